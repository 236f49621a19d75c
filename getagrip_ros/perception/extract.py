"""Object representations for the planners, from a trained NeRF or from posed depth images.

Both backends give the same :class:`ObjectRepresentation`: a cleaned object cloud, its BPS, a collision
mesh (.obj), the object frame and, for the NeRF backend, the density function for the NeRF evaluator.
Frames: world = robot base, z up, table top at z = 0; the object frame O has the world's axes and its origin
on the table below the object's centroid (the paper's By / Oy origin, z up). Metres.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import trimesh

from getagrip_ros.perception.bps import BpsEncoding, encode_bps
from getagrip_ros.perception.density import (DensityFn, MeshConfig, ObjectBox, density_centroid, extract_mesh,
                                             write_mesh_obj)
from getagrip_ros.perception.depth_fusion import DepthFusionConfig, fuse_depth
from getagrip_ros.perception.point_cloud import CloudCleaningConfig, clean_object_cloud
from getagrip_ros.status import StageError, StageTimer, StatusCode

ProgressFn = Callable[[str, float], None]
"""Called with (stage name, fraction of the extraction done)."""


@dataclass(frozen=True)
class ExtractionConfig:
    box: ObjectBox = field(default_factory=ObjectBox)
    """Object box around the object origin on the table (paper: [-0.2,-0.2,0] x [0.2,0.2,0.3] m)."""
    cleaning: CloudCleaningConfig = field(default_factory=lambda: CloudCleaningConfig(component_link_m=0.01))
    """open3d statistical 20/2.0 and radius 16/0.05 as published; the component links are the public code's
    1 cm: with 5000 points on an object the points are ~2-3 mm apart, so the paper's 1 mm leaves a few points."""
    mesh: MeshConfig = field(default_factory=MeshConfig)
    """Marching cubes at density 15, components with < 31 edges dropped (NeRF backend)."""
    centroid_resolution: int = 100
    """Grid points per axis for the density centroid (public code: 100^3 in the box)."""
    centroid_threshold: float = 15.0
    fusion: DepthFusionConfig = field(default_factory=DepthFusionConfig)
    """Depth backend: TSDF fusion settings."""
    min_mesh_component_faces: int = 20
    """Depth backend: mesh components with fewer faces are dropped (fusion noise)."""


@dataclass
class ObjectRepresentation:
    points_world_m: np.ndarray
    """(N, 3) cleaned object cloud."""
    bps: BpsEncoding
    """4096 distances (m) from the fixed basis, and the basis frame's origin."""
    T_world_object: np.ndarray
    """(4, 4) object frame: world axes, origin on the table below the centroid."""
    centroid_world_m: np.ndarray
    """(3,) density centroid (NeRF) or cloud centroid (depth)."""
    mesh: trimesh.Trimesh
    """Collision mesh, world frame."""
    mesh_path: Path | None
    backend: str
    """"nerf" or "depth"."""
    cleaning_counts: dict[str, int]
    timings_s: dict[str, float]
    density_fn: DensityFn | None = None
    """World-frame NeRF density (NeRF backend only)."""


def _object_frame(centroid_world_m: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:2, 3] = centroid_world_m[:2]
    return T


def _clean(points_world_m: np.ndarray, origin_world_m: np.ndarray, config: ExtractionConfig):
    try:
        return clean_object_cloud(points_world_m, origin_world_m, config.cleaning)
    except ValueError as exc:
        raise StageError(StatusCode.NO_RESULT, str(exc)) from exc


