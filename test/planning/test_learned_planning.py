"""Planning with learned models: samplers (fixed, diffusion), evaluators (BPS, NeRF), refinement, checkpoints.

The models are small and randomly initialised; the tests check what the planner does with any model:
frames, ranking, refinement that only accepts improvements, determinism, and clear failures.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from getagrip_ros.grasp.filters import cable_filter_mask
from getagrip_ros.grasp.frames import grasp_zup_to_yup
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.perturb import PerturbationConfig
from getagrip_ros.models.checkpoints import LoadedModel, load_checkpoint, save_checkpoint
from getagrip_ros.models.nerf_evaluator import NerfEvaluator, NerfEvaluatorConfig
from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.perception.bps import encode_bps
from getagrip_ros.perception.density import FingerGridConfig
from getagrip_ros.planning.evaluators import NerfGraspEvaluator
from getagrip_ros.planning.heuristic_sampler import sample_heuristic_grasps
from getagrip_ros.planning.object_input import PlanningObject, T_frame_Oy_at, bps_points, object_from_points
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest
from getagrip_ros.planning.refinement import TrustRegionConfig, refine_grasps
from getagrip_ros.planning.samplers import load_grasp_set, save_grasp_set
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.status import StageError, StatusCode

POINTS = box_surface_points()


@pytest.fixture(scope="module")
def hand():
    return AllegroHand()


@pytest.fixture(scope="module")
def models(tiny_models):
    return {"dir": Path(tiny_models.bps_evaluator).parent, "files": tiny_models}


@pytest.fixture(scope="module")
def planner(models, hand):
    cfg = GraspPlannerConfig(num_samples=300, models=models["files"],
                             diffusion=dataclasses.replace(GraspPlannerConfig().diffusion, num_steps=10))
    return GraspPlanner(cfg, hand)


def _plan(planner, **kw):
    request = PlanRequest(points_m=POINTS, num_grasps=8, sampler="fixed", evaluator="bps", refinement_iterations=10)
    return planner.plan(dataclasses.replace(request, **kw))


def test_bps_evaluator_ranks_in_the_public_object_frame(planner, models):
    result = _plan(planner)
    assert result.success, result.reason
    p = result.planned
    assert len(p.grasps) == 8 and p.grasps.frame_id == "world"
    assert bool((p.y_pgs[:-1] >= p.y_pgs[1:]).all())  # best first
    # independent recomputation: full model forward, grasps in Oy (y up, origin at the cloud centroid)
    model = load_checkpoint(models["dir"] / "evaluator.pt").model
    centroid = POINTS.mean(0)
    grasps_Oy = grasp_zup_to_yup(p.grasps.transformed(torch.tensor(
        [[1, 0, 0, -centroid[0]], [0, 1, 0, -centroid[1]], [0, 0, 1, -centroid[2]], [0, 0, 0, 1.0]],
        dtype=torch.float64), "object"))
    bps = torch.from_numpy(encode_bps(POINTS, np.array([*centroid[:2], 0.0])).distances_m)
    with torch.no_grad():
        expected = model(bps.expand(8, -1), grasps_Oy.to_vector().float())
    torch.testing.assert_close(p.y_pgs, expected[:, 2], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(p.y_pick, expected[:, 0], atol=1e-5, rtol=1e-4)
    assert bool(cable_filter_mask(p.grasps).all())
    assert {"evaluation", "refinement"} <= set(result.timings_s) and "moves accepted" in result.reason


def test_refinement_only_ever_improves_and_accepts_moves(planner):
    base = _plan(planner, refinement_iterations=0).planned
    refined = _plan(planner, refinement_iterations=30).planned
    assert bool((refined.y_pgs >= base.y_pgs - 1e-6).all())  # order statistics of improved grasps
    assert float(refined.y_pgs.mean()) > float(base.y_pgs.mean())


def test_same_seed_same_grasps_other_seed_other_grasps(planner):
    for sampler in ("fixed", "diffusion"):
        a, b = _plan(planner, sampler=sampler, seed=5).planned, _plan(planner, sampler=sampler, seed=5).planned
        c = _plan(planner, sampler=sampler, seed=6).planned
        torch.testing.assert_close(a.grasps.to_vector(), b.grasps.to_vector(), rtol=0, atol=0)
        assert not torch.allclose(a.grasps.to_vector(), c.grasps.to_vector())


def test_diffusion_sampler_with_a_bps_goal(planner):
    obj = object_from_points(POINTS, "world")
    stages = []
    result = planner.plan(PlanRequest(bps=obj.bps_m, bps_centroid_height_m=float(POINTS.mean(0)[2]), frame_id="object",
                                      sampler="diffusion", evaluator="bps", num_grasps=5, refinement_iterations=3),
                          progress=lambda stage, fraction, best: stages.append((stage, fraction)))
    assert result.success, result.reason
    assert result.planned.grasps.frame_id == "object" and len(result.planned.grasps) == 5
    names = [s for s, _ in stages]
    assert names.count("sampling") == 10 and names.count("refinement") == 3  # one report per DDIM step / iteration
    fractions = [f for _, f in stages]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_sampled_vectors_become_grasps_as_the_public_code_converts_them(models, hand):
    """The public conversion of a sampler's vectors clamps the joints into the hand's limits and normalises the
    closing directions (random weights: the raw vectors are far outside both)."""
    from getagrip_ros.planning.samplers import DiffusionSampler, DiffusionSamplerConfig

    sampler = DiffusionSampler(load_checkpoint(models["files"].bps_sampler), DiffusionSamplerConfig(num_steps=4), hand)
    obj = object_from_points(POINTS, "world")
    grasps = sampler.sample(obj, 64, torch.Generator().manual_seed(0), lambda fraction: None)
    assert len(grasps) == 64
    q = grasps.joint_angles_rad.to(hand.dtype)
    assert bool(hand.within_limits(q).all())
    at_limit = (q == hand.lower_limits_rad) | (q == hand.upper_limits_rad)
    assert at_limit.any()  # some raw joints were outside and got clamped
    torch.testing.assert_close(grasps.fingertip_directions.norm(dim=-1), torch.ones(64, 4, dtype=torch.float64))


def test_the_public_sampler_setting_walks_all_1000_ddim_steps(models, hand):
    """num_steps 1000 (the public sampler's) visits every timestep of the public sequence, one progress report each."""
    from getagrip_ros.models.diffusion import ddim_timesteps
    from getagrip_ros.planning.samplers import DiffusionSampler, DiffusionSamplerConfig

    sampler = DiffusionSampler(load_checkpoint(models["files"].bps_sampler), DiffusionSamplerConfig(num_steps=1000), hand)
    assert len(ddim_timesteps(1000)) == 1000
    steps = []
    grasps = sampler.sample(object_from_points(POINTS, "world"), 4, torch.Generator().manual_seed(0), steps.append)
    assert len(grasps) == 4 and len(steps) == 1000 and steps[-1] == 1.0
    assert bool(hand.within_limits(grasps.joint_angles_rad.to(hand.dtype)).all())


def test_the_public_3000_point_crop_changes_only_the_bps(models, hand):
    """bps_max_points: the BPS from a fixed random subset of the cloud (as the public code's first 3000 of a randomly
    ordered cloud); the centroid, and so the object frame, from every point."""
    cloud = box_surface_points(n=5000)
    full, crop = object_from_points(cloud, "world"), object_from_points(cloud, "world", 3000)
    again = object_from_points(cloud, "world", 3000)
    torch.testing.assert_close(crop.T_frame_Oy, full.T_frame_Oy)
    np.testing.assert_array_equal(crop.bps_m, again.bps_m)  # the same subset every time
    assert not np.array_equal(crop.bps_m, full.bps_m) and (np.asarray(crop.bps_m) >= np.asarray(full.bps_m) - 1e-7).all()
    subset = encode_bps(bps_points(cloud, 3000), np.array([*cloud.mean(0)[:2], 0.0])).distances_m
    np.testing.assert_allclose(crop.bps_m, subset)
    assert len(bps_points(cloud, 3000)) == 3000 and bps_points(cloud, 0) is cloud and bps_points(cloud, 9000) is cloud
    planner = GraspPlanner(GraspPlannerConfig(num_samples=50, models=models["files"], bps_max_points=3000), hand)
    result = planner.plan(PlanRequest(points_m=cloud, num_grasps=5, sampler="fixed", evaluator="bps",
                                      refinement_iterations=0))
    assert result.success, result.reason


def test_from_public_vector_clamps_joints_and_normalises_directions(hand):
    v = torch.zeros(3, 37, dtype=torch.float64)
    v[:, 3], v[:, 7] = 1.0, 1.0  # rot6d of the identity
    v[0, 9:25], v[1, 9:25], v[2, 9:25] = -5.0, 5.0, 0.5
    v[:, 25:37] = torch.tensor([0.0, 0.0, 2.0] * 4)
    v[2, 25:28] = 0.0  # a zero direction: NaN, as the public code divides by its norm
    g = Grasp.from_public_vector(v, hand.lower_limits_rad, hand.upper_limits_rad, "Oy")
    torch.testing.assert_close(g.joint_angles_rad[0], hand.lower_limits_rad.double())
    torch.testing.assert_close(g.joint_angles_rad[1], hand.upper_limits_rad.double())
    torch.testing.assert_close(g.fingertip_directions[0], torch.tensor([[0.0, 0.0, 1.0]] * 4, dtype=torch.float64))
    assert g.finite().tolist() == [True, True, False]


def test_fixed_sets_in_both_formats_are_placed_at_the_object(tmp_path, hand):
    grasp_Oy = Grasp(torch.tensor([[0.01, 0.02, 0.03]]), torch.eye(3)[None], torch.zeros(1, 16),
                     torch.tensor([[[0.0, 0.0, 1.0]] * 4]), frame_id="Oy")
    save_grasp_set(tmp_path / "ours.npz", grasp_Oy)
    public = {"trans": np.array([[0.01, 0.02, 0.03]]), "rot": np.eye(3)[None], "joint_angles": np.zeros((1, 16)),
              "grasp_orientations": np.tile(np.eye(3), (1, 4, 1, 1)), "y_PGS": np.ones(1)}
    np.save(tmp_path / "public.npy", public, allow_pickle=True)
    for name in ("ours.npz", "public.npy"):
        torch.testing.assert_close(load_grasp_set(tmp_path / name).to_vector().double(), grasp_Oy.to_vector().double())
        planner = GraspPlanner(GraspPlannerConfig(num_samples=1, apply_cable_filter=False,
                                                  models=ModelFiles(fixed_grasps=str(tmp_path / name))), hand)
        result = planner.plan(PlanRequest(points_m=POINTS, num_grasps=1, sampler="fixed"))
        assert result.success, result.reason
        # Oy -> z-up: (x, y, z)_Oy = (x, -z, y) in the world, from the cloud centroid
        expected = POINTS.mean(0) + np.array([0.01, -0.03, 0.02])
        np.testing.assert_allclose(result.planned.grasps.palm_position_m[0].numpy(), expected, atol=1e-6)
        np.testing.assert_allclose(result.planned.grasps.fingertip_directions[0, 0].numpy(), [0, -1, 0], atol=1e-6)


def test_the_fixed_sampler_without_an_evaluator_draws_at_random(tmp_path, hand):
    """Even when the whole set fits in num_samples, the unranked grasps are a seeded draw, not the file's order."""
    n = 40
    grasps_Oy = Grasp(torch.tensor([[0.0, 0.0, 0.001 * i] for i in range(n)]), torch.eye(3).expand(n, 3, 3),
                      torch.zeros(n, 16), torch.tensor([[[0.0, 0.0, 1.0]] * 4] * n), frame_id="Oy")
    save_grasp_set(tmp_path / "set.npz", grasps_Oy)
    planner = GraspPlanner(GraspPlannerConfig(num_samples=100, apply_cable_filter=False,
                                              models=ModelFiles(fixed_grasps=str(tmp_path / "set.npz"))), hand)

    def first_indices(seed: int) -> list[int]:
        result = planner.plan(PlanRequest(points_m=POINTS, num_grasps=3, sampler="fixed", seed=seed))
        assert result.success, result.reason
        offsets_m = result.planned.grasps.palm_position_m[:, 1].numpy() - POINTS.mean(0)[1]  # Oy z -> world -y
        return [int(i) for i in np.rint(-offsets_m / 0.001)]

    draws = [first_indices(seed) for seed in range(4)]
    assert draws[0] == first_indices(0)  # seeded
    assert len({tuple(d) for d in draws}) == 4 and any(d[:3] != [0, 1, 2] for d in draws)


@pytest.mark.parametrize("files, words", [
    (ModelFiles(bps_evaluator="/nonexistent/evaluator.pt", fixed_grasps="FIXED"), "checkpoint not found"),
    (ModelFiles(bps_evaluator="SAMPLER", fixed_grasps="FIXED"), "holds a bps_sampler, not a bps_evaluator"),
    (ModelFiles(bps_evaluator="OTHER_BASIS", fixed_grasps="FIXED"), "another basis"),
    (ModelFiles(bps_evaluator="EVALUATOR", fixed_grasps="/nonexistent/set.npz"), "fixed grasp set not found"),
    (ModelFiles(bps_evaluator="EVALUATOR", fixed_grasps="EVALUATOR"), "cannot read the fixed grasp set"),
])
def test_missing_or_mismatched_models_end_with_a_reason(models, hand, files, words):
    names = {"FIXED": "fixed.npz", "SAMPLER": "sampler.pt", "OTHER_BASIS": "other_basis.pt", "EVALUATOR": "evaluator.pt"}
    files = ModelFiles(**{k: str(models["dir"] / names[v]) if v in names else v for k, v in dataclasses.asdict(files).items()})
    planner = GraspPlanner(GraspPlannerConfig(num_samples=50, models=files), hand)
    result = planner.plan(PlanRequest(points_m=POINTS, sampler="fixed", evaluator="bps"))
    assert result.status == StatusCode.INTERNAL_ERROR and words in result.reason and result.planned is None


def test_cancel_during_refinement_stops_within_one_iteration(planner):
    reports = []

    def cancel():
        return any(stage == "refinement" for stage, _ in reports)

    result = planner.plan(PlanRequest(points_m=POINTS, sampler="fixed", evaluator="bps", refinement_iterations=50),
                          progress=lambda stage, fraction, best: reports.append((stage, fraction)), should_cancel=cancel)
    assert result.status == StatusCode.CANCELED
    assert [s for s, _ in reports].count("refinement") == 1


def test_refine_grasps_moves_toward_better_scores():
    """With a score that prefers palms near a target, refinement walks the palms there and never gets worse."""
    target = torch.tensor([0.1, 0.0, 0.2], dtype=torch.float64)

    def score(g):
        y = torch.exp(-(g.palm_position_m - target).norm(dim=1) / 0.05).float()
        return torch.stack([y, y, y], 1)

    start = Grasp(torch.zeros(6, 3, dtype=torch.float64), torch.eye(3, dtype=torch.float64).expand(6, 3, 3),
                  torch.zeros(6, 16), torch.tensor([[[1.0, 0, 0]] * 4] * 6))
    limits = (torch.full((16,), -1.0, dtype=torch.float64), torch.full((16,), 1.0, dtype=torch.float64))
    history = []
    refined, labels, accepted = refine_grasps(start, score(start), score, 200, PerturbationConfig(),
                                              torch.Generator().manual_seed(0), limits,
                                              on_iteration=lambda it, y: history.append(y[:, 2].clone()))
    distance = (refined.palm_position_m - target).norm(dim=1)
    assert bool((distance < 0.12).all()) and bool((accepted > 5).all())
    assert all(bool((b >= a).all()) for a, b in zip(history, history[1:]))
    torch.testing.assert_close(labels, score(refined))
    region = TrustRegionConfig(max_translation_m=0.02, max_rotation_rad=0.1, max_joint_rad=0.05)
    bounded, _, accepted = refine_grasps(start, score(start), score, 200, PerturbationConfig(),
                                         torch.Generator().manual_seed(0), limits, lambda g: region.within(start, g))
    assert bool((accepted > 0).all()) and bool(region.within(start, bounded).all())
    assert float((bounded.palm_position_m - start.palm_position_m).norm(dim=1).max()) <= 0.02
    assert float((bounded.palm_position_m - target).norm(dim=1).min()) > 0.2 - 0.02  # the target is out of reach


def test_trust_region_bounds_each_quantity():
    start = Grasp(torch.zeros(3, 3, dtype=torch.float64), torch.eye(3, dtype=torch.float64).expand(3, 3, 3),
                  torch.zeros(3, 16, dtype=torch.float64), torch.tensor([[[1.0, 0, 0]] * 4] * 3, dtype=torch.float64))
    angle = 0.15
    R = torch.tensor([[1.0, 0, 0], [0, math.cos(angle), -math.sin(angle)], [0, math.sin(angle), math.cos(angle)]],
                     dtype=torch.float64)
    moved = Grasp(torch.tensor([[0.015, 0, 0], [0, 0, 0], [0, 0, 0]], dtype=torch.float64),
                  torch.stack([torch.eye(3, dtype=torch.float64), R, torch.eye(3, dtype=torch.float64)]),
                  torch.tensor([[0.0] * 16, [0.0] * 16, [0.0] * 15 + [0.08]], dtype=torch.float64), start.fingertip_directions)
    unbounded = TrustRegionConfig(math.inf, math.inf, math.inf)
    assert unbounded.within(start, moved).tolist() == [True, True, True]
    assert TrustRegionConfig().within(start, moved).tolist() == [False, False, False]  # 5 mm, 0.05 rad
    assert TrustRegionConfig(0.01, 0.1, 0.05).within(start, moved).tolist() == [False, False, False]
    assert TrustRegionConfig(0.02, 0.2, 0.1).within(start, moved).tolist() == [True, True, True]


def test_nerf_evaluator_sees_opacity_and_object_frame_coordinates(hand):
    """Analytic density (a 4 cm ball on the table); the grids' coordinate channels are the points in Oy."""
    centre = torch.tensor([0.6, 0.0, 0.05])

    def density(points):
        return torch.where((points - centre.to(points)).norm(dim=-1) < 0.04, 1000.0, 0.0).to(points)

    obj = PlanningObject("world", T_frame_Oy_at(centre.double().numpy()), np.zeros(4096, np.float32), density_fn=density)
    model = NerfEvaluator(NerfEvaluatorConfig(conv_channels=(4,), global_conv_channels=(4,), mlp_hidden=(8,))).eval()
    seen = []
    original = model.forward
    model.forward = lambda f, g: (seen.append((f, g)), original(f, g))[1]
    small = FingerGridConfig(num_x=5, num_y=5, num_z=9)
    metadata = {"global_grid": {"resolution": 9, "size_m": 0.2}, "finger_grid": dataclasses.asdict(small)}
    loaded = LoadedModel("nerf_evaluator", model, model.config, None, None, None, None, metadata)
    evaluator = NerfGraspEvaluator(loaded, hand, batch_size=2)
    pts = np.random.default_rng(0).normal(centre.numpy(), 0.02, size=(300, 3))
    grasps = sample_heuristic_grasps(pts, 40, hand, "world", generator=torch.Generator().manual_seed(0))[:3]
    scores = evaluator.prepare(obj)(grasps)
    assert scores.shape == (3, 3) and bool(((scores > 0) & (scores < 1)).all())
    fingers, global_grid = seen[0]
    assert fingers.shape == (2, 4, 4, 5, 5, 9) and global_grid.shape == (2, 4, 9, 9, 9) and len(seen) == 2
    tips_palm = hand.fingertip_positions(grasps.joint_angles_rad[:1].float())[0].double()
    tip_world = tips_palm @ grasps.palm_rotation[0].T + grasps.palm_position_m[0]
    tip_Oy = torch.stack([tip_world[:, 0] - centre[0], tip_world[:, 2] - centre[2], -(tip_world[:, 1] - centre[1])], 1)
    torch.testing.assert_close(fingers[0, :, 1:, 2, 2, 0].double(), tip_Oy, atol=1e-5, rtol=0)
    # the global grid is centred on the centroid (origin of Oy) and its alpha sees the ball
    assert abs(float(global_grid[0, 1:, 4, 4, 4].abs().max())) < 1e-6
    assert math.isclose(float(global_grid[0, 0, 4, 4, 4]), 1 - math.exp(-1000 * 0.2 / 9), rel_tol=1e-5)


def _ball_object(frame_id="world"):
    """A 4 cm ball on the table at (0.6, 0, 0.05) as the NeRF path would give it: points, BPS, density."""
    centre = np.array([0.6, 0.0, 0.05])
    rng = np.random.default_rng(0)
    d = rng.normal(size=(2000, 3))
    points = centre + 0.04 * d / np.linalg.norm(d, axis=1, keepdims=True)
    obj = object_from_points(points, frame_id)
    c = torch.from_numpy(centre).float()
    obj.density_fn = lambda p: torch.where((p - c.to(p)).norm(dim=-1) < 0.04, 1000.0, 0.0).to(p)
    return obj


def test_planning_with_the_nerf_evaluator_ranks_and_refines(tmp_path, hand, monkeypatch):
    """The NeRF source's extraction is replaced by a known field (a real NeRF: see the slow test); the rest is real."""
    model = NerfEvaluator(NerfEvaluatorConfig(conv_channels=(4, 8), global_conv_channels=(4,), mlp_hidden=(8,)))
    small = FingerGridConfig(num_x=7, num_y=7, num_z=9)
    save_checkpoint(tmp_path / "nerf.pt", "nerf_evaluator", model, model.config,
                    metadata={"finger_grid": dataclasses.asdict(small), "global_grid": {"resolution": 9, "size_m": 0.3}})
    (tmp_path / "config.yml").write_text("a NeRF config")
    monkeypatch.setattr("getagrip_ros.planning.planner.object_from_nerf", lambda path, device, progress: _ball_object())
    planner = GraspPlanner(GraspPlannerConfig(num_samples=60, nerf_evaluator_batch_size=7,
                                              models=ModelFiles(nerf_evaluator=str(tmp_path / "nerf.pt"))), hand)
    stages = []
    result = planner.plan(PlanRequest(nerf_config_path=str(tmp_path / "config.yml"), sampler="heuristic",
                                      evaluator="nerf", num_grasps=4, refinement_iterations=3),
                          progress=lambda stage, fraction, best: stages.append(stage))
    assert result.success, result.reason
    p = result.planned
    assert p.grasps.frame_id == "world" and len(p.grasps) == 4 and bool((p.y_pgs[:-1] >= p.y_pgs[1:]).all())
    assert stages.count("refinement") == 3 and "ranked by the nerf evaluator" in result.reason


def test_cancel_reaches_into_the_nerf_extraction(tmp_path, hand, monkeypatch):
    steps = []

    def extraction(path, device, progress):  # stands in for the perception extraction's progress calls
        for stage in ("centroid", "point_cloud", "bps", "mesh"):
            progress(stage, len(steps) / 4)
            steps.append(stage)
        return _ball_object()

    monkeypatch.setattr("getagrip_ros.planning.planner.object_from_nerf", extraction)
    (tmp_path / "config.yml").write_text("a NeRF config")
    planner = GraspPlanner(GraspPlannerConfig(num_samples=20), hand)
    result = planner.plan(PlanRequest(nerf_config_path=str(tmp_path / "config.yml")),
                          should_cancel=lambda: len(steps) >= 2)
    assert result.status == StatusCode.CANCELED and steps == ["centroid", "point_cloud"]


def test_shipped_models_are_the_default_and_a_missing_one_is_reported(tiny_models, tmp_path, monkeypatch, hand):
    import shutil

    from getagrip_ros.models import shipped

    monkeypatch.setattr(shipped, "WEIGHTS_DIR", tmp_path)
    request = PlanRequest(points_m=POINTS, num_grasps=3, sampler="fixed", evaluator="bps", refinement_iterations=2)
    empty = GraspPlanner(GraspPlannerConfig(num_samples=64), hand)
    assert empty.preload() == ([], {})  # nothing shipped in this install: nothing to preload, no error
    result = empty.plan(request)
    assert result.status == StatusCode.NOT_IMPLEMENTED and "ships with this install" in result.reason
    assert str(tmp_path / "fixed_grasps.npz") in result.reason
    for setting, source in (("bps_evaluator", tiny_models.bps_evaluator), ("bps_sampler", tiny_models.bps_sampler),
                            ("fixed_grasps", tiny_models.fixed_grasps)):
        shutil.copy(source, tmp_path / shipped.SHIPPED_FILES[setting])
    planner = GraspPlanner(GraspPlannerConfig(num_samples=64), hand)
    assert planner.preload() == (["sampler diffusion", "sampler fixed", "evaluator bps"], {})
    for sampler in ("fixed", "diffusion"):
        result = planner.plan(dataclasses.replace(request, sampler=sampler))
        assert result.success and len(result.planned.grasps) == 3 and "ranked by the bps evaluator" in result.reason
    nerf = GraspPlanner(GraspPlannerConfig(models=ModelFiles(nerf_evaluator="shipped")), hand)
    loaded, failed = nerf.preload()  # the NeRF evaluator fails alone: the shipped others still load
    assert loaded == ["sampler diffusion", "sampler fixed", "evaluator bps"]
    assert list(failed) == ["evaluator nerf"] and "ships no nerf_evaluator" in failed["evaluator nerf"]
