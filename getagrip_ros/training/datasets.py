"""HDF5 grasp datasets in the public Get a Grip layouts: writers and validating readers.

BPS grasp dataset (BPS evaluator and sampler; key names as the public ``bps_grasp_dataset.py``), O objects,
N grasps, P basis points, metres (frames Oy and By as in :mod:`getagrip_ros.models.bps_evaluator`):

    /basis_points (P, 3) f4         fixed basis, frame By
    /bpss (O, P) f4                 BPS of each object: distance from each basis point to the object cloud
    /point_cloud_filepath (O,) str  /object_code (O,) str  /object_scale (O,) f4
    /grasps (N, 37) f4              37-D grasp vectors in the object frame Oy (getagrip_ros.grasp.grasp layout)
    /grasp_bps_idx (N,) i4          row of /bpss of each grasp
    /y_pick, /y_coll, /y_PGS (N,) f4 in [0, 1]
    /object_state (N, 13) f4        object xyz, quaternion xyzw, linear and angular velocity before the grasp
    /grasp_idx (N,) i4              index of the grasp among its object's grasps
    attribute num_grasps = N
    /bpss_turned (O, K, P) f4       optional (getagrip extension): the BPS of each object's cloud turned by
                                    2 pi k / K about the vertical through its centroid (k = 0: /bpss); a grasp
                                    turned with it is getagrip_ros.grasp.frames.turn_grasp_vectors_about_up_Oy
    /object_points (M, 3) f4        optional (getagrip extension, with the next two): every object's observed cloud
                                    in its frame Oy, object after object (the geometry evaluator's input)
    /object_num_points (O,) i4      points of each object in /object_points (>= 1, summing to M)
    /table_y (O,) f4                the table plane's y in each object's Oy (minus the centroid's height)

NeRF grasp dataset (NeRF evaluator; key names as the public ``create_nerf_grasp_dataset.py``), one row per grasp:

    /nerf_densities (N, 4, nx, ny, nz) f4   NeRF density sigma (1/m) on each finger's grid (public: 31 x 31 x 41)
    /grasp_transforms (N, 4, 4, 4) f4       T_object_finger (object frame Oy) of each finger: index, middle, ring, thumb
    /nerf_densities_global (O, R, R, R) f4  optional: sigma on one global grid per object (public: R = 30)
    /nerf_densities_global_idx (N,) i4      with the above: row of /nerf_densities_global of each grasp
    /y_pick, /y_coll, /y_PGS (N,) f4 in [0, 1]
    /object_code (N,) str  /object_scale (N,) f4  /object_state (N, 13) f4  /nerf_config (N,) str  /grasp_idx (N,) i4
    /grasp_configs (N, 4, 27) f4            optional, public only (wrist pose, joints, finger orientations)
    attribute num_data_points = N (public files may hold more, unused, rows)

The grid geometry is stored as attributes (getagrip extension; absent in public files, which use the defaults):
finger_grid_width_m, finger_grid_height_m, finger_grid_depth_m (0.06, 0.06, 0.08: x, y across the finger centred
on the fingertip, z from the fingertip along the closing direction) and global_grid_size_m (0.3: a cube centred
on the object frame origin). Point counts come from the array shapes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import h5py
import numpy as np
import torch

from getagrip_ros.grasp.grasp import GRASP_DIM, NUM_FINGERS
from getagrip_ros.models.bps_evaluator import LABEL_NAMES
from getagrip_ros.perception.density import (
    FingerGridConfig, GlobalGridConfig, finger_grid_points_finger_m, global_grid_points_m,
)

OBJECT_STATE_DIM = 13
PUBLIC_GRASP_CONFIG_DIM = 7 + 16 + 4
IDENTITY_OBJECT_STATE = np.array([0, 0, 0, 0, 0, 0, 1] + [0] * 6, dtype=np.float32)
"""Object at the frame origin, identity quaternion (xyzw), at rest."""
PUBLIC_GLOBAL_GRID_SIZE_M = 0.3
"""Edge of the public global grid ([-0.15, 0.15] m per axis)."""

Shape = tuple[int | str, ...]
"""Expected shape: ints are fixed sizes, strings name a size shared between keys."""

_BPS_SPEC: dict[str, Shape] = {
    "/basis_points": ("P", 3), "/bpss": ("O", "P"), "/object_code": ("O",), "/object_scale": ("O",),
    "/point_cloud_filepath": ("O",), "/grasps": ("N", GRASP_DIM), "/grasp_bps_idx": ("N",),
    **{f"/{name}": ("N",) for name in LABEL_NAMES}, "/object_state": ("N", OBJECT_STATE_DIM), "/grasp_idx": ("N",),
    "/bpss_turned": ("O", "K", "P"), "/object_points": ("M", 3), "/object_num_points": ("O",), "/table_y": ("O",),
}
_BPS_CLOUD_KEYS = ("/object_points", "/object_num_points", "/table_y")
_BPS_REQUIRED = ("/basis_points", "/bpss", "/object_code", "/grasps", "/grasp_bps_idx", *(f"/{n}" for n in LABEL_NAMES))

_NERF_SPEC: dict[str, Shape] = {
    **{f"/{name}": ("N",) for name in LABEL_NAMES}, "/nerf_densities": ("N", NUM_FINGERS, "nx", "ny", "nz"),
    "/grasp_transforms": ("N", NUM_FINGERS, 4, 4), "/object_code": ("N",), "/object_scale": ("N",),
    "/object_state": ("N", OBJECT_STATE_DIM), "/nerf_config": ("N",), "/grasp_idx": ("N",),
    "/nerf_densities_global_idx": ("N",), "/nerf_densities_global": ("O", "R", "R", "R"),
    "/grasp_configs": ("N", NUM_FINGERS, PUBLIC_GRASP_CONFIG_DIM),
}
_NERF_REQUIRED = ("/nerf_densities", "/grasp_transforms", "/object_code", *(f"/{n}" for n in LABEL_NAMES))
_STRING_KEYS = ("/object_code", "/point_cloud_filepath", "/nerf_config")


class DatasetError(ValueError):
    """A grasp dataset is malformed or inconsistent; the message names the file and the HDF5 key."""


@dataclass(frozen=True)
class BpsGraspDataset:
    """A BPS grasp dataset in memory (object frame, metres)."""

    basis_points_m: np.ndarray
    """(P, 3) basis points."""
    bpss_m: np.ndarray
    """(O, P) float32 BPS of each object."""
    object_codes: np.ndarray
    """(O,) str."""
    object_scales: np.ndarray
    """(O,) float32."""
    point_cloud_filepaths: np.ndarray
    """(O,) str."""
    grasps: np.ndarray
    """(N, 37) float32 grasp vectors."""
    grasp_bps_idx: np.ndarray
    """(N,) int64 row of bpss_m of each grasp."""
    labels: np.ndarray
    """(N, 3) float32 in LABEL_NAMES order (y_pick, y_coll, y_PGS)."""
    object_states: np.ndarray
    """(N, 13) float32."""
    grasp_idx: np.ndarray
    """(N,) int64."""
    bpss_turned_m: np.ndarray | None = None
    """(O, K, P) float32 BPS of each object at K headings (2 pi k / K about the vertical), or None."""
    object_points_Oy_m: np.ndarray | None = None
    """(M, 3) float32 every object's observed cloud in its Oy, object after object, or None."""
    object_num_points: np.ndarray | None = None
    """(O,) int64 points of each object in object_points_Oy_m."""
    table_y_m: np.ndarray | None = None
    """(O,) float32 the table plane's y in each object's Oy."""

    @property
    def has_clouds(self) -> bool:
        return self.object_points_Oy_m is not None

    def object_cloud_Oy_m(self, index: int) -> np.ndarray:
        """(n, 3) observed cloud of object ``index`` in its Oy (ValueError when the dataset holds no clouds)."""
        if self.object_points_Oy_m is None or self.object_num_points is None:
            raise ValueError("the dataset holds no object clouds (/object_points)")
        start = int(self.object_num_points[:index].sum())
        return self.object_points_Oy_m[start: start + int(self.object_num_points[index])]

    @property
    def num_grasps(self) -> int:
        return len(self.grasps)

    @property
    def grasp_object_codes(self) -> np.ndarray:
        """(N,) object code of each grasp."""
        return self.object_codes[self.grasp_bps_idx]


