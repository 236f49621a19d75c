"""Pre-grasps for the dataset: heuristic samples refined by gradient descent on a hand-object energy.

In the spirit of the paper's data generation: the fingertip contact points are pulled to a gap of
~1.5 cm off the object's surface, the thumb is pushed opposite the fingers (a smooth stand-in for the
force-closure term), and the hand is pushed out of the object and above the table and kept within its
joint limits. The object is its surface, sampled with outward normals (world frame, from the
true mesh); the hand is a set of proxy points (the palm's grasping face and its box corners, and points
along each finger's links with the links' radius). Distances are to the nearest surface sample, negative
behind its normal.
Closing directions are then set toward each fingertip's nearest surface point.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
import trimesh
from scipy.spatial import cKDTree

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.rotations import so3_exp
from getagrip_ros.robot.allegro import AllegroHand

#: The palm's collision box in the palm frame (URDF): centre and size, metres.
PALM_BOX_CENTRE_M = (-0.0093, 0.0, -0.0475)
PALM_BOX_SIZE_M = (0.0408, 0.113, 0.095)


@dataclass(frozen=True)
class GraspOptimizationConfig:
    num_steps: int = 200
    learning_rate: float = 1e-2
    """Adam step on the palm position (m), its rotation (so(3), rad) and the joints (rad)."""
    pregrasp_gap_m: float = 0.015
    """Target distance of each fingertip contact point from the surface (paper: ~1.5 cm)."""
    finger_radius_m: float = 0.012
    """Clearance kept between finger link centre lines and the surface / table."""
    table_clearance_m: float = 0.005
    points_per_link: int = 3
    """Proxy points per finger link segment (joints and tips included)."""
    num_surface_points: int = 1500
    """Surface samples standing for the object (ObjectSurface.from_mesh)."""
    gap_weight: float = 1.0
    penetration_weight: float = 10.0
    table_weight: float = 10.0
    joint_limit_weight: float = 10.0
    opposition_weight: float = 0.01
    """Weight of || mean over fingers of u_f + u_thumb ||^2, u = unit vector from a fingertip to the object centroid:
    the thumb pushed opposite the fingers (a smooth stand-in for force closure)."""


@dataclass(frozen=True)
class ObjectSurface:
    """Surface samples of the object with outward unit normals, world frame."""

    points_m: torch.Tensor
    normals: torch.Tensor

    @property
    def centroid_m(self) -> torch.Tensor:
        return self.points_m.mean(0)

    @cached_property
    def _tree(self) -> cKDTree:
        return cKDTree(self.points_m.detach().cpu().numpy())

    @classmethod
    def from_mesh(cls, mesh_world: trimesh.Trimesh, num_points: int, seed: int = 0) -> "ObjectSurface":
        points, faces = trimesh.sample.sample_surface(mesh_world, num_points, seed=seed)
        return cls(torch.as_tensor(np.asarray(points), dtype=torch.float64),
                   torch.as_tensor(np.asarray(mesh_world.face_normals[faces]), dtype=torch.float64))

    def signed_distance(self, points_m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(..., 3) -> distance to the nearest sample, negative where the point is behind that sample's normal
        (inside), and the sample (..., 3)."""
        flat = points_m.reshape(-1, 3)
        _, nearest = self._tree.query(flat.detach().cpu().numpy())
        nearest = torch.as_tensor(nearest, device=self.points_m.device)
        sample = self.points_m[nearest]
        offset = flat - sample
        outside = (offset * self.normals[nearest]).sum(-1) >= 0
        distance = (offset.square().sum(-1) + 1e-12).sqrt()
        signed = torch.where(outside, distance, -distance)
        return signed.reshape(points_m.shape[:-1]), sample.reshape(points_m.shape)


def _palm_points(dtype: torch.dtype) -> torch.Tensor:
    """(P, 3) palm proxies in the palm frame: a 4 x 5 grid on the grasping face (+x) and the 8 box corners."""
    c, s = torch.tensor(PALM_BOX_CENTRE_M, dtype=dtype), torch.tensor(PALM_BOX_SIZE_M, dtype=dtype)
    ys, zs = torch.linspace(-0.5, 0.5, 4, dtype=dtype), torch.linspace(-0.5, 0.5, 5, dtype=dtype)
    gy, gz = (v.reshape(-1) for v in torch.meshgrid(ys, zs, indexing="ij"))
    face = torch.stack([torch.full_like(gy, 0.5), gy, gz], -1)
    corners = torch.tensor([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)], dtype=dtype)
    return c + torch.cat([face, corners]) * s


