"""Trainers of the three learned models on HDF5 grasp datasets (pure torch, no ROS).

Each splits the dataset by object (:func:`getagrip_ros.training.split.split_by_object`, the same split for the
same dataset and seed), builds the model and hands it to :func:`getagrip_ros.training.loop.run_training`.
Defaults follow the public Get a Grip training scripts where they fit a CPU:

- BPS evaluator: AdamW, lr 1e-4 (public batch 32768), equally weighted L2 on [y_pick, y_coll, y_PGS].
- BPS sampler: grasps with y_PGS >= 0.9, normalised by the training grasps' mean and std (stored in the
  checkpoint), epsilon-prediction diffusion loss, Adam lr 2e-4, gradient norm clipped to 1.
- NeRF evaluator: AdamW lr 1e-4, weight decay 1e-3, gradient clip 1 (public batch 256), equally weighted L2 on the
  three success probabilities; inputs are the finger grids (opacity + object-frame xyz) and the global grid.
- Geometry evaluator (ours): the hand-object features of every grasp on its object's observed cloud (the dataset's
  /object_points), computed once and standardised by the training grasps' statistics (stored in the model);
  AdamW lr 1e-3, weight decay 1e-2, 30 epochs, equally weighted L2.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from getagrip_ros.grasp.frames import turn_grasp_vectors_about_up_Oy
from getagrip_ros.grasp.grasp import GRASP_DIM, Grasp
from getagrip_ros.models.bps_evaluator import LABEL_NAMES, Y_PGS, BpsEvaluator, BpsEvaluatorConfig
from getagrip_ros.models.bps_sampler import BpsSampler, BpsSamplerConfig
from getagrip_ros.models.diffusion import DiffusionConfig, DiffusionSchedule
from getagrip_ros.models.geometry_evaluator import GeometryEvaluator, GeometryEvaluatorConfig, HandObjectFeatures
from getagrip_ros.models.nerf_evaluator import NerfEvaluator, NerfEvaluatorConfig
from getagrip_ros.training.datasets import (
    BpsGraspDataset,
    finger_grid_inputs,
    global_grid_inputs,
    read_bps_dataset,
    read_nerf_grasp_dataset,
)
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.training.loop import LoopConfig, TrainingTask, TrainResult, run_config_of, run_training
from getagrip_ros.training.split import ObjectSplit, split_by_object

MIN_GRASP_STD = 1e-2
"""Floor of the sampler's per-dimension grasp std, so near-constant dimensions do not blow up."""


@dataclass(frozen=True)
class BpsEvaluatorTrainConfig:
    loop: LoopConfig = LoopConfig(lr=1e-4, optimizer="adamw", weight_decay=0.01)
    model: BpsEvaluatorConfig = BpsEvaluatorConfig()
    """num_basis_points is taken from the dataset."""
    turn_objects: bool = False
    """Turn augmentation: each training grasp is shown with its object at a random one of the dataset's K headings
    about the vertical (/bpss_turned) and turned with it; validation keeps the observed heading. The labels do not
    depend on an object's heading on a flat table, and the BPS is not invariant to it."""


@dataclass(frozen=True)
class BpsSamplerTrainConfig:
    loop: LoopConfig = LoopConfig(lr=2e-4, optimizer="adam", weight_decay=0.0, grad_clip_norm=1.0)
    model: BpsSamplerConfig = BpsSamplerConfig()
    """num_basis_points is taken from the dataset."""
    diffusion: DiffusionConfig = DiffusionConfig()
    y_PGS_threshold: float = 0.9
    """Train on grasps with y_PGS at or above this."""


@dataclass(frozen=True)
class NerfEvaluatorTrainConfig:
    loop: LoopConfig = LoopConfig(batch_size=32, lr=1e-4, optimizer="adamw", weight_decay=1e-3, grad_clip_norm=1.0)
    model: NerfEvaluatorConfig = NerfEvaluatorConfig()


