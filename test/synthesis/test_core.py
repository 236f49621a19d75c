"""The hand-agnostic Grasp'D core: object SDF, leaky contact, losses, hand model and the optimiser."""

import dataclasses
import math

import numpy as np
import pytest
import torch
import trimesh

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.validate import validate_grasp
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.description import FINGERTIP_LINK_NAMES, HAND_JOINT_NAMES, HAND_LINK_NAMES, PALM_LINK
from getagrip_ros.robot.urdf_chain import KinematicTree
from getagrip_ros.synthesis.contact import (ContactConfig, friction_cone_excess, friction_force, leaky_penetration,
                                            normal_force)
from getagrip_ros.synthesis.hand_model import (ALLEGRO_DISTAL_LINKS, AllegroModelConfig, HandModel, allegro_hand_model,
                                               hand_model_from_urdf)
from getagrip_ros.synthesis.losses import (HandState, axis_wrenches, evaluate_losses, object_wrenches, physics_loss,
                                           self_intersection_loss, task_loss)
from getagrip_ros.synthesis.object_sdf import ObjectSDF, SDFConfig
from getagrip_ros.synthesis.optimizer import SynthesisConfig, SynthesisOptions, offset_at, synthesize_grasps

F64 = torch.float64


@pytest.fixture(scope="module")
def sphere_sdf():
    return ObjectSDF.from_mesh(trimesh.creation.icosphere(4, radius=0.04), SDFConfig(resolution=48))


@pytest.fixture(scope="module")
def box_mesh():
    box = trimesh.creation.box((0.06, 0.06, 0.06))
    box.apply_translation((0.0, 0.0, 0.03))  # resting on the table (z = 0), as prepare_object places objects
    return box


@pytest.fixture(scope="module")
def box_sdf(box_mesh):
    return ObjectSDF.from_mesh(box_mesh, SDFConfig(resolution=40))


@pytest.fixture(scope="module")
def hand():
    return allegro_hand_model()


@pytest.fixture(scope="module")
def box_grasps(hand, box_sdf):
    """A short synthesis on the 6 cm box: 4 starts, 150 steps, a 40^3 grid."""
    fractions = []
    result = synthesize_grasps(hand, box_sdf, SynthesisConfig(num_steps=150),
                               SynthesisOptions(num_grasps=4, seed=0, progress=fractions.append))
    return result, fractions


def _box_sdf_analytic(p: torch.Tensor, half: float, centre: torch.Tensor) -> torch.Tensor:
    q = (p - centre).abs() - half
    return q.clamp_min(0).norm(dim=-1) + q.amax(-1).clamp_max(0)


# -- object SDF --------------------------------------------------------------------------------------------
def test_sphere_sdf_matches_analytic_distances_and_normals(sphere_sdf):
    g = torch.Generator().manual_seed(0)
    p = (torch.rand(4000, 3, generator=g, dtype=F64) - 0.5) * 0.096  # inside the padded grid (+-5 cm)
    d, n = sphere_sdf.query(p)
    r = p.norm(dim=-1)
    away = r > 0.01  # away from the centre (the medial axis: a cone point that trilinear interpolation rounds off)
    assert torch.allclose(d[away], r[away] - 0.04, atol=3e-4)
    assert (d[~away] < -0.029).all()
    cos = (n[away] * (p[away] / r[away, None])).sum(-1)
    assert cos.min() > 0.99
    assert torch.allclose(n[away].norm(dim=-1), torch.ones(int(away.sum()), dtype=F64), atol=1e-6)


def test_box_sdf_inside_outside_beyond_the_grid_and_offset(box_sdf):
    centre = torch.tensor([0.0, 0.0, 0.03], dtype=F64)
    g = torch.Generator().manual_seed(1)
    p = centre + (torch.rand(4000, 3, generator=g, dtype=F64) - 0.5) * 0.078
    d, _ = box_sdf.query(p)
    assert torch.allclose(d, _box_sdf_analytic(p, 0.03, centre), atol=1.5e-3)
    # face normals, away from edges
    faces = centre + torch.tensor([[0.035, 0.0, 0.0], [0.0, -0.035, 0.005], [0.005, 0.0, 0.036]], dtype=F64)
    _, n = box_sdf.query(faces)
    assert torch.allclose(n, torch.tensor([[1.0, 0, 0], [0, -1.0, 0], [0, 0, 1.0]], dtype=F64), atol=1e-3)
    # beyond the grid (1 cm padding): grows like the true distance along an axis, normal points away
    far = centre + torch.tensor([[0.25, 0.0, 0.0], [0.0, 0.0, 0.18]], dtype=F64)
    d_far, n_far = box_sdf.query(far)
    assert torch.allclose(d_far, torch.tensor([0.22, 0.15], dtype=F64), atol=1e-3)
    assert torch.allclose(n_far, torch.tensor([[1.0, 0, 0], [0, 0, 1.0]], dtype=F64), atol=1e-3)
    # a diagonal far point: an upper bound of the true distance, close to it
    diag = centre + torch.tensor([[0.12, 0.12, 0.12]], dtype=F64)
    true = _box_sdf_analytic(diag, 0.03, centre)
    assert true - 1e-3 <= box_sdf.distance(diag) <= true * 1.2
    # the offset moves the level set outward
    assert torch.allclose(box_sdf.distance(p, 0.05), d - 0.05)