def _finger_points(hand: AllegroHand, q: torch.Tensor, per_link: int) -> torch.Tensor:
    """(B, 4 * 4 * per_link, 3) points along each finger's link segments, palm frame."""
    joints = hand.skeleton_positions(q.to(hand.dtype)).to(q.dtype)  # (B, 4, 5, 3)
    t = torch.linspace(0.0, 1.0, per_link + 1, dtype=q.dtype)[1:, None]  # skip each segment's start (previous end)
    a, b = joints[:, :, :-1, None], joints[:, :, 1:, None]  # (B, 4, 4, 1, 3)
    return (a + (b - a) * t).reshape(q.shape[0], -1, 3)


def optimize_pregrasps(grasps: Grasp, surface: ObjectSurface, hand: AllegroHand,
                       config: GraspOptimizationConfig = GraspOptimizationConfig()) -> tuple[Grasp, dict[str, torch.Tensor]]:
    """Refine world-frame grasps by gradient descent; returns the grasps (directions toward the nearest surface
    points) and per-grasp terms of the final energy (``gap_m``: mean |gap error| per fingertip, ``penetration_m``,
    ``table_m``: deepest violation)."""
    if grasps.frame_id != "world":
        raise ValueError(f"grasps must be in the world frame, got {grasps.frame_id!r}")
    dtype = torch.float64
    R0 = grasps.palm_rotation.to(dtype).cpu()
    position = grasps.palm_position_m.to(dtype).cpu().clone().requires_grad_(True)
    rotation = torch.zeros(len(grasps), 3, dtype=dtype, requires_grad=True)
    q = grasps.joint_angles_rad.to(dtype).cpu().clone().requires_grad_(True)
    lower, upper = hand.lower_limits_rad.cpu().to(dtype), hand.upper_limits_rad.cpu().to(dtype)
    palm_local = _palm_points(dtype)
    optimizer = torch.optim.Adam([position, rotation, q], lr=config.learning_rate)

    def terms() -> tuple[torch.Tensor, ...]:
        R = so3_exp(rotation) @ R0

        def world(local: torch.Tensor) -> torch.Tensor:
            return torch.einsum("bij,bpj->bpi", R, local) + position[:, None]

        tips = world(hand.contact_positions(q.to(hand.dtype)).to(dtype).cpu())
        fingers = world(_finger_points(hand, q, config.points_per_link).cpu())
        palm = world(palm_local.expand(len(q), -1, -1))
        tip_signed, _ = surface.signed_distance(tips)
        finger_signed, _ = surface.signed_distance(fingers)
        palm_signed, _ = surface.signed_distance(palm)
        gap = tip_signed - config.pregrasp_gap_m
        penetration = torch.cat([(config.finger_radius_m - finger_signed).clamp_min(0), (-palm_signed).clamp_min(0)], 1)
        below = torch.cat([(config.finger_radius_m + config.table_clearance_m - fingers[..., 2]).clamp_min(0),
                           (config.table_clearance_m - palm[..., 2]).clamp_min(0)], 1)
        limits = (q - upper).clamp_min(0) + (lower - q).clamp_min(0)
        to_centre = surface.centroid_m - tips
        u = to_centre / to_centre.norm(dim=-1, keepdim=True).clamp_min(1e-9)
        opposition = (u[:, :3].mean(1) + u[:, 3]).square().sum(-1)
        return gap, penetration, below, limits, tips, opposition

    for _ in range(config.num_steps):
        gap, penetration, below, limits, _, opposition = terms()
        energy = (config.gap_weight * gap.square().sum(1) + config.penetration_weight * penetration.square().sum(1)
                  + config.table_weight * below.square().sum(1) + config.joint_limit_weight * limits.square().sum(1)
                  + config.opposition_weight * opposition)
        optimizer.zero_grad()
        energy.sum().backward()
        optimizer.step()

    with torch.no_grad():
        q.copy_(torch.maximum(torch.minimum(q, upper), lower))
        gap, penetration, below, _, tips, opposition = terms()
        _, nearest = surface.signed_distance(tips)
        toward = nearest - tips
        directions = toward / toward.norm(dim=-1, keepdim=True).clamp_min(1e-9)
        R = so3_exp(rotation) @ R0
        result = Grasp(position.detach().clone(), R, q.detach().clone(), directions, frame_id="world")
    return result, {"gap_m": gap.abs().mean(1), "penetration_m": penetration.max(1).values,
                    "table_m": below.max(1).values, "opposition": opposition}
