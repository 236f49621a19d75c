"""Rotation helpers (torch, batched over leading dimensions).

Conventions: rotation matrices act on column vectors (``p_a = R_a_b @ p_b``); quaternions are
(w, x, y, z) inside the core - ROS messages use (x, y, z, w) and are converted at the ROS boundary
only. The 6-D rotation representation is the one of the public Get a Grip code: the first two
*columns* of R, flattened row-major from the 3x2 block: [R00, R01, R10, R11, R20, R21].
"""

from __future__ import annotations

import math

import torch

_EPS = 1e-9


def rot6d_from_matrix(R: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) rotation matrices -> (..., 6) as [R00, R01, R10, R11, R20, R21]."""
    return R[..., :, :2].reshape(*R.shape[:-2], 6)


def matrix_from_rot6d(rot6d: torch.Tensor) -> torch.Tensor:
    """(..., 6) -> (..., 3, 3) by Gram-Schmidt on the two stored columns (any non-degenerate input); orthonormal to
    the dtype's precision (so a rotation survives a trip through a quaternion unchanged but for rounding)."""
    block = rot6d.reshape(*rot6d.shape[:-1], 3, 2)
    a, b = block[..., 0], block[..., 1]
    c1 = a / a.norm(dim=-1, keepdim=True).clamp_min(_EPS)
    b = b - (c1 * b).sum(-1, keepdim=True) * c1
    c2 = b / b.norm(dim=-1, keepdim=True).clamp_min(_EPS)
    c3 = torch.linalg.cross(c1, c2, dim=-1)
    return torch.stack([c1, c2, c3], dim=-1)


def skew(v: torch.Tensor) -> torch.Tensor:
    """(..., 3) -> (..., 3, 3) cross-product matrix."""
    x, y, z = v.unbind(-1)
    o = torch.zeros_like(x)
    return torch.stack([o, -z, y, z, o, -x, -y, x, o], dim=-1).reshape(*v.shape[:-1], 3, 3)


def so3_exp(omega: torch.Tensor) -> torch.Tensor:
    """Exponential map so(3) -> SO(3): (..., 3) axis * angle (rad) -> (..., 3, 3) (Rodrigues)."""
    theta = omega.norm(dim=-1, keepdim=True).unsqueeze(-1)  # (..., 1, 1)
    K = skew(omega)
    small = theta < 1e-6
    theta_safe = torch.where(small, torch.ones_like(theta), theta)
    a = torch.where(small, 1.0 - theta**2 / 6.0, torch.sin(theta_safe) / theta_safe)
    b = torch.where(small, 0.5 - theta**2 / 24.0, (1.0 - torch.cos(theta_safe)) / theta_safe**2)
    eye = torch.eye(3, dtype=omega.dtype, device=omega.device).expand(K.shape)
    return eye + a * K + b * (K @ K)


def so3_log(R: torch.Tensor) -> torch.Tensor:
    """Logarithm SO(3) -> so(3): (..., 3, 3) -> (..., 3) axis * angle, angle in [0, pi]."""
    quat = quat_wxyz_from_matrix(R)
    w = quat[..., :1].clamp(-1.0, 1.0)
    xyz = quat[..., 1:]
    sin_half = xyz.norm(dim=-1, keepdim=True)
    angle = 2.0 * torch.atan2(sin_half, w)
    scale = torch.where(sin_half > 1e-9, angle / sin_half.clamp_min(1e-12), 2.0 / w.clamp_min(1e-12))
    return xyz * scale


def rotation_angle(R_a: torch.Tensor, R_b: torch.Tensor) -> torch.Tensor:
    """Geodesic angle (rad) between rotations, (..., 3, 3) x2 -> (...)."""
    cos = (((R_a.transpose(-1, -2) @ R_b).diagonal(dim1=-2, dim2=-1).sum(-1)) - 1.0) / 2.0
    return torch.arccos(cos.clamp(-1.0, 1.0))


def quat_wxyz_from_matrix(R: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) -> unit quaternions (..., 4) (w, x, y, z) with w >= 0."""
    m = R
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    candidates = torch.stack(
        [
            torch.stack([1 + trace, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]], -1),
            torch.stack([m[..., 2, 1] - m[..., 1, 2], 1 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2], m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0]], -1),
            torch.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0], 1 - m[..., 0, 0] + m[..., 1, 1] - m[..., 2, 2], m[..., 1, 2] + m[..., 2, 1]], -1),
            torch.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1], 1 - m[..., 0, 0] - m[..., 1, 1] + m[..., 2, 2]], -1),
        ],
        dim=-2,
    )  # (..., 4 candidates, 4); candidate k is 4 * q_k * q, best conditioned for the largest q_k
    diag = torch.stack([1 + trace, 1 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2],
                        1 - m[..., 0, 0] + m[..., 1, 1] - m[..., 2, 2], 1 - m[..., 0, 0] - m[..., 1, 1] + m[..., 2, 2]], -1)
    best = diag.argmax(dim=-1, keepdim=True).unsqueeze(-1).expand(*diag.shape[:-1], 1, 4)
    q = candidates.gather(-2, best).squeeze(-2)
    q = q / q.norm(dim=-1, keepdim=True)
    return torch.where(q[..., :1] < 0, -q, q)


def matrix_from_quat_wxyz(q: torch.Tensor) -> torch.Tensor:
    """Quaternions (..., 4) (w, x, y, z), any norm > 0 -> (..., 3, 3)."""
    q = q / q.norm(dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
            2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
            2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(*q.shape[:-1], 3, 3)


def rotation_x(angle_rad: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Rotation by angle_rad about the x axis, (3, 3)."""
    c, s = math.cos(angle_rad), math.sin(angle_rad)
    return torch.tensor([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]], dtype=dtype)


def euler_xyz_to_matrix(roll_pitch_yaw: torch.Tensor) -> torch.Tensor:
    """Fixed-axis roll-pitch-yaw (rad), (..., 3) -> R = Rz(yaw) Ry(pitch) Rx(roll), (..., 3, 3).

    This is the URDF `rpy` convention.
    """
    r, p, y = roll_pitch_yaw.unbind(-1)
    cr, sr, cp, sp, cy, sy = r.cos(), r.sin(), p.cos(), p.sin(), y.cos(), y.sin()
    return torch.stack(
        [
            cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr,
            sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr,
            -sp, cp * sr, cp * cr,
        ],
        dim=-1,
    ).reshape(*roll_pitch_yaw.shape[:-1], 3, 3)
