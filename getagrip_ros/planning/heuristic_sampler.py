"""Geometric grasp sampler: an opposed pinch of the object from random directions.

The palm faces the object from a random direction (palm normal toward the centroid, random roll),
placed so that the centroid sits in front of the palm between the finger pads and the thumb. The
object's extent along the finger axis (from the cloud) gives pad targets on its two opposite sides:
index, middle and ring on the far side, the thumb on the near side; fingertip IK turns them into the
grasp's joints, and the closing directions squeeze the sides together (d = -/+ palm z). Samples
whose pads cannot reach the sides are dropped. Nothing is learned: learned samplers replace this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.robot.allegro import OPEN_HAND_JOINT_ANGLES_RAD, AllegroHand, solve_fingertip_ik


@dataclass(frozen=True)
class HeuristicSamplerConfig:
    """Where the palm goes relative to the object (palm frame: x = normal, y = toward the index, z = fingers)."""

    min_elevation_deg: float = -10.0
    """Lowest approach direction (0 = from the side, 90 = from straight above)."""
    max_elevation_deg: float = 90.0
    grasp_point_in_palm_m: tuple[float, float, float] = (0.07, 0.0, 0.035)
    """Where the object centroid sits in the palm frame: in front of the palm, between fingers and thumb."""
    palm_clearance_m: float = 0.02
    """For large objects the palm backs off so that its origin stays this far out of the object's surface."""
    finger_spread_m: float = 0.03
    """Pad targets of the index and ring fingers sit this far to either side of the middle finger's."""
    max_pad_error_m: float = 0.01
    """Drop samples whose fingertip pads end further than this from their targets (object too large)."""
    min_table_clearance_m: float = 0.02
    """Drop samples whose palm origin is lower than this above the table (z = 0)."""
    max_points: int = 2048
    """Object points used to find the surface (a random subset of larger clouds)."""
    style: str = "pinch"
    """"pinch": fingertip pads placed on opposite sides by IK, directions squeezing them together (35% lifts on
    tabletop-20 without an evaluator); "open": the open hand at the same stand-off, each closing direction
    toward the fingertip's nearest object point (the usual start of grasp optimisation)."""
    open_joint_noise_rad: float = 0.1
    """"open" style: std of the Gaussian noise added to the open hand's joints (within the joint limits)."""