def test_sdf_distance_gradient_is_the_normal(sphere_sdf):
    p = torch.tensor([[0.05, 0.01, -0.02], [-0.02, 0.03, 0.01]], dtype=F64, requires_grad=True)
    d, n = sphere_sdf.query(p)
    (grad,) = torch.autograd.grad(d.sum(), p)
    assert torch.allclose(grad / grad.norm(dim=-1, keepdim=True), n.detach(), atol=0.02)


def test_sdf_distance_alone_is_the_query_distance_with_its_gradient(box_sdf):
    # inside, near the surface, and beyond the grid, where the distance adds the clamped part
    p = torch.tensor([[0.01, 0.0, 0.03], [0.031, 0.01, 0.02], [0.2, -0.1, 0.05], [0.0, 0.0, -0.3]], dtype=F64,
                     requires_grad=True)
    d_query, _ = box_sdf.query(p, 0.01)
    (g_query,) = torch.autograd.grad(d_query.sum(), p)
    d = box_sdf.distance(p, 0.01)
    (g,) = torch.autograd.grad(d.sum(), p)
    assert torch.equal(d, d_query) and torch.equal(g, g_query)
    assert (g.norm(dim=-1) > 0.5).all()


def test_point_cloud_sdf_matches_the_mesh_sdf(sphere_sdf):
    points, normals = sphere_sdf.surface_points_m.numpy(), sphere_sdf.surface_normals.numpy()
    cloud = ObjectSDF.from_point_cloud(points, normals, SDFConfig(resolution=40))
    p = torch.tensor([[0.0, 0.0, 0.0], [0.02, 0.0, 0.0], [0.045, 0.0, 0.0], [0.0, -0.048, 0.0], [0.03, 0.03, 0.03]], dtype=F64)
    d = cloud.distance(p)
    assert torch.allclose(d, p.norm(dim=-1) - 0.04, atol=3e-3)
    assert (d[:2] < 0).all() and (d[2:] > 0).all()


@pytest.mark.parametrize("make, reason", [
    (lambda: trimesh.Trimesh(np.zeros((0, 3)), np.zeros((0, 3), dtype=int)), "empty"),
    (lambda: trimesh.Trimesh(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [np.nan, 0, 1.0]]), [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]],
                             process=False), "NaN"),
    (lambda: trimesh.Trimesh([[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0.1, 0.1, 0]], [[0, 1, 2], [1, 3, 2]]), "degenerate"),
], ids=["empty", "nan_vertex", "flat"])
def test_bad_meshes_raise_value_error(make, reason):
    with pytest.raises(ValueError, match=reason):
        ObjectSDF.from_mesh(make(), name="bad")


def test_bad_point_clouds_raise_value_error():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(100, 3)) * 0.03
    normals = points / np.linalg.norm(points, axis=1, keepdims=True)
    with pytest.raises(ValueError, match="at least 16"):
        ObjectSDF.from_point_cloud(points[:5], normals[:5])
    bad = points.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ObjectSDF.from_point_cloud(bad, normals)
    with pytest.raises(ValueError, match="normals are zero"):
        ObjectSDF.from_point_cloud(points, np.zeros_like(normals))
    flat = points.copy()
    flat[:, 1:] = 0.0  # all on a line
    with pytest.raises(ValueError, match="degenerate"):
        ObjectSDF.from_point_cloud(flat, normals)


# -- contact -----------------------------------------------------------------------------------------------
def test_leaky_gradient_reaches_contacts_that_do_not_touch():
    d = torch.tensor([0.01, -0.002], dtype=F64, requires_grad=True)  # one sample 1 cm off, one 2 mm deep
    config = ContactConfig()
    f = normal_force(d, config)
    assert torch.allclose(f.detach(), torch.tensor([0.0, 2000.0], dtype=F64))
    (grad,) = torch.autograd.grad(f.sum(), d)
    assert torch.allclose(grad, torch.tensor([-0.1 * 1e6, -1e6], dtype=F64))
    no_leak = ContactConfig(leak=0.0)
    (grad0,) = torch.autograd.grad(normal_force(d, no_leak).sum(), d)
    assert grad0[0] == 0.0 and grad0[1] == -1e6
    with pytest.raises(ValueError):
        leaky_penetration(d, -0.1)