@dataclass(frozen=True)
class NerfGraspDataset:
    """A NeRF grasp dataset: everything in memory except the per-grasp finger grids (read by batch)."""

    path: Path
    finger_grid: FingerGridConfig
    """Geometry of the finger grids (point counts from /nerf_densities)."""
    global_grid: GlobalGridConfig | None
    """Geometry of the global grids, None when the file has none."""
    T_object_finger: np.ndarray
    """(N, 4, 4, 4) float32 finger frames (/grasp_transforms)."""
    labels: np.ndarray
    """(N, 3) float32 in LABEL_NAMES order."""
    object_codes: np.ndarray
    """(N,) str object code of each grasp."""
    nerf_densities_global: np.ndarray | None
    """(O, R, R, R) float32 sigma in 1/m, or None."""
    nerf_densities_global_idx: np.ndarray | None
    """(N,) int64 row of nerf_densities_global of each grasp, or None."""

    @property
    def num_grasps(self) -> int:
        return len(self.labels)

    def read_nerf_densities(self, indices: np.ndarray) -> np.ndarray:
        """(B, 4, nx, ny, nz) float32 finger-grid sigma (1/m) of the grasps at the given (distinct) indices."""
        indices = np.asarray(indices, dtype=np.int64)
        order = np.argsort(indices)
        with h5py.File(self.path, "r") as f:
            sorted_values = f["/nerf_densities"][indices[order]]
        values = np.empty_like(sorted_values)
        values[order] = sorted_values
        if not np.isfinite(values).all():
            raise DatasetError(f"{self.path}: /nerf_densities: non-finite values in grasps "
                               f"{sorted(indices[~np.isfinite(values).reshape(len(values), -1).all(1)].tolist())[:5]}")
        return values.astype(np.float32, copy=False)