def sample_heuristic_grasps(points_m: np.ndarray, num_grasps: int, hand: AllegroHand, frame_id: str,
                            config: HeuristicSamplerConfig = HeuristicSamplerConfig(),
                            generator: torch.Generator | None = None,
                            rotation_ok: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Grasp:
    """Sample up to `num_grasps` grasps around an object point cloud (N, 3), z-up frame, table at z = 0.

    rotation_ok: (G, 3, 3) palm rotations -> (G,) bool; palm orientations it refuses are dropped before the
    fingertip IK (e.g. the cable filter, which would drop those grasps anyway).
    """
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
    helper = torch.where(approach[:, 2:].abs() > 0.9, torch.tensor([1.0, 0, 0], dtype=dtype),
                         torch.tensor([0, 0, 1.0], dtype=dtype))
    e1 = torch.linalg.cross(palm_normal, helper)
    e1 = e1 / e1.norm(dim=1, keepdim=True)
    e2 = torch.linalg.cross(palm_normal, e1)
    roll = 2 * math.pi * u[:, 2]
    finger_axis = roll.cos()[:, None] * e1 + roll.sin()[:, None] * e2
    palm_y = torch.linalg.cross(finger_axis, palm_normal)
    R = torch.stack([palm_normal, palm_y, finger_axis], dim=2)
    if rotation_ok is not None:
        ok = rotation_ok(R)
        approach, palm_normal, finger_axis, palm_y, R = (x[ok] for x in (approach, palm_normal, finger_axis, palm_y, R))
        num_grasps = len(R)
        if num_grasps == 0:
            return Grasp(pts.new_zeros(0, 3), R, pts.new_zeros(0, 16), pts.new_zeros(0, 4, 3), frame_id=frame_id)

    # object surface along the approach ray: furthest point projection within a 2 cm tube around the ray
    rel = pts[None] - centroid  # (1, N, 3)
    along = (rel * approach[:, None]).sum(-1)  # (G, N)
    radial = (rel - along[..., None] * approach[:, None]).norm(dim=-1)
    along = torch.where(radial < 0.02, along, torch.full_like(along, -1e9))
    surface = along.max(1).values.clamp_min(0.0)
    gx, gy, gz = config.grasp_point_in_palm_m
    distance = torch.maximum(torch.full_like(surface, gx), surface + config.palm_clearance_m)
    position = centroid + distance[:, None] * approach - gy * palm_y - gz * finger_axis

    # half-extent of the object along the finger axis, in a 3 cm tube around the palm's grasp line
    rel_z = (rel * finger_axis[:, None]).sum(-1)  # (G, N)
    off_axis = (rel - rel_z[..., None] * finger_axis[:, None]).norm(dim=-1)
    rel_z = torch.where(off_axis < 0.03, rel_z, torch.zeros_like(rel_z))
    far, near = rel_z.max(1).values, rel_z.min(1).values  # (G,) sides along +z / -z from the centroid

    if config.style == "open":
        q, directions = _open_hand(pts, position, R, num_grasps, hand, config, generator)
        reachable = torch.ones(num_grasps, dtype=torch.bool)
    elif config.style == "pinch":
        # pads on the two sides (palm frame), joints by fingertip IK from the open hand
        c_palm = torch.stack([distance, torch.full_like(distance, gy), torch.full_like(distance, gz)], 1)
        spread = torch.tensor([config.finger_spread_m, 0.0, -config.finger_spread_m, 0.0], dtype=dtype)
        side = torch.stack([far, far, far, near], 1)
        targets = c_palm[:, None].repeat(1, 4, 1)
        targets[..., 1] += spread
        targets[..., 2] += side
        q_open = hand.tensor(np.tile(OPEN_HAND_JOINT_ANGLES_RAD, (num_grasps, 1)))
        ik = solve_fingertip_ik(hand, q_open, targets.to(hand.dtype))
        q = ik.joint_angles_rad.to(dtype).cpu()  # the hand may live on a GPU; the sampler works on the CPU
        # the fingers squeeze toward the thumb, the thumb toward the fingers
        directions = -finger_axis[:, None, :].repeat(1, 4, 1)
        directions[:, 3] = finger_axis
        reachable = (ik.residual_m <= config.max_pad_error_m).all(1).cpu()
    else:
        raise ValueError(f"unknown heuristic sampler style {config.style!r} (pinch or open)")

    keep = (position[:, 2] >= config.min_table_clearance_m) & reachable
    return Grasp(position[keep], R[keep], q[keep], directions[keep], frame_id=frame_id)


def _open_hand(pts: torch.Tensor, position: torch.Tensor, R: torch.Tensor, num_grasps: int, hand: AllegroHand,
               config: HeuristicSamplerConfig, generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Open-hand joints (with noise, within limits) and unit directions from each fingertip to its nearest point."""
    dtype = pts.dtype
    q = torch.as_tensor(OPEN_HAND_JOINT_ANGLES_RAD, dtype=dtype).repeat(num_grasps, 1)
    q = q + config.open_joint_noise_rad * torch.randn(q.shape, generator=generator, dtype=dtype)
    q = hand.clamp_to_limits(hand.tensor(q)).to(dtype).cpu()
    tips = torch.einsum("gij,gfj->gfi", R, hand.fingertip_positions(hand.tensor(q)).to(dtype).cpu()) + position[:, None]
    nearest = pts[torch.cdist(tips.reshape(-1, 3), pts).argmin(dim=1)].reshape(num_grasps, -1, 3)
    toward = nearest - tips
    length = toward.norm(dim=-1, keepdim=True)
    fallback = R[:, :, 0][:, None].expand_as(toward)  # a tip inside the object closes along the palm normal
    return q, torch.where(length > 1e-6, toward / length.clamp_min(1e-9), fallback)
