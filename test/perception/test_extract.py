"""Object extraction: the NeRF path's logic on an analytic field (a sphere with known geometry), the depth path on
simulated depth images of a catalog object, and clear errors for missing or empty inputs."""

import numpy as np
import pytest
import torch
import trimesh
from scipy.spatial import cKDTree

from getagrip_ros.perception.bps import basis_points_B
from getagrip_ros.perception.extract import ExtractionConfig, extract_from_nerf, extract_object, representation_summary
from getagrip_ros.perception.nerf.model import RayRender
from getagrip_ros.perception.nerf.nerf_cloud import CaptureCameras, NerfCloudConfig, nerf_point_cloud
from getagrip_ros.perception.capture_trajectory import SpiralConfig, spiral_poses
from getagrip_ros.perception.nerf_dataset import write_nerf_dataset
from getagrip_ros.status import StageError, StatusCode

CENTRE = np.array([0.55, 0.05, 0.05])
RADIUS = 0.04


class SphereField:
    """Stands in for a trained NeRF: density 1000 inside a sphere resting on the table, exact ray hits."""

    def __init__(self, radius=RADIUS):
        self.radius, self.dataset_dir = radius, ""
        self.centre = torch.tensor(CENTRE, dtype=torch.float32)

    def density_fn(self, points):
        inside = (points - self.centre).norm(dim=-1) < self.radius
        return inside.float() * 1000.0

    def render_rays(self, origins, directions, pixel_area=1e-5, chunk=None):
        d = directions / directions.norm(dim=-1, keepdim=True)
        oc = origins - self.centre
        b = (oc * d).sum(-1)
        disc = b ** 2 - (oc ** 2).sum(-1) + self.radius ** 2
        hit = disc > 0
        t = torch.where(hit, -b - torch.sqrt(disc.clamp(min=0)), torch.full_like(b, 10.0))
        return RayRender(torch.zeros_like(origins), t, hit.float(), origins + d * t[:, None])


def cameras(num=30):
    poses = spiral_poses(np.array([CENTRE[0], CENTRE[1], 0.0]), SpiralConfig(num_images=num))
    return CaptureCameras(poses, np.array([[60.0, 0, 40], [0, 60.0, 30], [0, 0, 1]]), 80, 60)


def test_nerf_path_on_a_known_field_gives_surface_points_frame_bps_and_a_watertight_mesh(tmp_path):
    rep = extract_from_nerf(SphereField(), cameras(), np.array([0.56, 0.04, 0.0]), tmp_path)
    assert np.allclose(rep.centroid_world_m, CENTRE, atol=0.004)
    assert np.allclose(rep.T_world_object[:3, 3], [CENTRE[0], CENTRE[1], 0.0], atol=0.004)
    radial = np.linalg.norm(rep.points_world_m - CENTRE, axis=1)
    assert len(rep.points_world_m) > 1000 and np.abs(radial - RADIUS).max() < 1e-4
    assert rep.bps.distances_m.shape == (4096,) and np.allclose(rep.bps.origin_world_m, rep.T_world_object[:3, 3])
    basis = rep.bps.origin_world_m + basis_points_B()
    expected = np.abs(np.linalg.norm(basis - CENTRE, axis=1) - RADIUS)  # distance to the sphere's surface
    assert (rep.bps.distances_m >= expected - 1e-4).all()  # cloud points lie on the surface
    assert np.median(rep.bps.distances_m - expected) < 0.003  # and cover the part the cameras see
    volume = 4 / 3 * np.pi * RADIUS ** 3  # a step density on a 4 mm grid: within 15%
    assert rep.mesh.is_watertight and abs(rep.mesh.volume - volume) < 0.15 * volume
    assert rep.mesh_path.is_file() and trimesh.load(rep.mesh_path).vertices.shape[0] > 100
    summary = representation_summary(rep)
    assert summary["backend"] == "nerf" and set(summary["timings_s"]) == {"centroid", "point_cloud", "bps", "mesh"}


