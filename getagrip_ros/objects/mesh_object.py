"""Objects ready for simulation: a watertight mesh in the object frame plus convex collision parts.

Object frame (metres, z up): the object rests upright on the plane z = 0 with its lowest point at
z = 0, and x, y = 0 is the centre of its axis-aligned bounding box. ``prepare_object`` turns an
``ObjectSpec`` (a procedural shape or a mesh file with a scale) into a ``PreparedObject``, or raises
``ObjectRejected`` with a reason that names the object.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, Optional, Union

import coacd
import numpy as np
import trimesh

from getagrip_ros.objects.errors import MeshFileError, ObjectRejected
from getagrip_ros.objects.procedural import Shape
from getagrip_ros.objects.settle import SettleConfig, settle_test

MESH_FILE_SUFFIXES = (".obj", ".stl", ".ply", ".glb")
DEFAULT_CACHE_DIR = Path("~/.cache/getagrip_ros/convex")
DEBRIS_VOLUME_M3 = 1e-9
"""Closed shells of a multi-shell mesh enclosing less than this (1 mm^3: flat or sliver debris) are dropped."""
FLAT_THICKNESS_FRACTION = 1e-6
"""An open mesh thinner than this fraction of its size (along its principal axes) is flat: it is not repaired."""
MIN_KEPT_AREA_FRACTION = 0.8
"""A hole repair that keeps less of the mesh's surface than this (it dropped parts it could not fix) is refused."""


@dataclass(frozen=True)
class MeshFile:
    """A mesh file on disk and how to place it."""

    path: str
    scale_xyz: tuple[float, float, float] = (1.0, 1.0, 1.0)
    """Per-axis factor from file units to metres, applied in the file's frame."""
    resting_pose: Literal["most_stable", "as_given"] = "most_stable"
    """"most_stable": rest on the most probable stable pose (trimesh), footprint's long side along x;
    "as_given": keep the file's orientation (its z is up)."""


@dataclass(frozen=True)
class ObjectSpec:
    """How to make one catalog object; cheap to create, the mesh is built by ``prepare_object``."""

    name: str
    """Unique, "<set>/<id>", e.g. "procedural/mug_0003", "pybullet/042", "user/bunny"."""
    source: str
    """Where it comes from: "procedural", "pybullet", "tabletop20" or "user"."""
    geometry: Union[Shape, MeshFile]
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or any(c.isspace() for c in self.name):
            raise ValueError(f"ObjectSpec: name must be non-empty without whitespace, got {self.name!r}")


@dataclass(frozen=True)
class DecompositionConfig:
    """When and how to split a non-convex mesh into convex parts with CoACD."""

    convex_volume_ratio: float = 0.97
    """A mesh with volume / convex-hull volume above this is treated as convex (one part: its hull)."""
    threshold: float = 0.05
    """CoACD concavity threshold (smaller: more, tighter parts)."""
    max_convex_hulls: int = 16
    resolution: int = 500
    """CoACD surface sampling resolution."""
    mcts_iterations: int = 60
    mcts_nodes: int = 10
    mcts_max_depth: int = 3
    seed: int = 0
    min_part_volume_m3: float = 1e-10
    """Parts smaller than this (slivers) are dropped."""


@dataclass(frozen=True)
class PrepareConfig:
    """Acceptance limits and processing options of ``prepare_object``."""

    min_extent_m: float = 0.05
    max_extent_m: float = 0.30
    """Accepted range of the largest bounding-box extent in the object frame (paper: 5-30 cm)."""
    min_volume_m3: float = 1e-7
    shell_merge_gap_m: float = 2e-4
    """Closed shells of one mesh closer than this are fused into one solid (see make_watertight)."""
    decomposition: DecompositionConfig = DecompositionConfig()
    cache_dir: Optional[str] = None
    """Convex-decomposition cache; None: ~/.cache/getagrip_ros/convex."""
    settle: Optional[SettleConfig] = None
    """If set, run the drop-and-settle test and reject objects that tip over or keep moving."""


