"""The epoch loop shared by the trainers: shuffled mini-batches, validation loss per epoch, checkpoints, resume,
history and loss curves.

An output folder holds ``last.pt`` (every epoch, with the optimiser state and the history), ``best.pt`` (lowest
validation loss), ``history.json`` (every epoch) and ``loss_curves.png`` (after the first and the last epoch, in
between at most every ``LOSS_CURVES_EVERY_S``: a drawing takes 0.3-0.7 s, longer than a small model's epoch).
Rerunning with the same folder continues from ``last.pt``; the settings must be the same (only ``epochs`` and
``device`` may change). Each epoch reseeds torch from (seed, epoch), so a resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from getagrip_ros.models.checkpoints import load_checkpoint, save_checkpoint

LAST_CHECKPOINT = "last.pt"
BEST_CHECKPOINT = "best.pt"
HISTORY_FILE = "history.json"
LOSS_CURVES_FILE = "loss_curves.png"
LOSS_CURVES_EVERY_S = 30.0
"""Seconds of training between two redraws of ``loss_curves.png`` (it is always drawn after the last epoch)."""
RESUMABLE_FIELDS = ("epochs", "device")
"""LoopConfig fields that may differ between a run and its resumption."""

BatchLoss = Callable[[np.ndarray, torch.Generator], torch.Tensor]
"""(grasp indices, CPU generator for any sampling) -> mean loss over those grasps (scalar tensor)."""


@dataclass(frozen=True)
class LoopConfig:
    """Optimisation and bookkeeping settings shared by the trainers."""

    epochs: int = 10
    batch_size: int = 1024
    lr: float = 1e-4
    optimizer: Literal["adam", "adamw"] = "adamw"
    weight_decay: float = 0.01
    grad_clip_norm: float | None = None
    """Clip the gradient to this global L2 norm (None: no clipping)."""
    val_fraction: float = 0.1
    """Fraction of the objects held out for validation (> 0: it selects best.pt)."""
    test_fraction: float = 0.0
    """Fraction of the objects held out for testing (never trained or validated on)."""
    train_object_fraction: float = 1.0
    """Train on this seeded fraction of the training objects only (dataset-size ablations; validation unchanged)."""
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.epochs < 0 or self.batch_size < 2 or not self.lr > 0 or self.weight_decay < 0:
            raise ValueError(f"LoopConfig: need epochs >= 0, batch_size >= 2, lr > 0, weight_decay >= 0, got {self}")
        if self.optimizer not in ("adam", "adamw"):
            raise ValueError(f"LoopConfig: optimizer must be 'adam' or 'adamw', got {self.optimizer!r}")
        if self.grad_clip_norm is not None and not self.grad_clip_norm > 0:
            raise ValueError(f"LoopConfig: grad_clip_norm must be positive or None, got {self.grad_clip_norm}")
        if not self.val_fraction > 0:
            raise ValueError("LoopConfig: val_fraction must be > 0 (the validation loss selects best.pt)")


@dataclass(frozen=True)
class TrainingTask:
    """What the loop trains: the model, its loss on a batch of grasps and what goes into the checkpoints."""

    kind: str
    """A checkpoints.MODEL_KINDS entry."""
    model: nn.Module
    model_config: object
    train_indices: np.ndarray
    val_indices: np.ndarray
    batch_loss: BatchLoss
    run_config: dict
    """Settings that must match when resuming (train config less RESUMABLE_FIELDS, dataset size)."""
    checkpoint_extras: dict
    """Keyword arguments of save_checkpoint: bps_basis, grasp_mean, grasp_std."""
    metadata: dict
    """Stored in every checkpoint (plus epoch and losses)."""


@dataclass(frozen=True)
class TrainResult:
    """Where a training run wrote its files and how it ended."""

    kind: str
    output_dir: Path
    last_checkpoint: Path
    best_checkpoint: Path
    history_path: Path
    loss_curves_path: Path
    epochs_completed: int
    """Epochs trained in total, over all runs in this folder."""
    epochs_run: int
    """Epochs trained by this call (0 when the folder had them all already)."""
    final_train_loss: float
    final_val_loss: float
    best_val_loss: float
    best_epoch: int


def run_config_of(config, dataset: dict) -> dict:
    """The resume-relevant settings of a trainer config (a dataclass with a ``loop: LoopConfig``) plus dataset facts."""
    values = dataclasses.asdict(config)
    values["loop"] = {k: v for k, v in values["loop"].items() if k not in RESUMABLE_FIELDS}
    return {**values, "dataset": dataset}


def _differences(stored, current, prefix: str = "") -> list[str]:
    if isinstance(stored, dict) and isinstance(current, dict):
        return [d for k in sorted(set(stored) | set(current), key=str)
                for d in _differences(stored.get(k), current.get(k), f"{prefix}{k}.")]
    return [] if stored == current else [f"{prefix[:-1]}: {stored!r} in the checkpoint, {current!r} now"]


def _epoch_seed(seed: int, epoch: int) -> int:
    return int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0])


def _batches(order: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Consecutive batches; a last batch of one grasp joins the one before (BatchNorm needs two)."""
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    if len(batches) > 1 and len(batches[-1]) == 1:
        batches[-2:] = [np.concatenate(batches[-2:])]
    return batches


def _make_optimizer(model: nn.Module, loop: LoopConfig) -> torch.optim.Optimizer:
    cls = torch.optim.AdamW if loop.optimizer == "adamw" else torch.optim.Adam
    return cls(model.parameters(), lr=loop.lr, weight_decay=loop.weight_decay)


