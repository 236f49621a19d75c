"""Calibrated evaluator outputs: Platt scaling of each predicted label, fitted on labelled candidates.

An evaluator's predicted [y_pick, y_coll, y_PGS] rank grasps, but users also read them as probabilities (the plan's
predicted success). Platt scaling maps each label's prediction p to sigmoid(a logit(p) + b) with a > 0, so the
ranking (and refinement, which only compares predictions) is unchanged while the values match the labelled rates.
The two numbers per label are fitted to labelled candidates of held-out objects (the frozen ranking diagnostic's pools:
``benchmarks/bench_evaluator_ranking.py``) and stored in the checkpoint (:mod:`getagrip_ros.models.checkpoints`).

A labelled pool is a ``.npz`` per object with ``grasps_Oy`` (n, 37) grasps in the object frame Oy (y up, origin at the
cloud's centroid), ``bps_m`` (4096,) the object's BPS, ``cloud_Oy_m`` (m, 3) its observed cloud in Oy, ``table_y_m``
the table plane's height in Oy (metres), and ``y_pick``, ``y_coll``, ``y_PGS`` (n,) the simulated labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.optimize import minimize

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.models.bps_evaluator import LABEL_NAMES

if TYPE_CHECKING:
    from getagrip_ros.models.checkpoints import LoadedModel
    from getagrip_ros.robot.allegro import AllegroHand

POOL_ARRAYS = ("grasps_Oy", "bps_m", "cloud_Oy_m", "table_y_m") + LABEL_NAMES
_P_CLIP = 1e-9
"""Predictions are clipped to [_P_CLIP, 1 - _P_CLIP] before the logit (a float32 sigmoid output of exactly 0 or 1)."""


@dataclass(frozen=True)
class PlattCalibration:
    """Per label (y_pick, y_coll, y_PGS): calibrated = sigmoid(scale * logit(p) + offset), scale > 0."""

    scale: tuple[float, float, float]
    offset: tuple[float, float, float]
    fitted_on: str = ""
    """What the numbers were fitted to (objects, candidates), recorded with the checkpoint."""

    def __post_init__(self) -> None:
        if len(self.scale) != len(LABEL_NAMES) or len(self.offset) != len(LABEL_NAMES):
            raise ValueError(f"a calibration has {len(LABEL_NAMES)} scales and offsets, got {len(self.scale)} and "
                             f"{len(self.offset)}")
        values = np.asarray(self.scale + self.offset, dtype=float)
        if not np.isfinite(values).all() or min(self.scale) <= 0:
            raise ValueError(f"calibration scales must be finite and > 0 and offsets finite, got scale {self.scale}, "
                             f"offset {self.offset}")

    def __call__(self, predicted: torch.Tensor) -> torch.Tensor:
        """(B, 3) predictions in [0, 1] -> (B, 3) calibrated predictions (same dtype and device)."""
        p = predicted.double().clamp(_P_CLIP, 1 - _P_CLIP)
        scale = torch.tensor(self.scale, dtype=torch.float64, device=p.device)
        offset = torch.tensor(self.offset, dtype=torch.float64, device=p.device)
        return torch.sigmoid(scale * torch.log(p / (1 - p)) + offset).to(predicted.dtype)

    def to_dict(self) -> dict:
        return {"method": "platt", "scale": list(self.scale), "offset": list(self.offset), "fitted_on": self.fitted_on}

    @classmethod
    def from_dict(cls, values: dict) -> "PlattCalibration":
        """Raises ValueError on anything but the dict :meth:`to_dict` writes."""
        if not isinstance(values, dict) or values.get("method") != "platt" or set(values) != {"method", "scale", "offset", "fitted_on"}:
            raise ValueError(f"not a Platt calibration: {values!r:.200}")
        try:
            scale, offset = tuple(float(v) for v in values["scale"]), tuple(float(v) for v in values["offset"])
        except (TypeError, ValueError) as err:
            raise ValueError(f"calibration scale and offset must be lists of numbers: {err}") from err
        return cls(scale, offset, str(values["fitted_on"]))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _P_CLIP, 1 - _P_CLIP)
    return np.log(p / (1 - p))


def platt(predicted: np.ndarray, scale: float, offset: float) -> np.ndarray:
    """sigmoid(scale * logit(p) + offset) of one label's predictions."""
    return 1.0 / (1.0 + np.exp(-(scale * _logit(np.asarray(predicted, dtype=float)) + offset)))