def test_physics_loss_pulls_a_sample_with_a_desired_force_toward_the_surface(sphere_sdf):
    """A desired force on a sample 1 cm off the sphere moves it inward by the leak; without the leak it gets nothing."""
    for leak, moves in ((0.1, True), (0.0, False)):
        config = ContactConfig(leak=leak)
        p = torch.tensor([[[0.05, 0.0, 0.0]]], dtype=F64, requires_grad=True)
        d, _ = sphere_sdf.query(p)
        produced = normal_force(d, config)
        desired = torch.tensor([[0.5]], dtype=F64)
        loss = physics_loss(desired, torch.zeros(1, 1, 1, 3, dtype=F64), produced, produced[:, :0], config)
        (grad,) = torch.autograd.grad(loss.sum(), p)
        if moves:
            assert grad[0, 0, 0] > 1e3 and grad[0, 0, 1:].abs().max() < 1e-6 * grad[0, 0, 0]  # descent moves it to -x
        else:
            assert grad.abs().max() == 0.0


def test_friction_stays_in_the_coulomb_cone():
    config = ContactConfig()
    fn = torch.tensor([10.0, 10.0], dtype=F64)
    v = torch.tensor([[1e-9, 0.0, 0.0], [1.0, 0.0, 0.0]], dtype=F64)  # creeping, and sliding fast
    f = friction_force(v, fn, config)
    assert torch.allclose(f[0], torch.tensor([-1e8 * 1e-9, 0, 0], dtype=F64))  # k_f * |v| below the cone
    assert torch.allclose(f[1], torch.tensor([-8.0, 0, 0], dtype=F64))  # capped at mu * f_n
    excess = friction_cone_excess(torch.tensor([[7.0, 0, 0], [0, 9.0, 0]], dtype=F64), fn, config)
    assert torch.allclose(excess, torch.tensor([0.0, 1.0], dtype=F64))


