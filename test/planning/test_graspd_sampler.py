"""The graspd sampler (Grasp'D synthesis) in the planner, the CLI and the node parameters (over ROS 2:
test/ros/test_plan_grasp_graspd.py).

Every synthesis here uses a fast config (4 grasps, 40 steps in chunks of 10, a 48^3 grid) and one torch
thread: on a shared 2-core machine torch's thread pool waits on descheduled threads (~1 s per step with 2
threads next to another busy process, 17 ms with one).
"""

import dataclasses
import math
import time

import numpy as np
import pytest
import torch
import yaml

from getagrip_ros.config_tree import flatten, rebuild
from getagrip_ros.grasp.filters import cable_filter_mask
from getagrip_ros.objects.primitives import box_surface_points, cylinder_surface_points
from getagrip_ros.planning.graspd_sampler import (GraspdSamplerConfig, cloud_normals, graspd_hand_model,
                                                  synthesis_deadline_s)
from getagrip_ros.planning.object_input import object_from_bps, object_from_points
from getagrip_ros.planning.planner import SAMPLERS, GraspPlanner, GraspPlannerConfig, PlanRequest, rank_sum_order
from getagrip_ros.status import StageError, StatusCode
from getagrip_ros.synthesis.object_sdf import SDFConfig
from getagrip_ros.synthesis.optimizer import SynthesisConfig

FAST = GraspdSamplerConfig(num_grasps=4, synthesis=SynthesisConfig(num_steps=40, chunk_steps=10), sdf=SDFConfig(resolution=48))
CHUNKS = FAST.synthesis.num_steps // FAST.synthesis.chunk_steps


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def planner():
    """Shipped models (the geometry evaluator test ranks with them), fast graspd."""
    return GraspPlanner(GraspPlannerConfig(graspd=FAST))


def graspd_request(points=None, **kwargs) -> PlanRequest:
    options = {"frame_id": "world", "num_grasps": 4, "sampler": "graspd", "evaluator": "none", "seed": 1, **kwargs}
    return PlanRequest(points_m=box_surface_points() if points is None else points, **options)


def hand_points_m(planner: GraspPlanner, grasps) -> torch.Tensor:
    """(B, S, 3) surface samples of the hand at the grasps' pre-grasp joints, in the grasps' frame."""
    model = graspd_hand_model(planner.config.graspd.hand)
    T = torch.eye(4, dtype=torch.float64).repeat(len(grasps), 1, 1)
    T[:, :3, :3], T[:, :3, 3] = grasps.palm_rotation, grasps.palm_position_m
    points, _ = model.surface(model.link_poses(T, grasps.joint_angles_rad))
    return points


def test_graspd_plans_physics_ranked_grasps_in_the_request_frame(planner):
    calls = []
    result = planner.plan(graspd_request(), progress=lambda *a: calls.append(a))
    assert result.success, result.reason
    assert "ranked by the graspd physics score" in result.reason and "unranked" not in result.reason
    p = result.planned
    assert 1 <= len(p.grasps) <= 4 and p.grasps.frame_id == "world"
    assert np.isfinite(p.grasps.to_numpy_vector()).all() and torch.isnan(p.y_pgs).all()
    assert bool(cable_filter_mask(p.grasps).all()) and bool(planner.hand.within_limits(p.closed_joints_rad).all())
    points = hand_points_m(planner, p.grasps)
    assert float(points[..., 2].min()) > 0.0  # the whole hand above the table (z = 0)
    centre = torch.tensor([0.65, 0.0, 0.06], dtype=torch.float64)
    assert bool(((p.grasps.palm_position_m - centre).norm(dim=1) < 0.35).all())  # around the box, not elsewhere
    # progress: one "sampling" report before the SDF, one per round of starts, then one per chunk of steps, rising
    sampling = [fraction for stage, fraction, _ in calls if stage == "sampling"]
    assert len(sampling) >= CHUNKS + 1 and sampling == sorted(sampling) and math.isclose(sampling[-1], 0.35)
    assert {stage for stage, _, _ in calls} == {"object", "sampling", "closing_targets", "done"}
    # the order is the synthesis's own: the same seed gives the same grasps, best physics score first
    again = planner._sampler("graspd").synthesize(object_from_points(box_surface_points(), "world"), 4,
                                                  torch.Generator().manual_seed(1), lambda fraction: None)
    assert (np.diff(again.physics_score.numpy()) >= 0).all() and not again.partial and again.num_failed == 0
    kept = again.grasps[cable_filter_mask(again.grasps)]
    assert np.allclose(kept.to_numpy_vector(), p.grasps.to_numpy_vector(), atol=1e-9)
    same = planner.plan(graspd_request())
    assert np.array_equal(same.planned.grasps.to_numpy_vector(), p.grasps.to_numpy_vector())
    other = planner.plan(graspd_request(seed=2))
    assert other.success and not np.allclose(other.planned.grasps.to_numpy_vector()[0], p.grasps.to_numpy_vector()[0])


