"""Posed images as a nerfstudio dataset: write it frame by frame, read it back.

Layout (all paths in transforms.json relative to the dataset folder)::

    images/frame_00000.png    RGB, 8 bit
    depth/frame_00000.png     optional, 16-bit grey, millimetres along the optical axis, 0 = no depth
    transforms.json           intrinsics (one pinhole camera for the whole dataset, camera_model "OPENCV"
                              with zero distortion), frames [{file_path, transform_matrix, depth_file_path?}],
                              depth_unit_scale_factor 0.001 when there is depth, and a "getagrip" block of
                              metadata that nerfstudio ignores (frames, units, how the capture went)

Poses: ``transform_matrix`` is nerfstudio's camera-to-world pose in the OpenGL camera convention
(x right, y up, z backward): ``T_world_camera_opengl = T_world_camera_optical @ diag(1, -1, -1, 1)``
where the optical frame is the ROS one (x right, y down, z forward). The world frame is this stack's
(robot base, z up, table top at z = 0); metres.

Completeness: images are written first and transforms.json last, atomically (temporary file, then a
rename). A folder with frames but no transforms.json is an incomplete dataset (the writer stopped
before finishing); the reader refuses it with a FileNotFoundError that says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from getagrip_ros.serialization import json_default

TRANSFORMS_FILE = "transforms.json"
IMAGES_DIR = "images"
DEPTH_DIR = "depth"
DEPTH_UNIT_SCALE_FACTOR = 0.001
"""Depth PNG value x this = metres (the PNGs hold millimetres)."""
MAX_DEPTH_M = 65.535
"""Largest depth a 16-bit millimetre PNG holds; farther depths are stored as 0 (no depth)."""
METADATA_KEY = "getagrip"
FORMAT_VERSION = 1

#: T_camera_optical_camera_opengl: flips y and z (ROS optical <-> OpenGL camera axes); its own inverse.
OPTICAL_TO_OPENGL = np.diag([1.0, -1.0, -1.0, 1.0])

_ROTATION_TOLERANCE = 1e-4


def frame_name(index: int) -> str:
    """File name of frame `index` (the same in images/ and depth/)."""
    return f"frame_{index:05d}.png"


def nerfstudio_transform_from_optical(T_world_camera_optical: np.ndarray) -> np.ndarray:
    """(..., 4, 4) ROS optical camera poses -> nerfstudio transform_matrix (OpenGL camera axes)."""
    return np.asarray(T_world_camera_optical, dtype=float) @ OPTICAL_TO_OPENGL


def optical_from_nerfstudio_transform(transform_matrix: np.ndarray) -> np.ndarray:
    """(..., 4, 4) nerfstudio transform_matrix (OpenGL camera axes) -> ROS optical camera poses."""
    return np.asarray(transform_matrix, dtype=float) @ OPTICAL_TO_OPENGL


# -- validation ------------------------------------------------------------------------------------
def validate_intrinsics(K: np.ndarray, width_px: int, height_px: int) -> np.ndarray:
    """(3, 3) float64 copy of a pinhole K (no skew, principal point inside the image); ValueError otherwise."""
    K = np.asarray(K, dtype=float)
    if K.shape != (3, 3):
        raise ValueError(f"intrinsics K must be (3, 3), got {K.shape}")
    if not np.isfinite(K).all():
        raise ValueError("intrinsics K has NaN or inf")
    if not (K[0, 0] > 0 and K[1, 1] > 0):
        raise ValueError(f"intrinsics K: focal lengths must be > 0 px, got fx = {K[0, 0]}, fy = {K[1, 1]}")
    if abs(K[0, 1]) > 1e-9 or abs(K[1, 0]) > 1e-9 or not np.allclose(K[2], [0.0, 0.0, 1.0]):
        raise ValueError(f"intrinsics K must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] (no skew), got {K.tolist()}")
    if not (0 < K[0, 2] < width_px and 0 < K[1, 2] < height_px):
        raise ValueError(f"intrinsics K: principal point ({K[0, 2]}, {K[1, 2]}) px lies outside the "
                         f"{width_px} x {height_px} image")
    return K


def validate_pose(T: np.ndarray, what: str = "pose") -> np.ndarray:
    """(4, 4) float64 copy of a rigid transform; ValueError for NaN, a non-rotation or a bad last row."""
    T = np.asarray(T, dtype=float)
    if T.shape != (4, 4):
        raise ValueError(f"{what} must be (4, 4), got {T.shape}")
    if not np.isfinite(T).all():
        raise ValueError(f"{what} has NaN or inf")
    if not np.allclose(T[3], [0.0, 0.0, 0.0, 1.0]):
        raise ValueError(f"{what}: last row must be [0, 0, 0, 1], got {T[3].tolist()}")
    R = T[:3, :3]
    if np.abs(R.T @ R - np.eye(3)).max() > _ROTATION_TOLERANCE or np.linalg.det(R) <= 0:
        raise ValueError(f"{what} is not rigid: its rotation part is not orthonormal with determinant +1")
    return T


def _validate_rgb(rgb: np.ndarray, what: str) -> np.ndarray:
    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.shape[0] == 0 or rgb.shape[1] == 0:
        raise ValueError(f"{what} must be (H, W, 3) RGB, got shape {rgb.shape}")
    if rgb.dtype != np.uint8:
        raise ValueError(f"{what} must be uint8, got {rgb.dtype}")
    return rgb


def depth_to_millimetres(depth_m: np.ndarray) -> np.ndarray:
    """(H, W) metres -> uint16 millimetres; NaN/inf, 0 and depths beyond MAX_DEPTH_M become 0 (no depth)."""
    depth = np.asarray(depth_m, dtype=np.float64)
    finite = np.isfinite(depth)
    if (depth[finite] < 0).any():
        raise ValueError("depth has negative values (metres along the optical axis must be >= 0)")
    mm = np.where(finite, np.round(depth * 1000.0), 0.0)
    mm[mm > 65535] = 0.0
    return mm.astype(np.uint16)


# -- writing ---------------------------------------------------------------------------------------
class NerfDatasetWriter:
    """Writes a dataset frame by frame; :meth:`finish` writes transforms.json, which makes it complete.

    Args:
        dataset_dir: the dataset folder (created if missing).
        overwrite: replace a dataset already there (its transforms.json is removed first, so an
            interrupted overwrite is recognisably incomplete). Without it a folder that holds a
            dataset, complete or not, is refused with FileExistsError.
    """

    def __init__(self, dataset_dir: str | Path, overwrite: bool = False) -> None:
        self.dataset_dir = Path(dataset_dir)
        if self.dataset_dir.exists() and not self.dataset_dir.is_dir():
            raise FileExistsError(f"{self.dataset_dir} exists and is not a folder")
        old = self._existing_files()
        if old and not overwrite:
            kind = "a dataset" if (self.dataset_dir / TRANSFORMS_FILE).exists() else "an incomplete dataset"
            raise FileExistsError(f"{self.dataset_dir} already holds {kind} ({len(old)} files); "
                                  "choose another folder or allow overwriting")
        for path in sorted(old, key=lambda p: p.name != TRANSFORMS_FILE):  # transforms.json goes first
            path.unlink()
        self._created_dir = not self.dataset_dir.exists()
        (self.dataset_dir / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
        self._written: list[Path] = []
        self._poses: list[np.ndarray] = []
        self._shape: tuple[int, int] | None = None
        self._with_depth: bool | None = None
        self.finished = False

    def _existing_files(self) -> list[Path]:
        if not self.dataset_dir.is_dir():
            return []
        files = [self.dataset_dir / TRANSFORMS_FILE] if (self.dataset_dir / TRANSFORMS_FILE).exists() else []
        for sub in (IMAGES_DIR, DEPTH_DIR):
            files += sorted((self.dataset_dir / sub).glob("frame_*.png"))
        return files

    @property
    def num_frames(self) -> int:
        return len(self._poses)

    @property
    def image_shape(self) -> tuple[int, int] | None:
        """(H, W) of the frames written so far."""
        return self._shape

    def add(self, rgb: np.ndarray, T_world_camera_optical: np.ndarray, depth_m: np.ndarray | None = None) -> int:
        """Write one frame (RGB, optional depth in metres); returns its index. ValueError if it does not fit."""
        if self.finished:
            raise RuntimeError("the dataset is finished; no more frames can be added")
        index = len(self._poses)
        rgb = _validate_rgb(rgb, f"image {index}")
        T = validate_pose(T_world_camera_optical, f"camera pose {index}")
        if self._shape is not None and rgb.shape[:2] != self._shape:
            raise ValueError(f"image {index} is {rgb.shape[1]} x {rgb.shape[0]} px, the dataset's are "
                             f"{self._shape[1]} x {self._shape[0]}")
        if self._with_depth is not None and (depth_m is not None) != self._with_depth:
            raise ValueError(f"image {index} {'has' if depth_m is not None else 'lacks'} depth, unlike the dataset's first")
        depth_mm = None
        if depth_m is not None:
            if np.shape(depth_m) != rgb.shape[:2]:
                raise ValueError(f"depth {index} has shape {np.shape(depth_m)}, its image {rgb.shape[:2]}")
            depth_mm = depth_to_millimetres(depth_m)
        name = frame_name(index)
        path = self.dataset_dir / IMAGES_DIR / name
        Image.fromarray(np.ascontiguousarray(rgb)).save(path, compress_level=3)
        self._written.append(path)
        if depth_mm is not None:
            (self.dataset_dir / DEPTH_DIR).mkdir(exist_ok=True)
            path = self.dataset_dir / DEPTH_DIR / name
            Image.fromarray(depth_mm).save(path, compress_level=3)
            self._written.append(path)
        self._shape, self._with_depth = rgb.shape[:2], depth_m is not None
        self._poses.append(T)
        return index

    def finish(self, K: np.ndarray, metadata: dict[str, Any] | None = None) -> Path:
        """Write transforms.json (atomically) for the frames added; returns its path.

        Args:
            K: (3, 3) intrinsics of every frame, pixels.
            metadata: JSON-serialisable extras stored under "getagrip" (nerfstudio ignores them).
        """
        if not self._poses:
            raise ValueError("a dataset needs at least one frame")
        height, width = self._shape
        K = validate_intrinsics(K, width, height)
        frames = []
        for i, T in enumerate(self._poses):
            frame = {"file_path": f"{IMAGES_DIR}/{frame_name(i)}",
                     "transform_matrix": nerfstudio_transform_from_optical(T).tolist()}
            if self._with_depth:
                frame["depth_file_path"] = f"{DEPTH_DIR}/{frame_name(i)}"
            frames.append(frame)
        transforms: dict[str, Any] = {
            "camera_model": "OPENCV",
            "fl_x": float(K[0, 0]), "fl_y": float(K[1, 1]), "cx": float(K[0, 2]), "cy": float(K[1, 2]),
            "w": int(width), "h": int(height),
            "k1": 0.0, "k2": 0.0, "p1": 0.0, "p2": 0.0,
        }
        if self._with_depth:
            transforms["depth_unit_scale_factor"] = DEPTH_UNIT_SCALE_FACTOR
        transforms["frames"] = frames
        transforms[METADATA_KEY] = {
            "format_version": FORMAT_VERSION,
            "frame": "world",
            "units": "metres",
            "pose_convention": "transform_matrix = T_world_camera_optical @ diag(1, -1, -1, 1): camera-to-world, "
                               "OpenGL camera axes (x right, y up, z backward); optical = ROS (x right, y down, z forward)",
            "num_images": len(frames),
            "with_depth": bool(self._with_depth),
            **(metadata or {}),
        }
        path = self.dataset_dir / TRANSFORMS_FILE
        tmp = path.with_name(f".{TRANSFORMS_FILE}.tmp")
        with open(tmp, "w") as f:
            json.dump(transforms, f, indent=1, default=json_default)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.finished = True
        return path

    def discard(self) -> None:
        """Delete the frames written so far (and the folders this writer created, when left empty)."""
        for path in self._written:
            path.unlink(missing_ok=True)
        self._written.clear()
        self._poses.clear()
        for folder in (self.dataset_dir / DEPTH_DIR, self.dataset_dir / IMAGES_DIR):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        if self._created_dir and self.dataset_dir.is_dir() and not any(self.dataset_dir.iterdir()):
            self.dataset_dir.rmdir()


def write_nerf_dataset(dataset_dir: str | Path, rgb: Sequence[np.ndarray] | np.ndarray, K: np.ndarray,
                       T_world_camera_optical: np.ndarray, depth_m: Sequence[np.ndarray] | np.ndarray | None = None,
                       metadata: dict[str, Any] | None = None, overwrite: bool = False) -> Path:
    """Write a whole dataset at once; everything is checked before any file is written.

    Args:
        rgb: N images (H, W, 3) uint8, all the same size.
        K: (3, 3) intrinsics, pixels.
        T_world_camera_optical: (N, 4, 4) camera poses (ROS optical frame) in the world.
        depth_m: None or N depth images (H, W), metres along the optical axis, 0 = no depth.
        metadata: extras stored under "getagrip" in transforms.json.
        overwrite: replace a dataset already in dataset_dir.

    Returns:
        The path of transforms.json.

    Raises:
        ValueError: inconsistent or invalid inputs (the message says which).
        FileExistsError: dataset_dir already holds a dataset and overwrite is False.
    """
    images = [_validate_rgb(im, f"image {i}") for i, im in enumerate(rgb)]
    if not images:
        raise ValueError("a dataset needs at least one image")
    shapes = {im.shape for im in images}
    if len(shapes) != 1:
        raise ValueError(f"images differ in size: {sorted(shapes)}")
    poses = np.asarray(T_world_camera_optical, dtype=float)
    if poses.shape != (len(images), 4, 4):
        raise ValueError(f"{len(images)} images need ({len(images)}, 4, 4) poses, got {poses.shape}")
    for i, T in enumerate(poses):
        validate_pose(T, f"camera pose {i}")
    height, width = images[0].shape[:2]
    validate_intrinsics(K, width, height)
    depths = None
    if depth_m is not None:
        depths = list(depth_m)
        if len(depths) != len(images):
            raise ValueError(f"{len(images)} images but {len(depths)} depth images")
        for i, d in enumerate(depths):
            if np.shape(d) != (height, width):
                raise ValueError(f"depth {i} has shape {np.shape(d)}, the images ({height}, {width})")
            depth_to_millimetres(d)
    writer = NerfDatasetWriter(dataset_dir, overwrite=overwrite)
    for i, image in enumerate(images):
        writer.add(image, poses[i], None if depths is None else depths[i])
    return writer.finish(K, metadata)


# -- reading ---------------------------------------------------------------------------------------
@dataclass
class NerfDataset:
    """A dataset read back: images, optional depth, intrinsics and poses in this stack's conventions."""

    rgb: np.ndarray
    """(N, H, W, 3) uint8."""
    depth_m: np.ndarray | None
    """(N, H, W) float32 metres along the optical axis, 0 = no depth; None when the dataset has none."""
    K: np.ndarray
    """(3, 3) intrinsics, pixels."""
    T_world_camera_optical: np.ndarray
    """(N, 4, 4) ROS optical camera poses in the world (converted back from transform_matrix)."""
    file_paths: list[str]
    """Image paths as written in transforms.json (relative to the dataset folder)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The "getagrip" block of transforms.json ({} when absent)."""

    def __len__(self) -> int:
        return len(self.file_paths)


