"""Object point clouds from depth images: back-project the pixels that show the object."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from getagrip_ros.sim.world import CameraFrame


def backproject_object(frame: "CameraFrame") -> np.ndarray:
    """(N, 3) world points of the pixels that show the object (with a valid depth)."""
    v, u = np.nonzero(frame.object_mask & (frame.depth_m > 0))
    z = frame.depth_m[v, u]
    K = frame.K
    p_cam = np.stack([(u + 0.5 - K[0, 2]) * z / K[0, 0], (v + 0.5 - K[1, 2]) * z / K[1, 1], z], axis=1)
    T = frame.T_world_camera
    return p_cam @ T[:3, :3].T + T[:3, 3]