def test_graspd_on_a_cylinder_and_with_more_requested_grasps_than_configured(planner):
    result = planner.plan(graspd_request(cylinder_surface_points(), num_grasps=6))
    assert result.success, result.reason
    assert 1 <= len(result.planned.grasps) <= 6  # max(num_grasps 4, the request's 6) synthesised
    assert float(hand_points_m(planner, result.planned.grasps)[..., 2].min()) > 0.0


def test_cancel_during_synthesis_ends_canceled_at_the_next_chunk(planner):
    calls, cancelled_at = [], []

    def progress(stage, fraction, best):
        calls.append(stage)
        if stage == "sampling" and fraction > 0.05 and not cancelled_at:  # after the first chunk of steps
            cancelled_at.append((len(calls), time.monotonic()))

    result = planner.plan(graspd_request(), progress=progress, should_cancel=lambda: bool(cancelled_at))
    assert result.status == StatusCode.CANCELED and "cancelled by the client" in result.reason, result.reason
    assert len(calls) == cancelled_at[0][0]  # not one report more: the next chunk's check raised
    assert time.monotonic() - cancelled_at[0][1] < 10.0
    assert "closing_targets" not in result.timings_s


def test_a_deadline_midway_returns_the_grasps_so_far_as_partial():
    long = dataclasses.replace(FAST, synthesis=SynthesisConfig(num_steps=100_000, chunk_steps=5),
                               deadline_reserve_fraction=0.5)
    planner = GraspPlanner(GraspPlannerConfig(graspd=long))
    planner._sampler("graspd")  # the hand model (shared with the other planners) is built before the clock starts
    started = time.monotonic()
    # synthesis stops at 6 s, leaving 6 s for the rest on a loaded machine; 100k steps would take ~30 min
    result = planner.plan(graspd_request(timeout_s=12.0))
    assert result.status == StatusCode.SUCCEEDED, result.reason
    assert "partial: the deadline stopped synthesis at step" in result.reason and "of 100000" in result.reason
    assert time.monotonic() - started < 16.0 and 1 <= len(result.planned.grasps) <= 4
    assert np.isfinite(result.planned.grasps.to_numpy_vector()).all()
    assert synthesis_deadline_s(10.0, 8.0, long) == 14.0 and synthesis_deadline_s(10.0, math.inf, long) is None


def test_goals_graspd_cannot_work_on_are_invalid_with_a_reason(planner):
    bps = planner.plan(PlanRequest(bps=np.full(4096, 0.1), bps_centroid_height_m=0.05, sampler="graspd"))
    assert bps.status == StatusCode.INVALID_GOAL and "graspd sampler needs a point cloud or a NeRF" in bps.reason
    with pytest.raises(StageError, match="graspd sampler needs a point cloud") as err:  # the sampler's own check
        planner._sampler("graspd").synthesize(object_from_bps(np.full(4096, 0.1), "world", 0.05), 4,
                                              torch.Generator(), lambda fraction: None)
    assert err.value.code == StatusCode.INVALID_GOAL
    rng = np.random.default_rng(0)
    line = np.stack([np.linspace(0.6, 0.7, 200), np.zeros(200), np.full(200, 0.05)], axis=1)
    sheet = np.concatenate([rng.uniform([0.6, -0.03], [0.7, 0.03], (300, 2)), np.full((300, 1), 0.05)], axis=1)
    for cloud in (line, sheet):
        result = planner.plan(graspd_request(cloud))
        assert result.status == StatusCode.INVALID_GOAL, result.reason
        assert "cannot build the object's SDF: the point cloud is flat or collinear" in result.reason