def extract_from_nerf(nerf, cameras, capture_centre_world_m: np.ndarray, output_dir: str | Path | None = None,
                      config: ExtractionConfig = ExtractionConfig(), cloud_config=None,
                      progress: ProgressFn | None = None) -> ObjectRepresentation:
    """NeRF backend: centroid of density > 15, opaque depth points, cleaning, BPS, marching-cubes mesh.

    Args:
        nerf: a :class:`~getagrip_ros.perception.nerf.model.LoadedNerf`.
        cameras: :class:`~getagrip_ros.perception.nerf.nerf_cloud.CaptureCameras` the cloud rays come from.
        capture_centre_world_m: where the object was during capture; the object box is first placed here.

    Raises:
        StageError: NO_RESULT when the NeRF has no surface in the box or too few points survive cleaning.
    """
    from getagrip_ros.perception.nerf.nerf_cloud import NerfCloudConfig, nerf_point_cloud

    timer, report = StageTimer(), progress or (lambda stage, fraction: None)
    centre = np.asarray(capture_centre_world_m, float)
    with timer.stage("centroid"):
        report("centroid", 0.0)
        lower, upper = config.box.bounds_world(tuple(centre[:2]))
        try:
            centroid = density_centroid(nerf.density_fn, lower, upper, config.centroid_resolution,
                                        config.centroid_threshold).double().numpy()
        except ValueError as exc:
            raise StageError(StatusCode.NO_RESULT, str(exc)) from exc
    T_world_object = _object_frame(centroid)
    origin = T_world_object[:3, 3]
    with timer.stage("point_cloud"):
        report("point_cloud", 0.2)
        cloud_config = cloud_config or NerfCloudConfig(box_min_m=config.box.min_m, box_max_m=config.box.max_m)
        raw = nerf_point_cloud(nerf, cameras, origin, cloud_config)
        cleaned = _clean(raw, origin, config)
    with timer.stage("bps"):
        report("bps", 0.6)
        bps = encode_bps(cleaned.points_m, origin)
    with timer.stage("mesh"):
        report("mesh", 0.7)
        lower, upper = config.box.bounds_world(tuple(origin[:2]))
        try:
            mesh = extract_mesh(nerf.density_fn, lower, upper, config.mesh)
        except ValueError as exc:
            raise StageError(StatusCode.NO_RESULT, str(exc)) from exc
        mesh_path = write_mesh_obj(mesh, Path(output_dir) / "object_mesh.obj") if output_dir else None
    report("done", 1.0)
    return ObjectRepresentation(cleaned.points_m, bps, T_world_object, centroid, mesh, mesh_path, "nerf",
                                cleaned.counts, timer.durations_s, nerf.density_fn)


def extract_from_depth(depths_m, Ks, T_world_cameras, capture_centre_world_m: np.ndarray,
                       output_dir: str | Path | None = None, config: ExtractionConfig = ExtractionConfig(),
                       progress: ProgressFn | None = None) -> ObjectRepresentation:
    """Depth backend: TSDF fusion of posed depth images, then the same cleaning, BPS and a fused mesh.

    Raises:
        StageError: INVALID_GOAL for missing depth, NO_RESULT when nothing is above the table in the box.
    """
    timer, report = StageTimer(), progress or (lambda stage, fraction: None)
    if depths_m is None or len(depths_m) == 0:
        raise StageError(StatusCode.INVALID_GOAL, "the depth backend needs depth images; the dataset has none "
                                                  "(capture with depth, or use the NeRF backend)")
    centre = np.asarray(capture_centre_world_m, float)
    with timer.stage("fusion"):
        report("fusion", 0.0)
        try:
            fused = fuse_depth(list(depths_m), list(Ks), list(T_world_cameras), centre, config.fusion)
        except ValueError as exc:
            raise StageError(StatusCode.NO_RESULT, str(exc)) from exc
    with timer.stage("point_cloud"):
        report("point_cloud", 0.5)
        cleaned = _clean(fused.points_m, centre, config)
        centroid = cleaned.points_m.mean(axis=0)
        T_world_object = _object_frame(centroid)
    with timer.stage("bps"):
        report("bps", 0.7)
        bps = encode_bps(cleaned.points_m, T_world_object[:3, 3])
    with timer.stage("mesh"):
        report("mesh", 0.8)
        mesh = trimesh.Trimesh(fused.mesh_vertices_m, fused.mesh_faces, process=True)
        parts = [p for p in mesh.split(only_watertight=False) if len(p.faces) >= config.min_mesh_component_faces]
        mesh = trimesh.util.concatenate(parts) if parts else mesh
        mesh_path = write_mesh_obj(mesh, Path(output_dir) / "object_mesh.obj") if output_dir else None
    report("done", 1.0)
    return ObjectRepresentation(cleaned.points_m, bps, T_world_object, centroid, mesh, mesh_path, "depth",
                                cleaned.counts, timer.durations_s)


