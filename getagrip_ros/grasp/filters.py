"""Grasp filters: the wrist-camera cable constraints of the real robot."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from getagrip_ros.grasp.frames import WORLD_FORWARD, WORLD_UP
from getagrip_ros.grasp.grasp import Grasp


@dataclass(frozen=True)
class CableFilterConfig:
    """Keep grasps the cabled wrist camera allows (directions in the grasps' frame, z up)."""

    min_palm_normal_angle_from_up_deg: float = 60.0
    """Drop grasps whose palm normal (palm x) is within this angle of `up` (palm facing the ceiling)."""
    max_finger_angle_from_forward_deg: float = 60.0
    """Drop grasps whose palm-to-middle-finger axis (palm z) deviates more than this from `forward`."""
    up: tuple[float, float, float] = WORLD_UP
    forward: tuple[float, float, float] = WORLD_FORWARD


def cable_filter_mask(grasp: Grasp, config: CableFilterConfig = CableFilterConfig()) -> torch.Tensor:
    """(B,) bool: True for grasps that pass both cable constraints."""
    return cable_filter_rotation_mask(grasp.palm_rotation, config)


def cable_filter_rotation_mask(palm_rotation: torch.Tensor, config: CableFilterConfig = CableFilterConfig()) -> torch.Tensor:
    """(B,) bool from (B, 3, 3) palm rotations alone (the filter does not depend on anything else)."""
    up = torch.tensor(config.up, dtype=palm_rotation.dtype, device=palm_rotation.device)
    forward = torch.tensor(config.forward, dtype=up.dtype, device=up.device)
    up, forward = up / up.norm(), forward / forward.norm()
    palm_up_cos = palm_rotation[:, :, 0] @ up
    finger_forward_cos = palm_rotation[:, :, 2] @ forward
    palm_ok = palm_up_cos < math.cos(math.radians(config.min_palm_normal_angle_from_up_deg))
    fingers_ok = finger_forward_cos >= math.cos(math.radians(config.max_finger_angle_from_forward_deg))
    return palm_ok & fingers_ok
