"""Grasp samplers: the geometric heuristic, a fixed set of good grasps, and the BPS diffusion model.

Each returns grasps in the planning object's frame. Fixed sets and the diffusion model live in the
model frame Oy (see :mod:`getagrip_ros.planning.object_input`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import numpy as np
import torch

from getagrip_ros.grasp.grasp import GRASP_DIM, Grasp
from getagrip_ros.models.checkpoints import LoadedModel
from getagrip_ros.models.diffusion import DiffusionConfig, DiffusionSchedule, ddim_timesteps
from getagrip_ros.perception.density import PUBLIC_GLOBAL_GRID
from getagrip_ros.planning.heuristic_sampler import HeuristicSamplerConfig, sample_heuristic_grasps
from getagrip_ros.planning.object_input import PlanningObject, nerf_global_grid
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.safe_files import load_npy_arrays
from getagrip_ros.status import StageError, StatusCode

StepFn = Callable[[float], None]
"""Called with the fraction of sampling done; raises to cancel."""


def _in_object_frame(grasps_Oy: Grasp, obj: PlanningObject) -> Grasp:
    return grasps_Oy.to(dtype=torch.float64).transformed(obj.T_frame_Oy, obj.frame_id)


class HeuristicSampler:
    """Geometric sampler (no training); needs the object's points."""

    def __init__(self, hand: AllegroHand, config: HeuristicSamplerConfig = HeuristicSamplerConfig(),
                 chunk_size: int = 256, rotation_ok: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        """rotation_ok: palm orientations to keep, checked before the (costly) fingertip IK."""
        self.hand, self.config, self.chunk_size, self.rotation_ok = hand, config, chunk_size, rotation_ok

    def sample(self, obj: PlanningObject, num: int, generator: torch.Generator, step: StepFn) -> Grasp:
        if obj.points_m is None:
            raise StageError(StatusCode.INVALID_GOAL, "the heuristic sampler needs a point cloud or a NeRF; "
                             "with a BPS only, use the diffusion or fixed sampler")
        batches = []
        for done in range(0, num, self.chunk_size):
            n = min(self.chunk_size, num - done)
            batches.append(sample_heuristic_grasps(obj.points_m, n, self.hand, obj.frame_id, self.config, generator,
                                                   self.rotation_ok))
            step((done + n) / num)
        return Grasp.cat(batches)


def load_grasp_set(path: str | Path, joint_limits_rad: tuple[torch.Tensor, torch.Tensor] | None = None) -> Grasp:
    """Grasps (in Oy) from our ``.npz`` (``grasps`` (B, 37)) or the public code's ``.npy`` grasp-config dict; the
    public dict's joint angles are clamped into `joint_limits_rad` (lower, upper) when given, as the public code
    does when it reads one.

    Raises:
        StageError(INTERNAL_ERROR): missing or malformed file.
    """
    path = Path(path)
    if not path.is_file():
        raise StageError(StatusCode.INTERNAL_ERROR, f"fixed grasp set not found: {path}")
    if path.suffix not in (".npz", ".npy"):
        raise StageError(StatusCode.INTERNAL_ERROR,
                         f"cannot read the fixed grasp set {path}: expected our .npz or the public .npy dict")
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                grasps = Grasp.from_vector(data["grasps"], "Oy")
        else:  # the public grasp-config dict: pickled, read by an unpickler that builds numpy arrays only
            d = load_npy_arrays(path)
            if not isinstance(d, dict):
                raise ValueError(f"expected the public grasp-config dict, found a {type(d).__name__}")
            grasps = Grasp(d["trans"], d["rot"], d["joint_angles"], np.asarray(d["grasp_orientations"])[..., :, 2],
                           frame_id="Oy")
            if joint_limits_rad is not None:
                grasps = Grasp.from_public_vector(grasps.to_vector(), *joint_limits_rad, frame_id="Oy")
    except Exception as err:  # noqa: BLE001 - any reading problem is a bad file
        raise StageError(StatusCode.INTERNAL_ERROR, f"cannot read the fixed grasp set {path}: "
                         f"{type(err).__name__}: {err}") from err
    if len(grasps) == 0:
        raise StageError(StatusCode.INTERNAL_ERROR, f"the fixed grasp set {path} is empty")
    finite = np.isfinite(grasps.to_numpy_vector()).all(axis=1)
    if not finite.all():
        raise StageError(StatusCode.INTERNAL_ERROR, f"the fixed grasp set {path} has {int((~finite).sum())} of "
                         f"{len(finite)} grasps with NaN or inf values")
    return grasps


def save_grasp_set(path: str | Path, grasps_Oy: Grasp, **labels: np.ndarray) -> Path:
    """Write a fixed grasp set (``grasps`` (B, 37) in Oy, plus optional per-grasp labels) as .npz."""
    if grasps_Oy.frame_id != "Oy":
        raise ValueError(f"fixed grasp sets are stored in Oy, got grasps in {grasps_Oy.frame_id!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, grasps=grasps_Oy.to_numpy_vector().astype(np.float32), **labels)
    return path


class FixedSampler:
    """A fixed set of good grasps reused for every object (in its Oy frame); a seeded random subset in random
    order, so that without an evaluator the first grasps are a random draw (not the set's file order)."""

    def __init__(self, grasps_Oy: Grasp) -> None:
        self.grasps_Oy = grasps_Oy

    def sample(self, obj: PlanningObject, num: int, generator: torch.Generator, step: StepFn) -> Grasp:
        index = torch.randperm(len(self.grasps_Oy), generator=generator)[:num]
        step(1.0)
        return _in_object_frame(self.grasps_Oy[index], obj)


@dataclass(frozen=True)
class DiffusionSamplerConfig:
    num_steps: int = 50
    """DDIM steps (public code: 1000; 20-100 are CPU-friendly)."""
    skip_type: Literal["quad", "uniform"] = "quad"
    eta: float = 0.0
    """0 = deterministic DDIM given the initial noise."""


def bps_condition(obj: PlanningObject) -> torch.Tensor:
    """The BPS sampler's conditioning: the object's BPS."""
    return torch.as_tensor(obj.bps_m, dtype=torch.float32)


def nerf_condition(obj: PlanningObject) -> torch.Tensor:
    """The NeRF sampler's conditioning: the public global grid (30^3 over 0.3 m) of the object's NeRF."""
    return nerf_global_grid(obj, PUBLIC_GLOBAL_GRID)


class DiffusionSampler:
    """DDIM sampling of a diffusion model conditioned on the object (`condition`: its BPS, or its NeRF's global grid
    for the NeRF sampler); its vectors become grasps as the public code converts them (joints clamped into the hand's
    limits, closing directions normalised: `Grasp.from_public_vector`)."""

    def __init__(self, loaded: LoadedModel, config: DiffusionSamplerConfig = DiffusionSamplerConfig(),
                 hand: AllegroHand | None = None,
                 condition: Callable[[PlanningObject], torch.Tensor] = bps_condition) -> None:
        self.loaded, self.config, self.condition = loaded, config, condition
        hand = hand or AllegroHand()
        self.joint_lower_rad, self.joint_upper_rad = hand.lower_limits_rad.cpu(), hand.upper_limits_rad.cpu()
        self.device = next(loaded.model.parameters()).device
        trained = loaded.metadata.get("diffusion")  # our checkpoints record their schedule; public ones use the default
        self.schedule = DiffusionSchedule(DiffusionConfig(**trained) if trained else DiffusionConfig(), self.device)

    def sample(self, obj: PlanningObject, num: int, generator: torch.Generator, step: StepFn) -> Grasp:
        model = self.loaded.model
        eps_fn = model.conditioned(self.condition(obj).to(self.device))
        x_T = torch.randn(num, GRASP_DIM, generator=generator).to(self.device)
        timesteps = ddim_timesteps(self.config.num_steps, self.schedule.config.num_timesteps, self.config.skip_type)
        x0 = self.schedule.ddim_sample(eps_fn, x_T, timesteps, self.config.eta, generator,
                                       on_step=lambda i, n: step((i + 1) / n))
        if self.loaded.grasp_mean is not None:
            x0 = x0 * self.loaded.grasp_std + self.loaded.grasp_mean
        grasps = Grasp.from_public_vector(x0.double().cpu(), self.joint_lower_rad, self.joint_upper_rad, "Oy")
        return _in_object_frame(grasps[grasps.finite()], obj)
