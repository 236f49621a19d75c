"""The simulation evaluator: grasps executed in MuJoCo on a model of the planner's object."""

import numpy as np
import pytest
import torch
import trimesh

from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import approximate_convex_parts
from getagrip_ros.planning.graspd_sampler import GraspdSamplerConfig
from getagrip_ros.planning.object_input import object_from_mesh, object_from_points
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest
from getagrip_ros.planning.simulation_evaluator import (SimulationEvaluatorConfig, SimulationGraspEvaluator, object_mesh,
                                                        simulation_object)
from getagrip_ros.status import StageError, StatusCode
from getagrip_ros.synthesis.optimizer import SynthesisConfig

FAST = SimulationEvaluatorConfig(num_trials=2)


def _cup() -> trimesh.Trimesh:
    """A 7 cm cup with 5 mm walls and a floor, resting on z = 0, centred at (0.3, -0.2)."""
    outer = trimesh.creation.cylinder(radius=0.035, height=0.09, sections=48)
    inner = trimesh.creation.cylinder(radius=0.030, height=0.09, sections=48)
    inner.apply_translation((0, 0, 0.005))
    cup = outer.difference(inner)
    cup.apply_translation((0.3, -0.2, 0.045))
    return cup


def test_approximate_convex_parts_cover_the_solid_and_keep_a_cup_open():
    cup = _cup()
    parts = approximate_convex_parts(cup, "cup", voxel_m=0.003, max_parts=48)
    assert 8 <= len(parts) <= 48 and all(p.is_convex and p.volume > 0 for p in parts)
    lo, hi = cup.bounds
    grid = np.stack(np.meshgrid(*[np.arange(a, b, 0.002) for a, b in zip(lo, hi)], indexing="ij"), -1).reshape(-1, 3)
    inside = grid[cup.contains(grid)]
    covered = np.zeros(len(inside), dtype=bool)
    for part in parts:
        covered |= part.contains(inside)
    assert len(inside) > 1000 and covered.mean() > 0.85, covered.mean()  # thin walls: a hull spans a wall's chord
    # the cup stays a cup: the middle of its inside, 2 cm above the floor, is in no part
    hollow = np.array([[0.3, -0.2, 0.02 + z] for z in (0.0, 0.02, 0.04)])
    assert not any(part.contains(hollow).any() for part in parts)
    with pytest.raises(ObjectRejected, match="no convex part has a volume"):
        approximate_convex_parts(trimesh.creation.box((0.001, 0.001, 0.001)), "speck", voxel_m=0.01)


def test_simulation_object_keeps_the_surface_and_its_pose():
    cup = _cup()
    body, T_object_frame = simulation_object(cup, FAST)
    assert body.mesh.is_watertight and body.volume_m3 == pytest.approx(cup.volume, rel=1e-3)
    moved = cup.copy()
    moved.apply_transform(T_object_frame)
    assert np.allclose(moved.bounds, body.mesh.bounds, atol=1e-9)
    assert body.mesh.bounds[0, 2] == pytest.approx(0.0, abs=1e-9)
    assert np.allclose(T_object_frame[:3, 3], [-0.3, 0.2, 0.0], atol=1e-6)


def test_grasps_that_lift_the_cube_score_high_and_misses_score_zero(cube_grasps, cube_mesh_path):
    """The cube grasps lift the real cube (y_PGS = 1 in the data engine); simulated on the cube's mesh they score
    high. The same grasps 15 cm above it touch nothing (y_coll = 1, y_pick = 0), 2 cm into it collide (y_coll = 0)."""
    obj = object_from_mesh(cube_mesh_path, "world")
    score = SimulationGraspEvaluator(FAST).prepare(obj)
    good = score(cube_grasps)
    assert good.shape == (len(cube_grasps), 3) and good.dtype == torch.float32
    assert float(good[:, 2].mean()) >= 0.6, good
    above = cube_grasps.transformed(np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0.15], [0, 0, 0, 1.0]]), "world")
    missed = score(above)
    assert torch.equal(missed[:, 1], torch.ones(len(cube_grasps))) and not missed[:, 0].any() and not missed[:, 2].any()
    into = cube_grasps.transformed(np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, -0.02], [0, 0, 0, 1.0]]), "world")
    assert float(score(into)[:, 1].mean()) < 0.5


