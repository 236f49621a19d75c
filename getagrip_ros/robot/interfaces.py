"""Robot interfaces shared by the simulated and the real robot: joint trajectories, Arm and Hand.

Capture and execution talk only to these; `getagrip_ros.sim` implements them in MuJoCo and the
hardware drivers (franky arm, Allegro hand) implement them on the robot.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np


@dataclass(frozen=True)
class JointTrajectory:
    """Time-stamped joint positions; positions are linearly interpolated between waypoints.

    Attributes:
        joint_names: names of the n joints, in column order.
        times_s: (T,) strictly increasing times from the start of the motion, first >= 0.
        positions_rad: (T, n) joint positions at those times.
    """

    joint_names: tuple[str, ...]
    times_s: np.ndarray
    positions_rad: np.ndarray

    def __post_init__(self) -> None:
        t = np.asarray(self.times_s, dtype=float).reshape(-1)
        q = np.asarray(self.positions_rad, dtype=float)
        object.__setattr__(self, "times_s", t)
        object.__setattr__(self, "positions_rad", q)
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        if q.ndim != 2 or q.shape != (len(t), len(self.joint_names)) or len(t) == 0:
            raise ValueError(f"trajectory: positions must be (T, {len(self.joint_names)}) for T = {len(t)} times, got {q.shape}")
        if len(set(self.joint_names)) != len(self.joint_names):
            raise ValueError(f"trajectory: duplicate joint names {self.joint_names}")
        if not (np.isfinite(t).all() and np.isfinite(q).all()):
            raise ValueError("trajectory has NaN or inf")
        if t[0] < 0 or (np.diff(t) <= 0).any():
            raise ValueError("trajectory times must start >= 0 and strictly increase")

    @classmethod
    def linear(cls, joint_names: Sequence[str], start_rad: Sequence[float], goal_rad: Sequence[float],
               duration_s: float, num_points: int = 2) -> "JointTrajectory":
        """Straight line in joint space from start to goal over duration_s."""
        s = np.linspace(0.0, 1.0, num_points)[:, None]
        q = (1 - s) * np.asarray(start_rad, float) + s * np.asarray(goal_rad, float)
        return cls(tuple(joint_names), np.linspace(0.0, duration_s, num_points), q)

    @property
    def duration_s(self) -> float:
        return float(self.times_s[-1])

    def sample(self, t_s: float) -> np.ndarray:
        """(n,) positions at time t_s (held constant before the first and after the last waypoint)."""
        return np.array([np.interp(t_s, self.times_s, self.positions_rad[:, j]) for j in range(self.positions_rad.shape[1])])


@dataclass(frozen=True)
class JointState:
    """Measured joint positions (rad) and velocities (rad/s) by name."""

    joint_names: tuple[str, ...]
    positions_rad: np.ndarray
    velocities_rad_s: np.ndarray
    effort_nm: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True)
class MotionResult:
    """How a motion ended."""

    success: bool
    reason: str
    duration_s: float
    final_error_rad: np.ndarray
    """(n,) |commanded - measured| at the end, per trajectory joint."""
    max_error_rad: np.ndarray
    """(n,) largest |commanded - measured| during the motion."""


StopFn = Callable[[], bool]


class JointGroup(abc.ABC):
    """A set of position-controlled joints that follow trajectories (an arm, a hand)."""

    joint_names: tuple[str, ...]

    @abc.abstractmethod
    def move(self, trajectory: JointTrajectory, should_stop: StopFn | None = None) -> MotionResult:
        """Follow the trajectory to its end (blocking); stop early, holding position, when should_stop() is True."""

    @abc.abstractmethod
    def state(self) -> JointState:
        """Current joint state."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop moving now and hold the current position."""


class Arm(JointGroup):
    """The 7-DoF arm (fr3_joint1..7)."""


class Hand(JointGroup):
    """The 16-DoF Allegro hand (joint_0.0..joint_15.0, Get a Grip order)."""