# -- losses ------------------------------------------------------------------------------------------------
def test_object_wrench_and_task_loss_of_an_antipodal_pinch():
    centre = torch.zeros(3, dtype=F64)
    points = torch.tensor([[[0.03, 0.0, 0.0], [-0.03, 0.0, 0.0]]], dtype=F64)
    force = torch.tensor([[[[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]]], dtype=F64)  # 1 N up at +x
    w = object_wrenches(points, force, centre, torque_length_m=0.03)
    assert torch.allclose(w[0, 0], torch.tensor([0, 0, 1.0, 0, -1.0, 0], dtype=F64))  # torque (r x f) / L
    # a pinch along x squeezing with 2 N per side; friction holds 1 N against gravity-like -z wrench
    normals = torch.tensor([[[1.0, 0, 0], [-1.0, 0, 0]]], dtype=F64)
    wrench = torch.tensor([[0.0, 0, -1.0, 0, 0, 0]], dtype=F64)  # a 1 N downward pull on the object
    tangential = torch.tensor([[[[0, 0, 0.5], [0, 0, 0.5]]]], dtype=F64)
    loss = task_loss(points, normals, torch.tensor([[2.0, 2.0]], dtype=F64), tangential, wrench, centre, 0.03)
    assert loss.item() == pytest.approx(0.0, abs=1e-12)
    no_friction = task_loss(points, normals, torch.tensor([[2.0, 2.0]], dtype=F64), torch.zeros_like(tangential), wrench,
                            centre, 0.03)
    assert no_friction.item() == pytest.approx(1.0)
    assert axis_wrenches("axes12").shape == (12, 6)


def test_self_intersection_counts_overlaps_only():
    centres = torch.tensor([[[0, 0, 0], [0.015, 0, 0], [0.1, 0, 0]]], dtype=F64)
    radii = torch.tensor([0.01, 0.01, 0.01], dtype=F64)
    pairs = torch.tensor([[0, 1], [0, 2]])
    assert self_intersection_loss(centres, radii, pairs).item() == pytest.approx(0.005)


# -- hand model --------------------------------------------------------------------------------------------
def test_allegro_model_has_about_3000_samples_on_the_right_links(hand):
    counts = hand.samples_per_link()
    assert hand.num_samples == 3000 and sum(counts.values()) == 3000
    assert list(counts) == [PALM_LINK, *HAND_LINK_NAMES, *FINGERTIP_LINK_NAMES]
    assert all(c >= 20 for c in counts.values())
    assert counts[PALM_LINK] > counts["link_1.0"] > counts["link_3.0"]  # by area
    assert list(hand.joint_names) == list(HAND_JOINT_NAMES)
    contact_links = {hand.link_names[i] for i in hand.sample_link[hand.contact_mask].tolist()}
    assert contact_links == set(ALLEGRO_DISTAL_LINKS)
    assert torch.allclose(hand.normals_in_link.norm(dim=-1), torch.ones(3000, dtype=F64))
    # palm samples lie on its collision box (centre (-0.0093, 0, -0.0475), size 0.0408 x 0.113 x 0.095), normals outward
    palm = hand.sample_link == 0
    p, n = hand.points_in_link_m[palm], hand.normals_in_link[palm]
    q = (p - torch.tensor([-0.0093, 0.0, -0.0475], dtype=F64)).abs() - torch.tensor([0.0204, 0.0565, 0.0475], dtype=F64)
    assert q.amax(-1).abs().max() < 1e-9
    assert ((p - torch.tensor([-0.0093, 0.0, -0.0475], dtype=F64)) * n).sum(-1).min() > 0
    # tip samples on the 12 mm sphere, none hidden inside the distal link's box
    tip = hand.sample_link == hand.link_names.index("link_3.0_tip")
    assert torch.allclose(hand.points_in_link_m[tip].norm(dim=-1), torch.full((int(tip.sum()),), 0.012, dtype=F64))
    in_box = hand.points_in_link_m[tip] + torch.tensor([0.0, 0.0, 0.0267 - 0.01335], dtype=F64)  # about the box centre
    depth = (torch.tensor([0.0098, 0.01375, 0.01335], dtype=F64) - in_box.abs()).amin(-1)
    assert depth.max() < 5e-4
    everything = allegro_hand_model(AllegroModelConfig(contact_links="all"))
    assert bool(everything.contact_mask.all())
    assert (hand.self_collision_pairs[:, 0] != hand.self_collision_pairs[:, 1]).all()
    checked = set()
    for a, b in hand.self_collision_pairs.tolist():  # chain neighbours are never checked
        pair = tuple(sorted((int(hand.sphere_link[a]), int(hand.sphere_link[b]))))
        assert pair not in hand.adjacent_links
        checked.add(pair)
    link = hand.link_names.index
    # links that can meet are checked (neighbouring fingertips, thumb and index tips); the index and ring bases,
    # 9 cm apart on the palm, never come close and are left out
    assert {tuple(sorted((link(a), link(b)))) for a, b in (("link_3.0_tip", "link_7.0_tip"),
                                                           ("link_3.0_tip", "link_15.0_tip"))} <= checked
    assert tuple(sorted((link("link_0.0"), link("link_8.0")))) not in checked


def test_allegro_samples_move_with_the_joints_and_the_wrist(hand):
    T = torch.eye(4, dtype=F64)[None]
    q0 = hand.open_joint_angles_rad[None].clone()
    q1 = q0.clone()
    q1[0, 1] += 0.8  # index proximal flexion
    p0, n0 = hand.surface(hand.link_poses(T, q0))
    p1, n1 = hand.surface(hand.link_poses(T, q1))
    moved = (p1 - p0).norm(dim=-1)[0] > 1e-6
    index_links = {hand.link_names.index(n) for n in ("link_1.0", "link_2.0", "link_3.0", "link_3.0_tip")}
    expected = torch.tensor([int(i) in index_links for i in hand.sample_link])
    assert torch.equal(moved, expected)
    # moving samples stay on their links: distance to the joint_1.0 axis origin is preserved
    origin = hand.link_poses(T, q0)[0, hand.link_names.index("link_1.0"), :3, 3]
    assert torch.allclose((p1[0, moved] - origin).norm(dim=-1), (p0[0, moved] - origin).norm(dim=-1), atol=1e-9)
    assert torch.allclose((n1 * n1).sum(-1), torch.ones_like(n1[..., 0]))
    # a wrist pose moves every sample rigidly
    W = torch.eye(4, dtype=F64)[None].clone()
    W[0, :3, :3] = torch.tensor([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]], dtype=F64)
    W[0, :3, 3] = torch.tensor([0.1, 0.2, 0.3], dtype=F64)
    pw, nw = hand.surface(hand.link_poses(W, q0))
    assert torch.allclose(pw, p0 @ W[0, :3, :3].T + W[0, :3, 3], atol=1e-12)
    assert torch.allclose(nw, n0 @ W[0, :3, :3].T, atol=1e-12)
    assert torch.equal(hand.surface_points(hand.link_poses(W, q0)), pw)


# -- the hand-agnostic optimiser ---------------------------------------------------------------------------
TWO_LINK_URDF = """<robot name="pincer">
  <link name="base"><collision><geometry><box size="0.02 0.06 0.02"/></geometry></collision></link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="finger"/>
    <origin xyz="0 0.03 0" rpy="0 0 0"/><axis xyz="0 0 -1"/><limit lower="0" upper="1.5" velocity="1"/></joint>
  <link name="finger"><collision><origin xyz="0 0.025 0" rpy="1.5708 0 0"/>
    <geometry><cylinder radius="0.006" length="0.05"/></geometry></collision></link>
</robot>"""


def _two_link_hand() -> HandModel:
    """A made-up hand: a box base and one hinged cylinder finger, both allowed to touch."""
    return hand_model_from_urdf("pincer", TWO_LINK_URDF, "base", ["base", "finger"], ["hinge"], ["base", "finger"],
                                open_joint_angles_rad=[0.0], palm_point_in_root_m=[0.01, 0.0, 0.0],
                                palm_normal_in_root=[1.0, 0.0, 0.0])


