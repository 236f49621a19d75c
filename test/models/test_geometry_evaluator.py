"""The geometry evaluator: hand-object features, the model and its checkpoint, training, and planning with it
(alone and averaged with the BPS evaluator)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from getagrip_ros.cli.train import main as train_main
from getagrip_ros.grasp.frames import invert_transform
from getagrip_ros.models.checkpoints import load_checkpoint, save_checkpoint
from getagrip_ros.models.geometry_evaluator import (
    COUNT_CENTRES_PALM_M,
    NUM_FEATURES,
    NUM_HAND_POINTS,
    PALM_POINTS_PALM_M,
    SURFACE_CLIP_M,
    SURFACE_FEATURES_PER_LINK,
    GeometryEvaluator,
    GeometryEvaluatorConfig,
    HandObjectFeatures,
    feature_count,
)
from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.perception.bps import public_basis_points_By
from getagrip_ros.planning.evaluators import BpsGraspEvaluator, GeometryGraspEvaluator, MeanGraspEvaluator
from getagrip_ros.planning.object_input import object_from_points
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest
from getagrip_ros.planning.samplers import load_grasp_set
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.status import StatusCode
from getagrip_ros.training.datasets import DatasetError, read_bps_dataset, write_bps_dataset
from getagrip_ros.training.trainers import GeometryEvaluatorTrainConfig, geometry_features, train_geometry_evaluator

HEIGHTS = slice(NUM_HAND_POINTS, 2 * NUM_HAND_POINTS)
COSINES = slice(2 * NUM_HAND_POINTS, 2 * NUM_HAND_POINTS + 4)
PALM_CENTRE = 20  # first palm point, after the 20 skeleton points


@pytest.fixture(scope="module")
def hand():
    return AllegroHand()


@pytest.fixture(scope="module")
def grasps_Oy(tiny_models):
    return load_grasp_set(tiny_models.fixed_grasps)[:40]


def _yaw_Oy(angle: float) -> np.ndarray:
    """Rotation about Oy's up axis (y)."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def test_features_do_not_change_when_hand_and_object_move_together_over_the_table(hand, grasps_Oy):
    cloud = np.random.default_rng(0).normal(size=(500, 3)) * [0.03, 0.05, 0.03]  # in Oy, y up
    before = HandObjectFeatures(hand, cloud, -0.06)(grasps_Oy)
    assert before.shape == (len(grasps_Oy), NUM_FEATURES) and torch.isfinite(before).all()
    R, t = _yaw_Oy(0.7), np.array([0.05, 0.02, -0.03])
    T = torch.eye(4, dtype=torch.float64)
    T[:3, :3], T[:3, 3] = torch.from_numpy(R), torch.from_numpy(t)
    moved = HandObjectFeatures(hand, cloud @ R.T + t, -0.06 + t[1])(grasps_Oy.transformed(T, "Oy"))
    torch.testing.assert_close(moved, before, atol=2e-5, rtol=1e-4)
    lifted = HandObjectFeatures(hand, cloud, -0.07)(grasps_Oy)  # the table 1 cm lower: every height 1 cm more
    torch.testing.assert_close(lifted[:, HEIGHTS] - before[:, HEIGHTS], torch.full_like(before[:, HEIGHTS], 0.01),
                               atol=1e-6, rtol=0)
    torch.testing.assert_close(lifted[:, :NUM_HAND_POINTS], before[:, :NUM_HAND_POINTS])


