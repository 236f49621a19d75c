"""The whole NeRF path of the planner on a real NeRF: a short nerfstudio training on simulated captures of a
mug, then plan_grasp's NeRF source (density centroid, NeRF cloud, BPS) with the NeRF evaluator's grids."""

import dataclasses

import numpy as np
import pytest

from getagrip_ros.models.checkpoints import save_checkpoint
from getagrip_ros.models.nerf_evaluator import NerfEvaluator, NerfEvaluatorConfig
from getagrip_ros.perception.density import FingerGridConfig
from getagrip_ros.perception.nerf.config import nerf_profile
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest

MUG_XY = np.array([0.55, 0.0])


@pytest.mark.slow
def test_plan_from_a_trained_nerf_with_the_nerf_evaluator(mug_datasets, tmp_path):
    from getagrip_ros.perception.nerf.train import train_nerf

    config = nerf_profile("cpu", num_iterations=200, train_rays_per_batch=1024, eval_rays_per_batch=1024)
    nerf = train_nerf(mug_datasets / "mug", tmp_path / "runs", config)
    model = NerfEvaluator(NerfEvaluatorConfig(conv_channels=(4, 8), global_conv_channels=(4,), mlp_hidden=(8,)))
    grid = FingerGridConfig(num_x=7, num_y=7, num_z=9)
    save_checkpoint(tmp_path / "nerf_evaluator.pt", "nerf_evaluator", model, model.config,
                    metadata={"finger_grid": dataclasses.asdict(grid), "global_grid": {"resolution": 9, "size_m": 0.3}})
    planner = GraspPlanner(GraspPlannerConfig(num_samples=100, models=ModelFiles(
        nerf_evaluator=str(tmp_path / "nerf_evaluator.pt"))))
    stages = []
    result = planner.plan(PlanRequest(nerf_config_path=str(nerf.config_path), sampler="heuristic", evaluator="nerf",
                                      num_grasps=5, refinement_iterations=2),
                          progress=lambda stage, fraction, best: stages.append(stage))
    assert result.success, result.reason  # (NO_RESULT here would mean 200 iterations no longer give the mug a surface)
    palms = result.planned.grasps.palm_position_m.numpy()
    assert result.planned.grasps.frame_id == "world" and len(palms) == 5
    centroid = result.planned.object_centroid_m  # the NeRF's density centroid, world frame
    assert np.linalg.norm(centroid[:2] - MUG_XY) < 0.05  # the density centroid finds the mug
    # grasps around the NeRF's object (its 200-iteration cloud has floaters, which push some palms out to ~0.3 m), in
    # the world frame: a NeRF-frame mix-up would put them ~0.55 m away
    palm_distances_m = np.linalg.norm(palms - centroid, axis=1)
    assert np.median(palm_distances_m) < 0.3 and palm_distances_m.max() < 0.4, palm_distances_m
    assert stages[0] == "object" and "refinement" in stages and "object" in result.timings_s