def test_core_takes_any_kinematic_tree():
    pincer = _two_link_hand()
    assert isinstance(pincer.tree, KinematicTree) and pincer.num_joints == 1
    assert pincer.samples_per_link()["finger"] > 0 and pincer.adjacent_links == {(0, 1)}
    ball = ObjectSDF.from_mesh(trimesh.creation.icosphere(3, radius=0.02), SDFConfig(resolution=24))
    # starts beyond the joint limit: the MDMM joint-limit constraint brings it back
    options = SynthesisOptions(num_grasps=3, seed=0, T_object_table=None, initial_joint_angles_rad=torch.full((3, 1), 1.8))
    result = synthesize_grasps(pincer, ball, SynthesisConfig(num_steps=80, chunk_steps=20, task_wrenches="axes6"), options)
    assert result.grasp is None  # not an Allegro hand: no 37-D output
    assert result.T_object_root.shape == (3, 4, 4) and result.joint_angles_rad.shape == (3, 1)
    assert torch.isfinite(result.T_object_root).all() and torch.isfinite(result.metrics.task_loss).all()
    assert not result.failed.any() and not result.partial and result.steps_done == 80
    assert result.metrics.joint_limit_violation_rad.max() < 0.05
    # it started 10 cm out (open hand on the 10 cm level set); the leaky pull brought it onto the ball
    assert (result.metrics.contact_samples > 0).all()
    assert result.metrics.penetration_depth_m.max() < 0.003


def test_coarse_to_fine_offset_schedule():
    config = SynthesisConfig(num_steps=700)
    assert offset_at(0, config) == pytest.approx(0.10)
    assert offset_at(250, config) == pytest.approx(0.05)
    assert offset_at(500, config) == 0.0 and offset_at(699, config) == 0.0


def test_short_synthesis_on_a_box_touches_without_penetrating(hand, box_sdf, box_grasps):
    result, fractions = box_grasps
    m = result.metrics
    assert not result.failed.any() and not result.partial and result.steps_done == 150
    assert fractions == [pytest.approx(k * 25 / 150) for k in range(1, 7)]
    tips = m.fingertip_distance_m.abs()  # closest sample of each fingertip link
    assert ((tips < 0.004).sum(-1) >= 3).all(), tips
    assert (tips < 0.003).float().mean() >= 0.75, tips
    assert m.penetration_depth_m.max() < 0.0025 and m.penetration_volume_cm3.max() < 0.5
    assert (m.contact_samples >= 10).all() and (m.contact_area_cm2 > 2.0).all()
    assert m.task_loss.max() < 0.04  # mean squared residual over the 12 unit wrenches (N^2): <= 0.2 N each
    assert m.table_penetration_m.max() < 0.002 and m.self_intersection_m.max() < 0.003
    assert m.joint_limit_violation_rad.max() < 0.05  # before the output is clamped to the limits
    lower, upper = hand.lower_limits_rad, hand.upper_limits_rad
    assert ((result.joint_angles_rad >= lower) & (result.joint_angles_rad <= upper)).all()
    for value in (result.T_object_root, result.joint_angles_rad, result.fingertip_normals, *m.as_dict().values()):
        assert torch.isfinite(torch.as_tensor(value, dtype=F64)).all()


def test_synthesis_output_is_a_valid_37d_grasp(hand, box_sdf, box_grasps):
    result, _ = box_grasps
    grasp = result.grasp
    assert isinstance(grasp, Grasp) and len(grasp) == 4 and grasp.frame_id == "object"
    allegro = AllegroHand(dtype=F64)
    validate_grasp(grasp, (allegro.lower_limits_rad, allegro.upper_limits_rad))
    vector = grasp.to_vector()
    assert vector.shape == (4, 37) and torch.allclose(Grasp.from_vector(vector).to_vector(), vector, atol=1e-9)

    # the pre-grasp clearance is the whole hand's smallest gap there, to the object and the table (z = 0)
    points = hand.surface_points(hand.link_poses(grasp.T_frame_palm, grasp.joint_angles_rad))
    gap = torch.minimum(box_sdf.distance(points), points[..., 2]).amin(-1)
    assert result.pregrasp_clearance_m.shape == (4,) and torch.allclose(result.pregrasp_clearance_m, gap, atol=1e-9)


