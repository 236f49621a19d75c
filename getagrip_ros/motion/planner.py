"""Motion planning for ranked grasps: the best-ranked grasp whose pre-grasp the arm can reach, and how.

`MotionPlanner.plan_grasps` takes the current arm joints, the world (table, object) and a ranked
`Grasp` batch in the world frame. For each grasp, in rank order: the pre-grasp hand joints (fingertips
backed off 3 cm along their closing directions, `grasp.closing`), arm IK of the palm pose with the hand
there, a collision-free path to it with those hand joints held, and a time-parameterised trajectory
within the FR3 limits. It returns the first grasp that works and why each one before it did not.

Bad input (NaN, wrong shapes, wrong frames) raises ValueError; a request that cannot be planned ends
with a status and a reason (e.g. a start state in collision).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

from getagrip_ros.grasp.closing import ClosingConfig, closing_targets
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.motion.backend import GoalPlan, MotionBackend, PalmGoals, PlanOptions, PlanStatus
from getagrip_ros.motion.ompl_backend import OmplBackend, OmplBackendConfig
from getagrip_ros.motion.time_parameterization import TimeParameterizationConfig, time_parameterize
from getagrip_ros.motion.world import PlanningWorld
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.description import ARM_JOINT_NAMES
from getagrip_ros.robot.interfaces import JointTrajectory
from getagrip_ros.status import StageTimer, StatusCode


@dataclass(frozen=True)
class MotionPlannerConfig:
    """Build-time settings of the motion planner (per-request options are the arguments of its methods)."""

    planning_time_limit_s: float = 1.0
    """Path search time per grasp."""
    total_time_limit_s: Optional[float] = None
    """Stop trying lower-ranked grasps after this long (None: try them all)."""
    closing: ClosingConfig = field(default_factory=ClosingConfig)
    """Pre-grasp hand joints: fingertips moved closing.pregrasp_distance_m (-0.03 m) along their directions."""
    time_parameterization: TimeParameterizationConfig = field(default_factory=TimeParameterizationConfig)
    """Joint velocity / acceleration limits of the trajectory."""
    ompl: OmplBackendConfig = field(default_factory=OmplBackendConfig)
    """The CPU backend: IK, collision buffer (1 mm) and motion resolution (1 mm), RRTConnect, shortcutting."""
    world_frame: str = "world"
    """Frame the grasps and the world must be given in."""

    def __post_init__(self) -> None:
        if not self.planning_time_limit_s > 0:
            raise ValueError(f"planning_time_limit_s must be > 0, got {self.planning_time_limit_s}")
        if self.total_time_limit_s is not None and not self.total_time_limit_s > 0:
            raise ValueError(f"total_time_limit_s must be > 0 or None, got {self.total_time_limit_s}")


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

    def _check_world(self, world: PlanningWorld) -> None:
        if not isinstance(world, PlanningWorld):
            raise ValueError(f"world: expected a PlanningWorld, got {type(world).__name__}")
        if world.frame_id != self.config.world_frame:
            raise ValueError(f"world is in frame {world.frame_id!r}, the planner plans in {self.config.world_frame!r}")

    def _options(self, seed: int) -> PlanOptions:
        return PlanOptions(time_limit_s=self.config.planning_time_limit_s,
                           total_time_limit_s=self.config.total_time_limit_s, seed=seed)

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
        with timer.stage("planning"):
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
                    seed: int = 0) -> GraspMotionResult:
        """The best-ranked grasp (grasps in rank order, world frame) with a collision-free plan to its pre-grasp."""
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
            plans = self.backend.plan_to_palm_poses(q_start, goals, self._options(seed))
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