def representation_summary(rep: ObjectRepresentation) -> dict:
    """JSON-friendly summary (no arrays beyond 3-vectors)."""
    return {"backend": rep.backend, "num_points": int(len(rep.points_world_m)),
            "centroid_world_m": np.round(rep.centroid_world_m, 5).tolist(),
            "T_world_object": np.round(rep.T_world_object, 6).tolist(), "mesh_path": str(rep.mesh_path or ""),
            "mesh_watertight": bool(rep.mesh.is_watertight), "mesh_faces": int(len(rep.mesh.faces)),
            "cleaning_counts": rep.cleaning_counts, "timings_s": {k: round(v, 3) for k, v in rep.timings_s.items()}}


BACKENDS = ("nerf", "depth")


@dataclass(frozen=True)
class ObjectExtractorConfig:
    """How an extractor (the extract_object node, the in-process stack) serves requests."""

    backend: str = "depth"
    """Backend for requests that name none: "depth" (fast, needs depth images) or "nerf"."""
    device: str = "cpu"
    """Where NeRF queries run: "cpu" or "cuda"."""
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)


def extract_and_save(backend: str, output_dir: str | Path, nerf_config_path: str | Path = "",
                     dataset_dir: str | Path = "", config: ObjectExtractorConfig = ObjectExtractorConfig(),
                     progress: ProgressFn | None = None) -> ObjectRepresentation:
    """`extract_object` with the extractor's defaults, then the summary (object.json) and a picture (object.png)
    written to output_dir; the cloud is returned as float32 (as it travels in a PointCloud2)."""
    import json

    from getagrip_ros.viz.grasp_image import draw_object

    if not str(output_dir):
        raise StageError(StatusCode.INVALID_GOAL, "output_dir must be given")
    rep = extract_object(backend or config.backend, output_dir, nerf_config_path, dataset_dir, config.extraction,
                         config.device, progress)
    rep.points_world_m = np.asarray(rep.points_world_m, dtype=np.float32)
    (Path(output_dir) / "object.json").write_text(json.dumps(representation_summary(rep), indent=1))
    draw_object(rep.points_world_m, Path(output_dir) / "object.png",
                f"{rep.backend} backend: {len(rep.points_world_m)} cleaned points (colour = height)")
    return rep


def capture_centre(dataset) -> np.ndarray:
    """Where the object was during capture: the recorded spiral centre, else below the mean camera position."""
    recorded = dataset.metadata.get("object_position_m")
    centre = np.asarray(recorded if recorded is not None else dataset.T_world_camera_optical[:, :3, 3].mean(0), float)
    return np.array([centre[0], centre[1], 0.0])


def extract_object(backend: str, output_dir: str | Path, nerf_config_path: str | Path = "",
                   dataset_dir: str | Path = "", config: ExtractionConfig = ExtractionConfig(), device: str = "cpu",
                   progress: ProgressFn | None = None) -> ObjectRepresentation:
    """Either backend from files: a NeRF's config.yml (+ its capture dataset) or a dataset with depth images.

    Raises:
        StageError: INVALID_GOAL for an unknown backend or missing/unreadable inputs; NO_RESULT when no object
            surface is found.
    """
    from getagrip_ros.perception.nerf_dataset import read_nerf_dataset

    if backend not in BACKENDS:
        raise StageError(StatusCode.INVALID_GOAL, f"unknown backend {backend!r}; use one of {BACKENDS}")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    nerf = None
    if backend == "nerf":
        if not nerf_config_path:
            raise StageError(StatusCode.INVALID_GOAL, "the NeRF backend needs nerf_config_path (from train_nerf)")
        from getagrip_ros.perception.nerf.model import load_nerf

        nerf = load_nerf(nerf_config_path, device)
        dataset_dir = dataset_dir or nerf.dataset_dir
    if not dataset_dir:
        raise StageError(StatusCode.INVALID_GOAL, "no capture dataset given (dataset_dir)")
    try:
        dataset = read_nerf_dataset(dataset_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise StageError(StatusCode.INVALID_GOAL, f"cannot read the capture dataset: {exc}") from exc
    if nerf is not None:
        from getagrip_ros.perception.nerf.nerf_cloud import CaptureCameras

        height, width = dataset.rgb.shape[1:3]
        cameras = CaptureCameras(dataset.T_world_camera_optical, dataset.K, width, height)
        return extract_from_nerf(nerf, cameras, capture_centre(dataset), output_dir, config, progress=progress)
    return extract_from_depth(dataset.depth_m, [dataset.K] * len(dataset), dataset.T_world_camera_optical,
                              capture_centre(dataset), output_dir, config, progress)