def fit_platt_label(predicted: np.ndarray, labelled: np.ndarray) -> tuple[float, float]:
    """(scale > 0, offset) of one label, minimising the soft cross-entropy of the calibrated prediction against the
    labelled rate (labels in [0, 1], e.g. means over perturbed executions)."""
    z, y = _logit(np.asarray(predicted, dtype=float)), np.asarray(labelled, dtype=float)

    def loss(params: np.ndarray) -> float:
        q = np.clip(1.0 / (1.0 + np.exp(-(np.exp(params[0]) * z + params[1]))), 1e-9, 1 - 1e-9)
        return float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))

    log_scale, offset = minimize(loss, np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-10}).x
    return float(np.exp(log_scale)), float(offset)


def fit_platt(predicted: np.ndarray, labelled: np.ndarray, fitted_on: str = "") -> PlattCalibration:
    """Fit every label's (scale, offset) (:func:`fit_platt_label`).

    Args:
        predicted: (n, 3) predictions [y_pick, y_coll, y_PGS].
        labelled: (n, 3) labels in the same order.
    """
    predicted, labelled = np.asarray(predicted, dtype=float), np.asarray(labelled, dtype=float)
    if predicted.ndim != 2 or predicted.shape[1] != len(LABEL_NAMES) or predicted.shape != labelled.shape:
        raise ValueError(f"predicted and labelled must both be (n, {len(LABEL_NAMES)}), got {predicted.shape} and {labelled.shape}")
    if len(predicted) == 0 or not (np.isfinite(predicted).all() and np.isfinite(labelled).all()):
        raise ValueError("calibration needs at least one candidate and finite predictions and labels")
    scales, offsets = zip(*(fit_platt_label(p, y) for p, y in zip(predicted.T, labelled.T)))
    return PlattCalibration(tuple(scales), tuple(offsets), fitted_on)


def expected_calibration_error(predicted: np.ndarray, labelled: np.ndarray, bins: int = 10) -> float:
    """Sum over equal-width bins of the prediction of (share of candidates) x |mean predicted - mean labelled|."""
    predicted, labelled = np.asarray(predicted, dtype=float), np.asarray(labelled, dtype=float)
    which = np.clip((np.clip(predicted, 0.0, 1.0) * bins).astype(int), 0, bins - 1)
    return float(sum((which == b).mean() * abs(predicted[which == b].mean() - labelled[which == b].mean())
                     for b in range(bins) if (which == b).any()))


def read_pool(path: Path) -> dict[str, np.ndarray]:
    """One object's labelled candidates (no pickled data is read). Raises ValueError naming what is missing."""
    with np.load(path, allow_pickle=False) as f:
        missing = [k for k in POOL_ARRAYS if k not in f.files]
        if missing:
            raise ValueError(f"{path} is not a labelled pool: missing {missing}")
        return {k: f[k] for k in f.files}


@torch.no_grad()
def predict_pool(loaded: "LoadedModel", hand: "AllegroHand", pool: dict[str, np.ndarray]) -> np.ndarray:
    """(n, 3) uncalibrated predictions [y_pick, y_coll, y_PGS] of a BPS or geometry evaluator for a pool's candidates."""
    from getagrip_ros.models.geometry_evaluator import HandObjectFeatures

    if loaded.kind == "bps_evaluator":
        score = loaded.model.conditioned(torch.as_tensor(pool["bps_m"], dtype=torch.float32))
        return score(torch.as_tensor(pool["grasps_Oy"], dtype=torch.float32)).double().numpy()
    if loaded.kind == "geometry_evaluator":
        features = HandObjectFeatures(hand, pool["cloud_Oy_m"], float(pool["table_y_m"]), loaded.config)
        return loaded.model(features(Grasp.from_vector(pool["grasps_Oy"], "Oy"))).double().numpy()
    raise ValueError(f"calibration takes BPS or geometry evaluators, not a {loaded.kind}")