@dataclass(frozen=True, eq=False)
class PreparedObject:
    """A watertight object mesh and its convex collision parts, both in the object frame (metres)."""

    name: str
    mesh: trimesh.Trimesh
    convex_parts: tuple[trimesh.Trimesh, ...]
    tags: tuple[str, ...]
    T_object_source: np.ndarray = field(repr=False)
    """4x4 transform from the source frame (procedural shape frame, or mesh file frame after scaling)."""

    @property
    def volume_m3(self) -> float:
        return float(self.mesh.volume)

    @property
    def extents_m(self) -> np.ndarray:
        """(3,) bounding-box size along x, y, z of the object frame."""
        return self.mesh.extents.copy()

    def mass_properties(self, density_kg_m3: float = 500.0, mass_kg: Optional[float] = None
                        ) -> tuple[float, np.ndarray, np.ndarray]:
        """(mass_kg, centre of mass (3,) in the object frame, 3x3 inertia about the COM in object axes, kg m^2).

        Uniform density over the watertight mesh; an explicit `mass_kg` rescales mass and inertia.
        """
        if density_kg_m3 <= 0 or (mass_kg is not None and mass_kg <= 0):
            raise ValueError(f"{self.name}: density and mass must be positive, got {density_kg_m3}, {mass_kg}")
        mass = density_kg_m3 * self.volume_m3
        inertia = self.mesh.moment_inertia * density_kg_m3  # trimesh: unit density, about the centre of mass
        if mass_kg is not None:
            inertia, mass = inertia * (mass_kg / mass), mass_kg
        return float(mass), self.mesh.center_mass.copy(), inertia


