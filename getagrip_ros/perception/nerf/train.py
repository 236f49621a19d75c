"""Train nerfacto on a captured dataset: progress per iteration, cancel, a nerfstudio-compatible output.

The loop is nerfstudio's training iteration (pipeline loss, optimisers, schedulers, training callbacks)
without the viewer; the output folder is nerfstudio's (``config.yml``, ``nerfstudio_models/step-*.ckpt``,
``dataparser_transforms.json``), so nerfstudio's own tools can open it.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from getagrip_ros.perception.nerf.config import METADATA_FILE, NERF_TRANSFORMS_FILE, NerfTrainConfig, trainer_config
from getagrip_ros.status import StageError, StatusCode

MIN_IMAGES = 5
"""Fewer images than this cannot constrain a NeRF; training refuses them."""


@dataclass(frozen=True)
class TrainProgress:
    iteration: int
    """Iterations done (1-based)."""
    num_iterations: int
    loss: float
    psnr_db: float
    """PSNR of this iteration's training rays."""
    elapsed_s: float


@dataclass(frozen=True)
class NerfTrainResult:
    config_path: Path
    """nerfstudio config.yml of the trained model."""
    checkpoint_path: Path
    num_iterations: int
    final_loss: float
    train_psnr_db: float
    """Mean PSNR of the last 10 iterations' training rays."""
    eval_psnr_db: float
    """PSNR on rays of held-out images (NaN when every image was trained on)."""
    train_time_s: float


def check_dataset(dataset_dir: Path) -> dict:
    """The dataset's transforms.json, after checks that give clear errors (StageError INVALID_GOAL)."""
    transforms = dataset_dir / "transforms.json"
    if not transforms.is_file():
        raise StageError(StatusCode.INVALID_GOAL, f"no nerfstudio dataset at {dataset_dir}: transforms.json is missing")
    meta = json.loads(transforms.read_text())
    frames = meta.get("frames", [])
    if len(frames) < MIN_IMAGES:
        raise StageError(StatusCode.INVALID_GOAL,
                         f"too few images to train a NeRF: {len(frames)} in {dataset_dir} (need >= {MIN_IMAGES})")
    missing = [f["file_path"] for f in frames if not (dataset_dir / f["file_path"]).is_file()]
    if missing:
        raise StageError(StatusCode.INVALID_GOAL, f"{len(missing)} image files are missing, e.g. {missing[0]}")
    positions = np.array([np.array(f["transform_matrix"], float)[:3, 3] for f in frames])
    if not np.isfinite(positions).all():
        raise StageError(StatusCode.INVALID_GOAL, "camera poses contain NaN or inf")
    if np.linalg.norm(positions - positions.mean(0), axis=1).max() < 1e-3:
        raise StageError(StatusCode.INVALID_GOAL, "degenerate capture: all cameras are at the same position")
    return meta


def nerf_frame(meta: dict) -> np.ndarray:
    """T_world_nerf: world axes, origin on the table (z = 0) below the capture centre.

    The capture centre is the dataset's recorded object position, else the mean camera position.
    """
    extra = meta.get("getagrip", {})
    centre = extra.get("object_position_m")
    if centre is None:
        centre = np.mean([np.array(f["transform_matrix"], float)[:3, 3] for f in meta["frames"]], axis=0)
    T = np.eye(4)
    T[:2, 3] = np.asarray(centre, float)[:2]
    return T


