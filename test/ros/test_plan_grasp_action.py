"""The plan_grasp action served by a real node in another process, called over ROS 2."""

import dataclasses
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
import trimesh
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from visualization_msgs.msg import MarkerArray

from getagrip_interfaces.action import PlanGrasp
from getagrip_interfaces.msg import Status
from getagrip_ros.grasp.filters import cable_filter_mask
from getagrip_ros.paths import config_path
from getagrip_ros.ros.client import call_action, cancel_after_feedback, send_goal, wait_for_result
from getagrip_ros.ros.conversions import grasp_msgs_to_core, numpy_to_point_cloud2
from getagrip_ros.ros.markers import MARKERS_PER_GRASP
from getagrip_ros.ros.processes import NodeProcess

from getagrip_ros.objects.primitives import box_surface_points


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    """The node's one data root: goal paths (meshes) must lie under it."""
    return tmp_path_factory.mktemp("plan_grasp_data")


@pytest.fixture(scope="module")
def server(ros_env, tiny_models, data_root):
    models = [f"models.{k}:={v}" for k, v in dataclasses.asdict(tiny_models).items() if v]
    args = ["--ros-args", "--params-file", str(config_path("plan_grasp.yaml")), "-p", "num_samples:=400",
            "-p", "diffusion.num_steps:=5", "-p", f"data_roots:=['{data_root}']",
            *[a for m in models for a in ("-p", m)]]
    with NodeProcess("getagrip_ros.ros.plan_grasp_node", args, env=ros_env) as proc:
        yield proc
    assert proc.process.returncode == 0, proc.output()  # clean shutdown on SIGINT


@pytest.fixture(scope="module")
def client(rclpy_node, server):
    client = ActionClient(rclpy_node, PlanGrasp, "plan_grasp")
    yield client
    client.destroy()


def cloud_goal(points=None, frame_id="world", **kwargs) -> PlanGrasp.Goal:
    points = box_surface_points() if points is None else points
    options = {"sampler": "heuristic", "evaluator": "none", **kwargs}
    goal = PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_POINT_CLOUD, **options)
    goal.point_cloud = numpy_to_point_cloud2(points, frame_id)
    return goal


def test_plan_succeeds_with_feedback_markers_and_valid_grasps(rclpy_node, client, server):
    markers = []
    rclpy_node.create_subscription(MarkerArray, "grasp_markers", markers.append, 1)
    feedback = []
    status, result = call_action(rclpy_node, client, cloud_goal(num_grasps=12, seed=3), timeout_s=120, feedback=feedback.append)
    assert status == GoalStatus.STATUS_SUCCEEDED, (result.status.reason, server.output())
    assert result.status.code == Status.SUCCEEDED
    assert len(result.grasps) == 12
    assert {t.stage for t in result.timings} >= {"validation", "sampling", "filtering", "closing_targets"}
    # feedback: stages reported, progress rising to 1, no score without an evaluator
    assert {f.stage for f in feedback} == {"object", "sampling", "closing_targets", "done"}
    progress = [f.progress for f in feedback]
    assert progress == sorted(progress) and math.isclose(progress[-1], 1.0)
    assert all(math.isnan(f.best_score) for f in feedback)
    grasps, labels = grasp_msgs_to_core(list(result.grasps))
    assert grasps.frame_id == "world" and np.isnan(labels).all()
    assert bool(cable_filter_mask(grasps).all())
    # palms sit around the box (centre x = 0.65), outside it, above the table
    d = (grasps.palm_position_m - grasps.palm_position_m.new_tensor([0.65, 0.0, 0.06])).norm(dim=1)
    assert bool(((d > 0.05) & (d < 0.2)).all()) and bool((grasps.palm_position_m[:, 2] > 0.0).all())
    # the 37-D vector carries the same grasp
    for g, msg in zip(grasps.to_numpy_vector(), result.grasps):
        assert np.allclose(np.asarray(msg.vector), g, atol=1e-5)
    # same goal + seed -> same grasps
    _, again = call_action(rclpy_node, client, cloud_goal(num_grasps=12, seed=3), timeout_s=120)
    assert np.allclose(np.array([m.vector for m in again.grasps]), np.array([m.vector for m in result.grasps]))
    deadline = time.monotonic() + 5
    while not markers and time.monotonic() < deadline:
        rclpy.spin_once(rclpy_node, timeout_sec=0.1)
    assert markers and len(markers[-1].markers) == 1 + MARKERS_PER_GRASP * 12
    skeleton = markers[-1].markers[4]
    assert skeleton.type == skeleton.LINE_LIST and len(skeleton.points) == 4 * 5 * 2  # 5 segments per finger