def test_a_nerf_without_surface_is_a_clear_error(tmp_path):
    empty = SphereField(radius=0.0)
    with pytest.raises(StageError, match="no density above 15|no surface") as err:
        extract_from_nerf(empty, cameras(), np.array([0.55, 0.05, 0.0]), tmp_path)
    assert err.value.code == StatusCode.NO_RESULT
    with pytest.raises(StageError, match="no surface in the object box"):
        nerf_point_cloud(empty, cameras(), np.array([0.55, 0.05, 0.0]), NerfCloudConfig(max_rays=20000))


@pytest.fixture(scope="module")
def depth_dataset(tmp_path_factory):
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import PrepareConfig, prepare_object
    from getagrip_ros.sim.capture_views import render_capture_views
    from getagrip_ros.sim.scene import CameraConfig

    root = tmp_path_factory.mktemp("depth")
    obj = prepare_object(object_by_name("tabletop20/apple"), PrepareConfig(cache_dir=str(root / "cache")))
    views = render_capture_views(obj, (0.55, 0.0), CameraConfig(160, 90, 66.6), SpiralConfig(num_images=30))
    metadata = {"object_position_m": views.object_position_m.tolist()}
    write_nerf_dataset(root / "with_depth", views.rgb, views.K, views.T_world_camera, views.depth_m, metadata=metadata)
    write_nerf_dataset(root / "rgb_only", views.rgb, views.K, views.T_world_camera, metadata=metadata)
    true_mesh = views.true_mesh_world
    return root, true_mesh


def test_depth_backend_recovers_the_object_surface(depth_dataset, tmp_path):
    root, true_mesh = depth_dataset
    rep = extract_object("depth", tmp_path, dataset_dir=root / "with_depth")
    d_mm = cKDTree(true_mesh.sample(50_000)).query(rep.points_world_m)[0] * 1000
    assert np.median(d_mm) < 3.0 and np.percentile(d_mm, 90) < 6.0
    assert np.allclose(rep.centroid_world_m[:2], true_mesh.centroid[:2], atol=0.01)
    assert rep.mesh_path.is_file() and len(rep.mesh.faces) > 100
    assert rep.density_fn is None and rep.backend == "depth"


@pytest.mark.parametrize("kwargs, code, match", [
    (dict(backend="sdf"), StatusCode.INVALID_GOAL, "unknown backend"),
    (dict(backend="nerf"), StatusCode.INVALID_GOAL, "needs nerf_config_path"),
    (dict(backend="nerf", nerf_config_path="/nonexistent/config.yml"), StatusCode.INVALID_GOAL, "no NeRF config"),
    (dict(backend="depth"), StatusCode.INVALID_GOAL, "no capture dataset"),
    (dict(backend="depth", dataset_dir="/nonexistent"), StatusCode.INVALID_GOAL, "cannot read the capture dataset"),
    (dict(backend="depth", dataset_dir="RGB_ONLY"), StatusCode.INVALID_GOAL, "needs depth images"),
])
def test_bad_extraction_requests_are_refused_with_reasons(depth_dataset, tmp_path, kwargs, code, match):
    if kwargs.get("dataset_dir") == "RGB_ONLY":
        kwargs["dataset_dir"] = depth_dataset[0] / "rgb_only"
    with pytest.raises(StageError, match=match) as err:
        extract_object(output_dir=tmp_path, **kwargs)
    assert err.value.code == code


def test_depth_backend_with_an_empty_table_says_so(depth_dataset, tmp_path):
    root, _ = depth_dataset
    from getagrip_ros.perception.nerf_dataset import read_nerf_dataset

    ds = read_nerf_dataset(root / "with_depth")
    # the object box moved 1 m away from where the object is: nothing above the table there
    write_nerf_dataset(tmp_path / "moved", ds.rgb, ds.K, ds.T_world_camera_optical, ds.depth_m,
                       metadata={"object_position_m": [1.55, 0.0, 0.0]})
    with pytest.raises(StageError) as err:
        extract_object("depth", tmp_path / "out", dataset_dir=tmp_path / "moved", config=ExtractionConfig())
    assert err.value.code == StatusCode.NO_RESULT and "no surface above the table" in err.value.reason
