"""The grasp task: capture -> perception -> grasp planning -> motion planning -> execution -> scoring.

`GraspTask.run` drives any `TaskStages` implementation through the stages in order, gives each its
budget (`StageTimeouts`) and the cancel flag, records every stage's products in one trial bag as it
goes, scores the recorded trace independently of the executor, and always ends with a result and a
closed bag - also when a stage fails, times out, is cancelled or raises.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from getagrip_ros.status import StageError, StatusCode
from getagrip_ros.task.config import GraspTaskConfig
from getagrip_ros.task.recording import TrialRecorder
from getagrip_ros.task.stages import StageBudget, TaskStages
from getagrip_ros.trials.bag import read_bag
from getagrip_ros.trials.scoring import score_bag

STAGE_WEIGHTS = {"capture": 0.2, "perception": 0.2, "grasp_planning": 0.3, "motion_planning": 0.1, "execution": 0.2}
"""Share of the whole task's progress bar per stage."""


@dataclass
class TaskResult:
    """How one trial ended."""

    success: bool
    """The executor's verdict: the object was lifted and held."""
    status: StatusCode
    reason: str
    stage: str
    """The stage the trial ended in ("done" after scoring)."""
    bag_path: str
    timings_s: dict[str, float] = field(default_factory=dict)
    chosen_grasp: np.ndarray | None = None
    """(37,) the executed grasp's vector (world frame), None when none was chosen."""
    chosen_labels: np.ndarray | None = None
    scored_success: bool | None = None
    """The independent scorer's verdict from the recorded trace (None: could not judge)."""
    score_reason: str = ""

    @property
    def scorer_agrees(self) -> bool | None:
        return None if self.scored_success is None else self.scored_success == self.success

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status.name
        out["scorer_agrees"] = self.scorer_agrees
        return out