def test_features_measure_distances_directions_and_counts_against_the_cloud(hand, grasps_Oy):
    g = grasps_Oy[:1].to(dtype=torch.float64)
    palm_centre_Oy = (g.palm_rotation[0] @ torch.tensor(PALM_POINTS_PALM_M[0], dtype=torch.float64)
                      + g.palm_position_m[0]).numpy()
    tips = hand.skeleton_positions(g.joint_angles_rad.float())[0, :, 4].double()
    tips_Oy = (tips @ g.palm_rotation[0].T + g.palm_position_m[0]).numpy()
    cloud = np.concatenate([np.repeat(palm_centre_Oy[None], 10, axis=0), tips_Oy + 0.02 * g.fingertip_directions[0].numpy()])
    f = HandObjectFeatures(hand, cloud, -0.2, GeometryEvaluatorConfig(max_distance_m=0.2))(g)[0]
    assert f[PALM_CENTRE] == pytest.approx(0.0, abs=1e-6)  # a cloud point on the palm centre
    assert f[NUM_HAND_POINTS + PALM_CENTRE] == pytest.approx(palm_centre_Oy[1] + 0.2, abs=1e-5)  # height above the table
    torch.testing.assert_close(f[COSINES], torch.ones(4))  # every closing direction points at the nearest point
    counts = f[2 * NUM_HAND_POINTS + 4:]
    assert counts[0] == pytest.approx(np.log1p(10), abs=1e-5)  # 10 points at the palm centre, within 3 cm
    assert counts[len(COUNT_CENTRES_PALM_M)] >= counts[0]  # the 6 cm ball around the palm centre holds at least as many
    flipped = dataclasses.replace(g, fingertip_directions=-g.fingertip_directions)
    torch.testing.assert_close(HandObjectFeatures(hand, cloud, -0.2)(flipped)[0, COSINES], -torch.ones(4))
    far = HandObjectFeatures(hand, cloud + 5.0, -0.2, GeometryEvaluatorConfig(max_distance_m=0.1))(g)[0]
    torch.testing.assert_close(far[:NUM_HAND_POINTS], torch.full((NUM_HAND_POINTS,), 0.1))  # clipped
    for bad in (np.zeros((0, 3)), np.full((5, 3), np.nan), np.zeros((5, 2))):
        with pytest.raises(ValueError, match="cloud"):
            HandObjectFeatures(hand, bad, 0.0)


SURFACE = GeometryEvaluatorConfig(feature_set="surface", num_features=feature_count("surface"))


def _per_link(features: torch.Tensor) -> torch.Tensor:
    """(B, L, 6) surface features per link: distance, signed distance, contact, alignment, height, inside."""
    return features[:, NUM_FEATURES:].reshape(len(features), -1, SURFACE_FEATURES_PER_LINK)


def test_surface_features_move_with_hand_and_object_and_see_the_object_inside_the_hand(hand, grasps_Oy):
    """The surface set keeps the skeleton features, is invariant to moving both together over the table, and tells a
    palm sunk into a box (negative signed distance, cloud points in its spheres) from a palm in free space."""
    cloud = np.random.default_rng(0).normal(size=(500, 3)) * [0.03, 0.05, 0.03]
    before = HandObjectFeatures(hand, cloud, -0.06, SURFACE)(grasps_Oy)
    assert before.shape == (len(grasps_Oy), 56 + 21 * SURFACE_FEATURES_PER_LINK) and torch.isfinite(before).all()
    torch.testing.assert_close(before[:, :NUM_FEATURES], HandObjectFeatures(hand, cloud, -0.06)(grasps_Oy))
    R, t = _yaw_Oy(0.7), np.array([0.05, 0.02, -0.03])
    T = torch.eye(4, dtype=torch.float64)
    T[:3, :3], T[:3, 3] = torch.from_numpy(R), torch.from_numpy(t)
    moved = HandObjectFeatures(hand, cloud @ R.T + t, -0.06 + t[1], SURFACE)(grasps_Oy.transformed(T, "Oy"))
    torch.testing.assert_close(moved, before, atol=2e-4, rtol=1e-3)
    g = grasps_Oy[:1].to(dtype=torch.float64)
    palm_centre_Oy = (g.palm_rotation[0] @ torch.tensor(PALM_POINTS_PALM_M[0], dtype=torch.float64) + g.palm_position_m[0]).numpy()
    box = box_surface_points((0.05, 0.05, 0.05), (0.0, 0.0), n=3000)
    box = box - box.mean(axis=0) + palm_centre_Oy  # a 5 cm box around the palm centre
    sunk = _per_link(HandObjectFeatures(hand, box, -0.3, SURFACE)(g))[0, 0]  # the palm link
    free = _per_link(HandObjectFeatures(hand, box + [0.0, 0.5, 0.0], -0.3, SURFACE)(g))[0, 0]
    assert sunk[1] < -0.005 and sunk[5] > np.log1p(10) and sunk[2] > 0.1, sunk
    assert free[1] == pytest.approx(SURFACE_CLIP_M) and free[5] == 0 and free[2] == 0 and free[3] == 0, free
    assert sunk[4] == pytest.approx(free[4])  # the palm's lowest height does not depend on the object
    with pytest.raises(ValueError, match="unknown feature set"):
        HandObjectFeatures(hand, cloud, -0.06, GeometryEvaluatorConfig(feature_set="fingers"))
    with pytest.raises(ValueError, match="has 182 features, the config says 56"):
        GeometryEvaluator(GeometryEvaluatorConfig(feature_set="surface"))