def test_flex_pregrasp_opens_the_flexion_joints_and_closes_through_the_contact(hand, box_sdf, box_grasps):
    """The default pre-grasp: each finger opens its flexion joints by one of the angles tried, and its closing
    direction runs from the pre-grasp contact point back through the synthesised one (the fingertip IK retraces
    it); a finger that could not open clear backs off along the normal instead. "normal" backs every finger off
    along its contact normal and closes along the inward normal."""
    from getagrip_ros.robot.allegro import move_fingertips
    from getagrip_ros.synthesis.optimizer import ALLEGRO_FLEXION_JOINTS, allegro_grasp

    result, _ = box_grasps
    grasp, config = result.grasp, SynthesisConfig()
    allegro = AllegroHand(dtype=F64)
    R = grasp.palm_rotation
    inward_palm = -result.fingertip_normals @ R
    d_palm = grasp.fingertip_directions @ R
    chord = allegro.contact_positions(result.joint_angles_rad) - allegro.contact_positions(grasp.joint_angles_rad)
    opened = 0
    for b in range(len(grasp)):
        for f, joints in enumerate(ALLEGRO_FLEXION_JOINTS):
            delta = (result.joint_angles_rad[b] - grasp.joint_angles_rad[b])
            finger = slice(4 * f, 4 * f + 4)
            others = [j for j in range(4 * f, 4 * f + 4) if j not in joints]
            if torch.allclose(d_palm[b, f], inward_palm[b, f], atol=1e-9):
                assert not result.pregrasp_opened[b, f]
                continue  # the normal back-off
            assert result.pregrasp_opened[b, f]
            opened += 1
            assert torch.allclose(delta[others], torch.zeros(len(others), dtype=F64)), delta[finger]
            angle = float(delta[list(joints)].max())
            assert any(abs(angle - a) < 1e-9 for a in config.pregrasp_flex_rad), delta[finger]
            assert (delta[list(joints)] <= angle + 1e-9).all() and (delta[list(joints)] >= 0).all()
            assert torch.allclose(d_palm[b, f], chord[b, f] / chord[b, f].norm(), atol=1e-9)
    assert opened >= 8, opened  # most of the 16 fingers open by flexion on a box
    # closing along d_i by the chord's length brings the contact points back to the synthesised ones
    back = move_fingertips(allegro, grasp.joint_angles_rad, d_palm, chord.norm(dim=-1))
    assert (back.residual_m < 2e-3).float().mean() > 0.9, back.residual_m

    normal, clearance, opened_normal = allegro_grasp(result.T_object_root, result.joint_angles_rad, result.fingertip_normals,
                                                     hand, box_sdf, torch.eye(4, dtype=F64),
                                                     SynthesisConfig(pregrasp="normal"))
    assert not opened_normal.any()
    assert torch.allclose((normal.fingertip_directions * result.fingertip_normals).sum(-1), -torch.ones(4, 4, dtype=F64))
    assert torch.equal(normal.palm_position_m, grasp.palm_position_m) and clearance.shape == (4,)
    with pytest.raises(ValueError, match="pregrasp"):
        synthesize_grasps(hand, box_sdf, SynthesisConfig(num_steps=5, pregrasp="wide"), SynthesisOptions(num_grasps=1))


class _FlakySDF(ObjectSDF):
    """Returns NaN distances for grasp 0 during a few optimisation steps (calls 1, 2, ... = steps 0, 1, ...)."""

    def __init__(self, base: ObjectSDF, bad_steps: range) -> None:
        self.__dict__.update(base.__dict__)
        self.steps, self.bad_steps = 0, bad_steps

    def query(self, points_m, offset_m=0.0):
        d, n = super().query(points_m, offset_m)
        if points_m.requires_grad:  # an optimisation step (starts and metrics run without gradients)
            if self.steps in self.bad_steps:
                d = d.clone()
                d[0] = math.nan
            self.steps += 1
        return d, n


def test_nan_in_one_grasp_stops_that_grasp_only(hand, box_sdf):
    flaky = _FlakySDF(box_sdf, range(20, 23))
    result = synthesize_grasps(hand, flaky, SynthesisConfig(num_steps=50), SynthesisOptions(num_grasps=3, seed=2))
    assert flaky.steps == 50
    assert result.failed.tolist() == [True, False, False]
    assert list(result.failure_reasons) == [0] and "step 20" in result.failure_reasons[0]
    assert not result.partial and result.steps_done == 50
    assert torch.isfinite(result.T_object_root).all() and torch.isfinite(result.joint_angles_rad).all()
    reference = synthesize_grasps(hand, box_sdf, SynthesisConfig(num_steps=50), SynthesisOptions(num_grasps=3, seed=2))
    assert torch.allclose(result.T_object_root[1:], reference.T_object_root[1:])  # the others went on unaffected
    assert not torch.allclose(result.T_object_root[0], reference.T_object_root[0])  # grasp 0 was frozen early


def test_deadline_and_cancel_return_partial_results(hand, box_sdf):
    config = SynthesisConfig(num_steps=200, chunk_steps=10)
    late = synthesize_grasps(hand, box_sdf, config, SynthesisOptions(num_grasps=2, time_budget_s=0.0))
    assert late.partial and not late.cancelled and late.steps_done == 10
    assert torch.isfinite(late.T_object_root).all() and late.grasp is not None and len(late.grasp) == 2
    calls = []
    cancelled = synthesize_grasps(hand, box_sdf, config, SynthesisOptions(
        num_grasps=2, should_stop=lambda: len(calls) >= 3, progress=calls.append))
    assert cancelled.partial and cancelled.cancelled and cancelled.steps_done == 30
    assert calls == [pytest.approx(f) for f in (0.05, 0.1, 0.15)]