def versions() -> dict[str, str]:
    """Versions of what shapes a result (recorded with each trial)."""
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("getagrip_ros", "torch", "mujoco", "ompl", "franky-control", "nerfstudio", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def trial_name(prefix: str = "trial") -> str:
    return f"{prefix}_{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S_%fZ')}"


class GraspTask:
    """Runs trials of the grasp task with one set of stages."""

    def __init__(self, stages: TaskStages, config: GraspTaskConfig = GraspTaskConfig()) -> None:
        self.stages, self.config = stages, config

    def run(self, object_position_m: np.ndarray, name: str = "", config: GraspTaskConfig | None = None,
            cancelled: Callable[[], bool] = lambda: False,
            feedback: Callable[[str, float, str], None] = lambda stage, progress, detail: None) -> TaskResult:
        """One trial on the object near `object_position_m` (world, metres); `feedback(stage, progress 0..1, detail)`."""
        cfg = config or self.config
        position = np.asarray(object_position_m, dtype=float).reshape(-1)
        bag_dir = Path(cfg.trials_dir) / (name or trial_name())
        metadata = {"trial": bag_dir.name, "method": {"sampler": cfg.sampler, "evaluator": cfg.evaluator,
                                                       "perception": cfg.perception, "planner": cfg.planner},
                    "seed": cfg.seed, "config": asdict(cfg), "config_hash": cfg.hash(), "versions": versions(),
                    "object_position_m": position.tolist(), "started_utc": datetime.now(timezone.utc).isoformat(),
                    **self.stages.describe()}
        recorder = TrialRecorder(bag_dir, metadata)
        result = TaskResult(False, StatusCode.INTERNAL_ERROR, "not started", "capture", str(bag_dir))
        done = [0.0]

        def run_stage(stage: str, fn: Callable[[StageBudget], Any]) -> Any:
            result.stage = stage
            if cancelled():
                raise StageError(StatusCode.CANCELED, f"cancelled before {stage}")
            timeout = cfg.timeouts.of(stage)

            def progress(fraction: float, detail: str) -> None:
                feedback(stage, done[0] + STAGE_WEIGHTS[stage] * float(np.clip(fraction, 0, 1)), detail)

            budget = StageBudget(time.monotonic() + timeout, cancelled, progress)
            recorder.event(event="stage_start", stage=stage)
            progress(0.0, "started")
            start = time.perf_counter()
            try:
                out = fn(budget)
            except StageError as err:  # a stage stopped by its budget reports it as cancelled
                if not cancelled() and time.monotonic() > budget.deadline:
                    raise StageError(StatusCode.TIMEOUT, f"{stage} ran out of its {timeout:.0f} s budget: {err.reason}") from err
                raise
            finally:
                result.timings_s[stage] = time.perf_counter() - start
                recorder.event(event="stage_end", stage=stage, duration_s=result.timings_s[stage])
            if cancelled():
                raise StageError(StatusCode.CANCELED, f"cancelled during {stage}")
            if result.timings_s[stage] > timeout:
                raise StageError(StatusCode.TIMEOUT, f"{stage} took {result.timings_s[stage]:.1f} s (budget {timeout:.0f} s)")
            done[0] += STAGE_WEIGHTS[stage]
            return out

        try:
            capture = run_stage("capture", lambda b: self.stages.capture(position, cfg, b))
            if not capture.rgb:
                raise StageError(StatusCode.NO_RESULT, "the capture returned no images")
            recorder.capture(capture.rgb, capture.K, capture.T_world_camera, cfg.record_image_stride)
            feedback("capture", done[0], f"{len(capture.rgb)} images")
            obj = run_stage("perception", lambda b: self.stages.perceive(capture, position, cfg, b))
            recorder.object(obj.points_world_m, obj.bps, obj.bps_origin_m)
            feedback("perception", done[0], f"{len(obj.points_world_m)} object points")
            plan = run_stage("grasp_planning", lambda b: self.stages.plan_grasps(obj, cfg, b))
            if len(plan.grasps) == 0:
                raise StageError(StatusCode.NO_RESULT, "grasp planning returned no grasps")
            recorder.grasps("/grasps/candidates", plan.grasps, plan.labels)
            feedback("grasp_planning", done[0], f"{len(plan.grasps)} ranked grasps")
            motion = run_stage("motion_planning", lambda b: self.stages.plan_motion(obj, plan, cfg, b))
            chosen = plan.grasps[motion.grasp_index:motion.grasp_index + 1]
            result.chosen_grasp = chosen.to_numpy_vector()[0]
            result.chosen_labels = plan.labels[motion.grasp_index]
            recorder.grasps("/grasps/chosen", chosen, plan.labels[motion.grasp_index:motion.grasp_index + 1])
            recorder.motion(motion.stages)
            feedback("motion_planning", done[0], f"grasp #{motion.grasp_index} planned ({len(motion.rejected)} refused)")
            executed = run_stage("execution", lambda b: self.stages.execute(motion, cfg, b, recorder))
            if executed.stage != "done":  # refused, stopped or failed before the end of the lift
                raise StageError(executed.status, f"execution stopped in {executed.stage}: {executed.reason}")
            result.success = bool(executed.success and executed.lifted)
            result.status = StatusCode.SUCCEEDED if result.success else StatusCode.NO_RESULT
            result.reason, result.stage = executed.reason, "done"
        except StageError as err:
            result.status, result.reason = err.code, err.reason
        except Exception as err:  # noqa: BLE001 - a failed stage still ends with a recorded trial
            result.status, result.reason = StatusCode.INTERNAL_ERROR, f"{result.stage}: {type(err).__name__}: {err}"
        finally:
            self._finish(recorder, result, cfg)
        feedback("scoring", 1.0, result.reason)
        return result

    def _finish(self, recorder: TrialRecorder, result: TaskResult, cfg: GraspTaskConfig) -> None:
        """Score the recorded trace (read back from the bag), then write the outcome and close the bag."""
        try:
            recorder.event(event="stage_end", stage="trial")
            if result.stage in ("execution", "done"):
                score = score_bag(read_bag(recorder.path), self.stages.hand_link_names(), cfg.scoring)
                result.scored_success, result.score_reason = score.success, score.reason
            else:
                result.score_reason = f"not scored: the trial ended in {result.stage}"
        except Exception as err:  # noqa: BLE001 - scoring must not lose the record
            result.score_reason = f"scoring failed: {type(err).__name__}: {err}"
        finally:
            recorder.close(result.as_dict())