def test_a_cloud_only_object_is_modelled_from_its_signed_distance(cube_grasps, cube_mesh_path):
    mesh = trimesh.load(cube_mesh_path)
    points, _ = trimesh.sample.sample_surface(mesh, 3000, seed=0)
    points = points[points[:, 2] > 0.002]  # the camera never sees the bottom
    obj = object_from_points(points, "world")
    surface = object_mesh(obj)
    assert abs(surface.bounds - mesh.bounds).max() < 0.01
    labels = SimulationGraspEvaluator(FAST).prepare(obj)(cube_grasps)
    assert float(labels[:, 2].mean()) >= 0.5, labels


def test_planner_ranks_graspd_grasps_by_simulation_without_refinement(cube_mesh_path, one_torch_thread):
    config = GraspPlannerConfig(models=ModelFiles(bps_evaluator="", bps_sampler="", fixed_grasps="", geometry_evaluator=""),
                                graspd=GraspdSamplerConfig(num_grasps=8, synthesis=SynthesisConfig(num_steps=60)),
                                simulation=SimulationEvaluatorConfig(num_trials=1, max_grasps=6))
    planner = GraspPlanner(config)
    mesh = trimesh.load(cube_mesh_path)
    points, _ = trimesh.sample.sample_surface(mesh, 2000, seed=1)
    result = planner.plan(PlanRequest(points_m=points, mesh_path=cube_mesh_path, frame_id="world", num_grasps=4,
                                      sampler="graspd", evaluator="sim", refinement_iterations=50, seed=3))
    assert result.success, result.reason
    y = result.planned.y_pgs
    assert len(result.planned.grasps) == 4 and ((y == 0) | (y == 1)).all()  # one trial each: 0 or 1
    assert (y[:-1] >= y[1:]).all()
    assert "ranked by the sim evaluator (6 grasps scored; no refinement)" in result.reason
    assert "refinement" not in result.timings_s and "evaluation" in result.timings_s
    bps_goal = PlanRequest(bps=np.full(4096, 0.1), bps_centroid_height_m=0.05, frame_id="world", sampler="fixed",
                           evaluator="sim")
    refused = planner.plan(bps_goal)
    assert refused.status == StatusCode.INVALID_GOAL and "sim evaluator needs the object's points" in refused.reason
    with pytest.raises(StageError, match="BPS alone"):
        object_mesh(object_from_points(points, "world").__class__("world", torch.eye(4, dtype=torch.float64), np.zeros(4096)))


def test_the_geometry_sim_cascade_verifies_the_geometry_evaluators_best_and_puts_them_first(cube_mesh_path, one_torch_thread):
    """The cascade ranks and refines like the geometry evaluator, then simulates its first cascade_grasps grasps and
    orders them by the simulated y_PGS, with the simulated labels; the grasps after them are the geometry plan's."""
    simulation = SimulationEvaluatorConfig(num_trials=1, cascade_grasps=3)
    planner = GraspPlanner(GraspPlannerConfig(simulation=simulation))
    points, _ = trimesh.sample.sample_surface(trimesh.load(cube_mesh_path), 2000, seed=1)
    request = dict(points_m=points, frame_id="world", num_grasps=6, sampler="fixed", refinement_iterations=5, seed=3)
    geometry = planner.plan(PlanRequest(**request, evaluator="geometry"))
    progress = []
    cascade = planner.plan(PlanRequest(**request, evaluator="geometry>sim"),
                           progress=lambda stage, fraction, best: progress.append((stage, fraction)))
    assert geometry.success and cascade.success, (geometry.reason, cascade.reason)
    assert "the first 3 verified by the sim evaluator (1 simulated executions each)" in cascade.reason
    assert "verification" in cascade.timings_s and "verification" not in geometry.timings_s
    g, c = geometry.planned.grasps.to_vector(), cascade.planned.grasps.to_vector()
    head = [int(torch.nonzero((g[:3] == row).all(1))[0]) for row in c[:3]]  # the same 3 grasps, re-ordered
    assert sorted(head) == [0, 1, 2]
    torch.testing.assert_close(c[3:], g[3:])
    torch.testing.assert_close(cascade.planned.y_pgs[3:], geometry.planned.y_pgs[3:])
    y = cascade.planned.y_pgs[:3]
    assert ((y == 0) | (y == 1)).all() and (y[:-1] >= y[1:]).all()  # one simulated execution each, best first
    score = SimulationGraspEvaluator(simulation).prepare(object_from_points(points, "world"))
    torch.testing.assert_close(score(cascade.planned.grasps[:3])[:, 2], y.float())  # the simulation's own labels
    stages = [stage for stage, _ in progress]
    assert "verification" in stages and stages.index("verification") > stages.index("refinement")
    assert all(a <= b for (_, a), (_, b) in zip(progress, progress[1:]))  # progress never goes back
    refused = planner.plan(PlanRequest(bps=np.full(4096, 0.1), bps_centroid_height_m=0.05, frame_id="world",
                                       sampler="fixed", evaluator="geometry>sim"))
    assert refused.status == StatusCode.INVALID_GOAL and "geometry>sim evaluator needs the object's points" in refused.reason
    with pytest.raises(ValueError, match="cascade_grasps"):
        SimulationGraspEvaluator(SimulationEvaluatorConfig(cascade_grasps=0))