def test_model_standardises_its_features_and_its_checkpoint_reloads(tmp_path):
    torch.manual_seed(0)
    model = GeometryEvaluator(GeometryEvaluatorConfig(hidden_widths=(32, 16)))
    features = torch.randn(200, NUM_FEATURES) * 5 + 3
    model.set_normalization(features)
    torch.testing.assert_close(((features - model.feature_mean) / model.feature_std).mean(0), torch.zeros(NUM_FEATURES),
                               atol=1e-5, rtol=0)
    model.eval()
    out = model(features)
    assert out.shape == (200, 3) and (out > 0).all() and (out < 1).all()
    save_checkpoint(tmp_path / "g.pt", "geometry_evaluator", model, model.config)
    loaded = load_checkpoint(tmp_path / "g.pt", "geometry_evaluator")
    assert loaded.config.hidden_widths == (32, 16)
    torch.testing.assert_close(loaded.model(features), out)


def _sphere_dataset(path, hand, num_objects=24, grasps_per_object=60, with_clouds=True, seed=0):
    """Spheres of random radius resting on the table; fixed-set grasps moved so that their palm centre lies 0-4 cm
    off the surface; y = 1 within 1.5 cm (a rule of the hand-object geometry)."""
    from getagrip_ros.models.shipped import WEIGHTS_DIR

    rng = np.random.default_rng(seed)
    base = load_grasp_set(WEIGHTS_DIR / "fixed_grasps.npz")
    clouds, table_y, vectors, labels, idx = [], [], [], [], []
    for i in range(num_objects):
        radius = rng.uniform(0.03, 0.06)
        d = rng.normal(size=(300, 3))
        clouds.append(radius * d / np.linalg.norm(d, axis=1, keepdims=True))
        table_y.append(-radius)
        g = base[rng.choice(len(base), grasps_per_object, replace=False)].to(dtype=torch.float64)
        centre = torch.einsum("bij,j->bi", g.palm_rotation, torch.tensor(PALM_POINTS_PALM_M[0], dtype=torch.float64))
        centre = centre + g.palm_position_m
        gap = rng.uniform(0.0, 0.04, grasps_per_object)  # palm centre moved radially to this gap to the surface
        outward = centre / centre.norm(dim=1, keepdim=True)
        g.palm_position_m = g.palm_position_m + outward * (torch.from_numpy(radius + gap) - centre.norm(dim=1))[:, None]
        vectors.append(g.to_numpy_vector())
        labels.append((gap < 0.015).astype(np.float32))
        idx.append(np.full(grasps_per_object, i))
    y = np.concatenate(labels)
    extra = {"object_clouds_Oy_m": clouds, "table_y_m": np.array(table_y)} if with_clouds else {}
    return write_bps_dataset(path, basis_points_m=public_basis_points_By(), bpss_m=np.zeros((num_objects, 4096)),
                             object_codes=[f"sphere_{i}" for i in range(num_objects)], grasps=np.concatenate(vectors),
                             grasp_bps_idx=np.concatenate(idx), y_pick=y, y_coll=y, y_PGS=y, **extra)


