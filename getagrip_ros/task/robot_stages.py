"""The stages that use the robot - reset, capture, motion planning, execution - on one `RobotBackend`.

`RobotStages` is the one implementation of these stages: the robot node serves it as the ``reset_world``,
``capture_images``, ``plan_motion`` and ``execute_grasp`` actions, and the in-process stack
(`task.in_process`) calls it directly; only the transport differs. Each call takes a request dataclass
and returns a result with a status code and a reason (never raises for bad requests). One robot goal at a
time; a second one meanwhile is BUSY. Planning is stateless: each request carries its world (the object's
mesh) and nothing from an earlier request is kept.

Frames: world = robot base fr3_link0 (z up, table top at z = 0); metres, radians, seconds.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import numpy as np

from getagrip_ros.execution.executor import ExecutionConfig, ExecutionResult, GraspExecutor
from getagrip_ros.execution.safety import EStop, SafetyConfig, SafetyMonitor
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.motion.collision import WorkspaceBox
from getagrip_ros.motion.ompl_backend import OmplBackendConfig
from getagrip_ros.motion.planner import GraspMotionResult, GraspStages, GraspStagesConfig, MotionPlanner, MotionPlannerConfig
from getagrip_ros.motion.world import PlanningWorld, load_object_mesh, table_box
from getagrip_ros.perception.capture import CaptureConfig, CaptureRequest, CaptureResult, run_capture
from getagrip_ros.perception.capture_trajectory import SpiralConfig
from getagrip_ros.robot.backend import ResetNotSupported, ResetReport, RobotBackend, RobotSample, RobotUnavailable, WorldReset
from getagrip_ros.robot.description import ARM_JOINT_NAMES, FR3_LOWER_RAD, FR3_UPPER_RAD, HAND_JOINT_NAMES
from getagrip_ros.status import StatusCode

PLANNERS = ("ompl", "curobo")
_SPIRAL = SpiralConfig()


@dataclass(frozen=True)
class SpiralParams:
    """The capture spirals (perception.capture_trajectory.SpiralConfig) as flat parameters; the number of
    images and an optional radius come with each request."""

    radii_m: tuple[float, ...] = _SPIRAL.radii_m
    """Horizontal distance from the look-at point, per spiral (a request's radius_m scales them)."""
    start_heights_m: tuple[float, ...] = tuple(h[0] for h in _SPIRAL.heights_m)
    """Camera height above the table at the start of each spiral."""
    end_heights_m: tuple[float, ...] = tuple(h[1] for h in _SPIRAL.heights_m)
    """Camera height above the table at the end of each spiral."""
    turns: float = _SPIRAL.turns
    """Turns around the object per spiral."""
    look_at_height_m: float = _SPIRAL.look_at_height_m
    """The cameras look at the request's look_at point raised by this much."""

    def spiral(self) -> SpiralConfig:
        """The SpiralConfig (with one image per spiral; each request sets num_images); ValueError if inconsistent."""
        if not (len(self.radii_m) == len(self.start_heights_m) == len(self.end_heights_m)):
            raise ValueError("spiral: radii_m, start_heights_m and end_heights_m need one value per spiral")
        return SpiralConfig(num_images=max(1, len(self.radii_m)), radii_m=self.radii_m,
                            heights_m=tuple(zip(self.start_heights_m, self.end_heights_m)), turns=self.turns,
                            look_at_height_m=self.look_at_height_m)


@dataclass(frozen=True)
class RobotStagesConfig:
    """Build options of the robot's stages (the robot node's parameters mirror them)."""

    world_frame: str = "world"
    """Frame of grasps, worlds and poses (the robot base fr3_link0 is the world frame)."""
    spiral: SpiralParams = field(default_factory=SpiralParams)
    capture: CaptureConfig = field(default_factory=CaptureConfig)
    planning_time_limit_s: float = 1.0
    """OMPL path search per grasp, in the planning thread's CPU time (a request's timeout_s bounds the whole request)."""
    max_motion_planning_s: float = 300.0
    """Ceiling on one plan_motion request, whatever its timeout_s (0 there means this)."""
    stages: GraspStagesConfig = field(default_factory=GraspStagesConfig)
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    lift_check_fraction: float = 0.9
    """Simulation: the lift succeeded when the object rose at least this fraction of stages.lift_m (off the table,
    held by >= 3 hand links)."""
    sample_every_ms: float = 50.0
    """During execution the robot's state (and, in simulation, the object's) is reported every this many
    milliseconds of robot time (the trial's trace)."""
    capture_sample_every_ms: float = 250.0
    """... and during the capture every this many (minutes of motion along the spirals: coarser keeps the recording
    cheap; still several states for each frame of a trial's video)."""
    measured_limit_tolerance_rad: float = 0.05
    """A measured joint this far past a URDF limit is clamped onto it (logged; encoders read a few hundredths of a
    radian past the limits after a grasp); farther is a state error (HARDWARE_ERROR)."""

    def __post_init__(self) -> None:
        if not 0 < self.lift_check_fraction <= 1:
            raise ValueError(f"lift_check_fraction must be in (0, 1], got {self.lift_check_fraction}")
        if not self.sample_every_ms > 0 or not self.capture_sample_every_ms > 0 or not self.measured_limit_tolerance_rad >= 0:
            raise ValueError("sample_every_ms and capture_sample_every_ms must be > 0 and measured_limit_tolerance_rad >= 0")


@dataclass
class MotionRequest:
    """One plan_motion request: ranked grasps and the world they are planned in (per-call options included)."""

    grasps: Grasp
    """Ranked, best first, in the world frame."""
    start_arm_rad: Optional[np.ndarray] = None
    """(7,) arm start; None = the measured joints."""
    start_hand_rad: Optional[np.ndarray] = None
    """(16,) hand start (Get a Grip order); None = the measured joints."""
    object_mesh_path: str = ""
    """The object's collision mesh in the world frame ("" = the table only)."""
    planner: str = "ompl"
    seed: int = 0
    timeout_s: float = 0.0
    """The whole request's deadline, refused grasps included (0 = none)."""


@dataclass
class ExecuteRequest:
    """One execute_grasp request: a plan of `plan_motion` and the world to check it against."""

    stages: GraspStages
    object_mesh_path: str = ""


@dataclass
class ResetOutcome:
    status: StatusCode
    reason: str
    report: Optional[ResetReport] = None
    timings_s: dict[str, float] = field(default_factory=dict)


GRASP_JOINT_TOLERANCE_RAD = 0.2
"""plan_motion refuses grasps whose joints lie farther than this past the hand's limits (planners clamp theirs)."""


def planning_world(object_mesh_path: str, frame_id: str = "world") -> PlanningWorld:
    """The table and the object's mesh (world frame); ValueError for an unreadable or empty mesh."""
    objects = (load_object_mesh(object_mesh_path),) if object_mesh_path else ()
    return PlanningWorld((table_box(),), objects, frame_id)


def clamp_measured(names: tuple[str, ...], q_rad: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                   tolerance_rad: float) -> tuple[np.ndarray, list[str]]:
    """Measured joints clamped onto their limits when at most tolerance_rad past them, with a note per clamped joint;
    ValueError naming the first joint farther past."""
    q = np.asarray(q_rad, dtype=float)
    past = np.maximum(lower - q, q - upper)
    if not np.isfinite(q).all():
        raise ValueError(f"the measured joints contain NaN or inf: {q.tolist()}")
    if past.max() > tolerance_rad:
        j = int(np.argmax(past))
        raise ValueError(f"the measured {names[j]} = {q[j]:.4f} rad is {past[j]:.4f} rad past its limits "
                         f"[{lower[j]:.4f}, {upper[j]:.4f}] (tolerance {tolerance_rad} rad)")
    notes = [f"{names[j]} {q[j]:.4f} -> {np.clip(q[j], lower[j], upper[j]):.4f} rad" for j in np.flatnonzero(past > 0)]
    return np.clip(q, lower, upper), notes


class RobotStages:
    """Reset, capture, plan_motion and execute on one robot.

    Args:
        robot: the robot this bring-up owns (simulated or real).
        config: build options.
        estop: the e-stop shared with whoever can trigger it (the node's topic).
        log: where notes go (clamped measured joints).
    """

    def __init__(self, robot: RobotBackend, config: RobotStagesConfig = RobotStagesConfig(), estop: EStop | None = None,
                 log: Callable[[str], None] = lambda message: None) -> None:
        self.robot, self.config, self.log = robot, config, log
        self.spiral = config.spiral.spiral()
        self.estop = estop or EStop()
        self.safety = SafetyMonitor(config.safety)
        # plans keep the palm, flange and fingertips inside the box the safety layer checks
        box = WorkspaceBox(config.safety.workspace_min_m, config.safety.workspace_max_m)
        self.planner = MotionPlanner(MotionPlannerConfig(planning_time_limit_s=config.planning_time_limit_s,
                                                         stages=config.stages, world_frame=config.world_frame,
                                                         ompl=OmplBackendConfig(workspace=box)))
        self._planners: dict[str, MotionPlanner] = {"ompl": self.planner}
        self._hand_lower = self.planner.hand.lower_limits_rad.numpy()
        self._hand_upper = self.planner.hand.upper_limits_rad.numpy()
        self._robot_lock = threading.Lock()  # one goal that drives the robot at a time
        self.busy_with = ""

    # -- shared ----------------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """What shapes a trial on this robot (recorded with it)."""
        return {"robot": self.robot.description, "simulated": self.robot.simulated,
                "world": self.robot.physics_settings(), "robot_stages": asdict(self.config)}

    def _take(self, what: str) -> str:
        """"" when the robot was free and is now held for `what`, else why not."""
        if not self._robot_lock.acquire(blocking=False):
            return f"the robot is busy ({self.busy_with}); one robot goal at a time"
        self.busy_with = what
        return ""

    def _give_back(self) -> None:
        try:
            self.robot.run(self.robot.release)
        finally:
            self.busy_with = ""
            self._robot_lock.release()

    def measured_start(self) -> tuple[np.ndarray, np.ndarray]:
        """The measured arm (7) and hand (16) joints, clamped within measured_limit_tolerance_rad of their limits;
        ValueError naming a joint farther past."""
        sample: RobotSample = self.robot.run(self.robot.sample)
        state = sample.joint_state
        index = {n: i for i, n in enumerate(state.joint_names)}
        q = np.asarray(state.positions_rad, dtype=float)
        arm = np.array([q[index[n]] for n in ARM_JOINT_NAMES])
        hand = np.array([q[index[n]] for n in HAND_JOINT_NAMES])
        tol = self.config.measured_limit_tolerance_rad
        arm, notes = clamp_measured(ARM_JOINT_NAMES, arm, np.asarray(FR3_LOWER_RAD), np.asarray(FR3_UPPER_RAD), tol)
        hand, hand_notes = clamp_measured(HAND_JOINT_NAMES, hand, self._hand_lower, self._hand_upper, tol)
        if notes + hand_notes:
            self.log(f"measured joints past their limits, clamped: {', '.join(notes + hand_notes)}")
        return arm, hand

    # -- reset -----------------------------------------------------------------------------------------
    def reset(self, request: WorldReset = WorldReset()) -> ResetOutcome:
        """Before a trial: the object back on the table (at its configured pose or the request's), the robot home."""
        busy = self._take("reset")
        if busy:
            return ResetOutcome(StatusCode.BUSY, busy)
        start = time.perf_counter()
        try:
            report = self.robot.run(self.robot.reset, request)
        except ResetNotSupported as err:
            return ResetOutcome(StatusCode.NOT_IMPLEMENTED, str(err))
        except (ValueError, KeyError, FileNotFoundError) as err:
            return ResetOutcome(StatusCode.INVALID_GOAL, f"cannot reset the world: {err}")
        except Exception as err:  # noqa: BLE001 - the node keeps serving
            return ResetOutcome(StatusCode.INTERNAL_ERROR, f"reset failed: {type(err).__name__}: {err}")
        finally:
            self._give_back()
        p = report.T_world_object[:3, 3]
        return ResetOutcome(StatusCode.SUCCEEDED, f"{report.detail}: {report.object_name} at "
                                                  f"({p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}) m, robot at home", report,
                            {"reset": time.perf_counter() - start})

    # -- capture ---------------------------------------------------------------------------------------
    def capture(self, request: CaptureRequest, with_depth: bool, on_image=None,
                should_stop: Callable[[], bool] = lambda: False,
                on_sample: Callable[[RobotSample], None] = lambda sample: None) -> CaptureResult:
        """The spirals around request.look_at_m with the wrist camera (`perception.capture.run_capture`); on_sample
        every capture_sample_every_ms of robot time while the arm moves (a trial's recording shows the whole capture)."""
        from getagrip_ros.perception.cameras import CameraUnavailable

        if self.estop.triggered:
            return CaptureResult(StatusCode.HARDWARE_ERROR, f"e-stop is active ({self.estop.reason}); reset it first", None)
        busy = self._take("capture")
        if busy:
            return CaptureResult(StatusCode.BUSY, busy, None)
        robot = self.robot
        stop = should_stop

        def should_stop() -> bool:
            return stop() or self.estop.triggered
        try:
            robot.acquire()

            def capture() -> CaptureResult:
                poll = self._sampling(robot.paced(should_stop, "capture"), on_sample, self.config.capture_sample_every_ms)
                result = run_capture(robot.arm, robot.camera(with_depth), request, self.spiral, self.config.capture,
                                     on_image=on_image, should_stop=poll, hand=robot.hand)
                on_sample(robot.sample())
                return result

            return robot.run(capture)
        except RobotUnavailable as err:
            return CaptureResult(StatusCode.HARDWARE_ERROR, str(err), None)
        except CameraUnavailable as err:
            return CaptureResult(StatusCode.HARDWARE_ERROR, f"the camera is not available: {err}", None)
        except Exception as err:  # noqa: BLE001 - the node keeps serving
            return CaptureResult(StatusCode.INTERNAL_ERROR, f"{type(err).__name__}: {err}", None)
        finally:
            self._give_back()

    # -- plan_motion -----------------------------------------------------------------------------------
    def motion_planner(self, name: str) -> MotionPlanner:
        """The OMPL planner, or cuRobo's (built at its first request; CuroboUnavailableError without cuRobo/CUDA)."""
        if name not in PLANNERS:
            raise ValueError(f"unknown planner {name!r}; known: {list(PLANNERS)}")
        if name not in self._planners:
            from getagrip_ros.motion.curobo_backend import CuroboBackend

            self._planners[name] = MotionPlanner(self.planner.config, CuroboBackend())
        return self._planners[name]

    def plan_motion(self, request: MotionRequest) -> GraspMotionResult:
        """The best-ranked grasp with an approach and a lift the safety layer accepts, and its `GraspStages`."""
        from getagrip_ros.motion.curobo_backend import CuroboUnavailableError

        def failed(code: StatusCode, reason: str) -> GraspMotionResult:
            return GraspMotionResult(False, code, reason)

        try:
            planner = self.motion_planner(request.planner)
        except ValueError as err:
            return failed(StatusCode.INVALID_GOAL, str(err))
        except CuroboUnavailableError as err:
            return failed(StatusCode.NOT_IMPLEMENTED, str(err))
        try:
            world = planning_world(request.object_mesh_path, self.config.world_frame)
        except ValueError as err:
            return failed(StatusCode.INVALID_GOAL, str(err))
        if (request.start_arm_rad is None) != (request.start_hand_rad is None):
            return failed(StatusCode.INVALID_GOAL, "give both the arm and the hand start, or neither (measured)")
        refused = self._implausible_grasps(request)
        if refused:
            return failed(StatusCode.INVALID_GOAL, refused)
        if request.start_arm_rad is None:
            try:
                self.robot.run(self.robot.acquire)
                q_arm, q_hand = self.measured_start()
            except RobotUnavailable as err:
                return failed(StatusCode.HARDWARE_ERROR, str(err))
            except ValueError as err:
                return failed(StatusCode.HARDWARE_ERROR, f"cannot plan from the robot's state: {err}")
            finally:
                if not self._robot_lock.locked():  # no goal holds the robot: give it back
                    self.robot.run(self.robot.release)
        else:
            q_arm, q_hand = np.asarray(request.start_arm_rad, float), np.asarray(request.start_hand_rad, float)
        timeout = min(float(request.timeout_s) or math.inf, self.config.max_motion_planning_s)
        try:
            return planner.plan_grasp_motion(q_arm, q_hand, world, request.grasps, seed=int(request.seed), timeout_s=timeout,
                                             check=lambda stages: self.safety.check_stages(stages, q_arm, q_hand, world))
        except ValueError as err:
            return failed(StatusCode.INVALID_GOAL, f"malformed request: {err}")

    def _implausible_grasps(self, request: MotionRequest) -> str:
        """Why the request's grasps describe no hand pose the robot can take ('' when they can): joints farther than
        GRASP_JOINT_TOLERANCE_RAD past the Allegro limits."""
        if len(request.grasps) == 0:
            return ""  # the planner says so
        finite = np.isfinite(request.grasps.to_numpy_vector()).all(axis=1)
        if not finite.all():
            return f"{int((~finite).sum())} of {len(finite)} grasps have NaN or inf values (e.g. grasp {int(np.argmin(finite))})"
        q = request.grasps.joint_angles_rad.detach().cpu().double().numpy()
        past = np.maximum(self._hand_lower - q, q - self._hand_upper)
        if past.max() > GRASP_JOINT_TOLERANCE_RAD:
            i, j = np.unravel_index(int(np.argmax(past)), past.shape)
            return (f"grasp {i}: {HAND_JOINT_NAMES[j]} = {q[i, j]:.3f} rad is {past[i, j]:.3f} rad past its limits "
                    f"[{self._hand_lower[j]:.3f}, {self._hand_upper[j]:.3f}] (tolerance {GRASP_JOINT_TOLERANCE_RAD} rad)")
        return ""

    # -- execute ---------------------------------------------------------------------------------------
    def execute(self, request: ExecuteRequest, progress: Callable[[str, float], None] = lambda stage, f: None,
                should_stop: Callable[[], bool] = lambda: False,
                on_sample: Callable[[RobotSample], None] = lambda sample: None) -> ExecutionResult:
        """Safety checks against the measured joints and the request's world, then hand shaping -> approach ->
        close -> lift. progress(stage, fraction) is called once as each stage starts; on_sample every
        sample_every_ms of robot time while it moves (and once before and after)."""
        try:
            world = planning_world(request.object_mesh_path, self.config.world_frame)
        except ValueError as err:
            return ExecutionResult(False, StatusCode.INVALID_GOAL, "validation", str(err))
        busy = self._take("execution")
        if busy:
            return ExecutionResult(False, StatusCode.BUSY, "validation", busy)
        robot = self.robot
        try:
            robot.acquire()
            return robot.run(self._execute, request.stages, world, progress, should_stop, on_sample)
        except RobotUnavailable as err:
            return ExecutionResult(False, StatusCode.HARDWARE_ERROR, "validation", str(err))
        except Exception as err:  # noqa: BLE001 - the node keeps serving
            return ExecutionResult(False, StatusCode.INTERNAL_ERROR, "validation", f"{type(err).__name__}: {err}")
        finally:
            self._give_back()

    def _execute(self, stages: GraspStages, world: PlanningWorld, progress, should_stop, on_sample) -> ExecutionResult:
        """In the robot's thread."""
        robot, cfg = self.robot, self.config
        poll = self._sampling(robot.paced(should_stop, "execution"), on_sample, cfg.sample_every_ms)
        on_sample(robot.sample())
        lift_check = robot.lift_check(cfg.lift_check_fraction * cfg.stages.lift_m)
        executor = GraspExecutor(robot.arm, robot.hand, self.safety, cfg.execution, self.estop)
        result = executor.execute(stages, world, poll, progress, lift_check)
        on_sample(robot.sample())
        return result

    def _sampling(self, should_stop: Callable[[], bool], on_sample: Callable[[RobotSample], None],
                  every_ms: float) -> Callable[[], bool]:
        """`should_stop` that also hands on_sample the robot's state every `every_ms` of robot time (motions poll their
        should_stop every 10 ms of robot time)."""
        every, ticks = max(1, round(every_ms / 10)), [0]

        def poll() -> bool:
            ticks[0] += 1
            if ticks[0] % every == 0:
                on_sample(self.robot.sample())
            return should_stop()

        return poll

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop: the e-stop halts a running motion within one poll, then the robot is closed (after that goal ends,
        at most timeout_s later)."""
        self.estop.trigger("shutting down")
        held = self._robot_lock.acquire(timeout=timeout_s)
        try:
            self.robot.close()
        finally:
            if held:
                self._robot_lock.release()
