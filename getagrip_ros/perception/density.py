"""NeRF density to the object representations of the Get a Grip pipeline: density centroid, marching-cubes
mesh, per-finger density grids (NeRF evaluator input) and the global density grid around the object.

A density function maps (N, 3) float32 points in the world to (N,) or (N, 1) non-negative volume density
sigma in 1/m (as nerfstudio's field density). It is evaluated in chunks under torch.no_grad(). Pure torch:
no rclpy, no nerfstudio.

Frames: world z up, table top at z = 0; the object box is given relative to the object position on the
table (x, y of the object, z = 0). Metres, radians. Opacity of a sample is alpha = 1 - exp(-delta * sigma),
delta the sample spacing in metres.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

if TYPE_CHECKING:
    import trimesh

DensityFn = Callable[[torch.Tensor], torch.Tensor]
"""(N, 3) float32 world points in metres -> (N,) or (N, 1) volume density sigma in 1/m."""

DEFAULT_CHUNK_SIZE = 65536
"""Points per density call."""

PAPER_DENSITY_LEVEL = 15.0
"""Density at the object surface in the paper (centroid threshold and marching-cubes level)."""

FINGER_NAMES = ("index", "middle", "ring", "thumb")
"""Order of the fingers in the per-finger grids."""

Vec3 = tuple[float, float, float]
Device = torch.device | str | None


@dataclass(frozen=True)
class ObjectBox:
    """The paper's object box, relative to the object origin on the table (object x, y; z = 0)."""

    min_m: Vec3 = (-0.2, -0.2, 0.0)
    """Lower corner relative to the object origin."""
    max_m: Vec3 = (0.2, 0.2, 0.3)
    """Upper corner relative to the object origin."""

    def __post_init__(self) -> None:
        if len(self.min_m) != 3 or len(self.max_m) != 3:
            raise ValueError(f"ObjectBox: corners must have 3 coordinates, got {self.min_m} and {self.max_m}")
        if not all(lo < hi for lo, hi in zip(self.min_m, self.max_m)):
            raise ValueError(f"ObjectBox: min_m must be below max_m on every axis, got {self.min_m} and {self.max_m}")

    def bounds_world(self, object_xy_m: Sequence[float]) -> tuple[Vec3, Vec3]:
        """(lower_m, upper_m) world corners of the box for an object at (x, y) on the table."""
        if len(object_xy_m) < 2:
            raise ValueError(f"ObjectBox: object position needs x and y, got {object_xy_m}")
        origin = (float(object_xy_m[0]), float(object_xy_m[1]), 0.0)
        lower = tuple(o + d for o, d in zip(origin, self.min_m))
        upper = tuple(o + d for o, d in zip(origin, self.max_m))
        return lower, upper  # type: ignore[return-value]


def _as_vec3(name: str, value: Sequence[float] | torch.Tensor | np.ndarray) -> Vec3:
    arr = np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value, dtype=float).reshape(-1)
    if arr.shape != (3,) or not np.isfinite(arr).all():
        raise ValueError(f"{name}: expected 3 finite coordinates, got {value}")
    return (float(arr[0]), float(arr[1]), float(arr[2]))


def _check_bounds(lower_m: Sequence[float], upper_m: Sequence[float]) -> tuple[Vec3, Vec3]:
    lower, upper = _as_vec3("lower_m", lower_m), _as_vec3("upper_m", upper_m)
    if not all(lo < hi for lo, hi in zip(lower, upper)):
        raise ValueError(f"density grid: lower_m must be below upper_m on every axis, got {lower} and {upper}")
    return lower, upper


def _alpha(sigma: torch.Tensor, delta_m: float) -> torch.Tensor:
    """Opacity of a sample of length delta_m; negative density (should not happen) counts as empty."""
    return 1.0 - torch.exp(-delta_m * sigma.clamp(min=0.0))


