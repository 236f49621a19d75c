"""Methods judged in simulation: plan -> top grasps -> perturbed executions -> success rates."""

import dataclasses
import json

import numpy as np
import pytest

from getagrip_ros.data.evaluate import EvaluationConfig, Method, evaluate_methods, result_rows, summarize
from getagrip_ros.data.labels import LabelConfig
from getagrip_ros.objects.mesh_object import PreparedObject
from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig


@pytest.fixture(scope="module")
def box():
    import trimesh

    mesh = trimesh.creation.box((0.05, 0.05, 0.1))
    mesh.apply_translation((0, 0, 0.05))
    return PreparedObject("test/box", mesh, (mesh,), ("easy",), np.eye(4))


def observed_box(world):
    return box_surface_points(size_m=(0.05, 0.05, 0.1), centre_xy_m=world.placement.xy_m)


def test_methods_are_planned_executed_and_summarised(box, tiny_models):
    planner = GraspPlanner(GraspPlannerConfig(num_samples=200, models=tiny_models))
    config = EvaluationConfig(grasps_per_object=2, refinement_iterations=2,
                              label=dataclasses.replace(LabelConfig(), num_perturbations=2))
    methods = [Method("heuristic", "none"), Method("fixed", "bps"), Method("diffusion", "nerf")]
    seen = []
    results = evaluate_methods([box], planner, methods, observed_box, config, lambda o, m: seen.append((o, m)))
    assert seen == [("test/box", m.name) for m in methods]
    ok, learned, failed = results
    assert ok.plan_status == "SUCCEEDED" and len(ok.grasp_success) == 2
    assert all(0.0 <= s <= 1.0 for s in ok.grasp_success) and ok.success_rate == pytest.approx(np.mean(ok.grasp_success))
    assert len(learned.predicted_y_pgs) == 2 and all(0 < p < 1 for p in learned.predicted_y_pgs)
    assert failed.plan_status == "INVALID_GOAL" and failed.success_rate == 0.0 and "NeRF" in failed.plan_reason
    summary = summarize(results)
    assert summary["diffusion + nerf"] == {"success_rate": 0.0, "objects": 1, "plans_failed": 1}
    json.dumps(result_rows(results))  # serialisable for reports


def test_paired_gains_compare_each_evaluator_with_its_samplers_unranked_plans_on_the_same_objects():
    from getagrip_ros.data.evaluate import ObjectResult, paired_gains

    def row(name, method, rate):
        return ObjectResult(name, method, (rate,), rate, "SUCCEEDED", "", (float("nan"),))

    results = [row("a", "fixed + none", 0.1), row("a", "fixed + bps", 0.5), row("b", "fixed + none", 0.3),
               row("b", "fixed + bps", 0.4), row("c", "fixed + bps", 1.0),  # c has no unranked plan: left out
               row("a", "diffusion + none", 0.2), row("a", "diffusion + geometry", 0.0)]
    gains = paired_gains(results)
    assert set(gains) == {"fixed + bps", "diffusion + geometry"}
    assert gains["fixed + bps"]["gain"] == pytest.approx(0.25) and gains["fixed + bps"]["objects"] == 2
    assert gains["fixed + bps"]["standard_error"] == pytest.approx(np.std([0.4, 0.1], ddof=1) / np.sqrt(2))
    assert gains["diffusion + geometry"]["gain"] == pytest.approx(-0.2)
    assert np.isnan(gains["diffusion + geometry"]["standard_error"])  # one object: no spread to measure


def test_a_method_with_the_mesh_plans_graspd_on_the_observations_mesh(box, tmp_path):
    import torch

    from getagrip_ros.data.evaluate import Observation

    from ..planning.test_graspd_sampler import FAST

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        planner = GraspPlanner(GraspPlannerConfig(graspd=FAST))
        config = EvaluationConfig(grasps_per_object=2, label=dataclasses.replace(LabelConfig(), num_perturbations=1))

        def observed_with_mesh(world):
            path = tmp_path / "box.obj"
            mesh = box.mesh.copy()
            mesh.apply_translation((*world.placement.xy_m, 0.0))
            mesh.export(path)
            return Observation(observed_box(world), str(path))

        methods = [Method("graspd", "none"), Method("graspd", "none", with_mesh=True)]
        cloud, mesh = evaluate_methods([box], planner, methods, observed_with_mesh, config)
        assert [r.method for r in (cloud, mesh)] == ["graspd + none", "graspd@mesh + none"]
        assert cloud.plan_status == mesh.plan_status == "SUCCEEDED", (cloud.plan_reason, mesh.plan_reason)
        assert "SDF from the object's mesh" in mesh.plan_reason and "mesh" not in cloud.plan_reason
        with pytest.raises(ValueError, match="has none"):  # a mesh method on an observation without one
            evaluate_methods([box], planner, methods[1:], observed_box, config)
    finally:
        torch.set_num_threads(threads)
