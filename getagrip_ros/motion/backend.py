"""The interface every arm motion-planning backend implements (OMPL on CPU now; cuRobo can plug in later).

A backend plans the 7 arm joints with the 16 hand joints held fixed: from a start configuration to
given joint goals, or to palm poses T_world_palm (its own IK). It returns geometric, collision-checked
waypoint paths and a status with a reason per goal; `MotionPlanner` validates requests, picks the best
ranked grasp and time-parameterises the path.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Optional

import numpy as np

from getagrip_ros.motion.world import PlanningWorld


class PlanStatus(IntEnum):
    """Outcome of planning to one goal."""

    SUCCESS = 0
    START_INVALID = 1
    """The start configuration is outside the joint limits or in collision."""
    IK_FAILED = 2
    """No arm configuration within joint limits reaches the palm pose."""
    GOAL_IN_COLLISION = 3
    """Every arm configuration found for the goal is in collision (world or self)."""
    NO_PATH = 4
    """No collision-free path found within the time limit."""
    NOT_TRIED = 5
    """Skipped: a better-ranked goal succeeded first, or the total time limit ran out."""
    GOAL_INVALID = 6
    """A joint goal outside the joint limits."""
    LIFT_INFEASIBLE = 7
    """The pre-grasp is reachable but the straight lift from it is not (IK, joint jumps or collisions)."""
    REFUSED = 8
    """Planned, but the caller's check (e.g. the safety layer's workspace box) refused the stages."""


@dataclass(frozen=True)
class PalmGoals:
    """B goals: palm poses in the world frame and the hand joints held while the arm moves there."""

    T_world_palm: np.ndarray
    """(B, 4, 4) pose of palm_link in the world frame (metres)."""
    hand_rad: np.ndarray
    """(B, 16) hand joints (Get a Grip order), e.g. the pre-grasp joints."""

    def __post_init__(self) -> None:
        T = np.asarray(self.T_world_palm, dtype=float)
        hand = np.asarray(self.hand_rad, dtype=float)
        if T.ndim != 3 or T.shape[1:] != (4, 4) or len(T) == 0:
            raise ValueError(f"T_world_palm: expected shape (B, 4, 4) with B >= 1, got {T.shape}")
        if hand.shape != (len(T), 16):
            raise ValueError(f"hand_rad: expected shape ({len(T)}, 16), got {hand.shape}")
        if not (np.isfinite(T).all() and np.isfinite(hand).all()):
            raise ValueError("palm goals contain NaN or inf")
        object.__setattr__(self, "T_world_palm", T)
        object.__setattr__(self, "hand_rad", hand)

    def __len__(self) -> int:
        return len(self.T_world_palm)


@dataclass(frozen=True)
class PlanOptions:
    """Per-request options (the build-time settings are in each backend's config)."""

    time_limit_s: float = 1.0
    """Path search time per goal (the OMPL backend counts its planning thread's CPU time, so load does not cut a
    search short)."""
    total_time_limit_s: Optional[float] = None
    """Stop trying further goals once this much time has passed (None: no limit)."""
    stop_at_first_success: bool = True
    """Goals are ranked: stop at the first that succeeds (later ones end NOT_TRIED)."""
    seed: int = 0
    """Seeds IK and the sampling-based planner: the same request and seed give the same plan."""

    def __post_init__(self) -> None:
        if not self.time_limit_s > 0:
            raise ValueError(f"time_limit_s must be > 0, got {self.time_limit_s}")
        if self.total_time_limit_s is not None and not self.total_time_limit_s > 0:
            raise ValueError(f"total_time_limit_s must be > 0 or None, got {self.total_time_limit_s}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")


@dataclass
class GoalPlan:
    """The plan (or why there is none) for one goal."""

    status: PlanStatus
    reason: str
    """Human-readable: "" on success, else why, e.g. "no collision-free path within 1.0 s"."""
    q_goal_arm_rad: Optional[np.ndarray] = None
    """(7,) the arm configuration planned to (when IK found one)."""
    path_rad: Optional[np.ndarray] = None
    """(N, 7) collision-checked waypoints from the start to q_goal (straight joint-space segments)."""
    planning_time_s: float = 0.0
    details: dict = field(default_factory=dict)
    """Backend-specific numbers (IK errors, collision checks, path lengths)."""

    @property
    def success(self) -> bool:
        return self.status == PlanStatus.SUCCESS


class MotionBackend(abc.ABC):
    """Plans arm motions in one world, hand joints held fixed."""

    @abc.abstractmethod
    def set_world(self, world: PlanningWorld) -> None:
        """Use these obstacles for the following requests."""

    @abc.abstractmethod
    def plan_to_joints(self, q_start_arm_rad: np.ndarray, q_goal_arm_rad: np.ndarray, hand_rad: np.ndarray,
                       options: PlanOptions) -> GoalPlan:
        """A collision-free path from the start to one arm configuration (7,), hand at hand_rad (16,)."""

    @abc.abstractmethod
    def plan_to_palm_poses(self, q_start_arm_rad: np.ndarray, goals: PalmGoals, options: PlanOptions) -> list[GoalPlan]:
        """One GoalPlan per goal, in the goals' (rank) order; see PlanOptions.stop_at_first_success."""
