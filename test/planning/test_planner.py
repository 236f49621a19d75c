"""The core grasp planner (no ROS): request validation, sampling, cancel, timeout, results."""

import dataclasses

import numpy as np
import pytest
import torch

from getagrip_ros.grasp.filters import CableFilterConfig, cable_filter_mask
from getagrip_ros.grasp.validate import validate_grasp
from getagrip_ros.planning.heuristic_sampler import sample_heuristic_grasps
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest
from getagrip_ros.robot.allegro import OPEN_HAND_JOINT_ANGLES_RAD
from getagrip_ros.status import StatusCode

from getagrip_ros.objects.primitives import box_surface_points


@pytest.fixture(scope="module")
def planner():
    return GraspPlanner(GraspPlannerConfig(num_samples=300, chunk_size=100, models=ModelFiles("", "", "", "")))


def test_heuristic_samples_face_the_object_from_outside(planner):
    pts = box_surface_points()
    g = sample_heuristic_grasps(pts, 500, planner.hand, "world", generator=torch.Generator().manual_seed(0))
    assert 300 < len(g) <= 500  # some low approaches are dropped for table clearance
    validate_grasp(g, (planner.hand.lower_limits_rad, planner.hand.upper_limits_rad))
    centroid = torch.from_numpy(pts.mean(0))
    to_centroid = centroid - g.palm_position_m
    assert bool(((to_centroid * g.palm_normal).sum(1) > 0).all())  # palm normal points toward the object
    half = torch.tensor([0.03, 0.03, 0.06], dtype=torch.float64)
    inside = ((g.palm_position_m - torch.tensor([0.65, 0.0, 0.06], dtype=torch.float64)).abs() < half).all(1)
    assert not bool(inside.any()) and bool((g.palm_position_m[:, 2] >= 0.02).all())


def test_plan_returns_filtered_grasps_with_joint_targets(planner):
    result = planner.plan(PlanRequest(points_m=box_surface_points(), num_grasps=10, seed=2))
    assert result.status == StatusCode.SUCCEEDED and result.success, result.reason
    p = result.planned
    assert len(p.grasps) == 10 and bool(cable_filter_mask(p.grasps).all())
    assert p.pregrasp_joints_rad.shape == (10, 16) and p.closed_joints_rad.shape == (10, 16)
    assert bool(planner.hand.within_limits(p.closed_joints_rad).all())
    assert torch.isnan(p.y_pgs).all() and "unranked" in result.reason
    assert set(result.timings_s) == {"validation", "models", "object", "sampling", "filtering", "closing_targets"}


@pytest.mark.parametrize("change, code, words", [
    (dict(points_m=None), StatusCode.INVALID_GOAL, "exactly one object source"),
    (dict(bps=np.zeros(4096)), StatusCode.INVALID_GOAL, "exactly one object source"),
    (dict(points_m=np.zeros((10, 3))), StatusCode.INVALID_GOAL, "need at least 50"),
    (dict(points_m=np.zeros((100, 2))), StatusCode.INVALID_GOAL, "shape (N, 3)"),
    (dict(refinement_iterations=-1), StatusCode.INVALID_GOAL, "refinement_iterations"),
    (dict(timeout_s=float("nan")), StatusCode.INVALID_GOAL, "timeout_s"),
    (dict(evaluator="magic"), StatusCode.INVALID_GOAL, "unknown evaluator"),
    (dict(evaluator="nerf"), StatusCode.INVALID_GOAL, "needs a NeRF object source"),
    (dict(evaluator="bps"), StatusCode.NOT_IMPLEMENTED, "no checkpoint configured for the BPS evaluator"),
    (dict(sampler="diffusion"), StatusCode.NOT_IMPLEMENTED, "no checkpoint configured for the diffusion sampler"),
    (dict(sampler="fixed"), StatusCode.NOT_IMPLEMENTED, "no fixed grasp set configured"),
    (dict(sampler="magic"), StatusCode.INVALID_GOAL, "unknown sampler"),
    (dict(points_m=np.full((100, 3), np.nan)), StatusCode.INVALID_GOAL, "100 points with NaN"),
    (dict(points_m=None, bps=np.full(4095, 0.1), bps_centroid_height_m=0.05), StatusCode.INVALID_GOAL, "4096 values"),
    (dict(points_m=None, bps=np.full(4096, 0.1)), StatusCode.INVALID_GOAL, "0 < bps_centroid_height_m"),
    (dict(points_m=None, nerf_config_path="/nonexistent/config.yml"), StatusCode.INVALID_GOAL, "NeRF config not found"),
    (dict(points_m=None, bps=np.full(4096, 0.1), bps_centroid_height_m=0.05), StatusCode.INVALID_GOAL,
     "heuristic sampler needs a point cloud"),
    (dict(points_m=None, bps=np.full(4096, -0.1)), StatusCode.INVALID_GOAL, ">= 0"),
    # inputs that describe no object on the table
    (dict(points_m=box_surface_points() - [0, 0, 1.0]), StatusCode.INVALID_GOAL, "outside the region an object"),
    (dict(points_m=box_surface_points() + 1e20), StatusCode.INVALID_GOAL, "outside the region an object"),
    (dict(points_m=np.tile([[0.6, 0.0, 0.05]], (200, 1))), StatusCode.INVALID_GOAL, "the points span 0.0 mm"),
    (dict(points_m=None, bps=np.full(4096, 1e30), bps_centroid_height_m=0.05), StatusCode.INVALID_GOAL,
     "<= 2.0 m"),
    (dict(points_m=None, bps=np.full(4096, 0.1), bps_centroid_height_m=1e20), StatusCode.INVALID_GOAL,
     "0 < bps_centroid_height_m"),
    (dict(refinement_iterations=10**9), StatusCode.INVALID_GOAL, "max_refinement_iterations"),
])
def test_bad_requests_end_with_a_reason(planner, change, code, words):
    request = dataclasses.replace(PlanRequest(points_m=box_surface_points()), **change)
    result = planner.plan(request)
    assert result.status == code and words in result.reason and result.planned is None