def evaluate_density(density_fn: DensityFn, points_m: torch.Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE,
                     device: Device = None) -> torch.Tensor:
    """sigma at (..., 3) points -> (...) float32, in chunks of chunk_size points under torch.no_grad().

    device: where the density function is called (the points are moved there chunk by chunk; None: where
    they are). The result lies on the device of the points.
    """
    if chunk_size < 1:
        raise ValueError(f"evaluate_density: chunk_size must be positive, got {chunk_size}")
    if points_m.shape[-1] != 3:
        raise ValueError(f"evaluate_density: points must have shape (..., 3), got {tuple(points_m.shape)}")
    flat = points_m.reshape(-1, 3).to(torch.float32)
    out = torch.empty(flat.shape[0], dtype=torch.float32, device=flat.device)
    with torch.no_grad():
        for start in range(0, flat.shape[0], chunk_size):
            chunk = flat[start:start + chunk_size]
            sigma = density_fn(chunk if device is None else chunk.to(device))
            if sigma.shape not in ((chunk.shape[0],), (chunk.shape[0], 1)):
                raise ValueError(f"density function: expected shape ({chunk.shape[0]},) or ({chunk.shape[0]}, 1) "
                                 f"for {chunk.shape[0]} points, got {tuple(sigma.shape)}")
            out[start:start + chunk.shape[0]] = sigma.reshape(-1).to(device=out.device, dtype=torch.float32)
    return out.reshape(points_m.shape[:-1])


def density_grid(density_fn: DensityFn, lower_m: Sequence[float], upper_m: Sequence[float],
                 resolution: int | Sequence[int], chunk_size: int = DEFAULT_CHUNK_SIZE,
                 device: Device = None) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Density on a regular grid from lower_m to upper_m (both included), "ij" indexing.

    resolution: points per axis, one int for all axes or (nx, ny, nz), each >= 2.
    Returns (values (nx, ny, nz), (x_m, y_m, z_m) axes), all on device (None: CPU).
    """
    lower, upper = _check_bounds(lower_m, upper_m)
    counts = (resolution,) * 3 if isinstance(resolution, int) else tuple(int(r) for r in resolution)
    if len(counts) != 3 or min(counts) < 2:
        raise ValueError(f"density grid: resolution must be >= 2 points per axis, got {resolution}")
    axes = tuple(torch.linspace(lo, hi, n, dtype=torch.float32, device=device)
                 for lo, hi, n in zip(lower, upper, counts))
    points = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)
    return evaluate_density(density_fn, points, chunk_size), axes  # type: ignore[return-value]


def density_centroid(density_fn: DensityFn, lower_m: Sequence[float], upper_m: Sequence[float],
                     resolution: int = 100, threshold: float = PAPER_DENSITY_LEVEL,
                     chunk_size: int = DEFAULT_CHUNK_SIZE, device: Device = None) -> torch.Tensor:
    """(3,) world mean of the grid points in the box whose density is above threshold (paper: 100^3, > 15).

    ValueError when no point in the box is above the threshold.
    """
    values, axes = density_grid(density_fn, lower_m, upper_m, resolution, chunk_size, device)
    mask = values > threshold
    if not bool(mask.any()):
        raise ValueError(f"NeRF has no surface in the object box: no density above {threshold:g} in the box "
                         f"{_check_bounds(lower_m, upper_m)} (max density {float(values.max()):.3g})")
    points = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)
    return points[mask].to(torch.float64).mean(dim=0).to(torch.float32)


@dataclass(frozen=True)
class MeshConfig:
    """Marching cubes on the NeRF density (paper: level 15 in the object box)."""

    level: float = PAPER_DENSITY_LEVEL
    """Density of the surface; inside the object the density is above it."""
    voxel_size_m: float = 0.004
    """Largest grid spacing (shrunk a little where needed so the grid ends on the box faces). 4 mm gives
    101 x 101 x 76 points in the paper's box, about 0.8 M density evaluations; 2 mm is finer but eight times
    the calls, slow for a real NeRF without a GPU."""
    min_component_edges: int = 31
    """Connected components with fewer unique edges are dropped (floaters); the rest are merged."""
    close_at_box: bool = True
    """Close surfaces cut by the box with a flat cap on the box face (e.g. the bottom of an object standing on
    the table at z = 0), a thousandth of a voxel outside it, so the mesh is watertight. False: such surfaces
    stay open (hole filling may still close small holes)."""
    fill_holes: bool = True
    """Run trimesh's hole filling when the merged mesh is not watertight."""

    def __post_init__(self) -> None:
        if not self.voxel_size_m > 0:
            raise ValueError(f"MeshConfig: voxel_size_m must be positive, got {self.voxel_size_m}")
        if self.min_component_edges < 0:
            raise ValueError(f"MeshConfig: min_component_edges must be >= 0, got {self.min_component_edges}")


