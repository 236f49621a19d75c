"""The safety layer of grasp execution: every commanded waypoint is checked before anything moves.

`SafetyMonitor.check_stages` refuses a grasp plan (returns the reasons) unless, for every stage:
the joints are the robot's, every waypoint is within the joint position limits, the finite-difference
velocities and accelerations between waypoints are within the limits, the palm, flange and fingertips
stay inside the workspace box, every robot shape keeps `min_table_clearance_m` from the table, each
stage starts where the previous one ends (the first at the measured joints), the approach is
collision-free in the *current* world (the object included) and the lift against its boxes (the held
object left out). `EStop` latches a stop request that
the executor polls during every motion.

Frames: world (`fr3_link0`, z up, table top at z = 0); metres, radians, seconds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from getagrip_ros.motion.collision import CollisionChecker, CollisionCheckerConfig
from getagrip_ros.motion.planner import GraspStages
from getagrip_ros.motion.robot_geometry import RobotCollisionModel
from getagrip_ros.motion.time_parameterization import FR3_ACCELERATION_RAD_S2
from getagrip_ros.motion.world import PlanningWorld, table_box
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.description import (
    ARM_JOINT_NAMES, FINGERTIP_LINK_NAMES, FLANGE_LINK, FR3_LOWER_RAD, FR3_UPPER_RAD, FR3_VELOCITY_RAD_S, HAND_JOINT_NAMES,
    PALM_LINK,
)
from getagrip_ros.robot.interfaces import JointTrajectory

#: Allegro joint speed limit of its URDF (rad/s, every joint).
ALLEGRO_VELOCITY_RAD_S = 7.0


@dataclass(frozen=True)
class SafetyConfig:
    """Limits every commanded waypoint must respect."""

    velocity_scale: float = 1.0
    """Fraction of the joint velocity limits (FR3, Allegro) a trajectory may use."""
    arm_acceleration_rad_s2: tuple[float, ...] = FR3_ACCELERATION_RAD_S2
    """fr3_joint1..7 acceleration limits between waypoints (finite differences)."""
    hand_acceleration_rad_s2: float = 200.0
    """Hand joints (the hand's own PD loop smooths its commands; this catches jumps)."""
    workspace_min_m: tuple[float, float, float] = (0.1, -0.7, -0.01)
    """Lower corner of the box the palm, flange and fingertip centres must stay in (world frame)."""
    workspace_max_m: tuple[float, float, float] = (1.1, 0.7, 1.0)
    min_table_clearance_m: float = 0.002
    """Every robot shape keeps this far from the table top (the hand at its pre-grasp shape: closing fingers
    are stopped by the object)."""
    start_tolerance_rad: float = 0.05
    """The first waypoint of a plan may differ this much from the measured joints; stages must join within it."""
    position_tolerance_rad: float = 1e-6
    """Slack on the position limits (rounding)."""
    rate_tolerance: float = 1.01
    """Slack factor on the velocity and acceleration limits (rounding of sampled profiles)."""

    def __post_init__(self) -> None:
        if not 0 < self.velocity_scale <= 1:
            raise ValueError(f"velocity_scale must be in (0, 1], got {self.velocity_scale}")
        if not all(lo < hi for lo, hi in zip(self.workspace_min_m, self.workspace_max_m)):
            raise ValueError(f"workspace_min_m {self.workspace_min_m} must be below workspace_max_m {self.workspace_max_m}")
        for name in ("min_table_clearance_m", "start_tolerance_rad", "position_tolerance_rad"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"SafetyConfig.{name} must be >= 0, got {getattr(self, name)}")


class EStop:
    """A latched emergency stop shared by everything that moves the robot (thread-safe)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason = ""

    def trigger(self, reason: str = "e-stop") -> None:
        self._reason = reason
        self._event.set()

    def reset(self) -> None:
        self._event.clear()
        self._reason = ""

    @property
    def triggered(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str:
        return self._reason


class SafetyMonitor:
    """Checks grasp plans against the limits of `SafetyConfig` and the current world.

    Args:
        config: the limits.
        urdf: robot model (default: this package's fr3_algr_zed2i.urdf).
    """

    def __init__(self, config: SafetyConfig = SafetyConfig(), urdf: Optional[str] = None) -> None:
        self.config = config
        self._robot = RobotCollisionModel(urdf)
        hand = AllegroHand(dtype=torch.float64)
        hand_lower, hand_upper = hand.lower_limits_rad.tolist(), hand.upper_limits_rad.tolist()
        self._lower = dict(zip(ARM_JOINT_NAMES + HAND_JOINT_NAMES, (*FR3_LOWER_RAD, *hand_lower)))
        self._upper = dict(zip(ARM_JOINT_NAMES + HAND_JOINT_NAMES, (*FR3_UPPER_RAD, *hand_upper)))
        self._velocity = dict(zip(ARM_JOINT_NAMES + HAND_JOINT_NAMES,
                                  (*FR3_VELOCITY_RAD_S, *(ALLEGRO_VELOCITY_RAD_S,) * len(HAND_JOINT_NAMES))))
        self._acceleration = dict(zip(ARM_JOINT_NAMES + HAND_JOINT_NAMES,
                                      (*config.arm_acceleration_rad_s2, *(config.hand_acceleration_rad_s2,) * 16)))

    # -- single trajectories ------------------------------------------------------------------------------
    def check_limits(self, trajectory: JointTrajectory, label: str) -> list[str]:
        """Joint names, position, velocity and acceleration limits of one trajectory."""
        cfg = self.config
        unknown = [n for n in trajectory.joint_names if n not in self._lower]
        if unknown:
            return [f"{label}: unknown joints {unknown}"]
        names = trajectory.joint_names
        q, t = trajectory.positions_rad, trajectory.times_s
        lower = np.array([self._lower[n] for n in names]) - cfg.position_tolerance_rad
        upper = np.array([self._upper[n] for n in names]) + cfg.position_tolerance_rad
        problems = []
        outside = np.argwhere((q < lower) | (q > upper))
        if len(outside):
            i, j = outside[0]
            problems.append(f"{label}: {names[j]} = {q[i, j]:.4f} rad at t = {t[i]:.3f} s is outside its limits "
                            f"[{lower[j]:.4f}, {upper[j]:.4f}]")
        if len(t) > 1:
            v = np.diff(q, axis=0) / np.diff(t)[:, None]
            v_max = np.array([self._velocity[n] for n in names]) * cfg.velocity_scale * cfg.rate_tolerance
            fast = np.argwhere(np.abs(v) > v_max)
            if len(fast):
                i, j = fast[0]
                problems.append(f"{label}: {names[j]} moves at {abs(v[i, j]):.3f} rad/s at t = {t[i]:.3f} s, above its "
                                f"limit {v_max[j] / cfg.rate_tolerance:.3f} rad/s")
            if len(t) > 2:
                a = np.diff(v, axis=0) / ((t[2:] - t[:-2]) / 2)[:, None]
                a_max = np.array([self._acceleration[n] for n in names]) * cfg.rate_tolerance
                jerky = np.argwhere(np.abs(a) > a_max)
                if len(jerky):
                    i, j = jerky[0]
                    problems.append(f"{label}: {names[j]} accelerates at {abs(a[i, j]):.1f} rad/s^2 at t = {t[i + 1]:.3f} s, "
                                    f"above its limit {a_max[j] / cfg.rate_tolerance:.1f} rad/s^2")
        return problems

    def check_arm_geometry(self, arm_path_rad: np.ndarray, hand_rad: np.ndarray, label: str,
                           world: Optional[PlanningWorld] = None) -> list[str]:
        """Workspace box and table clearance (from the world's box named "table", else Get a Grip's table) at every
        (N, 7) arm waypoint with the hand at hand_rad (16,); with a world, also every straight motion between
        waypoints collision-free in it (1 mm buffer) and free of self-collision."""
        cfg = self.config
        self._robot.set_hand(np.asarray(hand_rad, dtype=float))
        lo, hi = np.asarray(cfg.workspace_min_m), np.asarray(cfg.workspace_max_m)
        tables = tuple(b for b in world.boxes if b.name == "table") if world is not None else ()
        table = CollisionChecker(self._robot, PlanningWorld(tables or (table_box(),), ()),
                                 CollisionCheckerConfig(world_buffer_m=cfg.min_table_clearance_m, self_collision=False))
        for i, q in enumerate(np.asarray(arm_path_rad, dtype=float)):
            for frame in (PALM_LINK, FLANGE_LINK, *FINGERTIP_LINK_NAMES):
                p = self._robot.frame_pose(q, frame)[:3, 3]
                if (p < lo).any() or (p > hi).any():
                    return [f"{label}: {frame} at {np.round(p, 3).tolist()} m (waypoint {i}) is outside the workspace "
                            f"box {lo.tolist()} - {hi.tolist()}"]
            if not table.is_valid(q):
                return [f"{label}: closer than {1000 * cfg.min_table_clearance_m:.0f} mm to the table at waypoint {i}: "
                        + table.report(q).describe()]
        if world is not None:
            checker = CollisionChecker(self._robot, world)
            path = np.asarray(arm_path_rad, dtype=float)
            bad = next((i for i in range(len(path)) if not (checker.is_valid(path[i]) if i == 0 else
                                                            checker.check_motion(path[i - 1], path[i]))), None)
            if bad is not None:
                return [f"{label}: collides in the current world at waypoint {bad}: " + checker.report(path[bad]).describe()]
        return []

    # -- whole plans ----------------------------------------------------------------------------------------
    def check_stages(self, stages: GraspStages, q_arm_now_rad: np.ndarray, q_hand_now_rad: np.ndarray,
                     world: PlanningWorld) -> list[str]:
        """Every check of the module docstring for a grasp plan; [] when it may run."""
        tol = self.config.start_tolerance_rad
        problems: list[str] = []
        expected = {"hand_shape": HAND_JOINT_NAMES, "approach": ARM_JOINT_NAMES, "close": HAND_JOINT_NAMES,
                    "lift": ARM_JOINT_NAMES}
        for name, trajectory in stages.as_list():
            if set(trajectory.joint_names) != set(expected[name]):
                problems.append(f"{name}: expected the joints {list(expected[name])}, got {list(trajectory.joint_names)}")
        if problems:
            return problems
        ordered = {name: _columns(trajectory, expected[name]) for name, trajectory in stages.as_list()}
        joins = [("hand_shape", np.asarray(q_hand_now_rad, float), ordered["hand_shape"][0], "the measured hand joints"),
                 ("approach", np.asarray(q_arm_now_rad, float), ordered["approach"][0], "the measured arm joints"),
                 ("close", ordered["hand_shape"][-1], ordered["close"][0], "the end of hand_shape"),
                 ("lift", ordered["approach"][-1], ordered["lift"][0], "the end of the approach")]
        for name, reference, first, what in joins:
            gap = np.abs(reference - first).max() if reference.shape == first.shape else np.inf
            if not gap <= tol:
                problems.append(f"{name}: starts {gap:.3f} rad away from {what} (tolerance {tol} rad)")
        for name, trajectory in stages.as_list():
            problems += self.check_limits(trajectory, name)
        if problems:
            return problems
        pregrasp = ordered["close"][0]
        problems += self.check_arm_geometry(ordered["approach"], pregrasp, "approach", world)
        problems += self.check_arm_geometry(ordered["lift"], pregrasp, "lift", PlanningWorld(world.boxes, (), world.frame_id))
        return problems


def _columns(trajectory: JointTrajectory, names: tuple[str, ...]) -> np.ndarray:
    """(T, n) positions in the order `names`."""
    index = [trajectory.joint_names.index(n) for n in names]
    return trajectory.positions_rad[:, index]
