"""Basis point set (BPS): the object as distances from 4096 fixed points to its point cloud.

The basis is bit-identical to the public Get a Grip code's (so its trained checkpoints apply): the
`bps` package's random basis with seed 13 (legacy MT19937 stream: 4096 x 3 standard normals, then
4096 uniforms; points = 0.3 * unit direction * u^(1/3)), shifted 0.15 m up. The public basis is
defined in the y-up frame ``By`` (origin on the table below the object, y up); this stack works in
the z-up frame ``B`` with the same origin, where the basis centre sits at (0, 0, 0.15).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.spatial import cKDTree

NUM_BASIS_POINTS = 4096
BASIS_RADIUS_M = 0.3
BASIS_SEED = 13
BASIS_CENTRE_HEIGHT_M = 0.15


@lru_cache(maxsize=1)
def public_basis_points_By() -> np.ndarray:
    """(4096, 3) basis in the public y-up frame By (read-only), exactly as the public code makes it."""
    rng = np.random.RandomState(BASIS_SEED)  # same stream as np.random.seed(13), without touching the global RNG
    x = rng.normal(size=(NUM_BASIS_POINTS, 3))
    x_unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    u = rng.uniform(size=(NUM_BASIS_POINTS, 1)) ** (1.0 / 3.0)
    basis = BASIS_RADIUS_M * x_unit * u + np.array([0.0, BASIS_CENTRE_HEIGHT_M, 0.0])
    basis.setflags(write=False)
    return basis


@lru_cache(maxsize=1)
def basis_points_B() -> np.ndarray:
    """(4096, 3) the same basis in the z-up frame B (x_B = x_By, y_B = -z_By, z_B = y_By), read-only."""
    b = public_basis_points_By()
    basis = np.stack([b[:, 0], -b[:, 2], b[:, 1]], axis=1)
    basis.setflags(write=False)
    return basis


def bps_frame_origin(points_world_m: np.ndarray) -> np.ndarray:
    """(3,) origin of B in the world: on the table (z = 0) below the cloud's centroid."""
    centroid = np.asarray(points_world_m, dtype=float).mean(axis=0)
    return np.array([centroid[0], centroid[1], 0.0])


@dataclass(frozen=True)
class BpsEncoding:
    """The BPS of one object and where its frame B sits."""

    distances_m: np.ndarray
    """(4096,) distance from each basis point to the nearest cloud point."""
    origin_world_m: np.ndarray
    """(3,) origin of B in the world frame (B has the world's axes)."""


def encode_bps(points_world_m: np.ndarray, origin_world_m: np.ndarray | None = None) -> BpsEncoding:
    """BPS of an object cloud (N, 3) in a z-up world frame with the table top at z = 0.

    Raises:
        ValueError: for an empty cloud, a wrong shape, or NaN/inf points.
    """
    pts = np.asarray(points_world_m, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"BPS: point cloud must have shape (N, 3), got {pts.shape}")
    if len(pts) == 0:
        raise ValueError("BPS: the point cloud is empty")
    if not np.isfinite(pts).all():
        raise ValueError(f"BPS: {int((~np.isfinite(pts).all(1)).sum())} points have NaN or inf")
    origin = bps_frame_origin(pts) if origin_world_m is None else np.asarray(origin_world_m, dtype=float)
    distances, _ = cKDTree(pts - origin).query(basis_points_B(), k=1)
    return BpsEncoding(distances.astype(np.float32), origin)


def encode_bps_turned(points_world_m: np.ndarray, yaw_rad: np.ndarray) -> np.ndarray:
    """(K, 4096) BPS of the cloud turned by each angle (radians) about the vertical through its centroid.

    The origin stays below the (unmoved) centroid, so yaw 0 gives :func:`encode_bps` of the cloud; a grasp
    turned with its object is :func:`getagrip_ros.grasp.frames.turn_grasp_vectors_about_up_Oy`.
    """
    pts = np.asarray(points_world_m, dtype=float)
    origin = bps_frame_origin(pts)
    rows = []
    for yaw in np.asarray(yaw_rad, dtype=float).reshape(-1):
        c, s = np.cos(yaw), np.sin(yaw)
        Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        rows.append(encode_bps((pts - origin) @ Rz.T + origin, origin).distances_m)
    return np.stack(rows)
