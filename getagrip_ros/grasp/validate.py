"""Input validation for grasps coming from files, messages or users: clear errors, nothing silent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from getagrip_ros.grasp.grasp import Grasp, GraspValidationError


@dataclass(frozen=True)
class GraspValidationConfig:
    """What counts as a valid grasp."""

    joint_limit_policy: Literal["reject", "clamp"] = "reject"
    """Joints outside their limits: raise ("reject") or clamp them into the limits ("clamp")."""
    joint_limit_tolerance_rad: float = 1e-4
    direction_norm_tolerance: float = 1e-3
    """|‖d_i‖ - 1| above this is an error (directions must be unit vectors)."""
    rotation_tolerance: float = 1e-3
    """max |R^T R - I| and |det R - 1| above this is an error."""


def validate_grasp(grasp: Grasp, joint_limits_rad: tuple[torch.Tensor, torch.Tensor] | None = None,
                   config: GraspValidationConfig = GraspValidationConfig()) -> Grasp:
    """Check a grasp batch and return it (joints clamped when the policy says so).

    Raises:
        GraspValidationError: naming the first problem found and the grasp indices affected.
    """
    if len(grasp) == 0:
        raise GraspValidationError("empty grasp batch")

    def fail(what: str, bad: torch.Tensor) -> None:
        idx = torch.nonzero(bad).flatten().tolist()
        shown = idx[:10] + (["..."] if len(idx) > 10 else [])
        raise GraspValidationError(f"{what} in {len(idx)} of {len(grasp)} grasps (indices {shown})")

    for name in ("palm_position_m", "palm_rotation", "joint_angles_rad", "fingertip_directions"):
        value = getattr(grasp, name)
        bad = ~torch.isfinite(value.reshape(len(grasp), -1)).all(dim=1)
        if bad.any():
            fail(f"{name} has NaN or inf", bad)

    R = grasp.palm_rotation
    eye = torch.eye(3, dtype=R.dtype, device=R.device)
    ortho_err = (R.transpose(-1, -2) @ R - eye).abs().amax(dim=(-1, -2))
    det_err = (torch.linalg.det(R) - 1.0).abs()
    bad = (ortho_err > config.rotation_tolerance) | (det_err > config.rotation_tolerance)
    if bad.any():
        fail("palm_rotation is not a rotation matrix", bad)

    norms = grasp.fingertip_directions.norm(dim=-1)
    bad = (norms < 1e-9).any(dim=1)
    if bad.any():
        fail("a fingertip direction is zero", bad)
    bad = ((norms - 1.0).abs() > config.direction_norm_tolerance).any(dim=1)
    if bad.any():
        fail(f"a fingertip direction is not a unit vector (norms {norms[bad][0].tolist()})", bad)

    if joint_limits_rad is None:
        return grasp
    lower, upper = (t.to(grasp.joint_angles_rad.device, grasp.joint_angles_rad.dtype) for t in joint_limits_rad)
    q = grasp.joint_angles_rad
    tol = config.joint_limit_tolerance_rad
    outside = (q < lower - tol) | (q > upper + tol)
    if outside.any():
        if config.joint_limit_policy == "reject":
            first = torch.nonzero(outside)[0].tolist()
            fail(f"joint angles outside limits (e.g. grasp {first[0]} joint {first[1]}: "
                 f"{q[first[0], first[1]]:.4f} not in [{lower[first[1]]:.4f}, {upper[first[1]]:.4f}] rad)",
                 outside.any(dim=1))
        elif config.joint_limit_policy != "clamp":
            raise ValueError(f"unknown joint_limit_policy {config.joint_limit_policy!r}")
    clamped = torch.maximum(torch.minimum(q, upper), lower)
    return Grasp(grasp.palm_position_m, grasp.palm_rotation, clamped, grasp.fingertip_directions, grasp.frame_id)
