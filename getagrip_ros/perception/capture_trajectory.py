"""Wrist-camera capture trajectory: 3 spirals around the object, each pose checked for reachability.

Frames: poses are T_world_camera of the ROS optical frame (z forward toward the look-at point,
x right, y down), world = robot base, z up, table top at z = 0. Metres, radians.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from getagrip_ros.robot.arm_ik import ArmIK, ArmIKConfig


@dataclass(frozen=True)
class SpiralConfig:
    """Three helical spirals around the look-at point, low and wide to high and close."""

    num_images: int = 100
    """Total poses over all spirals (split as evenly as possible)."""
    radii_m: tuple[float, ...] = (0.32, 0.26, 0.18)
    """Horizontal distance from the look-at point, per spiral."""
    heights_m: tuple[tuple[float, float], ...] = ((0.12, 0.22), (0.26, 0.36), (0.40, 0.46))
    """(start, end) camera height above the table, per spiral."""
    turns: float = 1.0
    """Turns around the object per spiral."""
    look_at_height_m: float = 0.06
    """The cameras look at the object position raised by this much."""

    def __post_init__(self) -> None:
        if len(self.radii_m) != len(self.heights_m) or not self.radii_m:
            raise ValueError("SpiralConfig: give one radius and one (start, end) height per spiral")
        if self.num_images < len(self.radii_m):
            raise ValueError(f"SpiralConfig: num_images must be >= the number of spirals, got {self.num_images}")


@dataclass
class CaptureTrajectory:
    """Reachable camera poses in capture order, with the arm joints that reach them."""

    T_world_camera: np.ndarray
    """(K, 4, 4) reachable poses."""
    arm_joints_rad: np.ndarray
    """(K, 7) IK solutions, same order."""
    num_planned: int
    unreachable: list[int] = field(default_factory=list)
    """Indices (into the planned poses) that were dropped: no IK solution within tolerance."""

    @property
    def report(self) -> str:
        return (f"{len(self.T_world_camera)} of {self.num_planned} capture poses reachable"
                + (f"; dropped {len(self.unreachable)} unreachable (indices {self.unreachable[:10]}"
                   f"{'...' if len(self.unreachable) > 10 else ''})" if self.unreachable else ""))


def look_at(camera_position_m: np.ndarray, target_m: np.ndarray) -> np.ndarray:
    """(4, 4) T_world_camera of a ROS optical frame at a position, looking at a target, image up ~ world up."""
    z = np.asarray(target_m, float) - np.asarray(camera_position_m, float)
    z /= np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    if np.linalg.norm(x) < 1e-6:  # looking straight down or up
        x = np.cross(z, [1.0, 0.0, 0.0])
    x /= np.linalg.norm(x)
    T = np.eye(4)
    T[:3, :3] = np.stack([x, np.cross(z, x), z], axis=1)
    T[:3, 3] = camera_position_m
    return T


def spiral_poses(object_position_m: np.ndarray, config: SpiralConfig = SpiralConfig()) -> np.ndarray:
    """(num_images, 4, 4) camera poses on the spirals, all looking at the object."""
    centre = np.asarray(object_position_m, float)
    target = centre + np.array([0.0, 0.0, config.look_at_height_m])
    counts = np.diff(np.linspace(0, config.num_images, len(config.radii_m) + 1).round().astype(int))
    poses = []
    for k, (radius, (h0, h1), n) in enumerate(zip(config.radii_m, config.heights_m, counts)):
        s = np.arange(n) / max(n, 1)
        angle = 2 * np.pi * (config.turns * s + k / len(config.radii_m))
        heights = h0 + (h1 - h0) * s
        for a, h in zip(angle, heights):
            position = np.array([centre[0] + radius * np.cos(a), centre[1] + radius * np.sin(a), centre[2] + h])
            poses.append(look_at(position, target))
    return np.stack(poses)


def plan_capture(object_position_m: np.ndarray, config: SpiralConfig = SpiralConfig(),
                 ik: ArmIK | None = None) -> CaptureTrajectory:
    """Spiral poses around the object, keeping those the arm can reach (wrist camera, free roll).

    Raises:
        ValueError: when no pose is reachable (the object is out of the arm's reach).
    """
    poses = spiral_poses(object_position_m, config)
    ik = ik or ArmIK(ArmIKConfig())
    result = ik.solve(torch.from_numpy(poses))
    ok = result.success.numpy()
    if not ok.any():
        raise ValueError(f"none of the {len(poses)} capture poses around {np.round(object_position_m, 3).tolist()} m is "
                         "reachable by the arm; move the object closer or change the spiral")
    # the camera may roll about its optical axis: report the pose the arm actually reaches
    from getagrip_ros.robot.arm import RobotKinematics

    q_full = torch.cat([result.joint_angles_rad[ok], ik.hand_rad.expand(int(ok.sum()), 16)], dim=1)
    reached = RobotKinematics(dtype=torch.float64).frames(q_full)[ik.config.frame].numpy()
    return CaptureTrajectory(reached, result.joint_angles_rad[ok].numpy(), len(poses), np.flatnonzero(~ok).tolist())