def load_mesh_file(path: Union[str, Path], scale_xyz: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> trimesh.Trimesh:
    """Read an obj/stl/ply/glb file as one triangle mesh, scaled per axis; MeshFileError names the file."""
    path = Path(path)
    if path.suffix.lower() not in MESH_FILE_SUFFIXES:
        raise MeshFileError(f"{path}: unsupported mesh file type '{path.suffix}' "
                            f"(supported: {', '.join(MESH_FILE_SUFFIXES)})")
    if not path.is_file():
        raise MeshFileError(f"{path}: mesh file does not exist")
    if path.stat().st_size == 0:
        raise MeshFileError(f"{path}: mesh file is empty")
    scale = np.asarray(scale_xyz, dtype=float)
    if scale.shape != (3,) or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise MeshFileError(f"{path}: scale must be 3 positive numbers, got {scale_xyz}")
    try:
        mesh = trimesh.load(str(path), force="mesh")
    except ImportError as exc:  # trimesh falls back to charset-normalizer for text that is not UTF-8
        raise MeshFileError(f"{path}: cannot read mesh: neither valid binary {path.suffix} data nor UTF-8 text (text in "
                            f"other encodings needs the 'charset-normalizer' package: {exc})") from exc
    except Exception as exc:  # trimesh raises many different types for unparsable files
        raise MeshFileError(f"{path}: cannot read mesh ({type(exc).__name__}: {exc})") from exc
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:  # trimesh drops faces with NaN/inf vertices
        raise MeshFileError(f"{path}: no valid triangles in the file (none, or only ones with non-finite vertices)")
    mesh.apply_transform(np.diag(np.r_[scale, 1.0]))
    return mesh


def _defects(mesh: trimesh.Trimesh) -> str:
    """Why a mesh is not closed: holes (loops of edges used once) and non-manifold edges (used > 2 times)."""
    groups = trimesh.grouping.group_rows(mesh.edges_sorted)
    counts = np.array([len(g) for g in groups])
    boundary = mesh.edges_sorted[[g[0] for g, c in zip(groups, counts) if c == 1]]
    holes = len(trimesh.graph.connected_components(boundary, min_len=1)) if len(boundary) else 0
    return f"{holes} holes, {int(np.sum(counts > 2))} non-manifold edges"


def _without_duplicates_and_membranes(mesh: trimesh.Trimesh) -> np.ndarray:
    """Mask of faces to keep: one of each set of identical faces, none of a pair facing opposite ways
    (the shared wall of two shells stored face to face, which lies inside the solid)."""
    keep = np.ones(len(mesh.faces), dtype=bool)
    normals = mesh.face_normals
    for group in trimesh.grouping.group_rows(np.sort(mesh.faces, axis=1)):
        if len(group) > 1:
            opposite = np.any(normals[group] @ normals[group[0]] < 0)
            keep[group if opposite else group[1:]] = False
    return keep


def _cleaned(mesh: trimesh.Trimesh, by_position: bool = False) -> trimesh.Trimesh:
    """Copy with merged vertices (by_position: also those that differ only in texture coordinates or normals),
    without degenerate or duplicate faces or membranes, and without texture or colours (geometry is all that is
    used, and trimesh would copy a texture image into every piece it splits off)."""
    mesh = mesh.copy()
    mesh.merge_vertices(merge_tex=by_position, merge_norm=by_position)
    mesh.visual = trimesh.visual.ColorVisuals()
    mesh.update_faces(mesh.nondegenerate_faces())
    mesh.update_faces(_without_duplicates_and_membranes(mesh))
    mesh.remove_unreferenced_vertices()
    return mesh


def _fuse_shells(shells: list[trimesh.Trimesh], gap_m: float) -> trimesh.Trimesh:
    """Union of closed shells, each first pushed out by up to gap_m / 2 along its vertex normals."""
    inflated = []
    for shell in shells:
        shell = shell.copy()
        trimesh.repair.fix_normals(shell)
        shell.vertices = shell.vertices + shell.vertex_normals * (gap_m / 2)
        inflated.append(shell)
    return trimesh.boolean.union(inflated, engine="manifold")


def _close_with_meshfix(mesh: trimesh.Trimesh, name: str) -> trimesh.Trimesh:
    """MeshFix (pymeshfix) on a mesh that is still open: every hole filled with a refined patch, non-manifold
    parts, degenerate and self-intersecting triangles removed and the gaps closed again. Returns its result,
    closed or not (the caller checks); ObjectRejected if MeshFix fails or throws away most of the surface."""
    import pymeshfix

    centred = mesh.vertices - mesh.vertices.mean(axis=0)
    axes = np.linalg.svd(centred, full_matrices=False)[2]
    spans = np.ptp(centred @ axes.T, axis=0)  # along the principal axes, largest first
    if spans[2] <= FLAT_THICKNESS_FRACTION * spans[0]:  # nothing to enclose (and MeshFix can loop for long on it)
        raise ObjectRejected(f"{name}: mesh is not watertight ({_defects(mesh)}) and flat ({spans[2]:.3g} m thick, "
                             f"{spans[0]:.3g} m across): no repair can make it a solid")
    fix = pymeshfix.PyTMesh()
    fix.set_quiet(True)
    try:
        fix.load_array(np.ascontiguousarray(mesh.vertices, dtype=np.float64),
                       np.ascontiguousarray(mesh.faces, dtype=np.int32))
        fix.fill_small_boundaries(0, True)  # 0: every hole, whatever its number of edges
        fix.clean(10, 3)
        vertices, faces = fix.return_arrays()
    except Exception as exc:  # noqa: BLE001 - MeshFix raises RuntimeError and others on broken input
        raise ObjectRejected(f"{name}: mesh is not watertight and MeshFix cannot repair it "
                             f"({type(exc).__name__}: {exc}; before: {_defects(mesh)})") from exc
    repaired = trimesh.Trimesh(vertices, faces)
    if len(repaired.faces) < 4:
        raise ObjectRejected(f"{name}: mesh is not watertight and nothing is left after repair "
                             f"({_defects(mesh)} before)")
    if repaired.area < MIN_KEPT_AREA_FRACTION * mesh.area:
        raise ObjectRejected(f"{name}: mesh is not watertight ({_defects(mesh)}) and its repair would drop "
                             f"{100 * (1 - repaired.area / mesh.area):.0f}% of its surface")
    return repaired


def _solid_of_closed_shells(mesh: trimesh.Trimesh, name: str, gap_m: float) -> trimesh.Trimesh:
    """A mesh that is open, or of several pieces, made only of closed shells (they may share edges): the shells
    fused into one solid, debris dropped. Any other mesh is returned as it is."""
    if mesh.is_watertight and mesh.body_count == 1:
        return mesh
    shells = mesh.split(only_watertight=False)
    if len(shells) < 2 or not all(shell.is_watertight for shell in shells):
        return mesh
    with np.errstate(divide="ignore", invalid="ignore"):  # trimesh divides by the volume of flat shells
        solid = [shell for shell in shells if abs(shell.volume) >= DEBRIS_VOLUME_M3]
    if not solid:
        raise ObjectRejected(f"{name}: all its {len(shells)} closed shells are debris (< 1 mm^3 each)")
    try:
        return solid[0] if len(solid) == 1 else _fuse_shells(solid, gap_m)
    except Exception as exc:  # the boolean engine fails in many ways on shells that are not proper volumes
        raise ObjectRejected(f"{name}: cannot fuse its {len(solid)} closed shells into one "
                             f"solid ({type(exc).__name__}: {exc})") from exc


def make_watertight(mesh: trimesh.Trimesh, name: str, min_volume_m3: float = 1e-7,
                    shell_merge_gap_m: float = 2e-4) -> trimesh.Trimesh:
    """Repaired copy: merged vertices, no degenerate or duplicate faces, holes filled, one closed
    outward-wound solid.

    Walls shared by two shells stored face to face are removed, holes of 3 or 4 edges filled (trimesh). A
    mesh made of several closed shells that touch (e.g. stored as convex pieces) is fused into one solid;
    shells are first grown by up to shell_merge_gap_m / 2, so touching shells overlap, and debris shells
    (< DEBRIS_VOLUME_M3) dropped. A mesh that this does not make a valid solid is repaired harder from the
    source: its vertices merged by position alone (a textured or flat-shaded file keeps them apart along its
    seams), and if it is still open (larger holes, as scans have; non-manifold edges), MeshFix
    (`_close_with_meshfix`) fills every hole and removes self-intersections. A mesh that the first way makes a
    solid is left exactly as it was. Raises ObjectRejected if the result is not a single closed solid of
    positive volume.
    """
    first = _cleaned(mesh)
    if len(first.faces) < 4:
        raise ObjectRejected(f"{name}: mesh is degenerate ({len(first.faces)} valid triangles)")
    trimesh.repair.fill_holes(first)
    first = _solid_of_closed_shells(first, name, shell_merge_gap_m)
    if not first.is_watertight:
        return _repaired(mesh, name, min_volume_m3, shell_merge_gap_m)
    try:
        return _checked_solid(first, name, min_volume_m3)
    except ObjectRejected as closed_but_invalid:  # not one solid of volume: the stronger repair may still make one
        try:
            return _repaired(mesh, name, min_volume_m3, shell_merge_gap_m)
        except ObjectRejected:
            raise closed_but_invalid from None  # the reason of the closed mesh says more


def _repaired(mesh: trimesh.Trimesh, name: str, min_volume_m3: float, shell_merge_gap_m: float) -> trimesh.Trimesh:
    """make_watertight's stronger repair: vertices merged by position, trimesh's hole filling, then MeshFix."""
    repaired = _cleaned(mesh, by_position=True)
    if len(repaired.faces) < 4:
        raise ObjectRejected(f"{name}: mesh is degenerate ({len(repaired.faces)} valid triangles with its vertices "
                             "merged by position)")
    trimesh.repair.fill_holes(repaired)
    if not repaired.is_watertight:
        repaired = _close_with_meshfix(repaired, name)
    repaired = _solid_of_closed_shells(repaired, name, shell_merge_gap_m)
    if not repaired.is_watertight:
        raise ObjectRejected(f"{name}: mesh is not watertight after repair ({_defects(repaired)})")
    return _checked_solid(repaired, name, min_volume_m3)


def _checked_solid(mesh: trimesh.Trimesh, name: str, min_volume_m3: float) -> trimesh.Trimesh:
    """A closed mesh wound outwards, if it is one piece enclosing at least min_volume_m3 (else ObjectRejected)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # a flat mesh: trimesh divides by its zero volume
        trimesh.repair.fix_normals(mesh)
    if mesh.body_count != 1:
        raise ObjectRejected(f"{name}: mesh has {mesh.body_count} separate pieces that do not touch, "
                             "expected one solid")
    if not mesh.is_volume or mesh.volume < min_volume_m3:
        raise ObjectRejected(f"{name}: mesh encloses no usable volume ({mesh.volume:.3g} m^3, "
                             f"minimum {min_volume_m3:g})")
    return mesh


def _most_stable_rotation(mesh: trimesh.Trimesh) -> np.ndarray:
    """4x4 transform putting the mesh on its most probable stable resting face (deterministic), then
    turning it about z so its smallest footprint rectangle is axis-aligned with the long side along x."""
    transforms, probabilities = trimesh.poses.compute_stable_poses(mesh, n_samples=1)
    resting = transforms[int(np.argmax(probabilities))]
    footprint = trimesh.transform_points(mesh.convex_hull.vertices, resting)[:, :2]
    transform_2d, size = trimesh.bounds.oriented_bounds_2D(footprint)
    yaw = transform_2d[:2, :2]
    if np.linalg.det(yaw) < 0:
        yaw = np.diag([1.0, -1.0]) @ yaw
    if size[0] < size[1]:
        yaw = np.array([[0.0, -1.0], [1.0, 0.0]]) @ yaw
    align = np.eye(4)
    align[:2, :2] = yaw
    return align @ resting


def _to_object_frame(mesh: trimesh.Trimesh) -> np.ndarray:
    """Translation putting the lowest point at z = 0 and the bounding-box centre at x = y = 0."""
    lo, hi = mesh.bounds
    transform = np.eye(4)
    transform[:3, 3] = [-(lo[0] + hi[0]) / 2, -(lo[1] + hi[1]) / 2, -lo[2]]
    return transform


def _cache_key(mesh: trimesh.Trimesh, config: DecompositionConfig) -> str:
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(mesh.vertices, dtype=np.float64).tobytes())
    digest.update(np.ascontiguousarray(mesh.faces, dtype=np.int64).tobytes())
    digest.update(json.dumps(asdict(config), sort_keys=True).encode())
    return digest.hexdigest()


def _run_coacd(mesh: trimesh.Trimesh, config: DecompositionConfig) -> list[trimesh.Trimesh]:
    coacd.set_log_level("error")
    parts = coacd.run_coacd(coacd.Mesh(mesh.vertices, mesh.faces), threshold=config.threshold,
                            max_convex_hull=config.max_convex_hulls, preprocess_mode="off", resolution=config.resolution,
                            mcts_nodes=config.mcts_nodes, mcts_iterations=config.mcts_iterations,
                            mcts_max_depth=config.mcts_max_depth, seed=config.seed)
    return [trimesh.Trimesh(np.asarray(v, dtype=float), np.asarray(f, dtype=np.int64)) for v, f in parts]


def _load_cached(path: Path) -> Optional[list[trimesh.Trimesh]]:
    try:
        with np.load(path) as data:
            vertices, faces = data["vertices"], data["faces"]
            v_split, f_split = np.cumsum(data["vertex_counts"])[:-1], np.cumsum(data["face_counts"])[:-1]
    except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile):
        return None  # missing or unreadable (e.g. truncated) entry: recompute
    return [trimesh.Trimesh(v, f, process=False) for v, f in zip(np.split(vertices, v_split), np.split(faces, f_split))]


def _store_cached(path: Path, parts: list[trimesh.Trimesh]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, vertices=np.concatenate([p.vertices for p in parts]), faces=np.concatenate([p.faces for p in parts]),
             vertex_counts=[len(p.vertices) for p in parts], face_counts=[len(p.faces) for p in parts])
    os.replace(tmp, path)


def approximate_convex_parts(mesh: trimesh.Trimesh, name: str, voxel_m: float = 0.003, max_parts: int = 48,
                             surface_samples: int = 4000, seed: int = 0) -> tuple[trimesh.Trimesh, ...]:
    """Convex parts approximately covering a watertight `mesh` (same frame), in about a second: the centres of its
    filled voxels (`voxel_m`) and `surface_samples` points on its surface are split into up to `max_parts` clusters
    by k-means, and each cluster's convex hull is a part. A part may bridge a concavity narrower than a cluster (a
    cup's rim, not its inside): coarser than CoACD (:func:`convex_decomposition`, 3-70 s on perceived meshes), for
    simulating many grasps on an object seen moments ago (the planner's simulation evaluator).

    Raises:
        ObjectRejected: the mesh encloses too little to make a part.
    """
    from scipy.cluster.vq import kmeans2

    filled = mesh.voxelized(voxel_m).fill().points
    surface, _ = trimesh.sample.sample_surface(mesh, surface_samples, seed=seed)
    points = np.vstack([filled, surface])
    k = min(max_parts, len(points) // 8)
    if k < 1:
        raise ObjectRejected(f"{name}: too small to make convex parts ({len(points)} points)")
    _, label = kmeans2(points, k, seed=seed, minit="++")
    parts = []
    for i in range(k):
        cluster = points[label == i]
        if len(cluster) < 4 or np.linalg.matrix_rank(cluster - cluster.mean(0), tol=1e-6) < 3:
            continue  # a flat or tiny cluster has no volume
        hull = trimesh.convex.convex_hull(cluster)
        if hull.volume > DEBRIS_VOLUME_M3:
            parts.append(hull)
    if not parts:
        raise ObjectRejected(f"{name}: no convex part has a volume")
    return tuple(parts)


def convex_decomposition(mesh: trimesh.Trimesh, name: str, config: DecompositionConfig = DecompositionConfig(),
                         cache_dir: Optional[Union[str, Path]] = None) -> tuple[trimesh.Trimesh, ...]:
    """Convex parts covering `mesh` (same frame): its hull if nearly convex, else CoACD parts.

    CoACD results are cached in `cache_dir` (None: ~/.cache/getagrip_ros/convex), one .npz per
    mesh keyed by a hash of the exact geometry and `config`.
    """
    if mesh.volume / mesh.convex_hull.volume > config.convex_volume_ratio:
        return (mesh.convex_hull,)
    folder = Path(cache_dir if cache_dir is not None else DEFAULT_CACHE_DIR).expanduser()
    cache_path = folder / f"{_cache_key(mesh, config)}.npz"
    parts = _load_cached(cache_path)
    if parts is None:
        with np.errstate(divide="ignore", invalid="ignore"):  # flat parts: trimesh divides by their zero volume
            parts = [p for p in _run_coacd(mesh, config) if p.volume >= config.min_part_volume_m3]
        if not parts:
            raise ObjectRejected(f"{name}: convex decomposition produced no usable parts")
        _store_cached(cache_path, parts)
    return tuple(parts)


def prepare_object(spec: ObjectSpec, config: PrepareConfig = PrepareConfig()) -> PreparedObject:
    """Build, repair, place (object frame), check and decompose the object of `spec`.

    Raises ObjectRejected (MeshFileError for unreadable files) with a reason naming the object.
    """
    if isinstance(spec.geometry, MeshFile):
        try:
            source = load_mesh_file(spec.geometry.path, spec.geometry.scale_xyz)
        except MeshFileError as exc:
            raise MeshFileError(f"{spec.name}: {exc}") from exc
    else:
        source = spec.geometry.mesh()
    mesh = make_watertight(source, spec.name, config.min_volume_m3, config.shell_merge_gap_m)
    transform = np.eye(4)
    if isinstance(spec.geometry, MeshFile) and spec.geometry.resting_pose == "most_stable":
        transform = _most_stable_rotation(mesh)
        mesh.apply_transform(transform)
    to_frame = _to_object_frame(mesh)
    mesh.apply_transform(to_frame)
    largest = float(mesh.extents.max())
    if not config.min_extent_m <= largest <= config.max_extent_m:
        raise ObjectRejected(f"{spec.name}: largest extent {largest * 100:.1f} cm is outside "
                             f"[{config.min_extent_m * 100:g}, {config.max_extent_m * 100:g}] cm")
    parts = convex_decomposition(mesh, spec.name, config.decomposition, config.cache_dir)
    prepared = PreparedObject(spec.name, mesh, parts, spec.tags, to_frame @ transform)
    if config.settle is not None:
        result = settle_test(prepared, config.settle)
        if not result.settled:
            raise ObjectRejected(f"{spec.name}: {result.reason}")
    return prepared
