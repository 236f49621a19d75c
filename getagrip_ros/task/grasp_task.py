"""The grasp task: capture -> perception -> grasp planning -> motion planning -> execution -> scoring.

`GraspTask.run` resets the world (simulation) and drives the stages in order through `StageCalls` (in this
process or over ROS: the same requests either way), gives each its budget (`StageTimeouts`) and the cancel
flag, records every stage's products in one trial bag as it goes, scores the recorded trace independently
of the executor, and always ends with a result and a closed bag - also when a stage fails, times out, is
cancelled or raises.
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

from getagrip_ros.human_demo.demonstration import HumanDemonstration
from getagrip_ros.perception.capture import CaptureRequest
from getagrip_ros.perception.nerf_dataset import read_nerf_dataset
from getagrip_ros.planning.planner import PlanRequest
from getagrip_ros.robot.backend import WorldReset
from getagrip_ros.status import StageError, StatusCode
from getagrip_ros.task.config import GraspTaskConfig
from getagrip_ros.task.machine import machine
from getagrip_ros.task.recording import TrialRecorder
from getagrip_ros.task.robot_stages import ExecuteRequest, MotionRequest
from getagrip_ros.task.stages import ExtractRequest, NerfRequest, PerceptionOutput, StageBudget, StageCalls
from getagrip_ros.trials.bag import read_bag
from getagrip_ros.trials.scoring import score_bag

STAGE_WEIGHTS = {"reset": 0.02, "capture": 0.18, "perception": 0.2, "grasp_planning": 0.3, "motion_planning": 0.1,
                 "execution": 0.2}
"""Share of the whole task's progress bar per stage."""
WORLD_FRAME = "world"


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


@dataclass(frozen=True)
class TrialObject:
    """What stands on the table for one trial."""

    name: str = ""
    """Simulation: the catalog object the reset puts on the table ("" = the configured one); hardware: the label
    recorded with the trial ("" = the stack's object label)."""
    place: bool = False
    """Simulation: the reset puts the object at the trial's object position (x, y) with yaw_rad (else at its
    configured pose)."""
    yaw_rad: float = 0.0


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


MAX_TRIAL_NAME_BYTES = 128
"""Longest trial name: its folder, bag and work folder are named after it (file names end at 255 bytes)."""


def check_trial_name(name: str, config: GraspTaskConfig) -> None:
    """ValueError unless `name` is a plain folder name (at most MAX_TRIAL_NAME_BYTES) that no trial under
    config.trials_dir has yet."""
    if not name or "/" in name or "\\" in name or name.startswith(".") or any(ord(c) < 32 for c in name):
        raise ValueError(f"trial_name {name!r} is not a plain name")
    if len(name.encode("utf8", "surrogateescape")) > MAX_TRIAL_NAME_BYTES:
        raise ValueError(f"trial_name is {len(name.encode('utf8', 'surrogateescape'))} bytes long; at most "
                         f"{MAX_TRIAL_NAME_BYTES} (its folder and files are named after it)")
    if (Path(config.trials_dir).expanduser() / name).exists():
        raise ValueError(f"trial {name!r} exists already")


def _fresh_folder(path: Path) -> Path:
    """path, after moving aside what an earlier, crashed attempt of the same trial left there."""
    if path.exists():
        attempt = 1
        while path.with_name(f"{path.name}__stale_{attempt}").exists():
            attempt += 1
        path.rename(path.with_name(f"{path.name}__stale_{attempt}"))
    return path


