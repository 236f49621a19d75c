"""What the planner knows about the object, from a point cloud, a BPS, a trained NeRF or a surface mesh.

Every learned model works in the public code's object frame Oy: y up, origin at the object centroid,
axes the world's rotated by Rx(+90 deg). ``T_frame_Oy`` places it in the request's frame (z up, table top
at z = 0), which is also the frame the returned grasps are expressed in.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np
import torch

from getagrip_ros.grasp.frames import T_zup_yup, invert_transform
from getagrip_ros.perception.bps import encode_bps
from getagrip_ros.status import StageError, StatusCode

if TYPE_CHECKING:
    import trimesh

    from getagrip_ros.perception.density import GlobalGridConfig


@dataclass
class PlanningObject:
    frame_id: str
    """Frame of the object data and of the returned grasps (z up, table top at z = 0)."""
    T_frame_Oy: torch.Tensor
    """(4, 4) float64 pose of the model frame Oy (origin at the centroid)."""
    bps_m: np.ndarray
    """(4096,) distances from the public basis (placed in By = Oy moved down to the table) to the object."""
    points_m: np.ndarray | None = None
    """(N, 3) object points in frame_id, when known."""
    density_fn: Callable[[torch.Tensor], torch.Tensor] | None = None
    """NeRF density at (..., 3) points of frame_id (NeRF input only)."""
    mesh: "trimesh.Trimesh | None" = None
    """The object's surface mesh in frame_id, when given (the graspd sampler builds its SDF from it)."""

    @property
    def centroid_m(self) -> np.ndarray:
        return self.T_frame_Oy[:3, 3].numpy()


def nerf_global_grid(obj: PlanningObject, config: "GlobalGridConfig") -> torch.Tensor:
    """(4, R, R, R) float32: the NeRF's opacity on a cube around the Oy origin (the centroid), indexed along Oy's axes,
    with the points' Oy coordinates as channels 1-3 (the NeRF evaluator's and the NeRF sampler's global input)."""
    from getagrip_ros.perception.density import global_density_grid

    if obj.density_fn is None:
        raise StageError(StatusCode.INVALID_GOAL, "a NeRF global grid needs a NeRF object source")
    T_Oy_frame = invert_transform(obj.T_frame_Oy).float()
    glob = global_density_grid(obj.density_fn, obj.T_frame_Oy[:3, 3].float(), config,
                               R_world_grid=obj.T_frame_Oy[:3, :3].numpy())
    coords = glob.points_world_m @ T_Oy_frame[:3, :3].T + T_Oy_frame[:3, 3]
    return torch.cat([glob.alpha[None], coords.permute(3, 0, 1, 2)]).float()


def T_frame_Oy_at(centroid_m: np.ndarray) -> torch.Tensor:
    """(4, 4) pose of Oy with its origin at centroid_m of a z-up frame."""
    T = T_zup_yup()
    T[:3, 3] = torch.as_tensor(np.asarray(centroid_m, dtype=float))
    return T


def object_from_points(points_m: np.ndarray, frame_id: str, bps_max_points: int = 0) -> PlanningObject:
    """Centroid = mean of the cloud; BPS measured from the table below it, from at most `bps_max_points` of the points
    (a fixed random subset, the same for the same cloud; 0 = all)."""
    pts = np.asarray(points_m, dtype=float)
    centroid = pts.mean(axis=0)
    bps = encode_bps(bps_points(pts, bps_max_points), np.array([centroid[0], centroid[1], 0.0]))
    return PlanningObject(frame_id, T_frame_Oy_at(centroid), bps.distances_m, points_m=pts)


def bps_points(points_m: np.ndarray, max_points: int) -> np.ndarray:
    """At most `max_points` of the points (0 = all): a fixed random subset in random order, as the first points of
    the public code's randomly ordered cloud are."""
    if max_points <= 0 or len(points_m) <= max_points:
        return points_m
    return points_m[np.random.default_rng(0).permutation(len(points_m))[:max_points]]


def object_from_bps(bps_m: np.ndarray, frame_id: str, centroid_height_m: float) -> PlanningObject:
    """BPS frame B: origin on the table below the centroid, which sits ``centroid_height_m`` above it."""
    return PlanningObject(frame_id, T_frame_Oy_at(np.array([0.0, 0.0, centroid_height_m])),
                          np.asarray(bps_m, dtype=np.float32))


def object_from_nerf(nerf_config_path: str, device: str,
                     progress: Callable[[str, float], None] | None = None) -> PlanningObject:
    """Density centroid, cleaned NeRF cloud and BPS from a trained NeRF (world frame), as perception does."""
    from getagrip_ros.perception.extract import extract_object

    with tempfile.TemporaryDirectory(prefix="plan_grasp_nerf_") as tmp:
        rep = extract_object("nerf", tmp, nerf_config_path=nerf_config_path, device=device, progress=progress)
    if rep.density_fn is None:
        raise StageError(StatusCode.INTERNAL_ERROR, "the NeRF extraction returned no density function")
    return PlanningObject("world", T_frame_Oy_at(rep.centroid_world_m), rep.bps.distances_m,
                          points_m=rep.points_world_m, density_fn=rep.density_fn)


def object_from_mesh(mesh_path: str, frame_id: str, points_m: np.ndarray | None = None, num_points: int = 5000,
                     seed: int = 0) -> PlanningObject:
    """The object of a triangle mesh file (metres, frame_id): its points are `points_m` when given (an observed
    cloud), else `num_points` drawn uniformly on the surface with `seed`; centroid and BPS from those points.

    Raises:
        StageError(INVALID_GOAL): the file cannot be read as a mesh, has NaN vertices or no faces.
    """
    import trimesh

    from getagrip_ros.motion.world import load_object_mesh

    try:
        loaded = load_object_mesh(mesh_path)
    except ValueError as err:
        raise StageError(StatusCode.INVALID_GOAL, str(err)) from None
    mesh = trimesh.Trimesh(loaded.vertices_m, loaded.faces, process=False)
    if points_m is None:
        points_m, _ = trimesh.sample.sample_surface(mesh, int(num_points), seed=int(seed) % 2**32)
    obj = object_from_points(np.asarray(points_m, dtype=float), frame_id)
    obj.mesh = mesh
    return obj