def test_cloud_normals_point_outward_and_fall_back_to_the_centroid():
    for points, max_points in ((box_surface_points(), 2000), (cylinder_surface_points(n=5000), 1000)):
        normals, method = cloud_normals(points, 20, max_points)
        outward = np.einsum("ij,ij->i", normals, points - points.mean(0))
        assert method == "tangent_plane" and (outward > 0).mean() > 0.95 and np.allclose(np.linalg.norm(normals, axis=1), 1)
    sheet = np.concatenate([np.random.default_rng(0).uniform(-0.03, 0.03, (300, 2)), np.zeros((300, 1))], axis=1)
    normals, method = cloud_normals(sheet)  # qhull cannot triangulate a plane: each normal away from the centroid
    assert method == "centroid" and (np.einsum("ij,ij->i", normals, sheet - sheet.mean(0)) >= 0).all()


def test_graspd_with_the_shipped_geometry_evaluator_ranks_with_the_physics_score_and_refines(planner):
    result = planner.plan(graspd_request(num_grasps=3, evaluator="geometry", refinement_iterations=2))
    assert result.success, result.reason
    assert "ranked by the geometry evaluator + 1 x the graspd physics score (ranks)" in result.reason
    assert "2 refinement iterations" in result.reason
    y_pgs = result.planned.y_pgs.numpy()
    assert 1 <= len(y_pgs) <= 3 and np.isfinite(y_pgs).all()
    assert {"evaluation", "refinement"} <= set(result.timings_s)


def test_the_rank_sum_orders_by_both_ranks_with_ties_in_physics_order():
    y_pgs = torch.tensor([0.1, 0.9, 0.5, 0.8])  # evaluator's ranks 4, 1, 3, 2; physics ranks 1, 2, 3, 4
    assert rank_sum_order(y_pgs, torch.arange(4), 1.0).tolist() == [1, 0, 2, 3]  # sums 5, 3, 6, 6: a tie, physics first
    assert rank_sum_order(y_pgs, torch.arange(4), 0.0).tolist() == [1, 3, 2, 0]  # the evaluator alone
    assert rank_sum_order(y_pgs, torch.arange(4), 10.0).tolist() == [0, 1, 2, 3]  # the physics score dominates
    assert rank_sum_order(y_pgs, torch.tensor([7, 2, 9, 4]), 1.0).tolist() == [1, 3, 0, 2]  # ranks of the given places
    assert rank_sum_order(torch.tensor([float("nan"), 0.2, 0.1]), torch.arange(3), 0.4).tolist() == [1, 2, 0]  # NaN: lowest


def test_graspd_settings_are_node_parameters_and_every_sampler_is_accepted(tmp_path, capsys):
    from getagrip_ros.cli.plan_grasps import main
    from getagrip_ros.serialization import json_default
    from getagrip_ros.task.benchmark import BenchmarkProtocol, load_protocol

    assert SAMPLERS == ("heuristic", "fixed", "diffusion", "graspd", "human_demo", "nerf_diffusion",
                        "fixed_graspd")
    default = GraspPlannerConfig()
    params = flatten(default)
    graspd = default.graspd  # the synthesis defaults move as it is tuned: compare with the dataclasses, not numbers
    assert {"graspd.num_grasps": graspd.num_grasps, "graspd.synthesis.num_steps": graspd.synthesis.num_steps,
            "graspd.sdf.resolution": graspd.sdf.resolution, "graspd.hand.contact_links": "distal"}.items() <= params.items()
    assert "graspd.synthesis.dtype" not in params and "graspd.synthesis.torque_length_m" not in params  # not parameters
    changed = rebuild(default, {**params, "graspd.synthesis.num_steps": 7, "graspd.hand.contact_links": "all"})
    assert changed.graspd.synthesis.num_steps == 7 and changed.graspd.hand.contact_links == "all"
    assert changed.graspd.synthesis.dtype == torch.float32 and rebuild(default, params) == default
    assert json_default(torch.float32) == "torch.float32"
    protocol = BenchmarkProtocol(objects=("tabletop20/cube",), methods=("graspd+none", "graspd+geometry"))
    (tmp_path / "protocol.yaml").write_text(protocol.to_yaml())
    assert load_protocol(tmp_path / "protocol.yaml") == protocol
    assert yaml.safe_load(protocol.to_yaml())["stack"]["planner"]["graspd"]["synthesis"]["dtype"] == "torch.float32"
    np.save(tmp_path / "cloud.npy", box_surface_points())
    out = tmp_path / "g.npz"
    code = main([str(tmp_path / "cloud.npy"), "--sampler", "graspd", "--evaluator", "none", "--num-grasps", "2",
                 "--graspd-grasps", "2", "--graspd-steps", "10", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert "ranked by the graspd physics score" in capsys.readouterr().out
    assert 1 <= len(np.load(out)["vectors_37d"]) <= 2
