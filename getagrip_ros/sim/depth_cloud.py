"""Object point clouds from the simulated wrist camera: back-project masked depth from several views."""

from __future__ import annotations

import numpy as np

from getagrip_ros.sim.world import CameraFrame


def look_at(camera_position_m: np.ndarray, target_m: np.ndarray, up: np.ndarray = np.array([0.0, 0.0, 1.0])) -> np.ndarray:
    """(4, 4) T_world_camera of a ROS optical frame (z forward, y down) at a position looking at a target."""
    z = np.asarray(target_m, float) - np.asarray(camera_position_m, float)
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    if np.linalg.norm(x) < 1e-6:  # looking straight up or down
        x = np.cross(z, np.array([1.0, 0.0, 0.0]))
    x /= np.linalg.norm(x)
    T = np.eye(4)
    T[:3, :3] = np.stack([x, np.cross(z, x), z], axis=1)
    T[:3, 3] = camera_position_m
    return T


def backproject_object(frame: CameraFrame) -> np.ndarray:
    """(N, 3) world points of the pixels that show the object (with a valid depth)."""
    v, u = np.nonzero(frame.object_mask & (frame.depth_m > 0))
    z = frame.depth_m[v, u]
    K = frame.K
    p_cam = np.stack([(u + 0.5 - K[0, 2]) * z / K[0, 0], (v + 0.5 - K[1, 2]) * z / K[1, 1], z], axis=1)
    T = frame.T_world_camera
    return p_cam @ T[:3, :3].T + T[:3, 3]
