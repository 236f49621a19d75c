"""Point clouds of simple upright objects resting on the table (z-up frame, table top at z = 0, metres)."""

from __future__ import annotations

import numpy as np


def box_surface_points(size_m: tuple[float, float, float] = (0.06, 0.06, 0.12), centre_xy_m: tuple[float, float] = (0.65, 0.0),
                       n: int = 2000, seed: int = 0) -> np.ndarray:
    """(n, 3) points uniformly on the five visible faces and the bottom of an upright box."""
    rng = np.random.default_rng(seed)
    half = np.asarray(size_m, dtype=float) / 2
    pts = rng.uniform(-half, half, size=(n, 3))
    axis = rng.integers(0, 3, n)
    pts[np.arange(n), axis] = np.where(rng.random(n) < 0.5, -half[axis], half[axis])
    return pts + np.array([centre_xy_m[0], centre_xy_m[1], half[2]])


def cylinder_surface_points(radius_m: float = 0.04, height_m: float = 0.10, centre_xy_m: tuple[float, float] = (0.65, 0.0),
                            n: int = 2000, seed: int = 0) -> np.ndarray:
    """(n, 3) points on the side and top of an upright cylinder (a can or a cup)."""
    rng = np.random.default_rng(seed)
    side_area, top_area = 2 * np.pi * radius_m * height_m, np.pi * radius_m**2
    on_top = rng.random(n) < top_area / (side_area + top_area)
    theta = rng.uniform(0, 2 * np.pi, n)
    r = np.where(on_top, radius_m * np.sqrt(rng.random(n)), radius_m)
    z = np.where(on_top, height_m, rng.uniform(0, height_m, n))
    return np.stack([centre_xy_m[0] + r * np.cos(theta), centre_xy_m[1] + r * np.sin(theta), z], axis=1)
