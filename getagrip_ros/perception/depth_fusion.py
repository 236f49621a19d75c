"""Depth-fusion backend: posed depth images -> TSDF volume -> object cloud and mesh, CPU friendly.

The object is what the fused surface holds inside the paper's object box above the table (no
segmentation needed, as on the real robot); the cloud then goes through the same cleaning and BPS as
NeRF clouds. Frames: world z up, table top at z = 0; camera poses are ROS optical frames. Metres.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from getagrip_ros.perception.point_cloud import CloudCleaningConfig


@dataclass(frozen=True)
class DepthFusionConfig:
    voxel_m: float = 0.002
    truncation_m: float = 0.008
    max_depth_m: float = 1.2
    table_clearance_m: float = 0.004
    """Surface closer than this to the table plane is the table, not the object."""
    cleaning: CloudCleaningConfig = field(default_factory=lambda: CloudCleaningConfig(component_link_m=0.01))


@dataclass(frozen=True)
class FusedObject:
    points_m: np.ndarray
    """(N, 3) object surface points, world frame (before cleaning)."""
    mesh_vertices_m: np.ndarray
    """(V, 3) fused surface mesh inside the object box, world frame."""
    mesh_faces: np.ndarray
    """(F, 3) vertex indices."""


def fuse_depth(depths_m: Sequence[np.ndarray], Ks: Sequence[np.ndarray], T_world_cameras: Sequence[np.ndarray],
               object_position_m: np.ndarray, config: DepthFusionConfig = DepthFusionConfig()) -> FusedObject:
    """Integrate depth images (H, W metres, 0 = no return) into a TSDF and cut out the object.

    Raises:
        ValueError: no images, mismatched inputs, or nothing above the table in the object box.
    """
    import open3d as o3d  # heavy: imported only when fusing

    if not (len(depths_m) == len(Ks) == len(T_world_cameras)) or len(depths_m) == 0:
        raise ValueError(f"depth fusion: need as many depth images, intrinsics and poses (>= 1), got "
                         f"{len(depths_m)}, {len(Ks)}, {len(T_world_cameras)}")
    box_min = np.array([object_position_m[0], object_position_m[1], 0.0]) + np.array(config.cleaning.crop_min_m)
    box_max = np.array([object_position_m[0], object_position_m[1], 0.0]) + np.array(config.cleaning.crop_max_m)
    origin = box_min - config.truncation_m  # a cube covering the object box (and a little of the table)
    length = float((box_max - box_min).max()) + 2 * config.truncation_m
    volume = o3d.pipelines.integration.UniformTSDFVolume(
        length=length, resolution=int(np.ceil(length / config.voxel_m)), sdf_trunc=config.truncation_m,
        color_type=o3d.pipelines.integration.TSDFVolumeColorType.NoColor, origin=origin.reshape(3, 1))
    for depth, K, T in zip(depths_m, Ks, T_world_cameras):
        depth = np.ascontiguousarray(depth, dtype=np.float32)
        h, w = depth.shape
        intrinsic = o3d.camera.PinholeCameraIntrinsic(w, h, K[0, 0], K[1, 1], K[0, 2] - 0.5, K[1, 2] - 0.5)
        color = o3d.geometry.Image(np.zeros((h, w, 3), dtype=np.uint8))
        rgbd = o3d.geometry.RGBDImage.create_from_color_and_depth(
            color, o3d.geometry.Image(depth), depth_scale=1.0, depth_trunc=config.max_depth_m, convert_rgb_to_intensity=False)
        volume.integrate(rgbd, intrinsic, np.linalg.inv(T))  # extrinsic = T_camera_world
    mesh = volume.extract_triangle_mesh()
    box_min[2] = max(box_min[2], config.table_clearance_m)
    mesh = mesh.crop(o3d.geometry.AxisAlignedBoundingBox(box_min, box_max))
    vertices, faces = np.asarray(mesh.vertices), np.asarray(mesh.triangles)
    if len(vertices) == 0:
        raise ValueError("depth fusion: no surface above the table inside the object box (empty scene, or the "
                         "cameras never saw the object)")
    return FusedObject(vertices.copy(), vertices.copy(), faces.copy())
