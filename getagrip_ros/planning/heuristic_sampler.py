"""Geometric grasp sampler: open hand placed around the object, palm facing it, fingers closing inward.

This is the kind of initialisation the Get a Grip data engine starts from (hand outside the object,
palm toward it, randomised roll and joints); it needs no trained model. Learned samplers (diffusion,
fixed set) plug into the same planner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.robot.allegro import OPEN_HAND_JOINT_ANGLES_RAD, AllegroHand


@dataclass(frozen=True)
class HeuristicSamplerConfig:
    """Where the palm goes relative to the object's surface (palm frame: x = normal, z = fingers)."""

    min_elevation_deg: float = -10.0
    """Lowest approach direction (0 = horizontal approach from the side, 90 = from straight above)."""
    max_elevation_deg: float = 90.0
    standoff_m: float = 0.06
    """Distance along the palm normal from the palm origin to the object's surface."""
    finger_offset_m: float = 0.03
    """Object surface point sits this far along the finger axis (palm z) from the palm origin."""
    joint_noise_rad: float = 0.1
    """Uniform noise added to the open-hand joints (clamped to the limits)."""
    min_table_clearance_m: float = 0.02
    """Drop samples whose palm origin is lower than this above the table (z = 0)."""
    max_points: int = 2048
    """Object points used to find the surface (a random subset of larger clouds)."""


def sample_heuristic_grasps(points_m: np.ndarray, num_grasps: int, hand: AllegroHand, frame_id: str,
                            config: HeuristicSamplerConfig = HeuristicSamplerConfig(),
                            generator: torch.Generator | None = None) -> Grasp:
    """Sample up to `num_grasps` grasps around an object point cloud (N, 3), z-up frame, table at z = 0."""
    dtype = torch.float64
    pts = torch.as_tensor(points_m, dtype=dtype)
    if len(pts) > config.max_points:  # bounds the (grasps x points) surface search
        pts = pts[torch.randperm(len(pts), generator=generator)[: config.max_points]]
    centroid = pts.mean(0)
    u = torch.rand(num_grasps, 3, generator=generator, dtype=dtype)
    yaw = 2 * math.pi * u[:, 0]
    lo, hi = (math.sin(math.radians(v)) for v in (config.min_elevation_deg, config.max_elevation_deg))
    sin_el = lo + (hi - lo) * u[:, 1]  # uniform on the sphere band
    cos_el = (1 - sin_el**2).sqrt()
    approach = torch.stack([cos_el * yaw.cos(), cos_el * yaw.sin(), sin_el], 1)  # from object toward the palm
    palm_normal = -approach
    # finger axis: random roll about the palm normal
    helper = torch.where((approach[:, 2:].abs() > 0.9), torch.tensor([1.0, 0, 0], dtype=dtype), torch.tensor([0, 0, 1.0], dtype=dtype))
    e1 = torch.linalg.cross(palm_normal, helper)
    e1 = e1 / e1.norm(dim=1, keepdim=True)
    e2 = torch.linalg.cross(palm_normal, e1)
    roll = 2 * math.pi * u[:, 2]
    finger_axis = roll.cos()[:, None] * e1 + roll.sin()[:, None] * e2
    palm_y = torch.linalg.cross(finger_axis, palm_normal)
    R = torch.stack([palm_normal, palm_y, finger_axis], dim=2)

    # object surface along the approach ray: furthest point projection within a 2 cm tube around the ray
    rel = pts[None] - centroid  # (1, N, 3)
    along = (rel * approach[:, None]).sum(-1)  # (G, N)
    radial = (rel - along[..., None] * approach[:, None]).norm(dim=-1)
    along = torch.where(radial < 0.02, along, torch.full_like(along, -1e9))
    surface = along.max(1).values.clamp_min(0.0)
    surface_point = centroid + surface[:, None] * approach
    position = surface_point - config.standoff_m * palm_normal - config.finger_offset_m * finger_axis

    q = hand.tensor(np.tile(OPEN_HAND_JOINT_ANGLES_RAD, (num_grasps, 1))).to(dtype)
    q = q + (torch.rand(q.shape, generator=generator, dtype=dtype) * 2 - 1) * config.joint_noise_rad
    q = torch.maximum(torch.minimum(q, hand.upper_limits_rad.to(dtype)), hand.lower_limits_rad.to(dtype))

    # fingertips close toward the object centroid
    tips_palm = hand.contact_positions(q.to(hand.dtype)).to(dtype)
    tips_frame = (R[:, None] @ tips_palm[..., None]).squeeze(-1) + position[:, None]
    directions = centroid - tips_frame
    directions = directions / directions.norm(dim=-1, keepdim=True).clamp_min(1e-9)

    keep = position[:, 2] >= config.min_table_clearance_m
    return Grasp(position[keep], R[keep], q[keep], directions[keep], frame_id=frame_id)