def test_dataset_clouds_round_trip_and_bad_ones_are_refused(tmp_path, hand):
    data = read_bps_dataset(_sphere_dataset(tmp_path / "d.h5", hand, num_objects=3, grasps_per_object=5))
    assert data.has_clouds and data.object_num_points.tolist() == [300, 300, 300]
    assert np.linalg.norm(data.object_cloud_Oy_m(2), axis=1) == pytest.approx(-data.table_y_m[2], abs=1e-6)
    assert not read_bps_dataset(_sphere_dataset(tmp_path / "n.h5", hand, 2, 5, with_clouds=False)).has_clouds
    with pytest.raises(DatasetError, match="go together"):
        write_bps_dataset(tmp_path / "bad.h5", basis_points_m=np.zeros((4, 3)), bpss_m=np.zeros((1, 4)),
                          object_codes=["a"], grasps=np.zeros((1, 37)), grasp_bps_idx=np.zeros(1, int),
                          y_pick=np.zeros(1), y_coll=np.zeros(1), y_PGS=np.zeros(1), object_clouds_Oy_m=[np.zeros((2, 3))])


def test_geometry_evaluator_learns_a_geometric_rule_and_the_cli_trains_and_refuses(tmp_path, hand, tiny_models, capsys):
    path = _sphere_dataset(tmp_path / "spheres.h5", hand)
    config = GeometryEvaluatorTrainConfig(loop=dataclasses.replace(GeometryEvaluatorTrainConfig().loop, epochs=30,
                                                                   batch_size=128, val_fraction=0.25))
    result = train_geometry_evaluator(path, tmp_path / "geo", config, progress=False)
    data = read_bps_dataset(path)
    loaded = load_checkpoint(result.best_checkpoint, "geometry_evaluator")
    val = np.isin(data.grasp_object_codes, loaded.metadata["val_objects"])
    y = data.labels[val, 2]
    assert 0.1 < y.mean() < 0.9
    constant = float(((y - data.labels[~val, 2].mean()) ** 2).mean())
    assert result.best_val_loss < 0.6 * constant, (result.best_val_loss, constant)
    scores = loaded.model(torch.from_numpy(geometry_features(data)[val]))[:, 2].detach().numpy()
    auc = (scores[y > 0.5][:, None] > scores[y < 0.5][None]).mean()
    assert auc > 0.85
    assert train_main(["geometry-evaluator", "--dataset", str(path), "--output-dir", str(tmp_path / "cli"),
                       "--epochs", "1", "--hidden-widths", "16", "--quiet"]) == 0
    assert load_checkpoint(tmp_path / "cli" / "best.pt", "geometry_evaluator").config.hidden_widths == (16,)
    assert train_main(["geometry-evaluator", "--dataset", str(path), "--output-dir", str(tmp_path / "surface"),
                       "--epochs", "1", "--hidden-widths", "16", "--feature-set", "surface", "--quiet"]) == 0
    surface = load_checkpoint(tmp_path / "surface" / "best.pt", "geometry_evaluator")
    assert (surface.config.feature_set, surface.config.num_features) == ("surface", feature_count("surface"))
    obj = object_from_points(box_surface_points(), "world")  # the planner's evaluator computes the same set
    scores = GeometryGraspEvaluator(surface, hand).prepare(obj)(load_grasp_set(tiny_models.fixed_grasps)[:3])
    assert scores.shape == (3, 3) and torch.isfinite(scores).all()
    capsys.readouterr()
    no_clouds = _sphere_dataset(tmp_path / "no_clouds.h5", hand, 4, 10, with_clouds=False)
    assert train_main(["geometry-evaluator", "--dataset", str(no_clouds), "--output-dir", str(tmp_path / "x"),
                       "--quiet"]) == 2
    assert "no object clouds" in capsys.readouterr().err


@pytest.fixture(scope="module")
def geometry_checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model = GeometryEvaluator(GeometryEvaluatorConfig(hidden_widths=(32,)))
    model.feature_std.fill_(0.05)
    path = tmp_path_factory.mktemp("geometry") / "geometry.pt"
    save_checkpoint(path, "geometry_evaluator", model, model.config)
    return path


