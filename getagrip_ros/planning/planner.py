"""The grasp planner: validate the object -> sample -> filter -> rank -> refine -> closing targets.

Pure Python/torch (no rclpy). The ROS node, the CLI and the demo all call :meth:`GraspPlanner.plan`.
Samplers and evaluators are looked up by name; names the interface defines but this build cannot
run yet (they need trained models) end with ``NOT_IMPLEMENTED`` and say so.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from getagrip_ros.grasp.closing import ClosingConfig, closing_targets
from getagrip_ros.grasp.filters import CableFilterConfig, cable_filter_mask
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.planning.heuristic_sampler import HeuristicSamplerConfig, sample_heuristic_grasps
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.status import StageError, StageTimer, StatusCode

#: name -> None if available, else why it is not (yet) available in this build.
SAMPLERS: dict[str, str | None] = {
    "heuristic": None,
    "diffusion": "the diffusion sampler needs trained weights, which this build does not ship yet",
    "fixed": "the fixed grasp set is built from a labelled dataset, which this build does not ship yet",
}
EVALUATORS: dict[str, str | None] = {
    "none": None,
    "bps": "the BPS evaluator needs trained weights, which this build does not ship yet",
    "nerf": "the NeRF evaluator needs trained weights, which this build does not ship yet",
}
BPS_SIZE = 4096
MAX_GRASPS = 10_000


@dataclass(frozen=True)
class GraspPlannerConfig:
    """Build-time settings of the planner (per-request options live in :class:`PlanRequest`)."""

    num_samples: int = 1024
    """Grasps sampled before filtering and ranking (raised to num_grasps when smaller). The paper samples
    3200 for its learned evaluator to rank; the geometric sampler solves IK per sample, so fewer here."""
    chunk_size: int = 256
    """Grasps per batch between progress reports and cancel checks."""
    min_points: int = 50
    """Fewest object points accepted."""
    apply_cable_filter: bool = True
    cable_filter: CableFilterConfig = field(default_factory=CableFilterConfig)
    heuristic_sampler: HeuristicSamplerConfig = field(default_factory=HeuristicSamplerConfig)
    closing: ClosingConfig = field(default_factory=ClosingConfig)
    device: str = "cpu"


@dataclass
class PlanRequest:
    """One planning request. Exactly one of points_m / bps / nerf_config_path is set."""

    frame_id: str = "world"
    """Frame of the object data and of the returned grasps (z up, table top at z = 0)."""
    points_m: np.ndarray | None = None
    """(N, 3) object points."""
    bps: np.ndarray | None = None
    """(4096,) basis-point distances, metres."""
    nerf_config_path: str | None = None
    num_grasps: int = 40
    sampler: str = "heuristic"
    evaluator: str = "none"
    refinement_iterations: int = 50
    seed: int = 0
    timeout_s: float = 0.0
    """0 = no limit."""


@dataclass
class PlannedGrasps:
    """Ranked grasps (best first) with their predicted labels and hand joint targets."""

    grasps: Grasp
    y_pgs: torch.Tensor
    """(K,) predicted labels; NaN where no evaluator ran."""
    y_coll: torch.Tensor
    y_pick: torch.Tensor
    pregrasp_joints_rad: torch.Tensor
    """(K, 16) fingertips backed off along d_i (approach posture)."""
    closed_joints_rad: torch.Tensor
    """(K, 16) fingertips pushed along d_i (closing command)."""


@dataclass
class PlanResult:
    status: StatusCode
    reason: str
    planned: PlannedGrasps | None
    timings_s: dict[str, float]

    @property
    def success(self) -> bool:
        return self.status == StatusCode.SUCCEEDED


ProgressFn = Callable[[str, float, float], None]
"""progress(stage, fraction in [0, 1], best predicted y_PGS so far or NaN)."""


def validate_request(request: PlanRequest, min_points: int) -> None:
    """Raise StageError(INVALID_GOAL / NOT_IMPLEMENTED) naming what is wrong with the request."""
    sources = [n for n, v in (("point cloud", request.points_m), ("BPS", request.bps),
                              ("NeRF", request.nerf_config_path)) if v is not None]
    if len(sources) != 1:
        raise StageError(StatusCode.INVALID_GOAL, f"give exactly one object source, got {sources or 'none'}")
    if not 1 <= request.num_grasps <= MAX_GRASPS:
        raise StageError(StatusCode.INVALID_GOAL, f"num_grasps must be in [1, {MAX_GRASPS}], got {request.num_grasps}")
    if request.refinement_iterations < 0:
        raise StageError(StatusCode.INVALID_GOAL, f"refinement_iterations must be >= 0, got {request.refinement_iterations}")
    if not (request.timeout_s >= 0 and math.isfinite(request.timeout_s)):
        raise StageError(StatusCode.INVALID_GOAL, f"timeout_s must be finite and >= 0, got {request.timeout_s}")
    choices = (("sampler", request.sampler, SAMPLERS), ("evaluator", request.evaluator, EVALUATORS))
    for kind, name, table in choices:
        if name not in table:
            raise StageError(StatusCode.INVALID_GOAL, f"unknown {kind} {name!r}; known: {sorted(table)}")
    if request.points_m is not None:
        pts = np.asarray(request.points_m)
        if pts.ndim != 2 or pts.shape[1] != 3:
            raise StageError(StatusCode.INVALID_GOAL, f"point cloud must have shape (N, 3), got {pts.shape}")
        if len(pts) < min_points:
            raise StageError(StatusCode.INVALID_GOAL, f"point cloud has {len(pts)} points, need at least {min_points}")
        bad = ~np.isfinite(pts).all(axis=1)
        if bad.any():
            raise StageError(StatusCode.INVALID_GOAL, f"point cloud has {int(bad.sum())} points with NaN or inf")
    if request.bps is not None:
        bps = np.asarray(request.bps)
        if bps.shape != (BPS_SIZE,):
            raise StageError(StatusCode.INVALID_GOAL, f"BPS must have {BPS_SIZE} values, got shape {bps.shape}")
        if not np.isfinite(bps).all() or (bps < 0).any():
            raise StageError(StatusCode.INVALID_GOAL, "BPS values must be finite distances >= 0")
    if request.nerf_config_path is not None and not Path(request.nerf_config_path).is_file():
        raise StageError(StatusCode.INVALID_GOAL, f"NeRF config not found: {request.nerf_config_path}")
    for kind, name, table in choices:
        if table[name] is not None:
            raise StageError(StatusCode.NOT_IMPLEMENTED, f"{kind} {name!r} is not available: {table[name]}")
    if request.sampler == "heuristic" and request.points_m is None:
        raise StageError(StatusCode.NOT_IMPLEMENTED, "the heuristic sampler needs a point cloud; "
                         "BPS and NeRF inputs need a learned sampler or the perception stage")


class GraspPlanner:
    """Plans ranked grasps for one object at a time; construct once, call :meth:`plan` per object."""

    def __init__(self, config: GraspPlannerConfig = GraspPlannerConfig(), hand: AllegroHand | None = None) -> None:
        self.config = config
        self.hand = hand or AllegroHand(device=config.device)

    def plan(self, request: PlanRequest, progress: ProgressFn | None = None,
             should_cancel: Callable[[], bool] | None = None) -> PlanResult:
        """Run the whole pipeline; never raises for bad input or cancellation (see the result's status)."""
        timer = StageTimer()
        start = time.monotonic()
        report = progress or (lambda stage, fraction, best: None)

        def checkpoint() -> None:
            if should_cancel is not None and should_cancel():
                raise StageError(StatusCode.CANCELED, "cancelled by the client")
            if request.timeout_s > 0 and time.monotonic() - start > request.timeout_s:
                raise StageError(StatusCode.TIMEOUT, f"timed out after {request.timeout_s:.1f} s")

        try:
            with timer.stage("validation"):
                validate_request(request, self.config.min_points)
            planned = self._run(request, timer, report, checkpoint)
        except StageError as err:
            return PlanResult(err.code, err.reason, None, timer.durations_s)
        except Exception as err:  # noqa: BLE001 - a planner bug must not take the caller down
            return PlanResult(StatusCode.INTERNAL_ERROR, f"{type(err).__name__}: {err}", None, timer.durations_s)
        reason = f"{len(planned.grasps)} grasps"
        if request.evaluator == "none":
            reason += " (unranked: no evaluator, no refinement)"
        return PlanResult(StatusCode.SUCCEEDED, reason, planned, timer.durations_s)

    def _run(self, request: PlanRequest, timer: StageTimer, report: ProgressFn,
             checkpoint: Callable[[], None]) -> PlannedGrasps:
        cfg = self.config
        generator = torch.Generator().manual_seed(int(request.seed))
        num_samples = max(cfg.num_samples, request.num_grasps)
        nan = float("nan")

        with timer.stage("sampling"):
            batches = []
            for done in range(0, num_samples, cfg.chunk_size):
                checkpoint()
                n = min(cfg.chunk_size, num_samples - done)
                batches.append(sample_heuristic_grasps(request.points_m, n, self.hand, request.frame_id,
                                                       cfg.heuristic_sampler, generator))
                report("sampling", 0.5 * (done + n) / num_samples, nan)
            samples = Grasp.cat(batches)
        with timer.stage("filtering"):
            if cfg.apply_cable_filter:
                samples = samples[cable_filter_mask(samples, cfg.cable_filter)]
            if len(samples) == 0:
                raise StageError(StatusCode.NO_RESULT, f"none of the {num_samples} sampled grasps passed the filters")
        chosen = samples[: request.num_grasps]  # no evaluator: sample order

        with timer.stage("closing_targets"):
            pre, closed = [], []
            for done in range(0, len(chosen), cfg.chunk_size):
                checkpoint()
                targets = closing_targets(self.hand, chosen[done : done + cfg.chunk_size], cfg.closing)
                pre.append(targets.pregrasp.joint_angles_rad)
                closed.append(targets.closed.joint_angles_rad)
                report("closing_targets", 0.5 + 0.5 * min(done + cfg.chunk_size, len(chosen)) / len(chosen), nan)
        k = len(chosen)
        no_label = torch.full((k,), nan)
        return PlannedGrasps(chosen, no_label, no_label.clone(), no_label.clone(), torch.cat(pre), torch.cat(closed))
