"""Try one grasp with the floating hand: approach -> close -> lift, and judge it from the physics.

The wrist stands in for the arm (its pose is commanded directly); the object is a free body held only
by contact forces. Success follows the paper's simulation criterion: after a 20 cm lift the object is
off the table, touched by >= 3 hand links, moved < 10 cm relative to the hand and tilted < 45 deg.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from getagrip_ros.robot.description import HAND_JOINT_NAMES
from getagrip_ros.robot.interfaces import JointTrajectory
from getagrip_ros.sim.world import SimWorld


@dataclass(frozen=True)
class GraspTrialConfig:
    """Phase timings (the public code's hardware values) and the success thresholds."""

    approach_distance_m: float = 0.10
    """Start this far back from the grasp pose, along -palm normal."""
    approach_s: float = 1.0
    close_s: float = 0.5
    hold_closed_s: float = 0.2
    lift_m: float = 0.20
    lift_s: float = 1.0
    hold_lifted_s: float = 0.5
    min_hand_contacts: int = 3
    max_relative_motion_m: float = 0.10
    max_tilt_deg: float = 45.0


@dataclass(frozen=True)
class GraspTrialResult:
    success: bool
    reason: str
    object_lift_m: float
    hand_links_touching: tuple[str, ...]
    relative_motion_m: float
    tilt_deg: float


def _hold(q: np.ndarray) -> JointTrajectory:
    return JointTrajectory(HAND_JOINT_NAMES, [0.0], [q])


def _line(Ta: np.ndarray, Tb: np.ndarray, duration_s: float):
    return lambda t: Ta + (Tb - Ta) * min(t / duration_s, 1.0)


def run_grasp_trial(world: SimWorld, T_world_palm: np.ndarray, pregrasp_rad: np.ndarray, closed_rad: np.ndarray,
                    config: GraspTrialConfig = GraspTrialConfig()) -> GraspTrialResult:
    """Reset the floating-hand world and try the grasp (palm pose, pre-grasp and closing joints)."""
    T_start = T_world_palm.copy()
    T_start[:3, 3] -= config.approach_distance_m * T_world_palm[:3, 0]
    T_lift = T_world_palm.copy()
    T_lift[2, 3] += config.lift_m
    world.reset(hand_rad=pregrasp_rad, T_world_palm=T_start)
    z0 = world.object_pose()[2, 3]
    world.follow(_hold(pregrasp_rad), settle_s=config.approach_s, wrist_path=_line(T_start, T_world_palm, config.approach_s))
    world.follow(JointTrajectory.linear(HAND_JOINT_NAMES, pregrasp_rad, closed_rad, config.close_s),
                 settle_s=config.hold_closed_s, wrist_path=lambda t: T_world_palm)
    T_palm_object_before = np.linalg.inv(world.body_pose("palm_link")) @ world.object_pose()
    world.follow(_hold(closed_rad), settle_s=config.lift_s, wrist_path=_line(T_world_palm, T_lift, config.lift_s))
    world.follow(_hold(closed_rad), settle_s=config.hold_lifted_s, wrist_path=lambda t: T_lift)

    T_object = world.object_pose()
    T_palm_object_after = np.linalg.inv(world.body_pose("palm_link")) @ T_object
    relative = float(np.linalg.norm(T_palm_object_after[:3, 3] - T_palm_object_before[:3, 3]))
    tilt = float(np.degrees(np.arccos(np.clip(T_object[2, 2], -1.0, 1.0))))
    touching = world.object_contacts()
    links = tuple(sorted(k for k, v in touching.items() if k in world.hand_link_names() and v > 1e-3))
    lift = float(T_object[2, 3] - z0)
    if "world" in touching:
        reason = f"object still on the table (lifted {lift * 100:.1f} cm)"
    elif len(links) < config.min_hand_contacts:
        reason = f"only {len(links)} hand links touch the object"
    elif relative > config.max_relative_motion_m:
        reason = f"object slipped {relative * 100:.1f} cm in the hand"
    elif tilt > config.max_tilt_deg:
        reason = f"object tilted {tilt:.0f} deg"
    else:
        return GraspTrialResult(True, f"lifted {lift * 100:.1f} cm with {len(links)} links", lift, links, relative, tilt)
    return GraspTrialResult(False, reason, lift, links, relative, tilt)