def _check_shapes(shapes: dict[str, tuple[int, ...]], spec: dict[str, Shape], where: str) -> dict[str, int]:
    """Sizes of the named dimensions; DatasetError naming the key whose shape does not fit."""
    sizes: dict[str, tuple[int, str]] = {}
    for key, want in spec.items():
        if key not in shapes:
            continue
        got = shapes[key]
        if len(got) != len(want):
            raise DatasetError(f"{where}: {key}: expected {len(want)} dimensions {want}, got shape {got}")
        for axis, (w, g) in enumerate(zip(want, got)):
            if isinstance(w, int) and g != w:
                raise DatasetError(f"{where}: {key}: axis {axis} must have size {w}, got shape {got}")
            if isinstance(w, str):
                size, source = sizes.setdefault(w, (g, key))
                if g != size:
                    raise DatasetError(f"{where}: {key}: shape {got} does not match {w} = {size} of {source}")
    return {name: size for name, (size, _) in sizes.items()}


def _check_finite(arrays: dict[str, np.ndarray], where: str) -> None:
    for key, arr in arrays.items():
        if key not in _STRING_KEYS and not np.isfinite(arr).all():
            raise DatasetError(f"{where}: {key}: {int((~np.isfinite(arr)).sum())} NaN or infinite values")


def _check_labels(arrays: dict[str, np.ndarray], where: str) -> np.ndarray:
    for name in LABEL_NAMES:
        y = arrays[f"/{name}"]
        if y.size and (y.min() < 0 or y.max() > 1):
            raise DatasetError(f"{where}: /{name}: labels must lie in [0, 1], got [{y.min():g}, {y.max():g}]")
    return np.stack([arrays[f"/{n}"] for n in LABEL_NAMES], axis=1).astype(np.float32)


def _check_index(arrays: dict[str, np.ndarray], key: str, num_rows: int, target: str, where: str) -> np.ndarray:
    idx = arrays[key]
    if not np.issubdtype(idx.dtype, np.integer):
        raise DatasetError(f"{where}: {key}: must hold integers, got dtype {idx.dtype}")
    if idx.size and (idx.min() < 0 or idx.max() >= num_rows):
        raise DatasetError(f"{where}: {key}: index out of range [0, {num_rows}) of the rows of {target}: "
                           f"[{idx.min()}, {idx.max()}]")
    return idx.astype(np.int64)