class GraspTask:
    """Runs trials of the grasp task through one set of stage calls (in this process or over ROS)."""

    def __init__(self, calls: StageCalls, config: GraspTaskConfig = GraspTaskConfig()) -> None:
        self.calls, self.config = calls, config

    def run(self, object_position_m: np.ndarray, name: str = "", config: GraspTaskConfig | None = None,
            cancelled: Callable[[], bool] = lambda: False,
            feedback: Callable[[str, float, str], None] = lambda stage, progress, detail: None,
            obj: TrialObject = TrialObject(), stop_reason: Callable[[], str | None] = lambda: None,
            human_demo: HumanDemonstration | None = None) -> TaskResult:
        """One trial on the object near `object_position_m` (world, metres); `feedback(stage, progress 0..1, detail)`;
        `stop_reason()` says why `cancelled()` is true (default "cancelled"); `human_demo` (world frame): the
        demonstration the human_demo sampler transfers (recorded in the trial's metadata). A bad trial name raises
        ValueError before anything runs; once the trial's bag is open, every failure ends in the result and the
        record."""
        cfg = config or self.config
        position = np.asarray(object_position_m, dtype=float).reshape(-1)
        name = name or trial_name()
        check_trial_name(name, cfg)
        bag_dir = Path(cfg.trials_dir).expanduser() / name
        work = Path(cfg.work_dir).expanduser().resolve() / name
        try:
            described = self.calls.describe()
        except Exception as err:  # noqa: BLE001 - a stage that cannot describe itself still gets a record
            described = {"describe_error": f"{type(err).__name__}: {err}"}
        metadata = {"trial": name, "method": {"sampler": cfg.sampler, "evaluator": cfg.evaluator,
                                              "perception": cfg.perception, "planner": cfg.planner,
                                              **({} if human_demo is None else {"human_demo": human_demo.to_dict()})},
                    "seed": cfg.seed, "config": asdict(cfg), "config_hash": cfg.hash(), "versions": versions(),
                    "machine": machine(),
                    "object_position_m": position.tolist(), "started_utc": datetime.now(timezone.utc).isoformat(),
                    **described, "object": obj.name or described.get("object", "unknown"), "work_dir": str(work)}
        recorder = TrialRecorder(bag_dir, metadata)
        result = TaskResult(False, StatusCode.INTERNAL_ERROR, "not started", "reset", str(bag_dir))
        done = [0.0]

        def why() -> str:
            return stop_reason() or "cancelled"

        def run_stage(stage: str, fn: Callable[[StageBudget], Any]) -> Any:
            result.stage = stage
            if cancelled():
                raise StageError(StatusCode.CANCELED, f"{why()} before {stage}")
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
                raise StageError(StatusCode.CANCELED, f"{why()} during {stage}")
            if result.timings_s[stage] > timeout:
                raise StageError(StatusCode.TIMEOUT, f"{stage} took {result.timings_s[stage]:.1f} s (budget {timeout:.0f} s)")
            done[0] += STAGE_WEIGHTS[stage]
            return out

        try:
            work = _fresh_folder(work)
            self._reset(run_stage, recorder, position, obj, feedback, done)
            capture = run_stage("capture", lambda b: self.calls.capture(CaptureRequest(
                look_at_m=position.tolist(), output_dir=str(work / "capture"), frame_id=WORLD_FRAME,
                num_images=cfg.num_images), b, recorder))
            data = read_nerf_dataset(capture.dataset_dir)
            if len(data) == 0:
                raise StageError(StatusCode.NO_RESULT, "the capture returned no images")
            recorder.capture(list(data.rgb), data.K, data.T_world_camera_optical, cfg.record_image_stride)
            feedback("capture", done[0], f"{len(data)} images")
            seen = run_stage("perception", lambda b: self._perceive(capture.dataset_dir, work, cfg, b))
            recorder.object(seen.points_world_m, seen.bps, seen.bps_origin_m)
            feedback("perception", done[0], f"{len(seen.points_world_m)} object points")
            mesh_for_planning = seen.mesh_path if cfg.plan_with_mesh and seen.mesh_path else None
            plan = run_stage("grasp_planning", lambda b: self.calls.plan_grasp(PlanRequest(
                frame_id=WORLD_FRAME, points_m=seen.points_world_m, mesh_path=mesh_for_planning,
                num_grasps=cfg.num_grasps, sampler=cfg.sampler, human_demo=human_demo,
                evaluator=cfg.evaluator, seed=cfg.seed, timeout_s=max(b.remaining_s(), 1.0)), b))
            if len(plan.grasps) == 0:
                raise StageError(StatusCode.NO_RESULT, "grasp planning returned no grasps")
            recorder.grasps("/grasps/candidates", plan.grasps, plan.labels)
            feedback("grasp_planning", done[0], f"{len(plan.grasps)} ranked grasps")
            motion = run_stage("motion_planning", lambda b: self.calls.plan_motion(MotionRequest(
                plan.grasps, object_mesh_path=seen.mesh_path, planner=cfg.planner, seed=cfg.seed,
                timeout_s=max(b.remaining_s(), 1.0)), b))
            chosen = plan.grasps[motion.grasp_index:motion.grasp_index + 1]
            result.chosen_grasp = chosen.to_numpy_vector()[0]
            result.chosen_labels = plan.labels[motion.grasp_index]
            recorder.grasps("/grasps/chosen", chosen, plan.labels[motion.grasp_index:motion.grasp_index + 1])
            recorder.motion(motion.stages)
            recorder.event(event="motion_plan", grasp_index=motion.grasp_index, rejected=motion.rejected)
            feedback("motion_planning", done[0], f"grasp #{motion.grasp_index} planned ({len(motion.rejected)} refused)")
            executed = run_stage("execution", lambda b: self.calls.execute(
                ExecuteRequest(motion.stages, seen.mesh_path), b, recorder))
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

    def _reset(self, run_stage, recorder: TrialRecorder, position: np.ndarray, obj: TrialObject, feedback, done) -> None:
        """The world back before the trial (recorded); a robot that cannot reset (hardware) is recorded and skipped."""
        request = WorldReset(obj.name, (float(position[0]), float(position[1])) if obj.place else None, obj.yaw_rad)

        def reset(budget: StageBudget):
            try:
                return self.calls.reset(request, budget)
            except StageError as err:
                if err.code != StatusCode.NOT_IMPLEMENTED:
                    raise
                return err

        outcome = run_stage("reset", reset)
        if isinstance(outcome, StageError):
            recorder.event(event="reset", done=False, reason=outcome.reason)
            feedback("reset", done[0], f"no reset: {outcome.reason}")
        else:
            recorder.event(event="reset", done=True, **outcome.as_dict())
            feedback("reset", done[0], f"{outcome.detail}: {outcome.object_name}")

    def _perceive(self, dataset_dir: str, work: Path, cfg: GraspTaskConfig, budget: StageBudget) -> PerceptionOutput:
        """Depth fusion, or a NeRF trained on the capture (90% of the stage's progress) and extracted."""
        nerf_config = ""
        if cfg.perception == "nerf":
            nerf_config = self.calls.train_nerf(NerfRequest(dataset_dir, str(work / "nerf"), seed=cfg.seed), StageBudget(
                budget.deadline, budget.cancelled, lambda f, detail: budget.progress(0.9 * f, detail)))
        share = (0.9, 0.1) if nerf_config else (0.0, 1.0)
        return self.calls.extract(ExtractRequest(cfg.perception, dataset_dir, str(work / "object"), nerf_config),
                                  StageBudget(budget.deadline, budget.cancelled,
                                              lambda f, detail: budget.progress(share[0] + share[1] * f, detail)))

    def _finish(self, recorder: TrialRecorder, result: TaskResult, cfg: GraspTaskConfig) -> None:
        """Score the recorded trace (read back from the bag), then write the outcome and close the bag."""
        try:
            recorder.event(event="stage_end", stage="trial")
            if result.stage in ("execution", "done"):
                score = score_bag(read_bag(recorder.path), self.calls.hand_link_names(), cfg.scoring)
                result.scored_success, result.score_reason = score.success, score.reason
            else:
                result.score_reason = f"not scored: the trial ended in {result.stage}"
        except Exception as err:  # noqa: BLE001 - scoring must not lose the record
            result.score_reason = f"scoring failed: {type(err).__name__}: {err}"
        finally:
            recorder.close(result.as_dict())
