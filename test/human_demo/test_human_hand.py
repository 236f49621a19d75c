"""The human hand: capsules from keypoints (distance, heatmap, palm vectors) and the model the synthesis core takes."""

import numpy as np
import pytest
import torch
import trimesh

from getagrip_ros.human_demo.demonstration import REFERENCE_KEYPOINTS_M, HumanDemonstration, demonstration_from_dict
from getagrip_ros.human_demo.human_hand import (CAPSULES, HumanHandModelConfig, capsule_distance, contact_heatmap,
                                                demonstration_keypoints, human_hand_model, model_keypoints,
                                                palm_vectors)
from getagrip_ros.synthesis.hand_model import SurfaceSamplingConfig
from getagrip_ros.synthesis.object_sdf import ObjectSDF, SDFConfig
from getagrip_ros.synthesis.optimizer import SynthesisConfig, SynthesisOptions, synthesize_grasps

F64 = torch.float64
REFERENCE = torch.tensor(REFERENCE_KEYPOINTS_M)


@pytest.fixture(scope="module")
def model():
    return human_hand_model(HumanHandModelConfig(sampling=SurfaceSamplingConfig(num_samples=600)))


def _random_pose(seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    T = torch.eye(4, dtype=F64)
    T[:3, :3] = torch.tensor(q * np.sign(np.linalg.det(q)))
    T[:3, 3] = torch.tensor(rng.normal(size=3) * 0.1)
    return T


def test_capsule_distance_is_exact_on_the_index_bone():
    # the index proximal capsule runs from (0, .03, .085) to (0, .03, .125) with radius 9.5 mm
    points = torch.tensor([[-0.05, 0.03, 0.105], [-0.0095, 0.03, 0.105], [0.0, 0.03, 0.105], [0.0, 0.01, 0.3]], dtype=F64)
    d = capsule_distance(points, REFERENCE)
    assert d[0].item() == pytest.approx(0.05 - 0.0095, abs=1e-9)
    assert d[1].item() == pytest.approx(0.0, abs=1e-9)
    assert d[2].item() == pytest.approx(-0.0095, abs=1e-9)  # on the axis: inside by the radius
    assert d[3].item() == pytest.approx(0.3 - 0.181 - 0.0075, abs=1e-9)  # beyond the middle fingertip: its cap
    # differentiable in the points and in the keypoints
    keypoints = REFERENCE.clone().requires_grad_(True)
    p = points[:1].clone().requires_grad_(True)
    capsule_distance(p, keypoints).sum().backward()
    assert torch.allclose(p.grad, torch.tensor([[-1.0, 0.0, 0.0]], dtype=F64))
    assert keypoints.grad[5:7, 0].sum().item() == pytest.approx(1.0)


def test_contact_heatmap_is_one_in_contact_and_falls_with_tau():
    h = contact_heatmap(torch.tensor([-0.002, 0.0, 0.01, 0.05]), tau_m=0.01)
    assert h.tolist() == pytest.approx([1.0, 1.0, np.exp(-1.0), np.exp(-5.0)])


def test_palm_vectors_follow_the_hand_and_its_side():
    n, f = palm_vectors(REFERENCE)
    assert n.tolist() == pytest.approx([1.0, 0.0, 0.0], abs=1e-9)
    assert f[2].item() > 0.99 and abs(torch.dot(n, f).item()) < 1e-9
    T = _random_pose(0)
    moved = REFERENCE @ T[:3, :3].T + T[:3, 3]
    n2, f2 = palm_vectors(moved)
    assert torch.allclose(n2, T[:3, :3] @ n) and torch.allclose(f2, T[:3, :3] @ f)
    # a left hand (the mirror image): its palm normal from the left-hand rule, then mirrored into a right hand
    left = REFERENCE * torch.tensor([1.0, -1.0, 1.0], dtype=F64)
    n_left, _ = palm_vectors(left, "left")
    assert n_left.tolist() == pytest.approx([1.0, 0.0, 0.0], abs=1e-9)
    _, f_left = palm_vectors(left, "left")
    mirrored = demonstration_keypoints(HumanDemonstration("keypoints21", "w", left.numpy(), handedness="left"))
    n_right, f_right = palm_vectors(mirrored)
    assert torch.allclose(n_right, n_left) and torch.allclose(f_right, f_left)  # the same place and orientation
    assert torch.allclose(torch.cdist(mirrored, mirrored), torch.cdist(REFERENCE, REFERENCE))  # the same hand
    assert torch.linalg.det(torch.stack([mirrored[5] - mirrored[0], mirrored[17] - mirrored[0], n_right])) > 0


def test_model_keypoints_are_the_reference_hand_and_move_with_the_joints(model):
    assert model.num_joints == 20 and model.num_samples == 600
    q = torch.zeros(2, 20, dtype=F64)
    q[1, model.tree.joint_names.index("index_mcp")] = 1.0
    T = torch.stack([torch.eye(4, dtype=F64), _random_pose(1)])
    keypoints = model_keypoints(model, T, q)
    assert torch.allclose(keypoints[0], REFERENCE, atol=1e-6)
    # flexing the index's MCP by 1 rad curls its three outer keypoints towards the palm side (+x), lengths kept
    posed = (keypoints[1] - T[1, :3, 3]) @ T[1, :3, :3]
    assert (posed[6:9, 0] > 0.02).all() and torch.allclose(posed[:6], REFERENCE[:6], atol=1e-6)
    assert torch.allclose((posed[8] - posed[7]).norm(), (REFERENCE[8] - REFERENCE[7]).norm())


def test_model_surface_is_the_capsule_hand(model):
    T = torch.eye(4, dtype=F64)[None]
    points = model.surface_points(model.link_poses(T, torch.zeros(1, 20, dtype=F64)))[0]
    d = capsule_distance(points, REFERENCE)
    # on the union's surface, except samples of a moving link hidden inside its neighbour's capsule
    assert (d.abs() < 1e-4).float().mean() > 0.7 and d.max() < 1e-4 and d.min() > -0.013  # at most the thickest radius
    assert model.samples_per_link()["thumb_distal"] > 0 and len(CAPSULES) == 24


def test_the_synthesis_core_makes_human_grasps(model):
    """The hand-agnostic core takes the human hand: a short synthesis on a ball gives valid demonstrations."""
    ball = trimesh.creation.icosphere(3, radius=0.04)
    ball.apply_translation((0.0, 0.0, 0.04))
    sdf = ObjectSDF.from_mesh(ball, SDFConfig(resolution=32))
    result = synthesize_grasps(model, sdf, SynthesisConfig(num_steps=120, chunk_steps=40),
                               SynthesisOptions(num_grasps=2, seed=0, T_object_table=np.eye(4)))
    assert not result.failed.any() and result.grasp is None
    assert (result.metrics.contact_samples >= 5).all() and result.metrics.penetration_depth_m.max() < 0.004
    keypoints = model_keypoints(model, result.T_object_root, result.joint_angles_rad)
    for k in keypoints:
        demo = demonstration_from_dict({"format": "keypoints21", "frame_id": "object", "keypoints_m": k.tolist()})
        heat = contact_heatmap(capsule_distance(torch.tensor(ball.vertices), torch.as_tensor(demo.keypoints_m)))
        assert 0.05 < (heat > 0.5).float().mean() < 0.8  # the hand touches part of the ball, not all of it
