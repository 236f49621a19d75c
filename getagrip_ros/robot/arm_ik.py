"""Inverse kinematics of the FR3 for a frame of the robot (e.g. the wrist camera), batched, within limits.

Damped least squares on the 7 arm joints (the hand joints stay fixed), several seeds per target; an
option leaves the rotation about the frame's z axis free (a camera may roll about its optical axis).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from getagrip_ros.grasp.rotations import so3_log
from getagrip_ros.paths import urdf_path
from getagrip_ros.robot.description import (
    ARM_JOINT_NAMES, BASE_LINK, FR3_Q_READY_RAD, FULL_URDF_NAME, HAND_JOINT_NAMES, LEFT_OPTICAL_FRAME,
)
from getagrip_ros.robot.urdf_chain import KinematicTree


@dataclass(frozen=True)
class ArmIKConfig:
    frame: str = LEFT_OPTICAL_FRAME
    """Robot frame to place (a link of the full URDF)."""
    free_z_rotation: bool = True
    """Leave the rotation about the frame's z axis free (camera roll about its optical axis)."""
    num_seeds: int = 8
    """Starts per target: the ready pose plus random configurations."""
    num_iterations: int = 80
    damping: float = 0.05
    position_tolerance_m: float = 0.002
    rotation_tolerance_rad: float = 0.02
    stop_tolerance_scale: float = 0.1
    """Stop iterating once every target has a seed within this fraction of both tolerances (0: run every iteration)."""
    seed: int = 0


@dataclass
class ArmIKResult:
    joint_angles_rad: torch.Tensor
    """(B, 7) best solution per target (within joint limits)."""
    position_error_m: torch.Tensor
    """(B,)"""
    rotation_error_rad: torch.Tensor
    """(B,) (about the free axis excluded when free_z_rotation)."""
    success: torch.Tensor
    """(B,) both errors within tolerance."""


class ArmIK:
    """Solves T_world_frame targets for the 7 arm joints (hand joints held at `hand_rad`)."""

    def __init__(self, config: ArmIKConfig = ArmIKConfig(), hand_rad: tuple[float, ...] = (0.0,) * 16) -> None:
        self.config = config
        self.tree = KinematicTree(urdf_path(FULL_URDF_NAME), BASE_LINK, [config.frame],
                                  list(ARM_JOINT_NAMES + HAND_JOINT_NAMES))
        self.hand_rad = torch.tensor(hand_rad, dtype=torch.float64)
        self.lower = self.tree.lower_limits[:7]
        self.upper = self.tree.upper_limits[:7]

    def _errors(self, T: torch.Tensor, T_target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e_pos = T_target[:, :3, 3] - T[:, :3, 3]
        if self.config.free_z_rotation:
            e_rot = torch.linalg.cross(T[:, :3, 2], T_target[:, :3, 2], dim=-1)  # aligns the z axes only
            angle = torch.atan2(e_rot.norm(dim=-1), (T[:, :3, 2] * T_target[:, :3, 2]).sum(-1))
            e_rot = e_rot / e_rot.norm(dim=-1, keepdim=True).clamp_min(1e-12) * angle[:, None]
        else:
            e_rot = so3_log(T_target[:, :3, :3] @ T[:, :3, :3].transpose(-1, -2))
        return e_pos, e_rot

    def solve(self, T_world_target: torch.Tensor, initial_rad: torch.Tensor | None = None,
              seed: int | None = None) -> ArmIKResult:
        """(B, 4, 4) targets -> best of num_seeds damped-least-squares solves each.

        The first seed of each target is `initial_rad` (B, 7) when given (e.g. the previous point of a path),
        else the ready pose; the others are random within the joint limits, drawn from `seed` (a per-call option;
        None = config.seed).
        """
        cfg = self.config
        targets = T_world_target.to(torch.float64)
        B, S = targets.shape[0], cfg.num_seeds
        gen = torch.Generator().manual_seed(cfg.seed if seed is None else int(seed))
        seeds = self.lower + (self.upper - self.lower) * torch.rand(B, S, 7, generator=gen, dtype=torch.float64)
        seeds[:, 0] = (torch.tensor(FR3_Q_READY_RAD, dtype=torch.float64) if initial_rad is None
                       else torch.as_tensor(initial_rad, dtype=torch.float64).reshape(B, 7))
        q = seeds.reshape(B * S, 7)
        T_t = targets.repeat_interleave(S, dim=0)
        hand = self.hand_rad.expand(B * S, 16)
        lam2 = cfg.damping**2 * torch.eye(6, dtype=torch.float64)
        for _ in range(cfg.num_iterations):
            T, J = self.tree.frame_jacobian(torch.cat([q, hand], dim=1), 0)
            J = J[:, :, :7]
            e_pos, e_rot = self._errors(T, T_t)
            close = ((e_pos.norm(dim=-1) <= cfg.stop_tolerance_scale * cfg.position_tolerance_m)
                     & (e_rot.norm(dim=-1) <= cfg.stop_tolerance_scale * cfg.rotation_tolerance_rad))
            # every target reached (e.g. a path point seeded with its neighbour's solution)
            if cfg.stop_tolerance_scale > 0 and bool(close.reshape(B, S).any(dim=1).all()):
                break
            if cfg.free_z_rotation:  # no angular error or motion demanded about the current z axis
                z = T[:, :3, 2]
                P = torch.eye(3, dtype=torch.float64) - z[:, :, None] * z[:, None, :]
                J = torch.cat([J[:, :3], P @ J[:, 3:]], dim=1)
            e = torch.cat([e_pos, e_rot], dim=1)[..., None]
            dq = J.transpose(1, 2) @ torch.linalg.solve(J @ J.transpose(1, 2) + lam2, e)
            q = torch.maximum(torch.minimum(q + dq[..., 0], self.upper), self.lower)
        T, _ = self.tree.frame_jacobian(torch.cat([q, hand], dim=1), 0)
        e_pos, e_rot = self._errors(T, T_t)
        pos_err, rot_err = e_pos.norm(dim=-1).reshape(B, S), e_rot.norm(dim=-1).reshape(B, S)
        score = pos_err / cfg.position_tolerance_m + rot_err / cfg.rotation_tolerance_rad
        best = score.argmin(dim=1)
        idx = torch.arange(B)
        pe, re = pos_err[idx, best], rot_err[idx, best]
        return ArmIKResult(q.reshape(B, S, 7)[idx, best], pe, re,
                           (pe <= cfg.position_tolerance_m) & (re <= cfg.rotation_tolerance_rad))