def test_bad_starts_and_options_raise_value_error(hand, box_sdf):
    with pytest.raises(ValueError, match="NaN"):
        synthesize_grasps(hand, box_sdf, SynthesisConfig(num_steps=5),
                          SynthesisOptions(initial_T_object_root=torch.full((1, 4, 4), math.nan)))
    with pytest.raises(ValueError, match="num_grasps"):
        synthesize_grasps(hand, box_sdf, SynthesisConfig(num_steps=5), SynthesisOptions(num_grasps=0))


def test_sdf_file_round_trip_and_malformed_files(box_sdf, tmp_path):
    path = tmp_path / "box.npz"
    box_sdf.save(path)
    loaded = ObjectSDF.load(path)
    points = torch.rand(500, 3, dtype=torch.float64) * 0.12 - torch.tensor([0.06, 0.06, 0.0], dtype=torch.float64)
    assert torch.allclose(loaded.distance(points), box_sdf.distance(points), atol=1e-6)  # float32 grid values
    assert loaded.shape == box_sdf.shape and loaded.frame_id == box_sdf.frame_id
    assert torch.equal(loaded.surface_points_m, box_sdf.surface_points_m) and torch.equal(loaded.centre_m, box_sdf.centre_m)
    np.savez(tmp_path / "partial.npz", values_m=np.zeros((4, 4, 4)))
    with pytest.raises(ValueError, match="missing"):
        ObjectSDF.load(tmp_path / "partial.npz")
    fields = dict(np.load(path))
    fields["frame_id"] = np.array([{"not": "data"}], dtype=object)  # a pickled object is never read
    np.savez(tmp_path / "pickled.npz", **fields)
    with pytest.raises(ValueError):
        ObjectSDF.load(tmp_path / "pickled.npz")


def test_hand_model_copy_on_a_device_leaves_the_original(hand):
    moved = hand.to("cpu")
    assert moved is not hand and moved.tree is not hand.tree
    assert torch.equal(moved.points_in_link_m, hand.points_in_link_m)
    T = torch.eye(4, dtype=torch.float64)[None]
    q = hand.open_joint_angles_rad[None]
    assert torch.equal(moved.surface_points(moved.link_poses(T, q)), hand.surface_points(hand.link_poses(T, q)))


def test_synthesis_on_the_gpu_matches_the_cpu_or_is_refused_without_one(hand, box_sdf):
    config, options = SynthesisConfig(num_steps=20), SynthesisOptions(num_grasps=2, seed=3)
    cpu = synthesize_grasps(hand, box_sdf, config, options)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            synthesize_grasps(hand, box_sdf, config, dataclasses.replace(options, device="cuda"))
        return
    gpu = synthesize_grasps(hand, box_sdf, config, dataclasses.replace(options, device="cuda"))
    assert gpu.T_object_root.device.type == "cpu" and gpu.grasp is not None
    assert torch.allclose(gpu.T_object_root, cpu.T_object_root, atol=1e-3)  # 20 steps: float rounding only
    assert torch.allclose(gpu.joint_angles_rad, cpu.joint_angles_rad, atol=1e-2)


def test_losses_see_the_hand_state(hand, box_sdf):
    """evaluate_losses on the open hand far from the box: no contact, no physics mismatch, no table penetration."""
    T = torch.eye(4, dtype=F64)[None].clone()
    T[0, :3, 3] = torch.tensor([0.0, 0.0, 0.5])
    C = hand.num_contact_samples
    state = HandState(T, hand.open_joint_angles_rad[None], torch.zeros(1, C, dtype=F64), torch.zeros(1, 6, C, 3, dtype=F64))
    terms = evaluate_losses(hand, box_sdf, state, axis_wrenches(), 0.03, 0.0, T_table_object=torch.eye(4, dtype=F64))
    assert terms.physics.item() < 1e-5 and terms.table.item() == 0.0 and terms.self_intersection.item() == 0.0
    assert terms.task.item() == pytest.approx(1.0)  # unit wrenches, no force: residual 1 each
    assert (terms.distance_m > 0.3).all()


