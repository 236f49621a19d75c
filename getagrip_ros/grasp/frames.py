"""Frames shared by every stage, and the conversion to the public code's y-up object frame.

Frames (all right-handed, metres):
- ``world``: the robot base ``fr3_link0``; z up, x forward (away from the robot).
- ``table``/``object`` frames of this stack are z up with the table top at z = 0.
- ``Oy``: the public Get a Grip object frame, y up (x_Oy = x_O, y_Oy = z_O, z_Oy = -y_O). Its
  models (BPS basis, evaluators, samplers, fixed grasp sets) are defined in it.

``T_O_Oy`` (pose of Oy in the z-up frame O with the same origin) is the rotation Rx(+90 deg).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from getagrip_ros.grasp.grasp import SLICE_DIRECTIONS, SLICE_POSITION, SLICE_ROT6D, Grasp
from getagrip_ros.grasp.rotations import rotation_x

#: World "up" and "forward" directions of the robot base frame.
WORLD_UP = (0.0, 0.0, 1.0)
WORLD_FORWARD = (1.0, 0.0, 0.0)


def T_zup_yup(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(4, 4) pose of a y-up frame in the z-up frame with the same origin: Rx(+90 deg)."""
    T = torch.eye(4, dtype=dtype)
    T[:3, :3] = rotation_x(math.pi / 2, dtype)
    return T


def make_transform(rotation: np.ndarray | torch.Tensor | None = None,
                   translation_m: np.ndarray | torch.Tensor | tuple = (0.0, 0.0, 0.0),
                   dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(4, 4) homogeneous transform from a (3, 3) rotation (default identity) and a translation."""
    T = torch.eye(4, dtype=dtype)
    if rotation is not None:
        T[:3, :3] = torch.as_tensor(np.asarray(rotation), dtype=dtype)
    T[:3, 3] = torch.as_tensor(np.asarray(translation_m, dtype=float), dtype=dtype)
    return T


def invert_transform(T: torch.Tensor) -> torch.Tensor:
    """Inverse of (..., 4, 4) rigid transforms."""
    R, t = T[..., :3, :3], T[..., :3, 3:]
    out = torch.zeros_like(T)
    out[..., :3, :3] = R.transpose(-1, -2)
    out[..., :3, 3:] = -R.transpose(-1, -2) @ t
    out[..., 3, 3] = 1.0
    return out


def grasp_yup_to_zup(grasp_Oy: Grasp, frame_id: str = "object") -> Grasp:
    """Grasps in the public y-up object frame Oy -> the z-up frame with the same origin."""
    return grasp_Oy.transformed(T_zup_yup(grasp_Oy.palm_position_m.dtype), frame_id)


def grasp_zup_to_yup(grasp_O: Grasp, frame_id: str = "Oy") -> Grasp:
    """Grasps in a z-up object frame -> the public y-up object frame Oy with the same origin."""
    return grasp_O.transformed(invert_transform(T_zup_yup(grasp_O.palm_position_m.dtype)), frame_id)


def turn_grasp_vectors_about_up_Oy(vectors_Oy: torch.Tensor, yaw_rad: torch.Tensor) -> torch.Tensor:
    """(B, 37) grasp vectors in Oy, each turned by its angle (radians, (B,)) about Oy's y axis, the vertical through
    the object centroid: position, the two stored rotation columns and the directions turned, joints kept,
    nothing re-orthonormalised. The same turn as the world rotation Rz(yaw) about that vertical (Oy is
    Rx(+90 deg) of the z-up frame), so a grasp turned with its object
    (:func:`getagrip_ros.perception.bps.encode_bps_turned`) stays the same grasp."""
    R = _rotation_about_y(yaw_rad, vectors_Oy)
    out = vectors_Oy.clone()
    out[:, SLICE_POSITION] = torch.einsum("bij,bj->bi", R, vectors_Oy[:, SLICE_POSITION])
    out[:, SLICE_ROT6D] = (R @ vectors_Oy[:, SLICE_ROT6D].reshape(-1, 3, 2)).reshape(-1, 6)
    out[:, SLICE_DIRECTIONS] = torch.einsum("bij,bkj->bki", R, vectors_Oy[:, SLICE_DIRECTIONS].reshape(-1, 4, 3)).reshape(-1, 12)
    return out


def _rotation_about_y(yaw_rad: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(B, 3, 3) rotations about y by each angle, dtype and device of ``like``."""
    yaw = torch.as_tensor(yaw_rad, dtype=like.dtype, device=like.device)
    c, s, zero, one = yaw.cos(), yaw.sin(), torch.zeros_like(yaw), torch.ones_like(yaw)
    return torch.stack([c, zero, s, zero, one, zero, -s, zero, c], dim=-1).reshape(-1, 3, 3)
