"""Try one grasp with the floating hand: approach -> close -> lift, and judge it from the physics.

The wrist stands in for the arm (its pose is commanded directly); the object is a free body held only
by contact forces. Success follows the paper's simulation criterion: after a 20 cm lift the object is
off the table, touched by >= 3 hand links, moved < 10 cm relative to the hand and tilted < 45 deg.
The close -> lift part (:func:`close_and_lift`) is shared with the grasp labels of getagrip_ros.data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from getagrip_ros.robot.description import HAND_JOINT_NAMES, PALM_LINK
from getagrip_ros.robot.interfaces import JointTrajectory
from getagrip_ros.sim.world import SimWorld

#: Object contacts below this normal force (N) do not count as touching.
MIN_CONTACT_FORCE_N = 1e-3


@dataclass(frozen=True)
class CloseLiftConfig:
    """Close the hand at the grasp pose, then lift straight up (the public code's hardware timings)."""

    close_s: float = 0.5
    hold_closed_s: float = 0.2
    lift_m: float = 0.20
    lift_s: float = 1.0
    hold_lifted_s: float = 0.5
    give_up_after_m: float | None = None
    """Stop the lift early once the wrist has risen this far while the object has risen less than
    ``min_object_rise_m`` and still touches the table: the hand is not holding it, and the rest of the lift
    cannot pick it up (the outcome is the state at that moment). None: always simulate every phase."""
    min_object_rise_m: float = 0.01


@dataclass(frozen=True)
class GraspTrialConfig:
    """Phase timings (the public code's hardware values) and the success thresholds."""

    approach_distance_m: float = 0.10
    """Start this far back from the grasp pose, along -palm normal."""
    approach_s: float = 1.0
    close_s: float = CloseLiftConfig.close_s
    hold_closed_s: float = CloseLiftConfig.hold_closed_s
    lift_m: float = CloseLiftConfig.lift_m
    lift_s: float = CloseLiftConfig.lift_s
    hold_lifted_s: float = CloseLiftConfig.hold_lifted_s
    min_hand_contacts: int = 3
    max_relative_motion_m: float = 0.10
    max_tilt_deg: float = 45.0

    @property
    def close_lift(self) -> CloseLiftConfig:
        """The close -> lift phases of this trial."""
        return CloseLiftConfig(self.close_s, self.hold_closed_s, self.lift_m, self.lift_s, self.hold_lifted_s)


@dataclass(frozen=True)
class GraspTrialResult:
    success: bool
    reason: str
    object_lift_m: float
    hand_links_touching: tuple[str, ...]
    relative_motion_m: float
    tilt_deg: float


@dataclass(frozen=True)
class LiftOutcome:
    """The object after close -> lift -> hold (world frame, metres)."""

    T_world_object: np.ndarray
    """(4, 4) object pose at the end."""
    T_palm_object_closed: np.ndarray
    """(4, 4) object in the palm frame once the hand has closed, before the lift."""
    T_palm_object_lifted: np.ndarray
    """(4, 4) object in the palm frame at the end."""
    touching: dict[str, float]
    """{body touching the object at the end ("world" = the table): total normal force in N}."""
    hand_links_touching: tuple[str, ...]
    """Sorted hand links touching the object with more than MIN_CONTACT_FORCE_N."""
    gave_up: bool
    """True when the lift stopped early because the object was left on the table (give_up_after_m)."""

    @property
    def relative_motion_m(self) -> float:
        """How far the object moved in the palm frame during the lift."""
        return float(np.linalg.norm(self.T_palm_object_lifted[:3, 3] - self.T_palm_object_closed[:3, 3]))


def _hold(q: np.ndarray) -> JointTrajectory:
    return JointTrajectory(HAND_JOINT_NAMES, [0.0], [q])


def _line(Ta: np.ndarray, Tb: np.ndarray, duration_s: float):
    return lambda t: Ta + (Tb - Ta) * min(t / duration_s, 1.0)


def close_and_lift(world: SimWorld, T_world_palm: np.ndarray, pregrasp_rad: np.ndarray, closed_rad: np.ndarray,
                   config: CloseLiftConfig = CloseLiftConfig()) -> LiftOutcome:
    """With the hand at the grasp pose: close to the closed joints, hold, lift straight up, hold lifted."""
    T_lift = T_world_palm.copy()
    T_lift[2, 3] += config.lift_m
    world.follow(JointTrajectory.linear(HAND_JOINT_NAMES, pregrasp_rad, closed_rad, config.close_s),
                 settle_s=config.hold_closed_s, wrist_path=lambda t: T_world_palm)
    T_palm_object_closed = np.linalg.inv(world.body_pose(PALM_LINK)) @ world.object_pose()
    z_object_closed_m = world.object_pose()[2, 3]

    def left_behind() -> bool:
        return (world.body_pose(PALM_LINK)[2, 3] - T_world_palm[2, 3] >= config.give_up_after_m
                and world.object_pose()[2, 3] - z_object_closed_m < config.min_object_rise_m
                and "world" in world.object_contacts())

    lifted = world.follow(_hold(closed_rad), settle_s=config.lift_s, wrist_path=_line(T_world_palm, T_lift, config.lift_s),
                          should_stop=None if config.give_up_after_m is None else left_behind)
    if lifted.success:
        world.follow(_hold(closed_rad), settle_s=config.hold_lifted_s, wrist_path=lambda t: T_lift)
    T_object = world.object_pose()
    touching = world.object_contacts()
    links = tuple(sorted(k for k, v in touching.items() if k in world.hand_link_names() and v > MIN_CONTACT_FORCE_N))
    return LiftOutcome(T_object, T_palm_object_closed, np.linalg.inv(world.body_pose(PALM_LINK)) @ T_object, touching,
                       links, not lifted.success)


def run_grasp_trial(world: SimWorld, T_world_palm: np.ndarray, pregrasp_rad: np.ndarray, closed_rad: np.ndarray,
                    config: GraspTrialConfig = GraspTrialConfig()) -> GraspTrialResult:
    """Reset the floating-hand world and try the grasp (palm pose, pre-grasp and closing joints)."""
    T_start = T_world_palm.copy()
    T_start[:3, 3] -= config.approach_distance_m * T_world_palm[:3, 0]
    world.reset(hand_rad=pregrasp_rad, T_world_palm=T_start)
    z0 = world.object_pose()[2, 3]
    world.follow(_hold(pregrasp_rad), settle_s=config.approach_s, wrist_path=_line(T_start, T_world_palm, config.approach_s))
    outcome = close_and_lift(world, T_world_palm, pregrasp_rad, closed_rad, config.close_lift)

    T_object, links, relative = outcome.T_world_object, outcome.hand_links_touching, outcome.relative_motion_m
    tilt = float(np.degrees(np.arccos(np.clip(T_object[2, 2], -1.0, 1.0))))
    lift = float(T_object[2, 3] - z0)
    if "world" in outcome.touching:
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


def object_lift_check(world: SimWorld, min_rise_m: float = 0.18, min_hand_links: int = 3) -> Callable[[], tuple[bool, str]]:
    """A lift check for `execution.GraspExecutor`, from the physics: remembers the object's height now; when called
    later, the object must have risen at least min_rise_m, be off the table and touched by min_hand_links hand links."""
    z0 = float(world.object_pose()[2, 3])

    def check() -> tuple[bool, str]:
        rise = float(world.object_pose()[2, 3]) - z0
        touching = world.object_contacts()
        links = sorted(k for k, v in touching.items() if k in world.hand_link_names() and v > MIN_CONTACT_FORCE_N)
        short = [f"rose less than {100 * min_rise_m:.1f} cm"] if rise < min_rise_m else []
        short += ["still on the table"] if "world" in touching else []
        short += [f"fewer than {min_hand_links} hand links"] if len(links) < min_hand_links else []
        where = "on the table" if "world" in touching else "off the table"
        why = f"object rose {100 * rise:.2f} cm, {where}, touched by {len(links)} hand links"
        return not short, why + (f" ({'; '.join(short)})" if short else "")

    return check
