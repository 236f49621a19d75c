"""Object point cloud cleaning, as the paper does it: crop to the object box, subsample, remove
statistical and radius outliers (open3d), keep the largest connected component.

Frames: input points are in the world (z up, table top at z = 0); the crop box is given relative to
the object position on the table (x, y of the object, z = 0). Metres.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree


@dataclass(frozen=True)
class CloudCleaningConfig:
    crop_min_m: tuple[float, float, float] = (-0.2, -0.2, 0.0)
    crop_max_m: tuple[float, float, float] = (0.2, 0.2, 0.3)
    """The paper's object box, relative to the object position on the table."""
    num_points: int = 5000
    """Random subsample (seeded) before cleaning, as the paper samples 5000 points."""
    statistical_neighbors: int = 20
    statistical_std_ratio: float = 2.0
    radius_min_points: int = 16
    radius_m: float = 0.05
    component_link_m: float = 0.001
    """Points closer than this are connected; the largest connected component is kept (paper: 1 mm;
    the public code uses 1 cm, which suits sparser clouds such as depth images)."""
    min_points: int = 100
    """Fewer points left than this is an error."""
    seed: int = 0


@dataclass(frozen=True)
class CleanedCloud:
    points_m: np.ndarray
    """(N, 3) world frame."""
    counts: dict[str, int]
    """Points left after each step: input, crop, subsample, statistical, radius, component."""


def _require(points: np.ndarray, step: str, counts: dict[str, int], minimum: int) -> None:
    if len(points) < minimum:
        raise ValueError(f"object cloud: {len(points)} points left after {step} (need {minimum}); counts so far {counts}")


def clean_object_cloud(points_world_m: np.ndarray, object_position_m: np.ndarray,
                       config: CloudCleaningConfig = CloudCleaningConfig()) -> CleanedCloud:
    """Crop, subsample and clean an object cloud; ValueError names the step that left too few points."""
    import open3d as o3d  # heavy: imported only when cleaning

    pts = np.asarray(points_world_m, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"object cloud: expected shape (N, 3), got {pts.shape}")
    pts = pts[np.isfinite(pts).all(axis=1)]
    counts = {"input": len(pts)}
    origin = np.array([object_position_m[0], object_position_m[1], 0.0])
    rel = pts - origin
    pts = pts[((rel >= config.crop_min_m) & (rel <= config.crop_max_m)).all(axis=1)]
    counts["crop"] = len(pts)
    _require(pts, "cropping to the object box", counts, config.min_points)
    if len(pts) > config.num_points:
        pts = pts[np.random.default_rng(config.seed).choice(len(pts), config.num_points, replace=False)]
    counts["subsample"] = len(pts)

    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(pts))
    cloud, _ = cloud.remove_statistical_outlier(nb_neighbors=config.statistical_neighbors, std_ratio=config.statistical_std_ratio)
    counts["statistical"] = len(cloud.points)
    _require(np.asarray(cloud.points), "statistical outlier removal", counts, config.min_points)
    cloud, _ = cloud.remove_radius_outlier(nb_points=config.radius_min_points, radius=config.radius_m)
    pts = np.asarray(cloud.points)
    counts["radius"] = len(pts)
    _require(pts, "radius outlier removal", counts, config.min_points)

    pairs = cKDTree(pts).query_pairs(config.component_link_m, output_type="ndarray")
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(len(pts), len(pts)))
    _, labels = connected_components(graph, directed=False)
    pts = pts[labels == np.bincount(labels).argmax()]
    counts["component"] = len(pts)
    _require(pts, f"keeping the largest connected component ({config.component_link_m * 1000:.0f} mm links)", counts,
             config.min_points)
    return CleanedCloud(pts, counts)
