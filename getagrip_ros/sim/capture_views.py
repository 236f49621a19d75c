"""Posed wrist-camera views of a catalog object along the capture spirals, rendered without moving the arm.

The arm is set straight to each reachable IK solution (no trajectory, no physics): a quick way to make
datasets for tests, benchmarks and the data engine. ``perception.capture`` drives the arm for real.
World frame: robot base, z up, table top at z = 0; metres; camera poses are ROS optical frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import trimesh

from getagrip_ros.objects.mesh_object import PreparedObject
from getagrip_ros.perception.capture_trajectory import SpiralConfig, plan_capture
from getagrip_ros.sim.scene import CameraConfig, SceneConfig
from getagrip_ros.sim.world import ObjectPlacement, SimWorld


@dataclass(frozen=True)
class CaptureViews:
    rgb: np.ndarray
    """(N, H, W, 3) uint8."""
    depth_m: np.ndarray
    """(N, H, W) float32 metres along the optical axis, 0 = no return."""
    K: np.ndarray
    """(3, 3) intrinsics, pixels."""
    T_world_camera: np.ndarray
    """(N, 4, 4) optical-frame poses."""
    true_mesh_world: trimesh.Trimesh
    """The object's mesh where it rests, world frame (ground truth for quality checks)."""
    object_position_m: np.ndarray
    """(3,) where the object was placed (on the table, z = 0) = the spiral centre."""


def render_capture_views(obj: PreparedObject, object_xy_m: tuple[float, float] = (0.55, 0.0),
                         camera: CameraConfig = CameraConfig(320, 180, 133.25),
                         spiral: SpiralConfig = SpiralConfig()) -> CaptureViews:
    """Render the reachable spiral views of `obj` resting at `object_xy_m` (default camera: ZED 2i HD720 / 4)."""
    position = np.array([object_xy_m[0], object_xy_m[1], 0.0])
    trajectory = plan_capture(position, spiral)
    rgb, depth, poses = [], [], []
    with SimWorld(SceneConfig(camera=camera), obj, ObjectPlacement(xy_m=tuple(object_xy_m))) as world:
        for q in trajectory.arm_joints_rad:
            world.reset(arm_rad=q, hand_rad=np.zeros(16))
            frame = world.render()
            rgb.append(frame.rgb), depth.append(frame.depth_m), poses.append(frame.T_world_camera)
        true_mesh = obj.mesh.copy()
        true_mesh.apply_transform(world.object_pose())
    return CaptureViews(np.stack(rgb), np.stack(depth), frame.K, np.stack(poses), true_mesh, position)