def _require(keys: Sequence[str], present: Sequence[str], where: str) -> None:
    for key in keys:
        if key not in present:
            raise DatasetError(f"{where}: missing key {key}")


def _strings(values) -> np.ndarray:
    return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(values).reshape(-1)])


def _open(path: Path) -> h5py.File:
    if not path.is_file():
        raise FileNotFoundError(f"grasp dataset not found: {path}")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise DatasetError(f"{path}: not a readable HDF5 file ({e})") from e


def _read(f: h5py.File, keys: Sequence[str]) -> dict[str, np.ndarray]:
    out = {}
    for key in keys:
        if key in f:
            out[key] = _strings(f[key][()]) if key in _STRING_KEYS else np.asarray(f[key][()])
    return out


def _write_atomically(path: Path, arrays: dict[str, np.ndarray], attrs: dict[str, object]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with h5py.File(tmp, "w") as f:
        for key, arr in arrays.items():
            if key in _STRING_KEYS:
                f.create_dataset(key, data=np.asarray(arr, dtype=object), dtype=h5py.string_dtype())
            else:
                f.create_dataset(key, data=arr)
        f.attrs.update(attrs)
    os.replace(tmp, path)
    return path


def _grasp_idx_within_object(codes: np.ndarray) -> np.ndarray:
    """Index of each row among the rows of the same object, in order of appearance."""
    counts: dict[str, int] = {}
    out = np.empty(len(codes), dtype=np.int32)
    for i, code in enumerate(codes):
        out[i] = counts.get(code, 0)
        counts[code] = out[i] + 1
    return out


def _validate_bps(arrays: dict[str, np.ndarray], attrs: dict, where: str) -> BpsGraspDataset:
    _require(_BPS_REQUIRED, list(arrays), where)
    dims = _check_shapes({k: v.shape for k, v in arrays.items()}, _BPS_SPEC, where)
    n, num_objects = dims["N"], dims["O"]
    if n == 0 or num_objects == 0:
        raise DatasetError(f"{where}: /grasps: the dataset is empty ({n} grasps, {num_objects} objects)")
    if "num_grasps" in attrs and int(attrs["num_grasps"]) != n:
        raise DatasetError(f"{where}: attribute num_grasps = {int(attrs['num_grasps'])} but /grasps has {n} rows")
    _check_finite(arrays, where)
    labels = _check_labels(arrays, where)
    bps_idx = _check_index(arrays, "/grasp_bps_idx", num_objects, "/bpss", where)
    object_states = arrays.get("/object_state", np.tile(IDENTITY_OBJECT_STATE, (n, 1)))
    clouds = [key for key in _BPS_CLOUD_KEYS if key in arrays]
    if clouds and len(clouds) != len(_BPS_CLOUD_KEYS):
        raise DatasetError(f"{where}: object clouds need all of {list(_BPS_CLOUD_KEYS)}, got only {clouds}")
    if clouds:
        counts = arrays["/object_num_points"]
        if not np.issubdtype(counts.dtype, np.integer) or counts.min() < 1 or counts.sum() != len(arrays["/object_points"]):
            raise DatasetError(f"{where}: /object_num_points must be integers >= 1 summing to the "
                               f"{len(arrays['/object_points'])} rows of /object_points")
    return BpsGraspDataset(
        basis_points_m=arrays["/basis_points"].astype(np.float32), bpss_m=arrays["/bpss"].astype(np.float32),
        object_codes=arrays["/object_code"], object_scales=arrays.get("/object_scale", np.ones(num_objects)).astype(np.float32),
        point_cloud_filepaths=arrays.get("/point_cloud_filepath", np.full(num_objects, "")),
        grasps=arrays["/grasps"].astype(np.float32), grasp_bps_idx=bps_idx, labels=labels,
        object_states=object_states.astype(np.float32),
        grasp_idx=arrays.get("/grasp_idx", _grasp_idx_within_object(bps_idx.astype(str))).astype(np.int64),
        bpss_turned_m=arrays["/bpss_turned"].astype(np.float32) if "/bpss_turned" in arrays else None,
        object_points_Oy_m=arrays["/object_points"].astype(np.float32) if clouds else None,
        object_num_points=arrays["/object_num_points"].astype(np.int64) if clouds else None,
        table_y_m=arrays["/table_y"].astype(np.float32) if clouds else None)


def read_bps_dataset(path: str | Path) -> BpsGraspDataset:
    """Read and check a BPS grasp dataset (FileNotFoundError, or DatasetError naming the bad key)."""
    path = Path(path)
    with _open(path) as f:
        arrays, attrs = _read(f, list(_BPS_SPEC)), dict(f.attrs)
    return _validate_bps(arrays, attrs, str(path))


def write_bps_dataset(path: str | Path, *, basis_points_m: np.ndarray, bpss_m: np.ndarray, object_codes: Sequence[str],
                      grasps: np.ndarray, grasp_bps_idx: np.ndarray, y_pick: np.ndarray, y_coll: np.ndarray,
                      y_PGS: np.ndarray, object_scales: np.ndarray | None = None,
                      point_cloud_filepaths: Sequence[str] | None = None, object_states: np.ndarray | None = None,
                      grasp_idx: np.ndarray | None = None, bpss_turned_m: np.ndarray | None = None,
                      object_clouds_Oy_m: Sequence[np.ndarray] | None = None, table_y_m: np.ndarray | None = None) -> Path:
    """Write a BPS grasp dataset (layout in the module docstring) atomically; the same checks as the reader.

    Defaults: object scale 1, empty point-cloud paths, objects at rest at the origin, grasp_idx counted per object.
    ``object_clouds_Oy_m`` (one (n, 3) cloud per object, in its Oy) goes with ``table_y_m`` (O,).
    """
    num_objects, n = len(bpss_m), len(grasps)
    bps_idx = np.asarray(grasp_bps_idx)
    arrays = {
        "/basis_points": np.asarray(basis_points_m, np.float32), "/bpss": np.asarray(bpss_m, np.float32),
        "/point_cloud_filepath": _strings([""] * num_objects if point_cloud_filepaths is None else point_cloud_filepaths),
        "/object_code": _strings(object_codes),
        "/object_scale": np.asarray(np.ones(num_objects) if object_scales is None else object_scales, np.float32),
        "/grasps": np.asarray(grasps, np.float32), "/grasp_bps_idx": bps_idx.astype(np.int32),
        "/y_PGS": np.asarray(y_PGS, np.float32), "/y_pick": np.asarray(y_pick, np.float32),
        "/y_coll": np.asarray(y_coll, np.float32),
        "/object_state": np.asarray(np.tile(IDENTITY_OBJECT_STATE, (n, 1)) if object_states is None else object_states,
                                    np.float32),
        "/grasp_idx": np.asarray(_grasp_idx_within_object(bps_idx.astype(str)) if grasp_idx is None else grasp_idx,
                                 np.int32),
    }
    if bpss_turned_m is not None:
        arrays["/bpss_turned"] = np.asarray(bpss_turned_m, np.float32)
    if (object_clouds_Oy_m is None) != (table_y_m is None):
        raise DatasetError(f"{path}: object clouds and table heights go together")
    if object_clouds_Oy_m is not None:
        arrays["/object_points"] = np.concatenate([np.asarray(c, np.float32).reshape(-1, 3) for c in object_clouds_Oy_m])
        arrays["/object_num_points"] = np.array([len(c) for c in object_clouds_Oy_m], np.int32)
        arrays["/table_y"] = np.asarray(table_y_m, np.float32)
    _validate_bps(arrays, {}, str(path))
    return _write_atomically(Path(path), arrays, {"num_grasps": n})


def _finger_grid_from(attrs: dict, shape: tuple[int, ...]) -> FingerGridConfig:
    public = FingerGridConfig()
    return FingerGridConfig(num_x=shape[2], num_y=shape[3], num_z=shape[4],
                            width_m=float(attrs.get("finger_grid_width_m", public.width_m)),
                            height_m=float(attrs.get("finger_grid_height_m", public.height_m)),
                            depth_m=float(attrs.get("finger_grid_depth_m", public.depth_m)))


def _validate_nerf(arrays: dict[str, np.ndarray], densities_shape: tuple[int, ...] | None, attrs: dict,
                   where: str) -> tuple[FingerGridConfig, GlobalGridConfig | None, np.ndarray]:
    """Checks everything but the values of /nerf_densities (read by batch); returns the grid geometry and labels."""
    present = [*arrays] + (["/nerf_densities"] if densities_shape is not None else [])
    _require(_NERF_REQUIRED, present, where)
    has_global = ["/nerf_densities_global" in arrays, "/nerf_densities_global_idx" in arrays]
    if any(has_global) and not all(has_global):
        missing = "/nerf_densities_global" if not has_global[0] else "/nerf_densities_global_idx"
        raise DatasetError(f"{where}: missing key {missing} (the global grids need both it and its partner)")
    dims = _check_shapes({k: v.shape for k, v in arrays.items()} | {"/nerf_densities": densities_shape}, _NERF_SPEC,
                         where)
    if dims["N"] == 0:
        raise DatasetError(f"{where}: /nerf_densities: the dataset is empty (0 grasps)")
    _check_finite(arrays, where)
    labels = _check_labels(arrays, where)
    if all(has_global):
        _check_index(arrays, "/nerf_densities_global_idx", dims["O"], "/nerf_densities_global", where)
    try:
        finger_grid = _finger_grid_from(attrs, densities_shape)
        global_grid = GlobalGridConfig(resolution=dims["R"], size_m=float(attrs.get(
            "global_grid_size_m", PUBLIC_GLOBAL_GRID_SIZE_M))) if all(has_global) else None
    except ValueError as e:
        raise DatasetError(f"{where}: grid geometry (attributes and grid sizes): {e}") from e
    return finger_grid, global_grid, labels


def read_nerf_grasp_dataset(path: str | Path) -> NerfGraspDataset:
    """Open and check a NeRF grasp dataset (FileNotFoundError, or DatasetError naming the bad key).

    The finger grids stay in the file (NerfGraspDataset.read_nerf_densities); their values are checked per batch.
    """
    path = Path(path)
    keys = [k for k in _NERF_SPEC if k not in ("/nerf_densities", "/grasp_configs")]
    with _open(path) as f:
        arrays, attrs = _read(f, keys), dict(f.attrs)
        densities_shape = tuple(f["/nerf_densities"].shape) if "/nerf_densities" in f else None
    if "num_data_points" in attrs:  # public files may be longer than the rows they filled
        n = int(attrs["num_data_points"])
        rows = {k: len(v) for k, v in arrays.items() if _NERF_SPEC[k][0] == "N"}
        if densities_shape:
            rows["/nerf_densities"] = densities_shape[0]
            densities_shape = (min(n, densities_shape[0]), *densities_shape[1:])
        for key, count in rows.items():
            if count < n:
                raise DatasetError(f"{path}: {key}: {count} rows but attribute num_data_points = {n}")
        arrays = {k: (v[:n] if _NERF_SPEC[k][0] == "N" else v) for k, v in arrays.items()}
    finger_grid, global_grid, labels = _validate_nerf(arrays, densities_shape, attrs, str(path))
    global_idx = arrays.get("/nerf_densities_global_idx")
    return NerfGraspDataset(
        path=path, finger_grid=finger_grid, global_grid=global_grid,
        T_object_finger=arrays["/grasp_transforms"].astype(np.float32), labels=labels,
        object_codes=arrays["/object_code"],
        nerf_densities_global=None if global_grid is None else arrays["/nerf_densities_global"].astype(np.float32),
        nerf_densities_global_idx=None if global_idx is None else global_idx.astype(np.int64))


def write_nerf_grasp_dataset(path: str | Path, *, nerf_densities: np.ndarray, T_object_finger: np.ndarray,
                             object_codes: Sequence[str], y_pick: np.ndarray, y_coll: np.ndarray, y_PGS: np.ndarray,
                             nerf_densities_global: np.ndarray | None = None,
                             nerf_densities_global_idx: np.ndarray | None = None,
                             finger_grid: FingerGridConfig | None = None,
                             global_grid_size_m: float = PUBLIC_GLOBAL_GRID_SIZE_M,
                             object_scales: np.ndarray | None = None, object_states: np.ndarray | None = None,
                             nerf_configs: Sequence[str] | None = None, grasp_idx: np.ndarray | None = None,
                             grasp_configs: np.ndarray | None = None) -> Path:
    """Write a NeRF grasp dataset (layout in the module docstring) atomically; the same checks as the reader.

    nerf_densities: (N, 4, nx, ny, nz) sigma in 1/m; finger_grid: extents of the finger grids (None: the public
    0.06 x 0.06 x 0.08 m; its point counts are ignored, they come from nerf_densities).
    """
    n = len(nerf_densities)
    codes = _strings(object_codes)
    arrays = {
        "/y_PGS": np.asarray(y_PGS, np.float32), "/y_pick": np.asarray(y_pick, np.float32),
        "/y_coll": np.asarray(y_coll, np.float32), "/nerf_config": _strings([""] * n if nerf_configs is None else nerf_configs),
        "/object_code": codes, "/object_scale": np.asarray(np.ones(n) if object_scales is None else object_scales, np.float32),
        "/object_state": np.asarray(np.tile(IDENTITY_OBJECT_STATE, (n, 1)) if object_states is None else object_states,
                                    np.float32),
        "/grasp_idx": np.asarray(_grasp_idx_within_object(codes) if grasp_idx is None else grasp_idx, np.int32),
        "/grasp_transforms": np.asarray(T_object_finger, np.float32),
    }
    if nerf_densities_global is not None or nerf_densities_global_idx is not None:
        arrays["/nerf_densities_global"] = np.asarray(nerf_densities_global, np.float32)
        arrays["/nerf_densities_global_idx"] = np.asarray(nerf_densities_global_idx).astype(np.int32)
    if grasp_configs is not None:
        arrays["/grasp_configs"] = np.asarray(grasp_configs, np.float32)
    densities = np.asarray(nerf_densities, np.float32)
    extents = finger_grid or FingerGridConfig()
    attrs = {"num_data_points": n, "finger_grid_width_m": extents.width_m, "finger_grid_height_m": extents.height_m,
             "finger_grid_depth_m": extents.depth_m, "global_grid_size_m": float(global_grid_size_m)}
    _validate_nerf(arrays, densities.shape, attrs, str(path))
    if not np.isfinite(densities).all():
        raise DatasetError(f"{path}: /nerf_densities: {int((~np.isfinite(densities)).sum())} NaN or infinite values")
    return _write_atomically(Path(path), {"/nerf_densities": densities, **arrays}, attrs)


def _alpha(sigma: torch.Tensor, delta_m: float) -> torch.Tensor:
    return 1.0 - torch.exp(-delta_m * sigma.clamp(min=0.0))


def finger_grid_inputs(nerf_densities: torch.Tensor, T_object_finger: torch.Tensor,
                       config: FingerGridConfig) -> torch.Tensor:
    """NeRF evaluator finger input: (B, 4, nx, ny, nz) sigma (1/m) and (B, 4, 4, 4) finger frames ->
    (B, 4, 4 [alpha, x, y, z], nx, ny, nz), alpha = 1 - exp(-config.delta_m * sigma), xyz the grid points in
    the object frame (metres), as the public code's alphas with coordinates."""
    local = finger_grid_points_finger_m(config, device=nerf_densities.device).to(T_object_finger.dtype)
    R, t = T_object_finger[..., :3, :3], T_object_finger[..., :3, 3]
    points = torch.einsum("bfij,xyzj->bfixyz", R, local) + t[..., None, None, None]
    return torch.cat([_alpha(nerf_densities, config.delta_m).unsqueeze(2), points.to(nerf_densities.dtype)], dim=2)


def global_grid_inputs(nerf_densities_global: torch.Tensor, config: GlobalGridConfig) -> torch.Tensor:
    """NeRF evaluator global input: (O, R, R, R) sigma (1/m) -> (O, 4 [alpha, x, y, z], R, R, R), the grid a cube of
    config.size_m centred on the object frame origin, alpha with delta = config.delta_m (public: 0.01 m)."""
    points = global_grid_points_m((0.0, 0.0, 0.0), config, device=nerf_densities_global.device)
    points = points.permute(3, 0, 1, 2).to(nerf_densities_global.dtype).expand(len(nerf_densities_global), -1, -1, -1, -1)
    return torch.cat([_alpha(nerf_densities_global, config.delta_m).unsqueeze(1), points], dim=1)
