"""Analytic grasp quality: the epsilon-quality (Ferrari and Canny) of a set of point contacts.

The radius of the largest ball about the origin that the convex hull of the contact wrenches contains: each contact
contributes the edges of its linearised Coulomb cone (unit normal force), torques about the object's centre divided
by a length (the object's largest radius) so that forces and torques are comparable. 0 when the hull does not
contain the origin (no force closure) or is flat (too few contacts). Metres, unit-free result.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import ConvexHull, QhullError


def cone_edges(inward_normals: np.ndarray, friction: float, edges: int) -> np.ndarray:
    """(K, E, 3) unit-normal-force edges of each contact's friction cone (``inward_normals`` (K, 3) point into the
    object)."""
    n = inward_normals / np.linalg.norm(inward_normals, axis=-1, keepdims=True)
    helper = np.where(np.abs(n[:, :1]) < 0.9, np.array([[1.0, 0.0, 0.0]]), np.array([[0.0, 1.0, 0.0]]))
    t1 = np.cross(n, helper)
    t1 /= np.linalg.norm(t1, axis=-1, keepdims=True)
    t2 = np.cross(n, t1)
    angles = 2 * np.pi * np.arange(edges) / edges
    return n[:, None] + friction * (np.cos(angles)[None, :, None] * t1[:, None] + np.sin(angles)[None, :, None] * t2[:, None])


def epsilon_quality(points_m: np.ndarray, inward_normals: np.ndarray, centre_m: np.ndarray, torque_length_m: float,
                    friction: float = 0.5, edges: int = 8) -> float:
    """Epsilon-quality of contacts at ``points_m`` (K, 3) with ``inward_normals`` (K, 3), about ``centre_m`` (3,)."""
    points_m, inward_normals = np.asarray(points_m, dtype=float).reshape(-1, 3), np.asarray(inward_normals, dtype=float).reshape(-1, 3)
    if len(points_m) < 2 or not (np.isfinite(points_m).all() and np.isfinite(inward_normals).all()):
        return 0.0
    forces = cone_edges(inward_normals, friction, edges)
    torques = np.cross((points_m - np.asarray(centre_m, dtype=float))[:, None], forces) / torque_length_m
    wrenches = np.concatenate([forces, torques], -1).reshape(-1, 6)
    try:
        hull = ConvexHull(wrenches)
    except (QhullError, ValueError):  # flat: the wrenches span fewer than 6 dimensions
        return 0.0
    offsets = hull.equations[:, -1]  # unit facet normals; inside is normal . w + offset <= 0
    return float((-offsets).min()) if (offsets < 0).all() else 0.0