_CAP_FRACTION = 1e-3
"""Where a surface cut by the box is capped: this fraction of a voxel outside the box face."""


def _pad_with_caps(values: np.ndarray, level: float) -> np.ndarray:
    """Pad the grid by one layer below the level, chosen so that marching cubes crosses the level within
    _CAP_FRACTION of a voxel beyond each box-face grid point above it: surfaces cut by the box get a flat cap
    just outside the box face. A pad point touches at most one grid point (its face neighbour), so each
    value is set for that one neighbour; pad points on the padded cube's edges touch none."""
    values = values.astype(np.float64)
    padded = np.pad(values, 1, mode="constant", constant_values=level - 1.0)
    inner = (slice(1, -1),) * 3
    for axis in range(3):
        for pad_index, face_index in ((0, 0), (-1, -1)):
            excess = np.maximum(np.take(values, face_index, axis=axis) - level, 0.0)
            target = list(inner)
            target[axis] = pad_index
            padded[tuple(target)] = level - 1.0 - excess * (1.0 / _CAP_FRACTION - 1.0)
    return padded


def extract_mesh(density_fn: DensityFn, lower_m: Sequence[float], upper_m: Sequence[float],
                 config: MeshConfig = MeshConfig(), chunk_size: int = DEFAULT_CHUNK_SIZE,
                 device: Device = None) -> trimesh.Trimesh:
    """Surface of the object in the box as a trimesh.Trimesh in world metres, normals pointing outward.

    mesh.is_watertight says whether it is closed; mesh.metadata holds "components_kept",
    "components_dropped", "watertight" and "voxel_size_m". ValueError when the density never crosses the
    level in the box, or when no component is large enough.
    """
    import trimesh  # heavy: imported only when meshing
    from skimage.measure import marching_cubes

    lower, upper = _check_bounds(lower_m, upper_m)
    counts = tuple(max(2, int(np.ceil((hi - lo) / config.voxel_size_m - 1e-6)) + 1) for lo, hi in zip(lower, upper))
    values_t, _ = density_grid(density_fn, lower, upper, counts, chunk_size, device)
    values = values_t.cpu().numpy()
    spacing = tuple((hi - lo) / (n - 1) for lo, hi, n in zip(lower, upper, counts))
    vmin, vmax = float(values.min()), float(values.max())
    if not vmax > config.level:
        raise ValueError(f"no surface: density never reaches level {config.level:g} in the box {lower}..{upper} "
                         f"(max density {vmax:.3g})")
    if not vmin < config.level:
        raise ValueError(f"no surface: density is above the level {config.level:g} everywhere in the box "
                         f"{lower}..{upper} (min density {vmin:.3g}); the box lies inside the object or the NeRF "
                         f"is foggy")
    origin = np.array(lower)
    if config.close_at_box:
        values = _pad_with_caps(values, config.level)
        origin = origin - np.array(spacing)
    try:
        # With density high inside, "ascent" winds the faces counter-clockwise seen from outside.
        verts, faces, _, _ = marching_cubes(values, level=config.level, spacing=spacing, gradient_direction="ascent",
                                            allow_degenerate=False)
    except ValueError as exc:  # level outside the data range, or no surface found
        raise ValueError(f"no surface at density level {config.level:g} in the box {lower}..{upper}: {exc}") from exc
    verts = verts.astype(np.float64) + origin

    # No trimesh processing: marching cubes already shares vertices, and merging near-coincident vertices or
    # dropping near-degenerate faces (where the density equals the level at grid points) opens holes.
    raw = trimesh.Trimesh(vertices=verts, faces=faces, process=False)
    components = raw.split(only_watertight=False)
    kept = [c for c in components if len(c.edges_unique) >= config.min_component_edges]
    if not kept:
        sizes = sorted((len(c.edges_unique) for c in components), reverse=True)[:5]
        raise ValueError(f"no surface: all {len(components)} surface components are smaller than "
                         f"{config.min_component_edges} edges (largest: {sizes})")
    mesh = trimesh.util.concatenate(kept) if len(kept) > 1 else kept[0]
    if config.fill_holes and not mesh.is_watertight:
        trimesh.repair.fill_holes(mesh)
    if mesh.is_watertight and mesh.volume < 0:  # safety net: a closed surface must enclose positive volume
        mesh.invert()
    mesh.metadata.update(components_kept=len(kept), components_dropped=len(components) - len(kept),
                         watertight=bool(mesh.is_watertight), voxel_size_m=config.voxel_size_m)
    return mesh