def write_nerf_frame_transforms(dataset_dir: Path, meta: dict, T_world_nerf: np.ndarray, path: Path) -> Path:
    """A transforms.json for nerfstudio with poses in the NeRF frame and absolute image paths (RGB only)."""
    T_nerf_world = np.linalg.inv(T_world_nerf)
    keys = ("fl_x", "fl_y", "cx", "cy", "w", "h", "camera_model", "k1", "k2", "p1", "p2")
    frames = [{"file_path": str(dataset_dir / f["file_path"]),
               "transform_matrix": (T_nerf_world @ np.array(f["transform_matrix"], float)).tolist()}
              for f in meta["frames"]]
    path.write_text(json.dumps({**{k: meta[k] for k in keys if k in meta}, "frames": frames,
                                "getagrip": {"T_world_nerf": T_world_nerf.tolist(), "dataset_dir": str(dataset_dir)}},
                               indent=1))
    return path


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train_nerf(dataset_dir: str | Path, output_dir: str | Path, config: NerfTrainConfig = NerfTrainConfig(),
               on_progress: Callable[[TrainProgress], None] | None = None,
               should_stop: Callable[[], bool] | None = None, experiment_name: str | None = None) -> NerfTrainResult:
    """Train nerfacto (Get a Grip settings) on a nerfstudio dataset.

    Raises:
        StageError: INVALID_GOAL for a missing/degenerate dataset, CANCELED when should_stop() turned true
            (nothing is saved), NO_RESULT when the loss becomes NaN.
    """
    dataset_dir, output_dir = Path(dataset_dir).resolve(), Path(output_dir).resolve()
    meta = check_dataset(dataset_dir)
    from getagrip_ros.perception.nerf.offline_nerfacto import OfflineNerfactoModel  # noqa: F401  (imports nerfstudio)
    from nerfstudio.engine.callbacks import TrainingCallbackAttributes, TrainingCallbackLocation
    from nerfstudio.engine.optimizers import Optimizers

    _seed_everything(config.seed)
    ns_config = trainer_config(dataset_dir, output_dir, config, experiment_name or dataset_dir.name)
    ns_config.set_timestamp()
    base_dir = ns_config.get_base_dir()
    base_dir.mkdir(parents=True, exist_ok=True)
    T_world_nerf = nerf_frame(meta)
    nerf_transforms = write_nerf_frame_transforms(dataset_dir, meta, T_world_nerf, base_dir / NERF_TRANSFORMS_FILE)
    ns_config.data = ns_config.pipeline.datamanager.data = nerf_transforms
    ns_config.pipeline.datamanager.dataparser.data = nerf_transforms
    pipeline = ns_config.pipeline.setup(device=config.device, test_mode="val", world_size=1, local_rank=0,
                                        grad_scaler=None)
    optimizers = Optimizers(dict(ns_config.optimizers), pipeline.get_param_groups())
    callbacks = pipeline.get_training_callbacks(
        TrainingCallbackAttributes(optimizers=optimizers, grad_scaler=None, pipeline=pipeline, trainer=None))

    start = time.perf_counter()
    loss_value, psnrs = float("nan"), []
    pipeline.train()
    for step in range(config.num_iterations):
        if should_stop is not None and should_stop():
            raise StageError(StatusCode.CANCELED, f"NeRF training cancelled after {step} of "
                                                  f"{config.num_iterations} iterations")
        for callback in callbacks:
            callback.run_callback_at_location(step, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
        optimizers.zero_grad_all()
        _, loss_dict, metrics = pipeline.get_train_loss_dict(step=step)
        loss = sum(loss_dict.values())
        loss_value = float(loss)
        if not np.isfinite(loss_value):
            raise StageError(StatusCode.NO_RESULT, f"NeRF training diverged: loss is {loss_value} at iteration {step}")
        loss.backward()
        optimizers.optimizer_step_all()
        optimizers.scheduler_step_all(step)
        for callback in callbacks:
            callback.run_callback_at_location(step, location=TrainingCallbackLocation.AFTER_TRAIN_ITERATION)
        psnrs.append(float(metrics["psnr"]))
        if on_progress is not None:
            on_progress(TrainProgress(step + 1, config.num_iterations, loss_value, psnrs[-1],
                                      time.perf_counter() - start))
    train_time_s = time.perf_counter() - start

    eval_psnr = _held_out_psnr(pipeline, config.num_iterations)
    ns_config.save_config()
    pipeline.datamanager.train_dataparser_outputs.save_dataparser_transform(base_dir / "dataparser_transforms.json")
    checkpoint = ns_config.get_checkpoint_dir() / f"step-{config.num_iterations - 1:09d}.ckpt"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"step": config.num_iterations - 1, "pipeline": pipeline.state_dict(),
                "optimizers": {k: v.state_dict() for k, v in optimizers.optimizers.items()},
                "schedulers": {k: v.state_dict() for k, v in optimizers.schedulers.items()},
                "scalers": {}}, checkpoint)
    result = NerfTrainResult(base_dir / "config.yml", checkpoint, config.num_iterations, loss_value,
                             float(np.mean(psnrs[-10:])), eval_psnr, train_time_s)
    (base_dir / METADATA_FILE).write_text(json.dumps({
        "T_world_nerf": T_world_nerf.tolist(), "dataset_dir": str(dataset_dir), "settings": dataclasses.asdict(config),
        "train_psnr_db": result.train_psnr_db, "eval_psnr_db": result.eval_psnr_db,
        "train_time_s": train_time_s}, indent=1))
    return result


@torch.no_grad()
def _held_out_psnr(pipeline, step: int, num_batches: int = 4) -> float:
    """Mean PSNR over a few ray batches of the held-out images."""
    if len(pipeline.datamanager.eval_dataset) == 0:
        return float("nan")
    values = [float(pipeline.get_eval_loss_dict(step)[2]["psnr"]) for _ in range(num_batches)]
    return float(np.mean(values))