@dataclass(frozen=True)
class GeometryEvaluatorTrainConfig:
    loop: LoopConfig = LoopConfig(epochs=30, lr=1e-3, optimizer="adamw", weight_decay=1e-2)
    model: GeometryEvaluatorConfig = GeometryEvaluatorConfig()


def _split_metadata(path: Path, split: ObjectSplit, train: np.ndarray, val: np.ndarray) -> dict:
    return {"dataset_path": str(path.resolve()), "label_names": list(LABEL_NAMES), "num_train_grasps": len(train),
            "num_val_grasps": len(val), "train_objects": list(split.train_objects),
            "val_objects": list(split.val_objects), "test_objects": list(split.test_objects)}


def _bps_dataset_and_split(path: Path, loop: LoopConfig) -> tuple[BpsGraspDataset, ObjectSplit]:
    data = read_bps_dataset(path)
    return data, split_by_object(data.grasp_object_codes, loop.val_fraction, loop.test_fraction, loop.seed,
                                 loop.train_object_fraction)


def _bps_tensors(data: BpsGraspDataset, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(bpss (O, P), grasps (N, 37), labels (N, 3), grasp_bps_idx (N,)) on device."""
    return tuple(torch.from_numpy(a).to(device) for a in (data.bpss_m, data.grasps, data.labels, data.grasp_bps_idx))


def train_bps_evaluator(dataset_path: str | Path, output_dir: str | Path,
                        config: BpsEvaluatorTrainConfig = BpsEvaluatorTrainConfig(), progress: bool = True) -> TrainResult:
    """Train (or resume) the BPS evaluator on a BPS grasp dataset; checkpoints etc. in output_dir."""
    path, loop = Path(dataset_path), config.loop
    data, split = _bps_dataset_and_split(path, loop)
    model_config = dataclasses.replace(config.model, num_basis_points=data.bpss_m.shape[1], grasp_dim=GRASP_DIM)
    torch.manual_seed(loop.seed)
    model = BpsEvaluator(model_config).to(loop.device)
    bpss, grasps, labels, bps_idx = _bps_tensors(data, loop.device)
    if config.turn_objects and data.bpss_turned_m is None:
        raise ValueError(f"{path}: turn_objects needs /bpss_turned in the dataset "
                         "(getagrip-generate --merge ... --headings K)")
    bpss_turned = torch.from_numpy(data.bpss_turned_m).to(loop.device) if config.turn_objects else None

    def batch_loss(indices: np.ndarray, generator: torch.Generator) -> torch.Tensor:
        i = torch.from_numpy(indices).to(loop.device)
        bps, g = bpss[bps_idx[i]], grasps[i]
        if bpss_turned is not None and model.training:
            k = torch.randint(bpss_turned.shape[1], (len(indices),), generator=generator).to(loop.device)
            bps = bpss_turned[bps_idx[i], k]
            yaw = 2 * torch.pi * k.to(g.dtype) / bpss_turned.shape[1]
            g = turn_grasp_vectors_about_up_Oy(g, yaw)
        return torch.nn.functional.mse_loss(model(bps, g), labels[i])

    task = TrainingTask(
        "bps_evaluator", model, model_config, split.train, split.val, batch_loss,
        run_config_of(dataclasses.replace(config, model=model_config), _dataset_facts(data)),
        {"bps_basis": data.basis_points_m}, _split_metadata(path, split, split.train, split.val))
    return run_training(task, loop, output_dir, progress)


def _dataset_facts(data: BpsGraspDataset) -> dict:
    return {"num_grasps": data.num_grasps, "num_objects": len(data.object_codes)}


def train_bps_sampler(dataset_path: str | Path, output_dir: str | Path,
                      config: BpsSamplerTrainConfig = BpsSamplerTrainConfig(), progress: bool = True) -> TrainResult:
    """Train (or resume) the BPS diffusion sampler on the good grasps (y_PGS >= threshold) of a BPS grasp dataset.

    Raises:
        ValueError: no good grasps at all, or none in the training or validation objects.
    """
    path, loop = Path(dataset_path), config.loop
    data, split = _bps_dataset_and_split(path, loop)
    good = data.labels[:, Y_PGS] >= config.y_PGS_threshold
    if not good.any():
        raise ValueError(f"{path}: no grasps with y_PGS >= {config.y_PGS_threshold} to train the sampler on "
                         f"(max y_PGS {data.labels[:, Y_PGS].max():.3f})")
    train, val = split.train[good[split.train]], split.val[good[split.val]]
    for name, members, objects in (("training", train, split.train_objects), ("validation", val, split.val_objects)):
        if len(members) == 0:
            raise ValueError(f"{path}: no grasps with y_PGS >= {config.y_PGS_threshold} in the {name} objects "
                             f"{list(objects)[:5]}; change the seed or the split fractions, or add good grasps")
    model_config = dataclasses.replace(config.model, num_basis_points=data.bpss_m.shape[1], grasp_dim=GRASP_DIM)
    torch.manual_seed(loop.seed)
    model = BpsSampler(model_config).to(loop.device)
    bpss, grasps, _, bps_idx = _bps_tensors(data, loop.device)
    train_grasps = grasps[torch.from_numpy(train).to(loop.device)]
    mean, std = train_grasps.mean(dim=0), train_grasps.std(dim=0).clamp(min=MIN_GRASP_STD)
    schedule = DiffusionSchedule(config.diffusion, device=loop.device)

    def batch_loss(indices: np.ndarray, generator: torch.Generator) -> torch.Tensor:
        i = torch.from_numpy(indices).to(loop.device)
        bps = bpss[bps_idx[i]]
        return schedule.training_loss(lambda x_t, t: model(x_t, t, bps), (grasps[i] - mean) / std, generator)

    metadata = {**_split_metadata(path, split, train, val), "y_PGS_threshold": config.y_PGS_threshold,
                "diffusion": dataclasses.asdict(config.diffusion)}
    task = TrainingTask(
        "bps_sampler", model, model_config, train, val, batch_loss,
        run_config_of(dataclasses.replace(config, model=model_config), _dataset_facts(data)),
        {"bps_basis": data.basis_points_m, "grasp_mean": mean, "grasp_std": std}, metadata)
    return run_training(task, loop, output_dir, progress)


def _check_grid_fits(name: str, sizes: tuple[int, ...], channels: tuple[int, ...]) -> None:
    """Each conv layer of the NeRF evaluator halves the grid; every axis must survive all of them."""
    if min(sizes) < 2 ** len(channels):
        raise ValueError(f"{name} of size {sizes} is too small for {len(channels)} conv layers "
                         f"(each halves the grid; need >= {2 ** len(channels)} points per axis)")


def train_nerf_evaluator(dataset_path: str | Path, output_dir: str | Path,
                         config: NerfEvaluatorTrainConfig = NerfEvaluatorTrainConfig(),
                         progress: bool = True) -> TrainResult:
    """Train (or resume) the NeRF evaluator on a NeRF grasp dataset (finger grids read from the file by batch).

    Raises:
        ValueError: the model uses the global grid but the dataset has none, or a grid is too small for the CNN.
    """
    path, loop, model_config = Path(dataset_path), config.loop, config.model
    data = read_nerf_grasp_dataset(path)
    split = split_by_object(data.object_codes, loop.val_fraction, loop.test_fraction, loop.seed, loop.train_object_fraction)
    grid = data.finger_grid
    _check_grid_fits("the finger grid", (grid.num_x, grid.num_y, grid.num_z), model_config.conv_channels)
    global_inputs = None
    if model_config.use_global:
        if data.global_grid is None:
            raise ValueError(f"{path}: the NeRF evaluator uses the global grid but the dataset has no "
                             "/nerf_densities_global; train without it (use_global=False, --no-global)")
        _check_grid_fits("the global grid", (data.global_grid.resolution,) * 3, model_config.global_conv_channels)
        global_inputs = global_grid_inputs(torch.from_numpy(data.nerf_densities_global), data.global_grid).to(loop.device)
        global_idx = torch.from_numpy(data.nerf_densities_global_idx).to(loop.device)
    torch.manual_seed(loop.seed)
    model = NerfEvaluator(model_config).to(loop.device)
    T_object_finger = torch.from_numpy(data.T_object_finger).to(loop.device)
    labels = torch.from_numpy(data.labels).to(loop.device)

    def batch_loss(indices: np.ndarray, _: torch.Generator) -> torch.Tensor:
        i = torch.from_numpy(indices).to(loop.device)
        sigma = torch.from_numpy(data.read_nerf_densities(indices)).to(loop.device)
        fingers = finger_grid_inputs(sigma, T_object_finger[i], grid)
        return torch.nn.functional.mse_loss(model(fingers, None if global_inputs is None else global_inputs[global_idx[i]]),
                                            labels[i])

    metadata = {**_split_metadata(path, split, split.train, split.val), "finger_grid": dataclasses.asdict(grid),
                "global_grid": None if data.global_grid is None else dataclasses.asdict(data.global_grid)}
    facts = {"num_grasps": data.num_grasps, "finger_grid": dataclasses.asdict(grid)}
    task = TrainingTask("nerf_evaluator", model, model_config, split.train, split.val, batch_loss,
                        run_config_of(config, facts), {}, metadata)
    return run_training(task, loop, output_dir, progress)


def geometry_features(data: BpsGraspDataset, config: GeometryEvaluatorConfig = GeometryEvaluatorConfig(),
                      hand: AllegroHand | None = None, progress: bool = False) -> np.ndarray:
    """(N, num_features) float32 hand-object features of every grasp of a dataset with object clouds.

    Raises:
        ValueError: the dataset holds no object clouds.
    """
    if not data.has_clouds:
        raise ValueError("the dataset holds no object clouds (/object_points); merge the run again "
                         "(getagrip-generate --out RUN --merge X.h5)")
    from tqdm import tqdm

    hand = hand or AllegroHand()
    out = np.zeros((data.num_grasps, config.num_features), np.float32)
    order = np.argsort(data.grasp_bps_idx, kind="stable")
    bounds = np.searchsorted(data.grasp_bps_idx[order], np.arange(len(data.object_codes) + 1))
    for obj in tqdm(range(len(data.object_codes)), desc="features", unit="object", disable=None if progress else True):
        rows = order[bounds[obj]: bounds[obj + 1]]
        if len(rows):
            features = HandObjectFeatures(hand, data.object_cloud_Oy_m(obj), float(data.table_y_m[obj]), config)
            out[rows] = features(Grasp.from_vector(data.grasps[rows], "Oy")).numpy()
    return out


def train_geometry_evaluator(dataset_path: str | Path, output_dir: str | Path,
                             config: GeometryEvaluatorTrainConfig = GeometryEvaluatorTrainConfig(),
                             progress: bool = True) -> TrainResult:
    """Train (or resume) the geometry evaluator on a BPS grasp dataset that holds the object clouds.

    Raises:
        ValueError: the dataset holds no object clouds.
    """
    path, loop = Path(dataset_path), config.loop
    data, split = _bps_dataset_and_split(path, loop)
    features = torch.from_numpy(geometry_features(data, config.model, progress=progress)).to(loop.device)
    torch.manual_seed(loop.seed)
    model = GeometryEvaluator(config.model).to(loop.device)
    model.set_normalization(features[torch.from_numpy(split.train).to(loop.device)])
    labels = torch.from_numpy(data.labels).to(loop.device)

    def batch_loss(indices: np.ndarray, _: torch.Generator) -> torch.Tensor:
        i = torch.from_numpy(indices).to(loop.device)
        return torch.nn.functional.mse_loss(model(features[i]), labels[i])

    task = TrainingTask("geometry_evaluator", model, config.model, split.train, split.val, batch_loss,
                        run_config_of(config, _dataset_facts(data)), {},
                        _split_metadata(path, split, split.train, split.val))
    return run_training(task, loop, output_dir, progress)
