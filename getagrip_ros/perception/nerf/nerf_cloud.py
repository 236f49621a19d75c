"""Object point cloud from a NeRF: depth along random capture-camera rays where opacity > 0.5, inside the box.

World frame (z up, table at z = 0), metres. The box is relative to the object origin on the table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from getagrip_ros.perception.nerf.model import LoadedNerf
from getagrip_ros.status import StageError, StatusCode


@dataclass(frozen=True)
class NerfCloudConfig:
    num_points: int = 5000
    """Points to collect (paper: 5000)."""
    opacity_threshold: float = 0.5
    """Keep rays whose accumulated opacity exceeds this."""
    box_min_m: tuple[float, float, float] = (-0.2, -0.2, 0.0)
    box_max_m: tuple[float, float, float] = (0.2, 0.2, 0.3)
    """Box around the object origin on the table (paper's box)."""
    table_clearance_m: float = 0.01
    """Points lower than this above the table are the table, not the object (a NeRF's table is a few mm thick)."""
    rays_per_batch: int = 8192
    max_rays: int = 400_000
    """Give up after rendering this many rays."""
    min_points: int = 100
    """Fewer points than this is an error (a NeRF with no surface in the box)."""
    seed: int = 0


@dataclass(frozen=True)
class CaptureCameras:
    """The capture cameras rays are drawn from (world frame, ROS optical convention)."""

    T_world_camera: np.ndarray
    """(K, 4, 4)."""
    K: np.ndarray
    """(3, 3) shared intrinsics, pixels."""
    width: int
    height: int


def nerf_point_cloud(nerf: LoadedNerf, cameras: CaptureCameras, object_origin_world_m: np.ndarray,
                     config: NerfCloudConfig = NerfCloudConfig()) -> np.ndarray:
    """(num_points, 3) surface points in the world frame (fewer only when max_rays ran out, but >= min_points).

    Raises:
        StageError: NO_RESULT when fewer than ``min_points`` opaque surface points lie in the box.
    """
    generator = torch.Generator().manual_seed(config.seed)
    origin = torch.as_tensor(object_origin_world_m, dtype=torch.float32)
    lower = origin + torch.tensor(config.box_min_m, dtype=torch.float32)
    lower[2] = max(float(lower[2]), float(origin[2]) + config.table_clearance_m)
    upper = origin + torch.tensor(config.box_max_m, dtype=torch.float32)
    poses = torch.as_tensor(cameras.T_world_camera, dtype=torch.float32)
    K = torch.as_tensor(cameras.K, dtype=torch.float32)
    kept, num_kept, rays_done = [], 0, 0
    while num_kept < config.num_points and rays_done < config.max_rays:
        n = config.rays_per_batch
        index = torch.randint(len(poses), (n,), generator=generator)
        u = torch.rand(n, generator=generator) * cameras.width
        v = torch.rand(n, generator=generator) * cameras.height
        d_cam = torch.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], torch.ones(n)], -1)
        directions = torch.einsum("nij,nj->ni", poses[index, :3, :3], d_cam)
        render = nerf.render_rays(poses[index, :3, 3], directions, pixel_area=float(1.0 / (K[0, 0] * K[1, 1])))
        p = render.points_world_m
        ok = (render.accumulation > config.opacity_threshold) & ((p >= lower) & (p <= upper)).all(-1)
        kept.append(p[ok])
        num_kept += int(ok.sum())
        rays_done += n
    points = torch.cat(kept)[:config.num_points].numpy().astype(np.float64)
    if len(points) < config.min_points:
        raise StageError(StatusCode.NO_RESULT,
                         f"the NeRF shows no surface in the object box: {len(points)} opaque points "
                         f"(opacity > {config.opacity_threshold}) from {rays_done} rays, need >= {config.min_points}")
    return points
