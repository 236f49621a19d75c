"""The public NeRF sampler: its checkpoint is told from the BPS sampler's and loads with the public sizes, the encoded
grid conditions the same attention network, and it samples grasps from an object's NeRF through the planner's
DiffusionSampler (a NeRF goal only)."""

import numpy as np
import pytest
import torch

from getagrip_ros.models.bps_sampler import BpsSampler, BpsSamplerConfig
from getagrip_ros.models.checkpoints import load_checkpoint
from getagrip_ros.models.nerf_sampler import NerfSampler, NerfSamplerConfig
from getagrip_ros.planning.object_input import PlanningObject, T_frame_Oy_at
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest
from getagrip_ros.planning.samplers import DiffusionSampler, DiffusionSamplerConfig, nerf_condition
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.status import StatusCode

TINY = NerfSamplerConfig(conv_channels=(4, 8), d_model=16, num_tokens=2, num_heads=2, block_neurons=16)
BPS_SAMPLER_PUBLIC_PARAMETERS = 4_559_013  # the public bps_sampler_model (tested in test_models)


def public_file(path, config: NerfSamplerConfig):
    """A NeRF sampler saved as the public training code saves one: [state_dict, optimizer, epoch, step]."""
    torch.save([NerfSampler(config).state_dict(), {}, 10, 1000], path)
    return path


def ball_object(radius_m: float = 0.04) -> PlanningObject:
    centre = torch.tensor([0.6, 0.0, radius_m])

    def density(points):
        return torch.where((points - centre.to(points)).norm(dim=-1) < radius_m, 1000.0, 0.0).to(points)

    return PlanningObject("world", T_frame_Oy_at(centre.double().numpy()), np.zeros(4096, np.float32), density_fn=density)


def test_the_public_nerf_sampler_loads_as_a_nerf_sampler_with_the_public_sizes(tmp_path):
    loaded = load_checkpoint(public_file(tmp_path / "ckpt_final.pth", NerfSamplerConfig()))
    assert loaded.kind == "nerf_sampler" and loaded.source == "public"
    assert loaded.config == NerfSamplerConfig()  # (32, 64, 128) CNN, 4 x 128 tokens, the public network's settings
    # the public BPS sampler with the two 4096 -> 512 projections of the BPS made 128 -> 512, plus the 3-D CNN
    cnn = (4 * 27 + 1) * 32 + (32 * 27 + 1) * 64 + (64 * 27 + 1) * 128
    expected = BPS_SAMPLER_PUBLIC_PARAMETERS - 2 * 4096 * 512 + 2 * 128 * 512 + cnn
    assert sum(p.numel() for p in loaded.model.parameters()) == expected == 775_941
    torch.save([BpsSampler(BpsSamplerConfig(num_basis_points=64, d_model=16, num_tokens=2, num_heads=2,
                                            block_neurons=16)).state_dict(), {}, 1, 1], tmp_path / "bps.pth")
    assert load_checkpoint(tmp_path / "bps.pth").kind == "bps_sampler"  # no CNN: still the BPS sampler


def test_the_encoded_grid_conditions_as_in_the_full_forward():
    model = NerfSampler(TINY).eval()
    grid = torch.rand(4, 30, 30, 30)
    grasps, t = torch.randn(5, 37), torch.tensor([0, 10, 200, 500, 999])
    full = model(grasps, t, grid.expand(5, -1, -1, -1, -1))
    torch.testing.assert_close(model.conditioned(grid)(grasps, t), full, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="global grids"):
        model.encode(torch.rand(1, 3, 30, 30, 30))


def test_it_samples_grasps_from_an_objects_nerf_and_only_from_a_nerf(tmp_path):
    hand = AllegroHand()
    loaded = load_checkpoint(public_file(tmp_path / "tiny.pth", TINY), "nerf_sampler")
    sampler = DiffusionSampler(loaded, DiffusionSamplerConfig(num_steps=5), hand, nerf_condition)
    grid = nerf_condition(ball_object())
    assert grid.shape == (4, 30, 30, 30) and 0 < float(grid[0].mean()) < 0.5  # the ball's opacity in the public cube
    grasps = sampler.sample(ball_object(), 6, torch.Generator().manual_seed(0), lambda fraction: None)
    assert len(grasps) == 6 and grasps.frame_id == "world"
    assert bool(hand.within_limits(grasps.joint_angles_rad.to(hand.dtype)).all())
    planner = GraspPlanner(GraspPlannerConfig(num_samples=20, models=ModelFiles(nerf_sampler=str(tmp_path / "tiny.pth"))),
                           hand)
    cloud = np.random.default_rng(0).normal([0.6, 0.0, 0.05], 0.02, size=(500, 3))
    result = planner.plan(PlanRequest(points_m=cloud, num_grasps=4, sampler="nerf_diffusion", evaluator="none"))
    assert result.status == StatusCode.INVALID_GOAL and "needs a NeRF object source" in result.reason