def test_the_pooled_sampler_verifies_the_fixed_sets_best_and_graspds_grasps_together(cube_mesh_path, one_torch_thread):
    """fixed_graspd + geometry>sim: the geometry evaluator ranks and refines the fixed set as in the plain cascade, graspd
    synthesises the grasps it would alone, and the simulation verifies the cascade's first grasps and graspd's
    together, best first; the fixed plan's other grasps follow in its order."""
    simulation = SimulationEvaluatorConfig(num_trials=1, cascade_grasps=3, max_grasps=4)
    config = GraspPlannerConfig(simulation=simulation,
                                graspd=GraspdSamplerConfig(num_grasps=5, synthesis=SynthesisConfig(num_steps=60)))
    planner = GraspPlanner(config)
    points, _ = trimesh.sample.sample_surface(trimesh.load(cube_mesh_path), 2000, seed=1)
    request = dict(points_m=points, frame_id="world", num_grasps=8, refinement_iterations=5, seed=3)
    geometry = planner.plan(PlanRequest(**request, sampler="fixed", evaluator="geometry"))
    progress = []
    pooled = planner.plan(PlanRequest(**request, sampler="fixed_graspd", evaluator="geometry>sim"),
                          progress=lambda stage, fraction, best: progress.append((stage, fraction)))
    assert geometry.success and pooled.success, (geometry.reason, pooled.reason)
    assert "the first 3 and the graspd sampler's first 4 verified by the sim evaluator" in pooled.reason
    g, p = geometry.planned.grasps.to_vector(), pooled.planned.grasps.to_vector()
    assert len(p) == 8
    from_fixed = [i for i, row in enumerate(p[:7]) if (g[:3] == row).all(1).any()]
    assert len(from_fixed) == 3  # the geometry plan's first 3, among graspd's first 4
    alone = planner.plan(PlanRequest(**{**request, "num_grasps": 5}, sampler="graspd", evaluator="none"))
    alone = alone.planned.grasps.to_vector()
    from_graspd = [i for i, row in enumerate(p[:7]) if (alone[:4] == row).all(1).any()]
    assert sorted(from_fixed + from_graspd) == list(range(7))
    torch.testing.assert_close(p[7:], g[3:4])  # then the fixed plan's 4th
    y = pooled.planned.y_pgs[:7]
    assert ((y == 0) | (y == 1)).all() and (y[:-1] >= y[1:]).all()
    score = SimulationGraspEvaluator(simulation).prepare(object_from_points(points, "world"))
    torch.testing.assert_close(score(pooled.planned.grasps[:7])[:, 2], y.float())  # the simulation's own labels
    assert all(a <= b for (_, a), (_, b) in zip(progress, progress[1:]))  # progress never goes back
    refused = planner.plan(PlanRequest(**request, sampler="fixed_graspd", evaluator="geometry"))
    assert refused.status == StatusCode.INVALID_GOAL and "use one of ['geometry>sim']" in refused.reason