@pytest.mark.parametrize(
    "goal, code, reason",
    [
        (lambda: cloud_goal(points=np.zeros((0, 3))), Status.INVALID_GOAL, "0 points"),
        (lambda: cloud_goal(points=np.full((200, 3), np.nan)), Status.INVALID_GOAL, "NaN"),
        (lambda: cloud_goal(frame_id=""), Status.INVALID_GOAL, "no frame_id"),
        (lambda: PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_BPS, bps=[0.1] * 10, bps_frame_id="object"),
         Status.INVALID_GOAL, "4096"),
        (lambda: PlanGrasp.Goal(object_source=9), Status.INVALID_GOAL, "object_source"),
        (lambda: cloud_goal(sampler="nope"), Status.INVALID_GOAL, "unknown sampler"),
        (lambda: cloud_goal(num_grasps=0), Status.INVALID_GOAL, "num_grasps"),
        (lambda: _broken_cloud_goal(), Status.INVALID_GOAL, "bytes"),
        (lambda: cloud_goal(sampler="heuristic", evaluator="nerf"), Status.INVALID_GOAL, "needs a NeRF object source"),
        (lambda: PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_BPS, bps=[0.1] * 4096, bps_frame_id="object"),
         Status.INVALID_GOAL, "bps_centroid_height_m"),
        (lambda: PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_NERF, nerf_config_path="/etc/passwd",
                                sampler="fixed", evaluator="none"), Status.INVALID_GOAL, "is outside the configured roots"),
        # goals that describe no object on the table (README "Reliability and security")
        (lambda: cloud_goal(frame_id="zed2i_left_optical"), Status.INVALID_GOAL, "transform it first"),
        (lambda: cloud_goal(points=box_surface_points() - [0, 0, 1.0]), Status.INVALID_GOAL, "outside the region"),
        (lambda: cloud_goal(points=box_surface_points() * 1e20), Status.INVALID_GOAL, "outside the region"),
        (lambda: cloud_goal(points=np.tile([[0.6, 0.0, 0.05]], (200, 1))), Status.INVALID_GOAL, "the points span 0.0 mm"),
        (lambda: PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_BPS, bps=[1e30] * 4096, bps_frame_id="world",
                                bps_centroid_height_m=0.05, sampler="fixed"), Status.INVALID_GOAL, "<= 2.0 m"),
        (lambda: cloud_goal(refinement_iterations=2**31 - 1), Status.INVALID_GOAL, "max_refinement_iterations"),
        # meshes: only under the node's data_roots, in the cloud's frame, with a cloud or alone
        (lambda: PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_MESH, mesh_path="/etc/passwd"),
         Status.INVALID_GOAL, "mesh_path '/etc/passwd' is outside the configured roots"),
        (lambda: PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_MESH), Status.INVALID_GOAL, "needs mesh_path"),
        (lambda: cloud_goal(mesh_path="/tmp/x.obj", mesh_frame_id="object"), Status.INVALID_GOAL, "must share one"),
        (lambda: PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_BPS, bps=[0.1] * 4096, bps_frame_id="world",
                                bps_centroid_height_m=0.05, mesh_path="/tmp/x.obj"), Status.INVALID_GOAL, "goes with"),
    ],
)
def test_bad_goals_abort_with_a_reason_and_the_node_keeps_serving(rclpy_node, client, server, goal, code, reason):
    status, result = call_action(rclpy_node, client, goal(), timeout_s=60)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.status.code == code and reason in result.status.reason, result.status.reason
    assert len(result.grasps) == 0
    assert server.process.poll() is None


