"""The models that ship in the package: present, small, loadable, and what the planner uses by default."""

from __future__ import annotations

import numpy as np
import torch

from getagrip_ros.models.checkpoints import load_checkpoint
from getagrip_ros.models.shipped import SHIPPED_FILES, WEIGHTS_DIR, default_method, shipped_available
from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest
from getagrip_ros.planning.samplers import load_grasp_set

MAX_TOTAL_MB = 50.0


def test_every_shipped_file_is_there_within_the_size_budget_with_its_card():
    assert shipped_available(*SHIPPED_FILES)
    total_mb = sum((WEIGHTS_DIR / name).stat().st_size for name in SHIPPED_FILES.values()) / 1e6
    assert total_mb <= MAX_TOTAL_MB, f"{total_mb:.1f} MB shipped"
    card = (WEIGHTS_DIR / "MODEL_CARD.md").read_text()
    for name in SHIPPED_FILES.values():
        assert name in card


def test_shipped_checkpoints_load_as_the_models_they_claim():
    evaluator = load_checkpoint(WEIGHTS_DIR / SHIPPED_FILES["bps_evaluator"], "bps_evaluator")
    sampler = load_checkpoint(WEIGHTS_DIR / SHIPPED_FILES["bps_sampler"], "bps_sampler")
    for loaded in (evaluator, sampler):
        assert loaded.training_state is None  # weights only
        assert loaded.metadata["num_train_grasps"] > 0 and len(loaded.metadata["train_objects"]) >= 500
        params = [p for p in loaded.model.parameters()]
        assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in params)  # fp16 on disk, fp32 here
    assert evaluator.config.hidden_width == 512
    assert sampler.grasp_mean is not None and sampler.grasp_std is not None
    geometry = load_checkpoint(WEIGHTS_DIR / SHIPPED_FILES["geometry_evaluator"], "geometry_evaluator")
    assert geometry.training_state is None and geometry.metadata["num_train_grasps"] > 10_000
    assert len(geometry.metadata["train_objects"]) >= 150
    std = geometry.model.feature_std
    assert torch.isfinite(std).all() and (std > 0).all() and not torch.equal(std, torch.ones_like(std))  # trained scaling
    fixed = load_grasp_set(WEIGHTS_DIR / SHIPPED_FILES["fixed_grasps"])
    assert len(fixed) >= 500 and fixed.frame_id == "Oy"


def test_the_planner_ranks_with_the_shipped_models_by_default():
    assert default_method() == ("fixed_graspd", "geometry>sim") and default_method(quick=True) == ("fixed", "geometry")
    planner = GraspPlanner(GraspPlannerConfig(num_samples=400, models=ModelFiles()))  # every model "shipped"
    cloud = box_surface_points()  # a 6 x 6 x 12 cm box at x = 0.65 m
    for sampler, evaluator in (("fixed", "bps"), ("diffusion", "bps"), ("fixed", "geometry")):
        result = planner.plan(PlanRequest(points_m=cloud, frame_id="world", num_grasps=5, sampler=sampler,
                                          evaluator=evaluator, refinement_iterations=2, seed=0))
        assert result.success, result.reason
        y_pgs = result.planned.y_pgs.numpy()
        assert np.isfinite(y_pgs).all() and (np.diff(y_pgs) <= 1e-6).all()  # ranked, best first
