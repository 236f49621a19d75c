"""Planning from a mesh of the object: alone (points drawn on it) or with the observed cloud (the graspd sampler's
SDF comes from the mesh), the CLI's --mesh, and the bad meshes a goal can name.

The graspd syntheses use the fast config of test_graspd_sampler (4 grasps, 40 steps, a 48^3 grid) on one thread.
"""

import numpy as np
import pytest
import trimesh

from getagrip_ros.cli import plan_grasps
from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.planning.object_input import object_from_mesh
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.status import StageError, StatusCode

from .test_graspd_sampler import FAST

BOX_SIZE_M, BOX_CENTRE_M = (0.06, 0.06, 0.12), (0.65, 0.0, 0.06)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def planner():
    return GraspPlanner(GraspPlannerConfig(graspd=FAST))


def box_mesh(open_bottom: bool = False) -> trimesh.Trimesh:
    """The test box (world frame, standing on the table); open_bottom: the faces under it removed, as a fused
    depth mesh cut at the table is."""
    mesh = trimesh.creation.box(BOX_SIZE_M)
    mesh.apply_translation(BOX_CENTRE_M)
    if open_bottom:
        keep = mesh.face_normals[:, 2] > -0.5
        mesh = trimesh.Trimesh(mesh.vertices, mesh.faces[keep], process=False)
    return mesh


@pytest.fixture
def box_file(tmp_path):
    path = tmp_path / "box.obj"
    box_mesh().export(path)
    return str(path)


def test_a_mesh_alone_gives_points_on_its_surface_and_a_plan(planner, box_file):
    obj = object_from_mesh(box_file, "world", num_points=3000, seed=3)
    assert obj.points_m.shape == (3000, 3) and obj.mesh is not None
    distance = np.abs(trimesh.proximity.signed_distance(box_mesh(), obj.points_m))
    assert distance.max() < 1e-6  # every point on the surface
    assert np.allclose(obj.centroid_m, BOX_CENTRE_M, atol=0.005)
    result = planner.plan(PlanRequest(mesh_path=box_file, frame_id="world", num_grasps=5, sampler="heuristic",
                                      evaluator="none", seed=1))
    assert result.success, result.reason
    assert np.allclose(result.planned.object_centroid_m, BOX_CENTRE_M, atol=0.005)


def test_graspd_builds_its_sdf_from_the_mesh_given_with_the_cloud(planner, box_file, tmp_path):
    cloud = box_surface_points(BOX_SIZE_M, BOX_CENTRE_M[:2])
    with_mesh = planner.plan(PlanRequest(points_m=cloud, mesh_path=box_file, frame_id="world", num_grasps=4,
                                         sampler="graspd", evaluator="none", seed=1))
    assert with_mesh.success, with_mesh.reason
    assert "SDF from the object's mesh" in with_mesh.reason
    # the cloud stays the object's: its centroid, not the mesh's surface samples
    assert np.allclose(with_mesh.planned.object_centroid_m, cloud.mean(axis=0))
    without = planner.plan(PlanRequest(points_m=cloud, frame_id="world", num_grasps=4, sampler="graspd",
                                       evaluator="none", seed=1))
    assert without.success and "mesh" not in without.reason
    assert not np.allclose(with_mesh.planned.grasps.to_numpy_vector(), without.planned.grasps.to_numpy_vector())
    # a mesh open at the table (what depth fusion gives) is closed first and still used
    open_file = tmp_path / "open.obj"
    box_mesh(open_bottom=True).export(open_file)
    repaired = planner.plan(PlanRequest(points_m=cloud, mesh_path=str(open_file), frame_id="world", num_grasps=4,
                                        sampler="graspd", evaluator="none", seed=1))
    assert repaired.success and "SDF from the object's mesh" in repaired.reason, repaired.reason


def test_a_mesh_that_cannot_be_made_solid_falls_back_to_the_cloud(planner, tmp_path):
    sheet = trimesh.Trimesh([[0.6, -0.03, 0.02], [0.7, -0.03, 0.02], [0.7, 0.03, 0.1], [0.6, 0.03, 0.1]],
                            [[0, 1, 2], [0, 2, 3]], process=False)  # one flat quad: nothing to close
    path = tmp_path / "sheet.obj"
    sheet.export(path)
    cloud = box_surface_points(BOX_SIZE_M, BOX_CENTRE_M[:2])
    result = planner.plan(PlanRequest(points_m=cloud, mesh_path=str(path), frame_id="world", num_grasps=4,
                                      sampler="graspd", evaluator="none", seed=1))
    assert result.success, result.reason
    assert "SDF from the cloud: the mesh's failed" in result.reason


def test_bad_meshes_and_source_mixes_are_invalid_goals_with_a_reason(planner, box_file, tmp_path):
    garbage = tmp_path / "garbage.obj"
    garbage.write_text("this is not a mesh\n")
    far = tmp_path / "far.obj"
    box_mesh().apply_translation((0.0, 0.0, 3.0)).export(far)
    nan_mesh = tmp_path / "nan.obj"
    nan_mesh.write_text("v nan 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    cases = [
        (dict(mesh_path=str(tmp_path / "missing.obj")), "object mesh not found"),
        (dict(mesh_path=str(garbage)), "no faces"),
        (dict(mesh_path=str(nan_mesh)), "NaN"),
        (dict(mesh_path=str(far)), "mesh points lie outside"),
        (dict(mesh_path=box_file, bps=np.zeros(4096), bps_centroid_height_m=0.06), "exactly one object source"),
    ]
    for fields, reason in cases:
        result = planner.plan(PlanRequest(frame_id="world", num_grasps=4, sampler="heuristic", evaluator="none",
                                          **fields))
        assert result.status == StatusCode.INVALID_GOAL and reason in result.reason, (fields, result.reason)
    with pytest.raises(StageError, match="no faces"):
        object_from_mesh(str(garbage), "world")


def test_cli_plans_from_a_mesh_alone_and_with_a_cloud(box_file, tmp_path, capsys):
    out = tmp_path / "grasps.npz"
    assert plan_grasps.main(["--mesh", box_file, "--sampler", "heuristic", "--evaluator", "none",
                             "--num-grasps", "3", "--out", str(out)]) == 0
    assert np.load(out)["vectors_37d"].shape == (3, 37)
    cloud = tmp_path / "cloud.npy"
    np.save(cloud, box_surface_points(BOX_SIZE_M, BOX_CENTRE_M[:2]))
    assert plan_grasps.main([str(cloud), "--mesh", box_file, "--sampler", "graspd", "--evaluator", "none",
                             "--graspd-grasps", "2", "--graspd-steps", "10", "--num-grasps", "2",
                             "--out", str(out)]) == 0
    assert "SDF from the object's mesh" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        plan_grasps.main(["--mesh", box_file, "--nerf", box_file])
