"""Pre-grasp optimisation: the energy's terms fall, fingertips end ~1.5 cm off the surface, directions point at it."""

import numpy as np
import pytest
import torch
import trimesh

from getagrip_ros.data.grasp_generation import GraspOptimizationConfig, ObjectSurface, optimize_pregrasps
from getagrip_ros.grasp.validate import validate_grasp
from getagrip_ros.planning.heuristic_sampler import HeuristicSamplerConfig, sample_heuristic_grasps
from getagrip_ros.robot.allegro import AllegroHand


@pytest.fixture(scope="module")
def setup():
    hand = AllegroHand()
    box = trimesh.creation.box((0.06, 0.06, 0.12))
    box.apply_translation((0.65, 0.0, 0.06))
    surface = ObjectSurface.from_mesh(box, 1500)
    starts = sample_heuristic_grasps(surface.points_m.numpy(), 24, hand, "world", HeuristicSamplerConfig(style="open"),
                                     torch.Generator().manual_seed(0))
    return hand, box, surface, starts


def test_signed_distance_of_a_box_surface():
    box = trimesh.creation.box((0.1, 0.1, 0.1))
    surface = ObjectSurface.from_mesh(box, 4000)
    signed, nearest = surface.signed_distance(torch.tensor([[0.0, 0.0, 0.08], [0.0, 0.0, 0.03], [0.2, 0.0, 0.0]],
                                                           dtype=torch.float64))
    np.testing.assert_allclose(signed.numpy(), [0.03, -0.02, 0.15], atol=4e-3)
    assert nearest.shape == (3, 3)


def test_optimisation_pulls_fingertips_to_the_gap_and_pushes_the_hand_out(setup):
    hand, box, surface, starts = setup
    _, before = optimize_pregrasps(starts, surface, hand, GraspOptimizationConfig(num_steps=0))
    grasps, after = optimize_pregrasps(starts, surface, hand)
    assert len(grasps) == len(starts) and grasps.frame_id == "world"
    validate_grasp(grasps, (hand.lower_limits_rad, hand.upper_limits_rad))
    assert float(after["gap_m"].median()) < 0.5 * float(before["gap_m"].median())
    assert float(after["gap_m"].median()) < 0.006
    assert float(after["penetration_m"].median()) < 0.003 < float(before["penetration_m"].median())
    assert float(after["table_m"].quantile(0.9)) < 0.01 < float(before["table_m"].quantile(0.9))
    # fingertip contact points ~1.5 cm off the true surface, closing directions toward it
    tips = torch.einsum("bij,bfj->bfi", grasps.palm_rotation,
                        hand.contact_positions(grasps.joint_angles_rad.float()).double()) + grasps.palm_position_m[:, None]
    distance = np.abs(trimesh.proximity.signed_distance(box, tips.reshape(-1, 3).numpy()))
    assert 0.01 < np.median(distance) < 0.02
    closest, _, _ = trimesh.proximity.closest_point(box, tips.reshape(-1, 3).numpy())
    toward = torch.from_numpy(closest).reshape(tips.shape) - tips
    cos = (toward / toward.norm(dim=-1, keepdim=True) * grasps.fingertip_directions).sum(-1)
    assert float(cos.median()) > 0.95


def test_deterministic_and_frame_checked(setup):
    hand, _, surface, starts = setup
    config = GraspOptimizationConfig(num_steps=5)
    a, _ = optimize_pregrasps(starts[:4], surface, hand, config)
    b, _ = optimize_pregrasps(starts[:4], surface, hand, config)
    torch.testing.assert_close(a.to_vector(), b.to_vector(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="world frame"):
        optimize_pregrasps(starts.transformed(torch.eye(4, dtype=torch.float64), "object"), surface, hand, config)


def test_the_opposition_term_puts_the_thumb_opposite_the_fingers(setup):
    hand, _, surface, starts = setup
    _, without = optimize_pregrasps(starts, surface, hand, GraspOptimizationConfig(opposition_weight=0.0))
    _, with_term = optimize_pregrasps(starts, surface, hand)
    assert float(with_term["opposition"].median()) < 0.5 * float(without["opposition"].median())