def test_a_goal_without_a_timeout_stops_at_the_planners_ceiling():
    planner = GraspPlanner(GraspPlannerConfig(num_samples=2000, chunk_size=50, max_plan_time_s=0.01))
    result = planner.plan(PlanRequest(points_m=box_surface_points(), timeout_s=0.0))
    assert result.status == StatusCode.TIMEOUT and "max_plan_time_s" in result.reason, result.reason
    result = planner.plan(PlanRequest(points_m=box_surface_points(), timeout_s=1e9))  # the ceiling bounds long ones too
    assert result.status == StatusCode.TIMEOUT and "max_plan_time_s" in result.reason, result.reason


def test_cancel_timeout_and_no_result():
    planner = GraspPlanner(GraspPlannerConfig(num_samples=2000, chunk_size=100))
    calls = []
    result = planner.plan(PlanRequest(points_m=box_surface_points()), progress=lambda *a: calls.append(a),
                          should_cancel=lambda: len(calls) >= 2)
    assert result.status == StatusCode.CANCELED and len(calls) == 2
    result = planner.plan(PlanRequest(points_m=box_surface_points(), timeout_s=1e-6))
    assert result.status == StatusCode.TIMEOUT and "timed out" in result.reason
    strict = GraspPlanner(GraspPlannerConfig(num_samples=200, cable_filter=CableFilterConfig(max_finger_angle_from_forward_deg=0.0)))
    result = strict.plan(PlanRequest(points_m=box_surface_points()))
    assert result.status == StatusCode.NO_RESULT and "none of the 200" in result.reason


def test_internal_errors_are_reported_not_raised(planner, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("simulated bug")
    monkeypatch.setattr("getagrip_ros.planning.samplers.sample_heuristic_grasps", boom)
    result = planner.plan(PlanRequest(points_m=box_surface_points()))
    assert result.status == StatusCode.INTERNAL_ERROR and "simulated bug" in result.reason


def test_open_style_heuristic_points_each_fingertip_at_its_nearest_surface_point(planner):
    pts = box_surface_points()
    config = dataclasses.replace(planner.config.heuristic_sampler, style="open")
    g = sample_heuristic_grasps(pts, 200, planner.hand, "world", config, torch.Generator().manual_seed(0))
    assert len(g) > 100
    validate_grasp(g, (planner.hand.lower_limits_rad, planner.hand.upper_limits_rad))
    open_q = torch.as_tensor(OPEN_HAND_JOINT_ANGLES_RAD, dtype=g.joint_angles_rad.dtype)
    assert float((g.joint_angles_rad - open_q).abs().mean()) < 0.15  # the open hand, with a little noise
    tips = torch.einsum("gij,gfj->gfi", g.palm_rotation, planner.hand.fingertip_positions(
        g.joint_angles_rad.float()).double()) + g.palm_position_m[:, None]
    cloud = torch.from_numpy(pts)
    nearest = cloud[torch.cdist(tips.reshape(-1, 3), cloud).argmin(1)].reshape(-1, 4, 3)
    expected = (nearest - tips) / (nearest - tips).norm(dim=-1, keepdim=True)
    torch.testing.assert_close(g.fingertip_directions, expected, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="unknown heuristic sampler style"):
        sample_heuristic_grasps(pts, 5, planner.hand, "world", dataclasses.replace(config, style="fist"))
