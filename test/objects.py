"""Small synthetic objects for tests (z-up world frame, table top at z = 0)."""

import numpy as np


def box_surface_points(size_m=(0.06, 0.06, 0.12), centre_xy_m=(0.65, 0.0), n: int = 2000, seed: int = 0) -> np.ndarray:
    """(n, 3) points on the surface of an upright box resting on the table."""
    rng = np.random.default_rng(seed)
    half = np.array([size_m[0] / 2, size_m[1] / 2, size_m[2] / 2])
    pts = rng.uniform(-half, half, size=(n, 3))
    axis = rng.integers(0, 3, n)
    pts[np.arange(n), axis] = np.where(rng.random(n) < 0.5, -half[axis], half[axis])
    return pts + np.array([centre_xy_m[0], centre_xy_m[1], half[2]])
