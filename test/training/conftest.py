"""Tiny synthetic grasp datasets whose labels are learnable functions of the inputs, and tiny model settings."""

from __future__ import annotations

import numpy as np
import pytest

from getagrip_ros.models.bps_evaluator import BpsEvaluatorConfig
from getagrip_ros.models.bps_sampler import BpsSamplerConfig
from getagrip_ros.models.diffusion import DiffusionConfig
from getagrip_ros.models.nerf_evaluator import NerfEvaluatorConfig
from getagrip_ros.training.datasets import write_bps_dataset, write_nerf_grasp_dataset
from getagrip_ros.training.loop import LoopConfig
from getagrip_ros.training.trainers import BpsEvaluatorTrainConfig, BpsSamplerTrainConfig, NerfEvaluatorTrainConfig

NUM_OBJECTS = 6
NUM_BASIS_POINTS = 32
GRID = (8, 8, 8)
GLOBAL_RESOLUTION = 8


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def bps_arrays(grasps_per_object: int = 50, seed: int = 0, num_objects: int = NUM_OBJECTS) -> dict:
    """Keyword arguments of write_bps_dataset: labels depend on the grasp and on the object's BPS."""
    rng = np.random.default_rng(seed)
    bpss = rng.uniform(0.0, 0.1, (num_objects, NUM_BASIS_POINTS))
    bps_idx = np.repeat(np.arange(num_objects), grasps_per_object)
    grasps = rng.normal(size=(len(bps_idx), 37))
    size = 20 * (bpss[bps_idx].mean(axis=1) - 0.05)
    return dict(basis_points_m=rng.uniform(-0.2, 0.2, (NUM_BASIS_POINTS, 3)), bpss_m=bpss,
                object_codes=[f"obj_{i}" for i in range(num_objects)], grasps=grasps, grasp_bps_idx=bps_idx,
                y_pick=_sigmoid(2 * grasps[:, 0] + size), y_coll=_sigmoid(-2 * grasps[:, 1]),
                y_PGS=_sigmoid(3 * grasps[:, 0] + 3 * grasps[:, 1]))


def nerf_arrays(grasps_per_object: int = 20, seed: int = 0, with_global: bool = True) -> dict:
    """Keyword arguments of write_nerf_grasp_dataset: the labels follow how dense each grasp's finger grids are."""
    rng = np.random.default_rng(seed)
    n = NUM_OBJECTS * grasps_per_object
    fill = rng.uniform(0, 1, n)
    densities = rng.uniform(0, 1, (n, 4, *GRID)) * (300 * fill)[:, None, None, None, None]
    T = np.tile(np.eye(4), (n, 4, 1, 1))
    T[..., :3, 3] = rng.normal(scale=0.05, size=(n, 4, 3))
    codes = np.repeat([f"obj_{i}" for i in range(NUM_OBJECTS)], grasps_per_object)
    arrays = dict(nerf_densities=densities, T_object_finger=T, object_codes=codes, y_pick=fill, y_coll=1 - fill,
                  y_PGS=fill ** 2)
    if with_global:
        arrays.update(nerf_densities_global=rng.uniform(0, 50, (NUM_OBJECTS, *(GLOBAL_RESOLUTION,) * 3)),
                      nerf_densities_global_idx=np.repeat(np.arange(NUM_OBJECTS), grasps_per_object))
    return arrays


@pytest.fixture(scope="session")
def bps_dataset(tmp_path_factory):
    return write_bps_dataset(tmp_path_factory.mktemp("bps") / "bps.h5", **bps_arrays())


@pytest.fixture(scope="session")
def nerf_dataset(tmp_path_factory):
    return write_nerf_grasp_dataset(tmp_path_factory.mktemp("nerf") / "nerf.h5", **nerf_arrays())


def tiny_loop(**overrides) -> LoopConfig:
    return LoopConfig(**{"epochs": 3, "batch_size": 64, "lr": 3e-3, "val_fraction": 0.34, "seed": 0, **overrides})


def tiny_evaluator(**overrides) -> BpsEvaluatorTrainConfig:
    return BpsEvaluatorTrainConfig(loop=tiny_loop(**overrides),
                                   model=BpsEvaluatorConfig(hidden_width=32, block_neurons=16, dropout=0.0))


def tiny_sampler(**overrides) -> BpsSamplerTrainConfig:
    return BpsSamplerTrainConfig(loop=tiny_loop(optimizer="adam", weight_decay=0.0, grad_clip_norm=1.0, **overrides),
                                 model=BpsSamplerConfig(d_model=16, num_tokens=2, num_heads=2, block_neurons=16),
                                 diffusion=DiffusionConfig(num_timesteps=100))


def tiny_nerf(use_global: bool = True, **overrides) -> NerfEvaluatorTrainConfig:
    return NerfEvaluatorTrainConfig(loop=tiny_loop(**{"batch_size": 16, "weight_decay": 1e-3, **overrides}),
                                    model=NerfEvaluatorConfig(conv_channels=(4, 8), global_conv_channels=(4,),
                                                              mlp_hidden=(16,), use_global=use_global, dropout=0.0))