def _validation_loss(task: TrainingTask, loop: LoopConfig) -> float:
    """Mean loss over the validation grasps, eval mode, sampling from a generator seeded the same every epoch."""
    task.model.eval()
    generator = torch.Generator().manual_seed(loop.seed)
    total = 0.0
    with torch.no_grad():
        for batch in _batches(task.val_indices, loop.batch_size):
            total += float(task.batch_loss(batch, generator)) * len(batch)
    return total / len(task.val_indices)


def write_loss_curves(history: dict, path: Path, title: str) -> Path:
    """Train and validation loss per epoch (log scale when positive) as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot(history["epoch"], history["train_loss"], "o-", label="train")
    ax.plot(history["epoch"], history["val_loss"], "s-", label="validation")
    if min(history["train_loss"] + history["val_loss"], default=0) > 0:
        ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    return path


def run_training(task: TrainingTask, loop: LoopConfig, output_dir: str | Path, progress: bool = True) -> TrainResult:
    """Train (or continue training) task.model for loop.epochs epochs in total; see the module docstring.

    Raises:
        ValueError: last.pt in output_dir was trained with other settings or is not a task.kind checkpoint.
        RuntimeError: the training loss became NaN or infinite (last.pt keeps the last good epoch).
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    last, best = output_dir / LAST_CHECKPOINT, output_dir / BEST_CHECKPOINT
    history_path, curves_path = output_dir / HISTORY_FILE, output_dir / LOSS_CURVES_FILE
    model, optimizer = task.model, _make_optimizer(task.model, loop)
    history: dict[str, list[float]] = {"epoch": [], "train_loss": [], "val_loss": [], "epoch_time_s": []}
    if last.exists():
        loaded = load_checkpoint(last, task.kind, device=loop.device)
        state = loaded.training_state or {}
        diffs = _differences(state.get("run_config"), task.run_config)
        if diffs:
            raise ValueError(f"cannot resume from {last}: it was trained with other settings ("
                             + "; ".join(diffs) + "); use another output directory or the same settings")
        model.load_state_dict(loaded.model.state_dict())
        optimizer.load_state_dict(state["optimizer"])
        history = {k: list(v) for k, v in state["history"].items()}
    start_epoch = len(history["epoch"])

    def save(path: Path, epoch: int, training_state: dict) -> None:
        metadata = {**task.metadata, "epoch": epoch, "train_loss": history["train_loss"][-1],
                    "val_loss": history["val_loss"][-1]}
        save_checkpoint(path, task.kind, model, task.model_config, training_state=training_state, metadata=metadata,
                        **task.checkpoint_extras)

    steps_per_epoch = len(_batches(task.train_indices, loop.batch_size))
    bar = tqdm(total=max(loop.epochs, start_epoch) * steps_per_epoch, initial=start_epoch * steps_per_epoch,
               desc=task.kind, unit="step", disable=None if progress else True, dynamic_ncols=True)
    curves_drawn_s = -math.inf
    with bar:
        for epoch in range(start_epoch + 1, loop.epochs + 1):
            start = time.perf_counter()
            seed = _epoch_seed(loop.seed, epoch)
            torch.manual_seed(seed)  # dropout
            generator = torch.Generator().manual_seed(seed)
            order = task.train_indices[torch.randperm(len(task.train_indices), generator=generator).numpy()]
            model.train()
            total = 0.0
            for batch in _batches(order, loop.batch_size):
                optimizer.zero_grad(set_to_none=True)
                loss = task.batch_loss(batch, generator)
                value = loss.item()
                if not math.isfinite(value):
                    raise RuntimeError(f"{task.kind} training diverged: loss {value} in epoch {epoch}")
                loss.backward()
                if loop.grad_clip_norm is not None:
                    nn.utils.clip_grad_norm_(model.parameters(), loop.grad_clip_norm)
                optimizer.step()
                total += value * len(batch)
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{value:.4g}")
            val_loss = _validation_loss(task, loop)
            if not math.isfinite(val_loss):
                raise RuntimeError(f"{task.kind} training diverged: validation loss {val_loss} in epoch {epoch}")
            history["epoch"].append(epoch)
            history["train_loss"].append(total / len(order))
            history["val_loss"].append(val_loss)
            history["epoch_time_s"].append(time.perf_counter() - start)
            bar.set_postfix(epoch=epoch, train=f"{history['train_loss'][-1]:.4g}", val=f"{val_loss:.4g}")
            if val_loss <= min(history["val_loss"]):
                save(best, epoch, {"epoch": epoch, "run_config": task.run_config})
            save(last, epoch, {"epoch": epoch, "optimizer": optimizer.state_dict(), "history": history,
                               "run_config": task.run_config})
            _write_history(history, history_path, task)
            if epoch == loop.epochs or time.monotonic() - curves_drawn_s >= LOSS_CURVES_EVERY_S:
                write_loss_curves(history, curves_path, f"{task.kind} ({len(task.train_indices)} train, "
                                                        f"{len(task.val_indices)} val grasps)")
                curves_drawn_s = time.monotonic()
    if not history["epoch"]:
        raise ValueError(f"{task.kind}: no epochs to train (epochs = {loop.epochs})")
    best_i = int(np.argmin(history["val_loss"]))
    return TrainResult(task.kind, output_dir, last, best, history_path, curves_path, len(history["epoch"]),
                       len(history["epoch"]) - start_epoch, history["train_loss"][-1], history["val_loss"][-1],
                       history["val_loss"][best_i], history["epoch"][best_i])


def _write_history(history: dict, path: Path, task: TrainingTask) -> None:
    best_i = int(np.argmin(history["val_loss"]))
    path.write_text(json.dumps({"kind": task.kind, "best_epoch": history["epoch"][best_i],
                                "best_val_loss": history["val_loss"][best_i], **history,
                                "run_config": task.run_config}, indent=1, default=str))