def test_core_imports_no_ros():
    import subprocess
    import sys

    code = ("import sys, getagrip_ros.synthesis.optimizer, getagrip_ros.synthesis.hand_model; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'rosidl_runtime_py', 'launch_ros')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_pregrasp_fingers_clear_the_object(hand, box_sdf, box_grasps):
    """Each finger's pre-grasp is opened or backed off until all its samples lie 5 mm off the object (Get a Grip's pre-grasp
    must not touch it under the label noise)."""
    from getagrip_ros.synthesis.optimizer import _allegro_finger

    result, _ = box_grasps
    grasp = result.grasp
    points, _ = hand.surface(hand.link_poses(grasp.T_frame_palm, grasp.joint_angles_rad))
    gap = box_sdf.distance(points)
    finger = torch.tensor([_allegro_finger(n) for n in hand.link_names])[hand.sample_link]
    clear = torch.stack([(gap[:, finger == f] >= 0.005 - 1e-4).all(-1) for f in range(4)], -1)
    assert clear.float().mean() >= 0.75, clear
    palm_gap = gap[:, finger == -1].min(-1).values  # palm: kept off by the free-sample clearance
    assert (palm_gap > 0.003).all(), palm_gap


def test_free_samples_keep_their_clearance_and_the_unrelaxed_task_uses_produced_forces(hand, sphere_sdf):
    T = torch.eye(4, dtype=F64)[None]
    q = hand.open_joint_angles_rad[None]
    C = hand.num_contact_samples
    points, _ = hand.surface(hand.link_poses(T, q))
    # put the ball 5 mm in front of the palm's closest free sample
    free = points[0, C:]
    i = int(free[:, 0].argmax())  # the palm face (+x)
    centre = free[i] + torch.tensor([0.04 + 0.005, 0.0, 0.0], dtype=F64)
    T_object_root = torch.eye(4, dtype=F64)[None].clone()
    T_object_root[0, :3, 3] = -centre
    f = torch.zeros(1, C, dtype=F64, requires_grad=True)
    state = HandState(T_object_root, q, f, torch.zeros(1, 12, C, 3, dtype=F64))
    w = axis_wrenches("axes12")
    near = evaluate_losses(hand, sphere_sdf, state, w, 0.05, 0.0, free_clearance_m=0.01)
    far = evaluate_losses(hand, sphere_sdf, state, w, 0.05, 0.0, free_clearance_m=0.0)
    assert near.physics > far.physics + 1.0  # 5 mm inside the 1 cm clearance: a stray force of ~5 kN/m
    unrelaxed = evaluate_losses(hand, sphere_sdf, state, w, 0.05, 0.0, relaxed=False)
    assert near.task.requires_grad and not unrelaxed.task.requires_grad  # without relaxation the desired forces play no part
    # zero desired forces resist nothing (mean |w|^2 = 1); unrelaxed, the fingers' produced forces enter the task
    assert near.task.item() == pytest.approx(1.0) and unrelaxed.task.item() != pytest.approx(1.0)


def test_physics_score_prefers_an_opposed_thumb_and_drops_failures():
    from getagrip_ros.synthesis.losses import GraspMetrics
    from getagrip_ros.synthesis.optimizer import physics_score

    z = torch.zeros(3, dtype=F64)
    metrics = GraspMetrics(torch.full((3,), 1e-3, dtype=F64), *(z,) * 4, torch.zeros(3, 4, dtype=F64), z, z, z)
    n = torch.tensor([1.0, 0.0, 0.0], dtype=F64).repeat(3, 4, 1)
    n[0, 3] = -n[0, 3]  # grasp 0: the thumb faces the fingers
    score = physics_score(metrics, torch.tensor([False, False, True]), n)
    assert score[0] < score[1] and score[2] == math.inf
    # a pre-grasp closer than 3 mm to the object or the table costs 0.5 per mm
    clearance = torch.tensor([0.001, 0.003, 0.01], dtype=F64)
    with_clearance = physics_score(metrics, None, n, clearance)
    assert torch.allclose(with_clearance - physics_score(metrics, None, n), torch.tensor([1.0, 0.0, 0.0], dtype=F64))
    # each finger whose pre-grasp backs off along the normal (it could not open clear) costs 1
    opened = torch.tensor([[True] * 4, [True, False, True, False], [False] * 4])
    with_backoff = physics_score(metrics, None, n, None, opened)
    assert torch.allclose(with_backoff - physics_score(metrics, None, n), torch.tensor([0.0, 2.0, 4.0], dtype=F64))
    metrics.task_loss[1] = math.nan
    assert physics_score(metrics, None, n)[1] == math.inf


def test_an_extra_objective_joins_the_minimised_objective(hand, box_sdf):
    """A per-call term (B,) computed from the current variables: here one that holds the wrists at their starts."""
    config = SynthesisConfig(num_steps=40)
    free = synthesize_grasps(hand, box_sdf, config, SynthesisOptions(num_grasps=2, seed=3))
    seen = []

    def hold_at_start(state: HandState) -> torch.Tensor:
        seen.append(tuple(state.T_object_root.shape))
        start = held_from[:, :3, 3].to(state.T_object_root)
        return 1e9 * (state.T_object_root[:, :3, 3] - start).square().sum(-1)

    starts = synthesize_grasps(hand, box_sdf, SynthesisConfig(num_steps=1), SynthesisOptions(num_grasps=2, seed=3))
    held_from = starts.T_object_root  # after one step: within one learning rate of the sampled starts
    held = synthesize_grasps(hand, box_sdf, config, SynthesisOptions(num_grasps=2, seed=3, extra_objective=hold_at_start))
    assert seen and set(seen) == {(2, 4, 4)} and len(seen) == 40
    moved_free = (free.T_object_root[:, :3, 3] - held_from[:, :3, 3]).norm(dim=-1)
    moved_held = (held.T_object_root[:, :3, 3] - held_from[:, :3, 3]).norm(dim=-1)
    assert moved_free.sum() > 0.03 and moved_held.sum() < 0.3 * moved_free.sum(), (moved_free, moved_held)
