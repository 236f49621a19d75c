"""Motion planning for ranked grasps: the best-ranked grasp whose pre-grasp the arm can reach, and how.

`MotionPlanner.plan_grasps` takes the current arm joints, the world (table, object) and a ranked
`Grasp` batch in the world frame. For each grasp, in rank order: the pre-grasp hand joints (fingertips
backed off 3 cm along their closing directions, `grasp.closing`), arm IK of the palm pose with the hand
there, a collision-free path to it with those hand joints held, and a time-parameterised trajectory
within the FR3 limits. It returns the first grasp that works and why each one before it did not.
`MotionPlanner.plan_grasp_motion` adds the other stages of the paper's grasp (hand shaping, closing the
fingertips 6 cm along their directions, a straight 20 cm lift) as `GraspStages`.

Bad input (NaN, wrong shapes, wrong frames) raises ValueError; a request that cannot be planned ends
with a status and a reason (e.g. a start state in collision). Per-call options (seed, timeout_s) are
arguments of the methods, apart from the build options (`MotionPlannerConfig`); one planner serves
one request at a time (its backend's collision state and OMPL's random generator are per process).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

from getagrip_ros.grasp.closing import ClosingConfig, closing_targets
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.motion.backend import GoalPlan, MotionBackend, PalmGoals, PlanOptions, PlanStatus
from getagrip_ros.motion.ompl_backend import OmplBackend, OmplBackendConfig
from getagrip_ros.motion.collision import CollisionChecker
from getagrip_ros.motion.robot_geometry import RobotCollisionModel
from getagrip_ros.motion.time_parameterization import (
    TimeParameterizationConfig, time_parameterize, time_parameterize_through,
)
from getagrip_ros.motion.world import PlanningWorld
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.arm_ik import ArmIK, ArmIKConfig
from getagrip_ros.robot.description import ARM_JOINT_NAMES, HAND_JOINT_NAMES, PALM_LINK
from getagrip_ros.robot.interfaces import JointTrajectory
from getagrip_ros.status import StageTimer, StatusCode


#: A measured hand joint this far beyond a limit is moved onto it (physical joints overshoot slightly).
HAND_START_LIMIT_TOLERANCE_RAD = 0.05


@dataclass(frozen=True)
class GraspStagesConfig:
    """Timing and geometry of the grasp stages around the planned approach (the public code's hardware values)."""

    hand_shape_s: float = 1.0
    """Start hand joints -> pre-grasp hand joints, before the arm moves."""
    approach_s: float = 3.0
    """Shortest approach: a faster one is slowed down to this (the public code times it to 3.0 s); a longer one,
    needed by the velocity and acceleration limits, is kept."""
    close_s: float = 0.5
    """Pre-grasp -> closed hand (the closing target is `MotionPlannerConfig.closing.close_distance_m`)."""
    lift_m: float = 0.20
    """Straight up (world z) from the grasp."""
    lift_s: float = 1.0
    """Shortest duration of the lift (longer when the FR3 limits need it)."""
    lift_step_m: float = 0.005
    """Spacing of the IK points along the lift line."""
    max_lift_joint_step_rad: float = 0.05
    """Largest joint change between two lift points (more means the IK jumped to another branch)."""

    def __post_init__(self) -> None:
        for name in ("hand_shape_s", "approach_s", "close_s", "lift_m", "lift_s", "lift_step_m", "max_lift_joint_step_rad"):
            if not getattr(self, name) > 0:
                raise ValueError(f"GraspStagesConfig.{name} must be > 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class MotionPlannerConfig:
    """Build-time settings of the motion planner (per-request options are the arguments of its methods)."""

    planning_time_limit_s: float = 1.0
    """Path search time per grasp, in the planning thread's CPU time (a request's timeout_s, wall clock, bounds the
    whole request)."""
    closing: ClosingConfig = field(default_factory=ClosingConfig)
    """Pre-grasp hand joints: fingertips moved closing.pregrasp_distance_m (-0.03 m) along their directions."""
    time_parameterization: TimeParameterizationConfig = field(default_factory=TimeParameterizationConfig)
    """Joint velocity / acceleration limits of the trajectory."""
    ompl: OmplBackendConfig = field(default_factory=OmplBackendConfig)
    """The CPU backend: IK, collision buffer (1 mm) and motion resolution (1 mm), RRTConnect, shortcutting."""
    world_frame: str = "world"
    """Frame the grasps and the world must be given in."""
    stages: GraspStagesConfig = field(default_factory=GraspStagesConfig)
    """Hand shaping, closing and lift around the planned approach (`plan_grasp_motion`)."""

    def __post_init__(self) -> None:
        if not self.planning_time_limit_s > 0:
            raise ValueError(f"planning_time_limit_s must be > 0, got {self.planning_time_limit_s}")


@dataclass(frozen=True)
class GraspAttempt:
    """What happened to one grasp of the ranked batch."""

    grasp_index: int
    status: PlanStatus
    reason: str
    planning_time_s: float


@dataclass
class PlannedMotion:
    """A planned arm motion (or why there is none)."""

    success: bool
    status: StatusCode
    reason: str
    trajectory: Optional[JointTrajectory] = None
    """fr3_joint1..7, time-parameterised, from the start to q_goal_arm_rad."""
    path_rad: Optional[np.ndarray] = None
    """(N, 7) collision-checked waypoints the trajectory follows (straight joint-space segments)."""
    q_goal_arm_rad: Optional[np.ndarray] = None
    timings_s: dict[str, float] = field(default_factory=dict)


@dataclass
class GraspStages:
    """The executable plan of one grasp: four trajectories, run one after the other, each starting where the
    previous one ends."""

    hand_shape: JointTrajectory
    """Hand (16 joints): start -> pre-grasp, arm still at its start."""
    approach: JointTrajectory
    """Arm (fr3_joint1..7): start -> pre-grasp palm pose, collision-free, hand at the pre-grasp."""
    close: JointTrajectory
    """Hand: pre-grasp -> closed (fingertips closing along their directions), arm still."""
    lift: JointTrajectory
    """Arm: grasp -> lift_m straight up, hand commanded closed."""

    def as_list(self) -> list[tuple[str, JointTrajectory]]:
        return [("hand_shape", self.hand_shape), ("approach", self.approach), ("close", self.close), ("lift", self.lift)]


@dataclass
class GraspMotionResult(PlannedMotion):
    """The best-ranked grasp with a plan to its pre-grasp, and the reasons the grasps before it were rejected."""

    grasp_index: Optional[int] = None
    """Index of the chosen grasp in the given (ranked) batch."""
    hand_pregrasp_rad: Optional[np.ndarray] = None
    """(16,) hand joints held during the motion (the chosen grasp's pre-grasp)."""
    hand_closed_rad: Optional[np.ndarray] = None
    """(16,) the chosen grasp's closing target (fingertips closing.close_distance_m along their directions)."""
    attempts: list[GraspAttempt] = field(default_factory=list)
    """One per grasp tried, in rank order (the last one is the chosen grasp on success)."""
    stages: Optional[GraspStages] = None
    """All stages of the chosen grasp (`plan_grasp_motion` only)."""

    @property
    def rejected(self) -> list[GraspAttempt]:
        """The grasps tried and refused, in rank order."""
        return [a for a in self.attempts if a.status not in (PlanStatus.SUCCESS, PlanStatus.NOT_TRIED)]


def _arm_joints(q: np.ndarray, name: str) -> np.ndarray:
    q = np.asarray(q, dtype=float)
    if q.shape != (7,):
        raise ValueError(f"{name}: expected 7 arm joints (rad), got shape {q.shape}")
    if not np.isfinite(q).all():
        raise ValueError(f"{name}: contains NaN or inf: {q}")
    return q


class MotionPlanner:
    """Plans the arm to the pre-grasp of the best feasible grasp of a ranked batch (CPU backend by default).

    The hand holds the chosen grasp's pre-grasp joints during the whole motion: it is shaped at the start pose before
    the arm moves (the start is checked with the hand there), and closes (`hand_closed_rad`) after the approach.

    Args:
        config: limits, time limits, pre-grasp back-off and backend settings.
        backend: a MotionBackend (default: OmplBackend(config.ompl)).
    """

    def __init__(self, config: MotionPlannerConfig = MotionPlannerConfig(), backend: MotionBackend | None = None) -> None:
        self.config = config
        self.backend = backend if backend is not None else OmplBackend(config.ompl)
        self.hand = AllegroHand(dtype=torch.float64)
        self._lift_ik = ArmIK(ArmIKConfig(frame=PALM_LINK, free_z_rotation=False, num_seeds=1, num_iterations=30,
                                          position_tolerance_m=0.001, rotation_tolerance_rad=0.01))
        self._lift_robot = RobotCollisionModel(config.ompl.urdf)
        self._lock = threading.RLock()  # one request at a time: the backend's collision state is per request

    def _check_world(self, world: PlanningWorld) -> None:
        if not isinstance(world, PlanningWorld):
            raise ValueError(f"world: expected a PlanningWorld, got {type(world).__name__}")
        if world.frame_id != self.config.world_frame:
            raise ValueError(f"world is in frame {world.frame_id!r}, the planner plans in {self.config.world_frame!r}")

    def _options(self, seed: int, timeout_s: float | None = None) -> PlanOptions:
        return PlanOptions(time_limit_s=self.config.planning_time_limit_s, total_time_limit_s=timeout_s, seed=seed)

    def _timed(self, plan: GoalPlan, result: PlannedMotion, timer: StageTimer) -> None:
        with timer.stage("time_parameterization"):
            result.trajectory = time_parameterize(plan.path_rad, self.config.time_parameterization, ARM_JOINT_NAMES)
        result.path_rad, result.q_goal_arm_rad = plan.path_rad, plan.q_goal_arm_rad

    def plan_to_joints(self, q_start_arm_rad: np.ndarray, q_goal_arm_rad: np.ndarray, world: PlanningWorld,
                       hand_rad: np.ndarray, seed: int = 0) -> PlannedMotion:
        """A timed, collision-free arm motion between two arm configurations (7,), hand held at hand_rad (16,)."""
        q_start = _arm_joints(q_start_arm_rad, "q_start_arm_rad")
        q_goal = _arm_joints(q_goal_arm_rad, "q_goal_arm_rad")
        hand = np.asarray(hand_rad, dtype=float)
        if hand.shape != (16,) or not np.isfinite(hand).all():
            raise ValueError(f"hand_rad: expected 16 finite hand joints (rad), got shape {hand.shape}")
        self._check_world(world)
        timer = StageTimer()
        with self._lock, timer.stage("planning"):
            self.backend.set_world(world)
            plan = self.backend.plan_to_joints(q_start, q_goal, hand, self._options(seed))
        if not plan.success:
            status = StatusCode.INVALID_GOAL if plan.status == PlanStatus.START_INVALID else StatusCode.NO_RESULT
            return PlannedMotion(False, status, plan.reason, timings_s=timer.durations_s)
        result = PlannedMotion(True, StatusCode.SUCCEEDED, "")
        self._timed(plan, result, timer)
        result.timings_s = timer.durations_s
        return result

    def plan_grasps(self, q_start_arm_rad: np.ndarray, world: PlanningWorld, grasps: Grasp,
                    seed: int = 0, timeout_s: float | None = None) -> GraspMotionResult:
        """The best-ranked grasp (grasps in rank order, world frame) with a collision-free plan to its pre-grasp;
        lower-ranked grasps are not tried once timeout_s has passed (None: no limit)."""
        with self._lock:
            return self._plan_grasps(q_start_arm_rad, world, grasps, seed, timeout_s)

    def _plan_grasps(self, q_start_arm_rad: np.ndarray, world: PlanningWorld, grasps: Grasp, seed: int,
                     timeout_s: float | None) -> GraspMotionResult:
        q_start = _arm_joints(q_start_arm_rad, "q_start_arm_rad")
        self._check_world(world)
        if not isinstance(grasps, Grasp):
            raise ValueError(f"grasps: expected a Grasp batch, got {type(grasps).__name__}")
        if len(grasps) == 0:
            raise ValueError("grasps: the batch is empty")
        if grasps.frame_id != world.frame_id:
            raise ValueError(f"grasps are in frame {grasps.frame_id!r}, the world in {world.frame_id!r}")
        vector = grasps.to_vector()
        if not torch.isfinite(vector).all():
            bad = torch.nonzero(~torch.isfinite(vector).all(dim=1)).flatten().tolist()
            raise ValueError(f"grasps {bad} contain NaN or inf")
        timer = StageTimer()
        grasps = grasps.to(dtype=torch.float64)
        with timer.stage("hand_targets"):  # one fingertip-IK batch for the pre-grasp and closed hands
            targets = closing_targets(self.hand, grasps, self.config.closing)
            pregrasp = targets.pregrasp.joint_angles_rad.numpy()
            closed = targets.closed.joint_angles_rad.numpy()
        goals = PalmGoals(grasps.T_frame_palm.detach().to(torch.float64).numpy(), pregrasp)
        with timer.stage("planning"):
            self.backend.set_world(world)
            plans = self.backend.plan_to_palm_poses(q_start, goals, self._options(seed, timeout_s))
        chosen = next((i for i, p in enumerate(plans) if p.success), None)
        last = chosen if chosen is not None else len(plans) - 1
        attempts = [GraspAttempt(i, p.status, p.reason, p.planning_time_s) for i, p in enumerate(plans[: last + 1])]
        if chosen is None:
            return GraspMotionResult(False, *self._failure(plans), attempts=attempts, timings_s=timer.durations_s)
        result = GraspMotionResult(True, StatusCode.SUCCEEDED, "", grasp_index=chosen, hand_pregrasp_rad=pregrasp[chosen],
                                   hand_closed_rad=closed[chosen], attempts=attempts)
        self._timed(plans[chosen], result, timer)
        result.timings_s = timer.durations_s
        return result

    def plan_lift(self, q_grasp_arm_rad: np.ndarray, hand_rad: np.ndarray, world: PlanningWorld) -> PlannedMotion:
        """The straight lift (`config.stages`) from arm joints q_grasp_arm_rad (7,): IK points every lift_step_m up
        world z, each seeded with the previous one, checked against the world's boxes (the table; the held object
        is left out) and for self-collision with the hand at hand_rad (16,), then timed without stops."""
        with self._lock:
            return self._plan_lift(q_grasp_arm_rad, hand_rad, world)

    def _plan_lift(self, q_grasp_arm_rad: np.ndarray, hand_rad: np.ndarray, world: PlanningWorld) -> PlannedMotion:
        cfg = self.config.stages
        q = _arm_joints(q_grasp_arm_rad, "q_grasp_arm_rad")
        self._check_world(world)
        timer = StageTimer()
        with timer.stage("lift"):
            self._lift_robot.set_hand(np.asarray(hand_rad, dtype=float))
            T_start = self._lift_robot.frame_pose(q, PALM_LINK)
            n = int(np.ceil(cfg.lift_m / cfg.lift_step_m))
            path, reason = [q], ""
            for k in range(1, n + 1):
                T = T_start.copy()
                T[2, 3] += cfg.lift_m * k / n
                ik = self._lift_ik.solve(torch.from_numpy(T)[None], torch.from_numpy(path[-1])[None])
                q_next = ik.joint_angles_rad[0].numpy()
                if not bool(ik.success[0]):
                    reason = (f"no IK for the lift at {100 * cfg.lift_m * k / n:.1f} cm "
                              f"({1000 * float(ik.position_error_m[0]):.1f} mm off)")
                    break
                if np.abs(q_next - path[-1]).max() > cfg.max_lift_joint_step_rad:
                    reason = f"the lift IK jumps {np.abs(q_next - path[-1]).max():.2f} rad at {100 * cfg.lift_m * k / n:.1f} cm"
                    break
                path.append(q_next)
            if not reason:
                checker = CollisionChecker(self._lift_robot, PlanningWorld(world.boxes, (), world.frame_id),
                                           self.config.ompl.collision, self.config.ompl.workspace)
                bad = next((k for k in range(1, len(path)) if not checker.check_motion(path[k - 1], path[k])), None)
                if bad is not None:
                    reason = f"the lift collides at {100 * cfg.lift_m * bad / n:.1f} cm: " + checker.report(path[bad]).describe()
        if reason:
            return PlannedMotion(False, StatusCode.NO_RESULT, reason, timings_s=timer.durations_s)
        with timer.stage("time_parameterization"):
            trajectory = time_parameterize_through(np.stack(path), self.config.time_parameterization, ARM_JOINT_NAMES,
                                                   cfg.lift_s)
        return PlannedMotion(True, StatusCode.SUCCEEDED, "", trajectory, np.stack(path), path[-1], timer.durations_s)

    def plan_grasp_motion(self, q_start_arm_rad: np.ndarray, q_start_hand_rad: np.ndarray, world: PlanningWorld,
                          grasps: Grasp, seed: int = 0, timeout_s: float | None = None,
                          check: Callable[[GraspStages], list[str]] | None = None) -> GraspMotionResult:
        """`plan_grasps` plus the other stages: the best-ranked grasp whose approach and lift both have plans, with
        its `GraspStages` (hand shaping from q_start_hand_rad (16,), approach, close, lift). `check(stages)` may
        refuse a plan with reasons (e.g. the safety layer's checks); the next-ranked grasp is then tried.

        Per-call options: `seed` (IK seeds and OMPL's sampler) and `timeout_s`, one deadline for the whole request
        (every refused lift or check included; None: no limit). Past it the result is TIMEOUT."""
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {timeout_s}")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            return self._plan_grasp_motion(q_start_arm_rad, q_start_hand_rad, world, grasps, seed, deadline, timeout_s,
                                           check)

    def _plan_grasp_motion(self, q_start_arm_rad, q_start_hand_rad, world: PlanningWorld, grasps: Grasp, seed: int,
                           deadline: float | None, timeout_s: float | None,
                           check: Callable[[GraspStages], list[str]] | None) -> GraspMotionResult:
        hand_start = np.asarray(q_start_hand_rad, dtype=float)
        if hand_start.shape != (16,) or not np.isfinite(hand_start).all():
            raise ValueError(f"q_start_hand_rad: expected 16 finite hand joints (rad), got shape {np.shape(q_start_hand_rad)}")
        lower, upper = self.hand.lower_limits_rad.numpy(), self.hand.upper_limits_rad.numpy()
        outside = np.maximum(lower - hand_start, hand_start - upper)
        if outside.max() > HAND_START_LIMIT_TOLERANCE_RAD:
            j = int(np.argmax(outside))
            raise ValueError(f"q_start_hand_rad: {HAND_JOINT_NAMES[j]} = {hand_start[j]:.4f} rad is outside its limits "
                             f"[{lower[j]:.4f}, {upper[j]:.4f}]")
        hand_start = np.clip(hand_start, lower, upper)  # measured joints overshoot their limits a little
        cfg = self.config.stages
        attempts: list[GraspAttempt] = []
        offset = 0
        timings: dict[str, float] = {}
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                last = f"; last: {attempts[-1].reason}" if attempts else ""
                return GraspMotionResult(False, StatusCode.TIMEOUT,
                                         f"motion planning ran out of its {timeout_s:g} s after trying {len(attempts)} of "
                                         f"{len(grasps)} grasps{last}", attempts=attempts, timings_s=timings)
            result = self._plan_grasps(q_start_arm_rad, world, grasps[offset:], seed, remaining)
            attempts += [GraspAttempt(a.grasp_index + offset, a.status, a.reason, a.planning_time_s) for a in result.attempts]
            result.attempts = attempts
            timings = {k: timings.get(k, 0.0) + result.timings_s.get(k, 0.0) for k in {*timings, *result.timings_s}}
            result.timings_s = timings
            if not result.success:
                return result
            result.grasp_index += offset
            lift = self._plan_lift(result.q_goal_arm_rad, result.hand_pregrasp_rad, world)
            timings = {k: timings.get(k, 0.0) + lift.timings_s.get(k, 0.0) for k in {*timings, *lift.timings_s}}
            result.timings_s = timings
            refusal = (PlanStatus.LIFT_INFEASIBLE, lift.reason)
            if lift.success:
                approach = result.trajectory
                if approach.duration_s < cfg.approach_s:  # slower everywhere: still within every limit
                    approach = JointTrajectory(approach.joint_names, approach.times_s * cfg.approach_s / approach.duration_s,
                                               approach.positions_rad)
                    result.trajectory = approach
                result.stages = GraspStages(
                    hand_shape=JointTrajectory.linear(HAND_JOINT_NAMES, hand_start, result.hand_pregrasp_rad, cfg.hand_shape_s),
                    approach=approach,
                    close=JointTrajectory.linear(HAND_JOINT_NAMES, result.hand_pregrasp_rad, result.hand_closed_rad, cfg.close_s),
                    lift=lift.trajectory)
                problems = check(result.stages) if check is not None else []
                if not problems:
                    return result
                refusal = (PlanStatus.REFUSED, "; ".join(problems))
            attempts[-1] = GraspAttempt(result.grasp_index, refusal[0], refusal[1], attempts[-1].planning_time_s)
            offset = result.grasp_index + 1
            if offset >= len(grasps):
                return GraspMotionResult(False, StatusCode.NO_RESULT,
                                         f"none of {len(grasps)} grasps has an approach and a lift that pass every check; "
                                         f"last: {refusal[1]}", attempts=attempts, timings_s=timings)

    @staticmethod
    def _failure(plans: list[GoalPlan]) -> tuple[StatusCode, str]:
        """Status and reason when no grasp has a plan."""
        tried = [p for p in plans if p.status != PlanStatus.NOT_TRIED]
        if tried and all(p.status == PlanStatus.START_INVALID for p in tried):
            return StatusCode.INVALID_GOAL, tried[0].reason
        counts = Counter(p.status.name for p in plans)
        summary = ", ".join(f"{n} {name}" for name, n in counts.most_common())
        first = tried[0].reason if tried else "none tried"
        status = StatusCode.TIMEOUT if counts.get("NOT_TRIED") else StatusCode.NO_RESULT
        return status, f"none of {len(plans)} grasps has a collision-free plan ({summary}); best-ranked: {first}"