def test_a_mesh_goal_plans_on_its_surface_and_a_broken_mesh_aborts(rclpy_node, client, server, data_root):
    mesh = trimesh.creation.box((0.06, 0.06, 0.12))
    mesh.apply_translation((0.65, 0.0, 0.06))
    mesh.export(data_root / "box.obj")
    goal = PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_MESH, mesh_path=str(data_root / "box.obj"),
                          sampler="heuristic", evaluator="none", num_grasps=6, seed=2)
    status, result = call_action(rclpy_node, client, goal, timeout_s=120)
    assert status == GoalStatus.STATUS_SUCCEEDED, (result.status.reason, server.output())
    grasps, _ = grasp_msgs_to_core(list(result.grasps))
    assert len(grasps) == 6 and grasps.frame_id == "world"
    d = (grasps.palm_position_m - grasps.palm_position_m.new_tensor([0.65, 0.0, 0.06])).norm(dim=1)
    assert bool(((d > 0.05) & (d < 0.2)).all())  # around the mesh's box
    (data_root / "broken.obj").write_text("v 0 0 0\nf 1 2 3\n")
    goal.mesh_path = str(data_root / "broken.obj")
    status, result = call_action(rclpy_node, client, goal, timeout_s=60)
    assert status == GoalStatus.STATUS_ABORTED and result.status.code == Status.INVALID_GOAL, result.status.reason
    assert "mesh" in result.status.reason and server.process.poll() is None


def _broken_cloud_goal() -> PlanGrasp.Goal:
    goal = cloud_goal()
    goal.point_cloud.data = bytes(goal.point_cloud.data)[:100]
    return goal


def test_cancel_stops_planning(rclpy_node, client, server):
    started = []
    handle = send_goal(rclpy_node, client, cloud_goal(num_grasps=3000, seed=1), timeout_s=30, feedback=started.append)
    status, result = cancel_after_feedback(rclpy_node, handle, started, 60, 60)
    assert status == GoalStatus.STATUS_CANCELED
    assert result.status.code == Status.CANCELED and len(result.grasps) == 0
    # and the server still plans afterwards
    status, result = call_action(rclpy_node, client, cloud_goal(num_grasps=2), timeout_s=60)
    assert status == GoalStatus.STATUS_SUCCEEDED and len(result.grasps) == 2


def test_learned_sampler_and_evaluator_rank_and_refine_with_feedback(rclpy_node, client, server):
    feedback = []
    goal = cloud_goal(sampler="fixed", evaluator="bps", num_grasps=6, refinement_iterations=7, seed=2)
    status, result = call_action(rclpy_node, client, goal, timeout_s=120, feedback=feedback.append)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.status.reason
    assert "ranked by the bps evaluator" in result.status.reason and len(result.grasps) == 6
    scores = [g.y_pgs for g in result.grasps]
    assert scores == sorted(scores, reverse=True) and all(0 < v < 1 for v in scores)
    stages = [f.stage for f in feedback]
    assert stages.count("refinement") == 7 and "evaluation" in stages
    refinement_best = [f.best_score for f in feedback if f.stage == "refinement"]
    assert refinement_best == sorted(refinement_best) and math.isclose(refinement_best[-1], scores[0], rel_tol=1e-6)
    assert {t.stage for t in result.timings} >= {"evaluation", "refinement"}
    # the diffusion sampler from a BPS goal, answered in the BPS frame
    from getagrip_ros.planning.object_input import object_from_points
    points = box_surface_points()
    bps_goal = PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_BPS, bps_frame_id="object", sampler="diffusion",
                              evaluator="bps", num_grasps=3, refinement_iterations=2,
                              bps_centroid_height_m=float(points.mean(0)[2]))
    bps_goal.bps = object_from_points(points, "world").bps_m.tolist()
    status, result = call_action(rclpy_node, client, bps_goal, timeout_s=120)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.status.reason
    assert len(result.grasps) == 3 and all(g.header.frame_id == "object" for g in result.grasps)


