"""The planning world: boxes (the table, obstacles) and the object (a triangle mesh or a point cloud).

Everything is in the world frame (`fr3_link0`: z up, x forward; the table top is z = 0), metres. The
collision buffer around this geometry is a planner setting (`CollisionCheckerConfig.world_buffer_m`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np

#: Get a Grip's table (and the simulated world's, `sim.scene.SceneConfig`): top face at z = 0, under the robot base.
TABLE_SIZE_M = (1.3208, 1.8288, 0.02)
TABLE_CENTRE_M = (0.50165, 0.0, -0.01)


def _pose(T: np.ndarray, name: str) -> np.ndarray:
    T = np.asarray(T, dtype=float)
    if T.shape != (4, 4) or not np.isfinite(T).all():
        raise ValueError(f"{name}: expected a finite (4, 4) pose, got shape {T.shape}")
    R = T[:3, :3]
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0 or not np.allclose(T[3], [0, 0, 0, 1]):
        raise ValueError(f"{name}: not a rigid transform (rotation must be orthonormal with det +1)")
    return T


def translation(xyz_m: tuple[float, float, float]) -> np.ndarray:
    """(4, 4) pure translation."""
    T = np.eye(4)
    T[:3, 3] = xyz_m
    return T


@dataclass(frozen=True, eq=False)
class WorldBox:
    """A box obstacle: full side lengths `size_m`, pose T_world_box of its centre."""

    name: str
    size_m: tuple[float, float, float]
    T_world_box: np.ndarray = field(default_factory=lambda: np.eye(4))

    def __post_init__(self) -> None:
        size = tuple(float(s) for s in self.size_m)
        if len(size) != 3 or not all(np.isfinite(s) and s > 0 for s in size):
            raise ValueError(f"box {self.name!r}: size_m must be 3 positive lengths, got {self.size_m}")
        object.__setattr__(self, "size_m", size)
        object.__setattr__(self, "T_world_box", _pose(self.T_world_box, f"box {self.name!r}"))


@dataclass(frozen=True, eq=False)
class ObjectMesh:
    """A triangle mesh in its own frame and its pose T_world_object. A watertight mesh is treated as solid."""

    name: str
    vertices_m: np.ndarray
    """(V, 3) in the object frame."""
    faces: np.ndarray
    """(F, 3) vertex indices."""
    T_world_object: np.ndarray = field(default_factory=lambda: np.eye(4))

    def __post_init__(self) -> None:
        v = np.asarray(self.vertices_m, dtype=float)
        f = np.asarray(self.faces)
        if v.ndim != 2 or v.shape[1] != 3 or len(v) < 3 or not np.isfinite(v).all():
            raise ValueError(f"object {self.name!r}: vertices_m must be a finite (V >= 3, 3) array, got {v.shape}")
        if f.ndim != 2 or f.shape[1] != 3 or len(f) == 0 or not np.issubdtype(f.dtype, np.integer):
            raise ValueError(f"object {self.name!r}: faces must be an integer (F >= 1, 3) array, got {f.shape} {f.dtype}")
        if f.min() < 0 or f.max() >= len(v):
            raise ValueError(f"object {self.name!r}: face indices outside [0, {len(v) - 1}]")
        object.__setattr__(self, "vertices_m", v)
        object.__setattr__(self, "faces", f.astype(np.int64))
        object.__setattr__(self, "T_world_object", _pose(self.T_world_object, f"object {self.name!r}"))

    @property
    def world_vertices_m(self) -> np.ndarray:
        """(V, 3) vertices in the world frame."""
        T = self.T_world_object
        return self.vertices_m @ T[:3, :3].T + T[:3, 3]


@dataclass(frozen=True, eq=False)
class ObjectPointCloud:
    """Object surface points (N, 3) in the world frame, checked as an octree of `resolution_m` cells."""

    name: str
    points_m: np.ndarray
    resolution_m: float = 0.005

    def __post_init__(self) -> None:
        p = np.asarray(self.points_m, dtype=float)
        if p.ndim != 2 or p.shape[1] != 3 or len(p) == 0 or not np.isfinite(p).all():
            raise ValueError(f"object {self.name!r}: points_m must be a finite (N >= 1, 3) array, got {p.shape}")
        if not self.resolution_m > 0:
            raise ValueError(f"object {self.name!r}: resolution_m must be > 0, got {self.resolution_m}")
        object.__setattr__(self, "points_m", p)


WorldObject = Union[ObjectMesh, ObjectPointCloud]


def table_box() -> WorldBox:
    """Get a Grip's table: 1.3208 x 1.8288 x 0.02 m, top face at z = 0 of the world."""
    return WorldBox("table", TABLE_SIZE_M, translation(TABLE_CENTRE_M))


@dataclass(frozen=True, eq=False)
class PlanningWorld:
    """Obstacles of one planning request, all in the world frame (`frame_id`)."""

    boxes: tuple[WorldBox, ...] = field(default_factory=lambda: (table_box(),))
    objects: tuple[WorldObject, ...] = ()
    frame_id: str = "world"

    def __post_init__(self) -> None:
        object.__setattr__(self, "boxes", tuple(self.boxes))
        object.__setattr__(self, "objects", tuple(self.objects))
        names = [b.name for b in self.boxes] + [o.name for o in self.objects]
        if len(set(names)) != len(names):
            raise ValueError(f"world: obstacle names must be unique, got {names}")
        for item in self.boxes:
            if not isinstance(item, WorldBox):
                raise ValueError(f"world: boxes must be WorldBox, got {type(item).__name__}")
        for item in self.objects:
            if not isinstance(item, (ObjectMesh, ObjectPointCloud)):
                raise ValueError(f"world: objects must be ObjectMesh or ObjectPointCloud, got {type(item).__name__}")

    def with_boxes(self, *boxes: WorldBox) -> "PlanningWorld":
        """A copy with more boxes."""
        return PlanningWorld(self.boxes + tuple(boxes), self.objects, self.frame_id)


def world_with_mesh(name: str, vertices_m: np.ndarray, faces: np.ndarray, T_world_object: np.ndarray,
                    with_table: bool = True) -> PlanningWorld:
    """The table (optional) and one object mesh placed at T_world_object."""
    return PlanningWorld((table_box(),) if with_table else (), (ObjectMesh(name, vertices_m, faces, T_world_object),))


def load_object_mesh(path: str) -> ObjectMesh:
    """A collision mesh file in the world frame; ValueError when it cannot be read or is empty."""
    import trimesh

    try:
        mesh = trimesh.load(path, force="mesh", process=False)  # as written: processing drops NaN vertices silently
    except Exception as err:  # noqa: BLE001 - trimesh raises many kinds
        raise ValueError(f"cannot read the object mesh {path!r}: {type(err).__name__}: {err}") from None
    bad = ~np.isfinite(np.asarray(mesh.vertices)).all(axis=1)
    if bad.any():
        raise ValueError(f"the object mesh {path!r} has {int(bad.sum())} vertices with NaN or inf")
    mesh.process()
    if len(mesh.faces) == 0:
        raise ValueError(f"the object mesh {path!r} has no faces")
    return ObjectMesh("object", np.asarray(mesh.vertices), np.asarray(mesh.faces), np.eye(4))