def _read_png(path: Path, what: str) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"{what} listed in {TRANSFORMS_FILE} is missing: {path}")
    with Image.open(path) as im:
        return np.array(im)


def read_nerf_dataset(dataset_dir: str | Path) -> NerfDataset:
    """Read a dataset written by this module (or any single-camera pinhole nerfstudio dataset).

    Raises:
        FileNotFoundError: no transforms.json (not a dataset, or an incomplete one) or a listed file is missing.
        ValueError: transforms.json is malformed, or the images do not match it.
    """
    root = Path(dataset_dir)
    path = root / TRANSFORMS_FILE
    if not path.is_file():
        partial = any((root / IMAGES_DIR).glob("frame_*.png")) if (root / IMAGES_DIR).is_dir() else False
        raise FileNotFoundError(f"{root} has no {TRANSFORMS_FILE}: "
                                + ("an incomplete dataset (the capture did not finish)" if partial else "not a dataset"))
    try:
        meta = json.loads(path.read_text())
        width, height = int(meta["w"]), int(meta["h"])
        K = np.array([[meta["fl_x"], 0.0, meta["cx"]], [0.0, meta["fl_y"], meta["cy"]], [0.0, 0.0, 1.0]], dtype=float)
        frames = meta["frames"]
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path} is malformed: {type(err).__name__}: {err}") from err
    model = meta.get("camera_model", "OPENCV")
    distortion = [float(meta.get(k, 0.0)) for k in ("k1", "k2", "k3", "k4", "p1", "p2")]
    if model not in ("OPENCV", "PINHOLE") or any(distortion):
        raise ValueError(f"{path}: only undistorted pinhole cameras are supported, got {model} with {distortion}")
    validate_intrinsics(K, width, height)
    if not isinstance(frames, list) or not frames:
        raise ValueError(f"{path} lists no frames")
    per_frame = sorted({k for f in frames for k in ("fl_x", "fl_y", "cx", "cy", "w", "h") if k in f})
    if per_frame:
        raise ValueError(f"{path}: per-frame intrinsics ({per_frame}) are not supported")
    with_depth = all("depth_file_path" in f for f in frames)
    scale = float(meta.get("depth_unit_scale_factor", DEPTH_UNIT_SCALE_FACTOR))
    rgb, depth, poses, names = [], [], [], []
    for i, f in enumerate(frames):
        try:
            T = optical_from_nerfstudio_transform(np.array(f["transform_matrix"], dtype=float))
            names.append(str(f["file_path"]))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: frame {i} is malformed: {type(err).__name__}: {err}") from err
        poses.append(validate_pose(T, f"{path}: frame {i} transform_matrix"))
        image = _read_png(root / names[-1], f"image of frame {i}")
        if image.ndim == 3 and image.shape[2] == 4:
            image = image[..., :3]
        if image.shape != (height, width, 3) or image.dtype != np.uint8:
            raise ValueError(f"{root / names[-1]}: expected {width} x {height} RGB uint8, got {image.shape} {image.dtype}")
        rgb.append(image)
        if with_depth:
            d = _read_png(root / str(f["depth_file_path"]), f"depth of frame {i}")
            if d.shape != (height, width):
                raise ValueError(f"{root / f['depth_file_path']}: expected {width} x {height}, got {d.shape}")
            depth.append(d.astype(np.float32) * np.float32(scale))
    return NerfDataset(np.stack(rgb), np.stack(depth) if with_depth else None, K, np.stack(poses), names,
                       dict(meta.get(METADATA_KEY, {})))
