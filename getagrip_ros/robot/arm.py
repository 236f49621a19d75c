"""Batched forward kinematics of the whole robot (FR3 + Allegro + ZED 2i) in the world frame (fr3_link0)."""

from __future__ import annotations

from pathlib import Path

import torch

from getagrip_ros.paths import urdf_path
from getagrip_ros.robot.description import (
    ARM_JOINT_NAMES, BASE_LINK, FINGERTIP_LINK_NAMES, FLANGE_LINK, FR3_Q_READY_RAD, FULL_URDF_NAME, HAND_JOINT_NAMES,
    LEFT_OPTICAL_FRAME, PALM_LINK,
)
from getagrip_ros.robot.urdf_chain import KinematicTree

#: Frames :meth:`RobotKinematics.frames` returns, in this order.
ROBOT_FRAMES: tuple[str, ...] = (FLANGE_LINK, PALM_LINK, LEFT_OPTICAL_FRAME, *FINGERTIP_LINK_NAMES)


class RobotKinematics:
    """T_world_frame of the flange, palm, left camera optical frame and fingertips for (B, 23) joints.

    Joint order: fr3_joint1..7 then the 16 hand joints (Get a Grip order), as in the cuRobo config.
    """

    joint_names: tuple[str, ...] = ARM_JOINT_NAMES + HAND_JOINT_NAMES
    q_ready_arm_rad: tuple[float, ...] = FR3_Q_READY_RAD

    def __init__(self, urdf: str | Path | None = None, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32) -> None:
        self.device, self.dtype = torch.device(device), dtype
        self._tree = KinematicTree(urdf or urdf_path(FULL_URDF_NAME), BASE_LINK, list(ROBOT_FRAMES),
                                   list(self.joint_names)).to(self.device)
        self.lower_limits_rad = self._tree.lower_limits.to(self.device, dtype)
        self.upper_limits_rad = self._tree.upper_limits.to(self.device, dtype)

    def frames(self, q_rad: torch.Tensor) -> dict[str, torch.Tensor]:
        """(B, 23) joints -> {frame name: (B, 4, 4) T_world_frame} for ROBOT_FRAMES."""
        poses = self._tree(q_rad.to(self.device, self.dtype))
        return {name: poses[:, i] for i, name in enumerate(ROBOT_FRAMES)}

    def T_world_palm(self, q_rad: torch.Tensor) -> torch.Tensor:
        """(B, 23) -> (B, 4, 4) palm pose in the world frame."""
        return self.frames(q_rad)[PALM_LINK]