def test_second_goal_waits_its_turn_and_a_third_is_busy(rclpy_node, client, server):
    """One plan at a time: a goal arriving meanwhile is queued (feedback "queued") and served next; with
    max_queued_goals = 1 a third concurrent goal is aborted at once as BUSY."""
    seen = {"a": [], "b": [], "c": []}
    slow = cloud_goal(num_grasps=3000, seed=1)
    a = send_goal(rclpy_node, client, slow, timeout_s=30, feedback=seen["a"].append)
    deadline = time.monotonic() + 60
    while not seen["a"] and time.monotonic() < deadline:  # a is planning
        rclpy.spin_once(rclpy_node, timeout_sec=0.02)
    b = send_goal(rclpy_node, client, cloud_goal(num_grasps=2, seed=4), timeout_s=30, feedback=seen["b"].append)
    while not seen["b"] and time.monotonic() < deadline:
        rclpy.spin_once(rclpy_node, timeout_sec=0.02)
    c = send_goal(rclpy_node, client, cloud_goal(num_grasps=2), timeout_s=30, feedback=seen["c"].append)
    status_c, result_c = wait_for_result(rclpy_node, c, 30)
    assert status_c == GoalStatus.STATUS_ABORTED and result_c.status.code == Status.BUSY, result_c.status.reason
    assert "busy" in result_c.status.reason
    status_a, result_a = wait_for_result(rclpy_node, a, 120)
    status_b, result_b = wait_for_result(rclpy_node, b, 120)
    assert status_a == status_b == GoalStatus.STATUS_SUCCEEDED
    assert seen["b"][0].stage == "queued" and len(result_b.grasps) == 2
    assert [f.stage for f in seen["b"]].index("sampling") > 0  # b planned only after waiting
    assert not seen["c"] or all(f.stage == "queued" for f in seen["c"])


def test_cancel_while_queued_ends_the_goal_without_planning(rclpy_node, client, server):
    seen_a, seen_b = [], []
    a = send_goal(rclpy_node, client, cloud_goal(num_grasps=3000, seed=2), timeout_s=30, feedback=seen_a.append)
    deadline = time.monotonic() + 60
    while not seen_a and time.monotonic() < deadline:
        rclpy.spin_once(rclpy_node, timeout_sec=0.02)
    b = send_goal(rclpy_node, client, cloud_goal(num_grasps=2), timeout_s=30, feedback=seen_b.append)
    status_b, result_b = cancel_after_feedback(rclpy_node, b, seen_b, 60, 60)
    assert status_b == GoalStatus.STATUS_CANCELED and result_b.status.reason == "cancelled by the client while queued"
    assert [f.stage for f in seen_b] == ["queued"]
    status_a, _ = wait_for_result(rclpy_node, a, 120)
    assert status_a == GoalStatus.STATUS_SUCCEEDED


def test_the_readme_client_example_calls_the_action_from_its_own_process(server, ros_env, tiny_models, tmp_path):
    np.save(tmp_path / "cloud.npy", box_surface_points())
    example = Path(__file__).resolve().parents[2] / "examples" / "plan_grasp_client.py"
    run = subprocess.run([sys.executable, str(example), str(tmp_path / "cloud.npy"), "--sampler", "fixed",
                          "--evaluator", "bps", "--num-grasps", "3"], env=ros_env, capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("#")]
    assert len(lines) == 3 and "in world, predicted y_PGS 0." in lines[0]
    assert "refinement" in run.stdout and "refinement" in run.stderr  # timings printed, feedback logged