def write_mesh_obj(mesh: trimesh.Trimesh, path: str | Path) -> Path:
    """Write a mesh (world metres) as a Wavefront .obj, creating the folder; returns the path."""
    path = Path(path)
    if path.suffix.lower() != ".obj":
        raise ValueError(f"write_mesh_obj: expected a .obj path, got {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    mesh.export(path, file_type="obj")
    return path


@dataclass(frozen=True)
class FingerGridConfig:
    """Per-finger query grid of the NeRF evaluator (public Get a Grip code: 31 x 31 x 41 points, 2 mm apart),
    in the finger frame: x, y across the finger centred on the fingertip, z from the fingertip along the
    closing direction."""

    num_x: int = 31
    """Points along x of the finger frame."""
    num_y: int = 31
    """Points along y of the finger frame."""
    num_z: int = 41
    """Points along the closing direction (z), the first at the fingertip."""
    width_m: float = 0.06
    """Extent along x, centred on the fingertip."""
    height_m: float = 0.06
    """Extent along y, centred on the fingertip."""
    depth_m: float = 0.08
    """Extent along z, from the fingertip."""

    def __post_init__(self) -> None:
        if min(self.num_x, self.num_y, self.num_z) < 2:
            raise ValueError(f"FingerGridConfig: need >= 2 points per axis, got {(self.num_x, self.num_y, self.num_z)}")
        if min(self.width_m, self.height_m, self.depth_m) <= 0:
            raise ValueError("FingerGridConfig: extents must be positive, got "
                             f"{(self.width_m, self.height_m, self.depth_m)}")

    @property
    def spacing_m(self) -> Vec3:
        """Point spacing along x, y, z (0.002 m each by default)."""
        return (self.width_m / (self.num_x - 1), self.height_m / (self.num_y - 1), self.depth_m / (self.num_z - 1))

    @property
    def delta_m(self) -> float:
        """Sample length for alpha: the spacing along the closing direction (the 'ray')."""
        return self.spacing_m[2]


@dataclass(frozen=True)
class FingerGrids:
    """Per-finger NeRF opacity grids, B grasps x F fingers (F = 4: index, middle, ring, thumb)."""

    alpha: torch.Tensor
    """(B, F, num_x, num_y, num_z) opacity 1 - exp(-delta * sigma), delta = config.delta_m."""
    points_world_m: torch.Tensor
    """(B, F, num_x, num_y, num_z, 3) query points."""
    T_world_finger: torch.Tensor
    """(B, F, 4, 4) finger frames (origin at the fingertip, z along the closing direction)."""


def _check_finger_input(name: str, value: torch.Tensor) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.ndim != 3 or value.shape[-1] != 3:
        shape = tuple(value.shape) if hasattr(value, "shape") else type(value).__name__
        raise ValueError(f"finger grids: {name} must be a (B, F, 3) tensor, got {shape}")
    return value.to(torch.float32)


def finger_frames(fingertip_positions_world_m: torch.Tensor, closing_directions_world: torch.Tensor,
                  along_finger_world: torch.Tensor) -> torch.Tensor:
    """(B, F, 4, 4) T_world_finger: origin at the fingertip, z = unit closing direction, y = the along-finger
    direction made perpendicular to z (any perpendicular where it is parallel to z), x = y cross z."""
    pos = _check_finger_input("fingertip_positions_world_m", fingertip_positions_world_m)
    closing = _check_finger_input("closing_directions_world", closing_directions_world).to(pos.device)
    along = _check_finger_input("along_finger_world", along_finger_world).to(pos.device)
    if not (pos.shape == closing.shape == along.shape):
        raise ValueError(f"finger grids: inputs must share a shape, got {tuple(pos.shape)}, "
                         f"{tuple(closing.shape)} and {tuple(along.shape)}")
    norm = closing.norm(dim=-1, keepdim=True)
    if bool((norm < 1e-9).any()) or not bool(torch.isfinite(closing).all()):
        raise ValueError("finger grids: closing directions must be finite and non-zero")
    z = closing / norm
    y = along - (along * z).sum(dim=-1, keepdim=True) * z
    y_norm = y.norm(dim=-1, keepdim=True)
    degenerate = (y_norm < 1e-6).squeeze(-1)
    if bool(degenerate.any()):
        # Any perpendicular: cross z with the world axis least aligned with it.
        axes = torch.eye(3, dtype=z.dtype, device=z.device)
        helper = axes[z.abs().argmin(dim=-1)]
        fallback = torch.linalg.cross(z, helper)
        y = torch.where(degenerate.unsqueeze(-1), fallback, y)
        y_norm = y.norm(dim=-1, keepdim=True)
    y = y / y_norm
    x = torch.linalg.cross(y, z)
    T = torch.zeros(*pos.shape[:-1], 4, 4, dtype=torch.float32, device=pos.device)
    T[..., :3, 0], T[..., :3, 1], T[..., :3, 2], T[..., :3, 3] = x, y, z, pos
    T[..., 3, 3] = 1.0
    return T


def finger_grid_points_finger_m(config: FingerGridConfig = FingerGridConfig(), device: Device = None) -> torch.Tensor:
    """(num_x, num_y, num_z, 3) query points in the finger frame, "ij" indexing."""
    xs = torch.linspace(-config.width_m / 2, config.width_m / 2, config.num_x, device=device)
    ys = torch.linspace(-config.height_m / 2, config.height_m / 2, config.num_y, device=device)
    zs = torch.linspace(0.0, config.depth_m, config.num_z, device=device)
    return torch.stack(torch.meshgrid(xs, ys, zs, indexing="ij"), dim=-1)


def finger_grid_points_world(T_world_finger: torch.Tensor, config: FingerGridConfig = FingerGridConfig()) -> torch.Tensor:
    """(B, F, num_x, num_y, num_z, 3) query points of each finger's grid, given its (B, F, 4, 4) frame."""
    local = finger_grid_points_finger_m(config, device=T_world_finger.device)
    R, t = T_world_finger[..., :3, :3], T_world_finger[..., :3, 3]
    return torch.einsum("bfij,xyzj->bfxyzi", R, local) + t[:, :, None, None, None, :]


def finger_density_grids(density_fn: DensityFn, fingertip_positions_world_m: torch.Tensor,
                         closing_directions_world: torch.Tensor, along_finger_world: torch.Tensor,
                         config: FingerGridConfig = FingerGridConfig(), chunk_size: int = DEFAULT_CHUNK_SIZE,
                         device: Device = None) -> FingerGrids:
    """NeRF opacity on a grid in front of each fingertip, inputs (B, F, 3) world (F = 4 in FINGER_NAMES order).

    device: where the density function is called (None: where the fingertip positions are); results lie on
    the device of the fingertip positions.
    """
    T = finger_frames(fingertip_positions_world_m, closing_directions_world, along_finger_world)
    points = finger_grid_points_world(T, config)
    sigma = evaluate_density(density_fn, points, chunk_size, device)
    return FingerGrids(alpha=_alpha(sigma, config.delta_m), points_world_m=points, T_world_finger=T)


@dataclass(frozen=True)
class GlobalGridConfig:
    """Cubic grid around the density centroid (paper: 41^3 over 0.4 m; the public code uses 30^3 over 0.3 m,
    GlobalGridConfig(resolution=30, size_m=0.3))."""

    resolution: int = 41
    """Points per axis."""
    size_m: float = 0.4
    """Edge of the cube, from the first to the last point, centred on the centroid."""

    def __post_init__(self) -> None:
        if self.resolution < 2 or not self.size_m > 0:
            raise ValueError(f"GlobalGridConfig: need resolution >= 2 and size_m > 0, got {self.resolution}, "
                             f"{self.size_m}")

    @property
    def delta_m(self) -> float:
        """Sample length for alpha: size_m / resolution (as the public code; the point spacing itself is
        size_m / (resolution - 1))."""
        return self.size_m / self.resolution


PUBLIC_GLOBAL_GRID = GlobalGridConfig(resolution=30, size_m=0.3)
"""The public code's global grid (its NeRF evaluator and NeRF sampler; ours store their own)."""


class GlobalGrid(NamedTuple):
    """NeRF opacity on the global grid; unpacks as (alpha, points_world_m)."""

    alpha: torch.Tensor
    """(R, R, R) opacity 1 - exp(-delta * sigma), delta = config.delta_m."""
    points_world_m: torch.Tensor
    """(R, R, R, 3) query points, "ij" indexing."""


def global_grid_points_m(centre_world_m: Sequence[float] | torch.Tensor, config: GlobalGridConfig = GlobalGridConfig(),
                         R_world_grid: np.ndarray | torch.Tensor | None = None, device: Device = None) -> torch.Tensor:
    """(R, R, R, 3) float32 world points of a cube of config.size_m centred on centre_world_m, "ij" indexing along
    the grid's own axes: the columns of R_world_grid (None: the world's)."""
    centre = torch.tensor(_as_vec3("centre_world_m", centre_world_m), dtype=torch.float32, device=device)
    axis = torch.linspace(-config.size_m / 2, config.size_m / 2, config.resolution, dtype=torch.float32, device=device)
    local = torch.stack(torch.meshgrid(axis, axis, axis, indexing="ij"), dim=-1)
    if R_world_grid is None:
        return local + centre
    R = torch.as_tensor(np.asarray(R_world_grid, dtype=np.float32), device=device)
    if R.shape != (3, 3):
        raise ValueError(f"global grid: R_world_grid must be (3, 3), got {tuple(R.shape)}")
    return local @ R.T + centre


def global_density_grid(density_fn: DensityFn, centroid_world_m: Sequence[float] | torch.Tensor,
                        config: GlobalGridConfig = GlobalGridConfig(), chunk_size: int = DEFAULT_CHUNK_SIZE,
                        device: Device = None, R_world_grid: np.ndarray | torch.Tensor | None = None) -> GlobalGrid:
    """NeRF opacity on a cube of config.size_m centred on the density centroid (world), on device (None: CPU);
    indexed along the axes R_world_grid (e.g. the object frame Oy's, as the NeRF evaluator is trained; None: world)."""
    points = global_grid_points_m(centroid_world_m, config, R_world_grid, device)
    return GlobalGrid(alpha=_alpha(evaluate_density(density_fn, points, chunk_size, device), config.delta_m),
                      points_world_m=points)