def test_planner_scores_in_the_object_frame_ranks_refines_and_needs_points(hand, tiny_models, geometry_checkpoint):
    points = box_surface_points()
    obj = object_from_points(points, "world")
    loaded = load_checkpoint(geometry_checkpoint, "geometry_evaluator")
    grasps_Oy = load_grasp_set(tiny_models.fixed_grasps)[:30]
    grasps_world = grasps_Oy.transformed(obj.T_frame_Oy, "world")
    T_Oy_world = invert_transform(obj.T_frame_Oy).numpy()
    cloud_Oy = points @ T_Oy_world[:3, :3].T + T_Oy_world[:3, 3]
    expected = loaded.model(HandObjectFeatures(hand, cloud_Oy, -obj.centroid_m[2])(grasps_Oy))
    torch.testing.assert_close(GeometryGraspEvaluator(loaded, hand).prepare(obj)(grasps_world), expected,
                               atol=1e-5, rtol=1e-4)

    files = dataclasses.replace(tiny_models, geometry_evaluator=str(geometry_checkpoint))
    planner = GraspPlanner(GraspPlannerConfig(num_samples=200, models=files), hand)
    assert "evaluator geometry" in planner.preload()[0]
    request = PlanRequest(points_m=points, num_grasps=6, sampler="fixed", evaluator="geometry", refinement_iterations=10)
    result = planner.plan(request)
    assert result.success and "ranked by the geometry evaluator" in result.reason
    y = result.planned.y_pgs.numpy()
    assert np.isfinite(y).all() and (np.diff(y) <= 1e-6).all()
    rescored = GeometryGraspEvaluator(loaded, hand).prepare(obj)(result.planned.grasps)[:, 2].numpy()
    np.testing.assert_allclose(rescored, y, atol=1e-5)  # the reported predictions are those of the returned grasps
    bps_goal = planner.plan(PlanRequest(bps=obj.bps_m, bps_centroid_height_m=float(obj.centroid_m[2]), sampler="fixed",
                                        evaluator="geometry"))
    assert bps_goal.status == StatusCode.INVALID_GOAL and "needs the object's points" in bps_goal.reason
    missing = GraspPlanner(GraspPlannerConfig(models=ModelFiles(geometry_evaluator="")), hand).plan(request)
    assert missing.status == StatusCode.NOT_IMPLEMENTED and "models.geometry_evaluator" in missing.reason


def test_bps_plus_geometry_ranks_by_the_mean_of_both_predictions(hand, tiny_models, geometry_checkpoint):
    points = box_surface_points()
    obj = object_from_points(points, "world")
    geometry = GeometryGraspEvaluator(load_checkpoint(geometry_checkpoint, "geometry_evaluator"), hand)
    bps = BpsGraspEvaluator(load_checkpoint(tiny_models.bps_evaluator, "bps_evaluator"))
    grasps = load_grasp_set(tiny_models.fixed_grasps)[:30].transformed(obj.T_frame_Oy, "world")
    g, b = geometry.prepare(obj)(grasps), bps.prepare(obj)(grasps)
    assert not torch.allclose(g, b, atol=1e-3)  # two different opinions, so the mean is not either one
    torch.testing.assert_close(MeanGraspEvaluator([bps, geometry]).prepare(obj)(grasps), (g + b) / 2)

    files = dataclasses.replace(tiny_models, geometry_evaluator=str(geometry_checkpoint))
    planner = GraspPlanner(GraspPlannerConfig(num_samples=200, models=files), hand)
    result = planner.plan(PlanRequest(points_m=points, num_grasps=5, sampler="fixed", evaluator="bps+geometry",
                                      refinement_iterations=5))
    assert result.success and "ranked by the bps+geometry evaluator" in result.reason
    both = (geometry.prepare(obj)(result.planned.grasps) + bps.prepare(obj)(result.planned.grasps))[:, 2] / 2
    np.testing.assert_allclose(both.numpy(), result.planned.y_pgs.numpy(), atol=1e-5)
    bps_goal = planner.plan(PlanRequest(bps=obj.bps_m, bps_centroid_height_m=float(obj.centroid_m[2]), sampler="fixed",
                                        evaluator="bps+geometry"))
    assert bps_goal.status == StatusCode.INVALID_GOAL and "needs the object's points" in bps_goal.reason
    missing = GraspPlanner(GraspPlannerConfig(models=dataclasses.replace(files, bps_evaluator="")), hand).plan(
        PlanRequest(points_m=points, sampler="fixed", evaluator="bps+geometry"))
    assert missing.status == StatusCode.NOT_IMPLEMENTED and "models.bps_evaluator" in missing.reason
