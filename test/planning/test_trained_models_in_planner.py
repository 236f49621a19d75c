"""Models trained by getagrip_ros.training plug into the planner, and a trained evaluator changes the ranking.

A BPS dataset (public basis, heuristic grasps on six boxes, in Oy) is labelled by a rule the evaluator can learn
(y_PGS high when the palm approaches from above); after training, the planner's top grasps on a training box
follow the rule far more often than unranked ones. This checks the plumbing (dataset layout, frames, BPS,
checkpoints) end to end; generalising to unseen objects needs hundreds of training objects (issue: data engine).
"""

import numpy as np
import pytest
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.models.bps_evaluator import BpsEvaluatorConfig
from getagrip_ros.models.bps_sampler import BpsSamplerConfig
from getagrip_ros.models.checkpoints import load_checkpoint
from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.perception.bps import public_basis_points_By
from getagrip_ros.planning.heuristic_sampler import sample_heuristic_grasps
from getagrip_ros.planning.object_input import object_from_points
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.training.datasets import write_bps_dataset
from getagrip_ros.training.loop import LoopConfig
from getagrip_ros.training.trainers import (BpsEvaluatorTrainConfig, BpsSamplerTrainConfig, train_bps_evaluator,
                                            train_bps_sampler)

DOWN_Oy = torch.tensor([0.0, -1.0, 0.0], dtype=torch.float64)  # world -z expressed in Oy (y up)


def _from_above(grasps_Oy) -> torch.Tensor:
    return grasps_Oy.palm_normal @ DOWN_Oy > 0.7


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("trained")
    hand, rng = AllegroHand(), np.random.default_rng(0)
    bpss, grasps, idx, codes = [], [], [], []
    for i in range(6):  # boxes of different sizes at the origin
        size = rng.uniform(0.04, 0.09, 3)
        points = box_surface_points(size_m=tuple(size), centre_xy_m=(0.6, 0.0), seed=i)
        obj = object_from_points(points, "world")
        g = sample_heuristic_grasps(points, 400, hand, "world", generator=torch.Generator().manual_seed(i))
        g_Oy = g.transformed(torch.linalg.inv(obj.T_frame_Oy), "Oy")
        bpss.append(obj.bps_m)
        grasps.append(g_Oy.to_numpy_vector())
        idx += [i] * len(g_Oy)
        codes.append(f"box_{i}_{size[0]:.4f}_{size[1]:.4f}_{size[2]:.4f}")
    grasps = np.concatenate(grasps)
    good = _from_above(Grasp.from_vector(grasps, "Oy")).numpy()
    y = np.where(good, 0.95, 0.05)
    dataset = write_bps_dataset(out / "boxes.h5", basis_points_m=public_basis_points_By(), bpss_m=np.stack(bpss),
                                object_codes=codes, grasps=grasps, grasp_bps_idx=np.array(idx), y_pick=y, y_coll=y, y_PGS=y)
    loop = LoopConfig(epochs=40, batch_size=128, lr=3e-4, val_fraction=0.34, seed=0)
    evaluator = train_bps_evaluator(dataset, out / "evaluator", BpsEvaluatorTrainConfig(
        loop=loop, model=BpsEvaluatorConfig(hidden_width=64, block_neurons=32, dropout=0.0)), progress=False)
    sampler = train_bps_sampler(dataset, out / "sampler", BpsSamplerTrainConfig(
        loop=LoopConfig(epochs=2, batch_size=128, lr=1e-3, optimizer="adam", weight_decay=0.0, val_fraction=0.34),
        model=BpsSamplerConfig(d_model=16, num_heads=8, block_neurons=32)), progress=False)
    return evaluator, sampler


def test_a_trained_evaluator_ranks_grasps_by_what_it_learned(trained):
    evaluator, sampler = trained
    files = ModelFiles(bps_evaluator=str(evaluator.best_checkpoint), bps_sampler=str(sampler.best_checkpoint))
    planner = GraspPlanner(GraspPlannerConfig(num_samples=400, models=files))
    code = load_checkpoint(evaluator.last_checkpoint).metadata["train_objects"][0]
    size = tuple(float(v) for v in code.split("_")[2:])
    points = box_surface_points(size_m=size, centre_xy_m=(0.6, 0.0), seed=99)  # a new scan of a training box
    T_Oy_world = torch.linalg.inv(object_from_points(points, "world").T_frame_Oy)
    shares = {}
    for name in ("none", "bps"):
        result = planner.plan(PlanRequest(points_m=points, num_grasps=20, sampler="heuristic", evaluator=name,
                                          refinement_iterations=5, seed=3))
        assert result.success, result.reason
        shares[name] = float(_from_above(result.planned.grasps.transformed(T_Oy_world, "Oy")).double().mean())
    assert shares["bps"] >= 0.9 and shares["bps"] > shares["none"] + 0.3, shares
    # the trained sampler (its own diffusion schedule and normalisation) plugs in too
    result = planner.plan(PlanRequest(points_m=points, num_grasps=5, sampler="diffusion", evaluator="bps",
                                      refinement_iterations=2))
    assert result.status.name in ("SUCCEEDED", "NO_RESULT"), result.reason  # an undertrained sampler may miss the filter
