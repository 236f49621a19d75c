"""Pre-grasp and closed-hand joint targets of a grasp (fingertip IK along the closing directions)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.robot.allegro import AllegroHand, FingertipIKConfig, FingertipIKResult, move_fingertips


@dataclass(frozen=True)
class ClosingConfig:
    """How far the fingertips move along d_i from the grasp's pre-grasp joints (Get a Grip hardware values)."""

    pregrasp_distance_m: float = -0.03
    """Back-off before the approach (negative = away from the object), so the approach is collision-free."""
    close_distance_m: float = 0.06
    """Closing target beyond the pre-grasp fingertips (the fingers stop on the object before it)."""
    ik: FingertipIKConfig = field(default_factory=FingertipIKConfig)


@dataclass
class ClosingTargets:
    """Joint targets for the three hand phases of one grasp batch."""

    pregrasp: FingertipIKResult
    """Backed-off joints commanded during the approach."""
    closed: FingertipIKResult
    """Joints commanded to close the hand."""


def closing_targets(hand: AllegroHand, grasp: Grasp, config: ClosingConfig = ClosingConfig()) -> ClosingTargets:
    """Pre-grasp (backed-off) and closed joint targets for every grasp, each within joint limits."""
    R_frame_palm = grasp.palm_rotation.to(hand.device, hand.dtype)
    directions_palm = grasp.fingertip_directions.to(hand.device, hand.dtype) @ R_frame_palm  # d_palm = R^T d
    q = grasp.joint_angles_rad.to(hand.device, hand.dtype)
    B = len(grasp)
    distance = torch.cat([torch.full((B, 1), config.pregrasp_distance_m), torch.full((B, 1), config.close_distance_m)])
    both = move_fingertips(hand, q.repeat(2, 1), directions_palm.repeat(2, 1, 1), distance, config.ik)  # one IK batch
    split = [FingertipIKResult(both.joint_angles_rad[s], both.residual_m[s], both.converged[s])
             for s in (slice(0, B), slice(B, 2 * B))]
    return ClosingTargets(pregrasp=split[0], closed=split[1])
