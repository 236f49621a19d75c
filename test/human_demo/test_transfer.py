"""Transfer of a human demonstration to the Allegro: the three steps, the output, and refusals."""

from dataclasses import replace

import numpy as np
import pytest
import torch
import trimesh

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.human_demo.demonstration import HumanDemonstration
from getagrip_ros.human_demo.human_hand import FINGERTIP_KEYPOINTS, contact_heatmap, palm_vectors
from getagrip_ros.human_demo.transfer import (TransferConfig, TransferError, human_fingertip_contacts, initial_palm_pose,
                                              transfer_grasp)
from getagrip_ros.synthesis.hand_model import AllegroModelConfig, SurfaceSamplingConfig, allegro_hand_model
from getagrip_ros.synthesis.object_sdf import ObjectSDF, SDFConfig
from .demos import side_power_grasp

F64 = torch.float64
FAST = TransferConfig(num_object_points=1000, finger_iterations=20, iterations=40, lr_drop_at=30)


@pytest.fixture(scope="module")
def cylinder_sdf():
    """A 7 cm x 12 cm can standing on the table (z = 0)."""
    can = trimesh.creation.cylinder(radius=0.035, height=0.12)
    can.apply_translation((0.0, 0.0, 0.06))
    return ObjectSDF.from_mesh(can, SDFConfig(resolution=40))


@pytest.fixture(scope="module")
def allegro():
    return allegro_hand_model(AllegroModelConfig(contact_links="all", sampling=SurfaceSamplingConfig(num_samples=800)))


@pytest.fixture(scope="module")
def side_grasp():
    """A hand-posed power grasp: the palm on the can's side (+x), facing it, the fingers around it."""
    return side_power_grasp()


def test_step_a_puts_the_allegro_palm_on_the_human_palm(side_grasp):
    keypoints = torch.as_tensor(side_grasp.keypoints_m)
    T = initial_palm_pose(keypoints)
    n, f = palm_vectors(keypoints)
    assert torch.allclose(T[:3, 0], n) and torch.allclose(T[:3, 2], f)
    assert torch.allclose(T[:3, :3].T @ T[:3, :3], torch.eye(3, dtype=F64)) and torch.det(T[:3, :3]) > 0
    assert torch.allclose(T[:3, 3], keypoints[[5, 9, 13, 17]].mean(0))


def test_transfer_touches_where_the_human_did(side_grasp, allegro, cylinder_sdf):
    start = transfer_grasp(side_grasp, allegro, cylinder_sdf, TransferConfig(num_object_points=1000, finger_iterations=0,
                                                                            iterations=0), T_object_table=np.eye(4))
    result = transfer_grasp(side_grasp, allegro, cylinder_sdf, FAST, T_object_table=np.eye(4))
    # the heatmaps come closer than the open hand at the human palm, the orientation stays the human's
    assert start.orientation_difference < 1e-9
    assert result.contact_heatmap_difference < start.contact_heatmap_difference - 0.02, (
        result.contact_heatmap_difference, start.contact_heatmap_difference)
    assert result.contact_heatmap_difference < 0.25 and result.orientation_difference < 0.3
    assert result.penetration_depth_m < 0.006
    assert result.heatmap_robot.max() > 0.9  # the Allegro touches the can
    # the human contact is on the +x side of the can; so is the Allegro's
    assert (result.object_points_m[result.heatmap_robot > 0.5, 0] > -0.01).float().mean() > 0.8
    grasp = result.grasp
    assert isinstance(grasp, Grasp) and len(grasp) == 1 and grasp.frame_id == "object"
    lower, upper = allegro.lower_limits_rad, allegro.upper_limits_rad
    assert ((result.joint_angles_rad >= lower - 1e-9) & (result.joint_angles_rad <= upper + 1e-9)).all()
    assert torch.allclose(grasp.fingertip_directions.norm(dim=-1), torch.ones(1, 4, dtype=F64))
    assert set(result.timings_s) == {"init_s", "fingers_contact_s", "optimise_contact_s", "fingers_discrete_s",
                                     "optimise_discrete_s", "optimise_s", "total_s"}


def test_a_mano_demonstration_uses_its_vertices(side_grasp, allegro, cylinder_sdf):
    # the keypoint hand's capsule axes stand in for 778 mesh vertices: its heatmap is that of a thin hand
    rng = np.random.default_rng(0)
    k = side_grasp.keypoints_m
    a, b = rng.integers(0, 21, 778), rng.integers(0, 21, 778)
    t = rng.random((778, 1))
    vertices = k[a] + t * (k[b] - k[a])
    mano = HumanDemonstration("mano_mesh", "object", k, vertices)
    result = transfer_grasp(mano, allegro, cylinder_sdf, TransferConfig(num_object_points=500, finger_iterations=0,
                                                                        iterations=0))
    assert result.heatmap_human.shape == (500,) and float(result.heatmap_human.max()) <= 1.0


def test_refusals_say_why(side_grasp, allegro, cylinder_sdf):
    far = HumanDemonstration("keypoints21", "object", side_grasp.keypoints_m + np.array([0.3, 0.0, 0.0]))
    with pytest.raises(TransferError, match="cm from the object"):
        transfer_grasp(far, allegro, cylinder_sdf, FAST)
    elsewhere = HumanDemonstration("keypoints21", "camera", side_grasp.keypoints_m)
    with pytest.raises(TransferError, match="frame 'camera'"):
        transfer_grasp(elsewhere, allegro, cylinder_sdf, FAST)


def test_the_dexpilot_baseline_moves_the_fingertips_to_the_human_ones(side_grasp, allegro, cylinder_sdf):
    from getagrip_ros.human_demo.baselines import DEXPILOT_TARGETS, dexpilot_grasp
    from getagrip_ros.human_demo.transfer import transfer_objective
    from getagrip_ros.robot.allegro import AllegroHand

    objective = transfer_objective(side_grasp, allegro, cylinder_sdf, FAST, np.eye(4))
    result = dexpilot_grasp(objective, AllegroHand(dtype=F64))
    assert result.orientation_difference < 1e-9  # the palm stays at the human palm
    targets = torch.stack([objective.keypoints[list(k)].mean(0) for k in DEXPILOT_TARGETS])

    def tip_error(q: torch.Tensor) -> torch.Tensor:
        T_link = allegro.link_poses(result.T_object_palm[None], q[None])
        return (allegro.fingertip_points(T_link)[0] - targets).norm(dim=-1)

    before, after = tip_error(allegro.open_joint_angles_rad.to(F64)), tip_error(result.joint_angles_rad)
    assert (after <= before + 1e-6).all() and after.mean() < before.mean() - 0.01, (before, after)
    assert len(result.grasp) == 1 and result.heatmap_human is objective.heat_human


def test_the_fixed_set_baseline_closes_each_grasp_and_keeps_the_most_similar(side_grasp, allegro, cylinder_sdf):
    from getagrip_ros.grasp.grasp import Grasp
    from getagrip_ros.human_demo.baselines import close_onto_surface, fixed_set_grasp
    from getagrip_ros.human_demo.transfer import transfer_objective
    from getagrip_ros.robot.allegro import AllegroHand

    objective = transfer_objective(side_grasp, allegro, cylinder_sdf, FAST, np.eye(4))
    hand = AllegroHand(dtype=F64)
    # two candidates: the demonstration's own palm (step a) with the open hand, and the same hand turned away
    T = initial_palm_pose(objective.keypoints)
    turned = T.clone()
    turned[:3, :3] = T[:3, :3] @ torch.tensor([[-1.0, 0, 0], [0, -1.0, 0], [0, 0, 1.0]], dtype=F64)
    q = allegro.open_joint_angles_rad.to(F64).repeat(2, 1)
    inward = torch.tensor([-1.0, 0.0, 0.0], dtype=F64)  # towards the can's axis from its +x side
    candidates = Grasp(torch.stack([turned[:3, 3], T[:3, 3]]), torch.stack([turned[:3, :3], T[:3, :3]]), q,
                       inward.expand(2, 4, 3).clone(), frame_id="object")
    closed = close_onto_surface(objective, hand, candidates)
    assert not torch.equal(closed, q)  # the fingers moved towards the can
    result, index = fixed_set_grasp(objective, candidates, hand)
    assert index == 1 and result.orientation_difference < 1e-9


def test_the_result_reports_the_seeds_quality_columns(side_grasp, allegro, cylinder_sdf):
    from getagrip_ros.grasp.quality import epsilon_quality
    from getagrip_ros.synthesis.losses import hand_contacts

    result = transfer_grasp(side_grasp, allegro, cylinder_sdf, FAST, T_object_table=np.eye(4))
    # penetration volume: positive exactly when a sample is inside
    assert (result.penetration_volume_cm3 > 0) == (result.penetration_depth_m > 0) and result.penetration_volume_cm3 < 5
    # epsilon-quality of the links' contacts (the palm and fingers on the can's +x side: several contacts)
    points, normals = hand_contacts(allegro, cylinder_sdf, result.T_object_palm, result.joint_angles_rad)
    radius = float((cylinder_sdf.surface_points_m - cylinder_sdf.centre_m).norm(dim=-1).max())
    assert len(points) >= 4
    assert result.epsilon_quality == epsilon_quality(points.numpy(), normals.numpy(), cylinder_sdf.centre_m.numpy(), radius)
    # contacts lie on the can's side, normals into it
    radial = points[:, :2].norm(dim=-1)
    assert ((radial - 0.035).abs() < 0.003).float().mean() > 0.7
    inward = -(points[:, :2] / radial[:, None])
    assert ((normals[:, :2] * inward).sum(-1) > 0.5).float().mean() > 0.7
    # the open hand at the human palm touches nothing: no contacts, no quality
    start = transfer_grasp(side_grasp, allegro, cylinder_sdf, TransferConfig(num_object_points=500, finger_iterations=0,
                                                                            iterations=0), T_object_table=np.eye(4))
    assert start.epsilon_quality == 0.0


def test_discrete_finger_closing_closes_each_finger_until_it_would_go_deeper(side_grasp, allegro, cylinder_sdf):
    from getagrip_ros.human_demo.transfer import discrete_finger_closing
    from getagrip_ros.synthesis.optimizer import ALLEGRO_FLEXION_JOINTS

    T = initial_palm_pose(torch.as_tensor(side_grasp.keypoints_m))
    q0 = allegro.open_joint_angles_rad.to(F64)
    q = discrete_finger_closing(allegro, cylinder_sdf, T, q0, bins=8)
    flexion = [j for joints in ALLEGRO_FLEXION_JOINTS for j in joints]
    others = [j for j in range(16) if j not in flexion]
    assert torch.equal(q[others], q0[others])
    assert (q[flexion] >= q0[flexion] - 1e-12).all() and (q[flexion] > q0[flexion] + 0.05).sum() >= 4

    def depth(joints):
        samples = allegro.surface_points(allegro.link_poses(T[None], joints[None]))[0]
        return float((-cylinder_sdf.distance(samples, 0.0)).clamp_min(0).sum())

    assert depth(q) <= depth(q0) + 1e-9
    # the ablation that uses it runs end to end
    result = transfer_grasp(side_grasp, allegro, cylinder_sdf, TransferConfig(num_object_points=500, finger_init="discrete",
                                                                             iterations=0), T_object_table=np.eye(4))
    assert result.heatmap_robot.max() > 0.5


def test_step_c_runs_only_the_named_terms(side_grasp, allegro, cylinder_sdf):
    with pytest.raises(ValueError, match="unknown transfer terms"):
        TransferConfig(terms=("contact", "friendliness"))
    with pytest.raises(ValueError, match="finger_init"):
        TransferConfig(finger_init="magic")
    # with only the orientation term, step (c) keeps the human palm orientation exactly and leaves the joints alone
    only = TransferConfig(num_object_points=500, finger_init="contact", finger_iterations=10, iterations=10,
                          terms=("orientation",))
    no_c = TransferConfig(num_object_points=500, finger_init="contact", finger_iterations=10, iterations=0)
    a = transfer_grasp(side_grasp, allegro, cylinder_sdf, only, T_object_table=np.eye(4))
    b = transfer_grasp(side_grasp, allegro, cylinder_sdf, no_c, T_object_table=np.eye(4))
    assert torch.allclose(a.joint_angles_rad, b.joint_angles_rad)
    assert a.orientation_difference < 0.02  # L1 at its minimum: Adam hovers around it


def test_both_finger_starts_keep_the_one_with_the_lower_final_objective(side_grasp, allegro, cylinder_sdf):
    from dataclasses import replace

    from getagrip_ros.human_demo.transfer import TERMS

    short = replace(FAST, num_object_points=500, finger_iterations=10, iterations=15, lr_drop_at=10)
    results = {init: transfer_grasp(side_grasp, allegro, cylinder_sdf, replace(short, finger_init=init),
                                    T_object_table=np.eye(4)) for init in ("both", "contact", "discrete")}
    weights = FAST.weights

    def objective(result):
        return sum(getattr(weights, name) * result.losses[name] for name in TERMS)

    winner = min(("contact", "discrete"), key=lambda init: objective(results[init]))
    loser = ({"contact", "discrete"} - {winner}).pop()
    assert objective(results[winner]) < objective(results[loser])
    assert torch.allclose(results["both"].joint_angles_rad, results[winner].joint_angles_rad)
    assert torch.allclose(results["both"].T_object_palm, results[winner].T_object_palm)
    assert objective(results["both"]) == pytest.approx(objective(results[winner]))


def test_similar_grasps_stay_like_the_demonstration(side_grasp, allegro, cylinder_sdf):
    from getagrip_ros.human_demo.transfer import SimilarityRegion, similar_grasps, transfer_objective

    result = transfer_grasp(side_grasp, allegro, cylinder_sdf, FAST, T_object_table=np.eye(4))
    objective = transfer_objective(side_grasp, allegro, cylinder_sdf, FAST, np.eye(4))
    region = SimilarityRegion(max_contact_increase=0.01, max_orientation_difference=0.08)
    grasps, contact, orientation = similar_grasps(objective, result, 8, torch.Generator().manual_seed(0), region)
    assert 2 <= len(grasps) <= 8 and len(contact) == len(orientation) == len(grasps)
    # the transfer itself comes first, unchanged
    assert torch.allclose(grasps.palm_position_m[0], result.grasp.palm_position_m[0])
    assert torch.allclose(grasps.joint_angles_rad[0], result.grasp.joint_angles_rad[0])
    assert abs(float(contact[0]) - result.contact_heatmap_difference) < 1e-9
    # the variants differ from it, within the region
    assert (grasps.palm_position_m[1:] - grasps.palm_position_m[0]).norm(dim=-1).min() > 1e-4
    assert (contact <= contact[0] + 0.01 + 1e-12).all() and (orientation[1:] <= 0.08).all()
    # a region nothing else fits leaves the transfer alone
    alone, _, _ = similar_grasps(objective, result, 8, torch.Generator().manual_seed(0),
                                 SimilarityRegion(max_contact_increase=-1.0))
    assert len(alone) == 1


def test_the_fingertip_term_brings_allegro_fingertips_to_the_human_fingertip_contacts(side_grasp, allegro, cylinder_sdf):
    keypoints = torch.as_tensor(side_grasp.keypoints_m)
    points = cylinder_sdf.surface_points_m
    contacts = human_fingertip_contacts(keypoints, points, 0.015)
    tips = keypoints[list(FINGERTIP_KEYPOINTS)]
    assert 1 <= len(contacts) <= 5
    assert (torch.cdist(contacts, tips).amin(-1) <= 0.015).all()  # each at a touching human fingertip
    assert len(human_fingertip_contacts(keypoints + torch.tensor([0.5, 0.0, 0.0], dtype=F64), points, 0.015)) == 0
    results = {weight: transfer_grasp(side_grasp, allegro, cylinder_sdf,
                                      replace(FAST, finger_init="contact", weights=replace(FAST.weights, fingertips=weight)),
                                      T_object_table=np.eye(4))
               for weight in (0.0, 100.0)}
    assert results[100.0].losses["fingertips"] > 0
    assert results[100.0].fingertip_gap_m < results[0.0].fingertip_gap_m - 0.003, {
        w: r.fingertip_gap_m for w, r in results.items()}
    assert results[100.0].penetration_depth_m < 0.006


def test_the_trust_region_penalty_is_zero_inside_and_grows_outside(side_grasp, allegro, cylinder_sdf):
    from getagrip_ros.human_demo.transfer import PhysicsRefinement, SimilarityRegion, transfer_objective

    result = transfer_grasp(side_grasp, allegro, cylinder_sdf, FAST, T_object_table=np.eye(4))
    objective = transfer_objective(side_grasp, allegro, cylinder_sdf, FAST, np.eye(4))
    T = result.T_object_palm.repeat(3, 1, 1)
    T[1, :3, 3] += torch.tensor([0.0, 0.0, 0.05], dtype=F64)  # slid 5 cm up the can: other contacts
    turn = torch.tensor([[1.0, 0, 0], [0, 0.8, -0.6], [0, 0.6, 0.8]], dtype=F64)
    T[2, :3, :3] = turn @ T[2, :3, :3]  # turned by 37 deg about x: another orientation
    q = result.joint_angles_rad.repeat(3, 1).requires_grad_(True)
    # the differentiable terms (nearest samples searched in float32) are the exact float64 heatmaps of all points,
    # the reported ones are them in batches, and a subset estimates them
    contact, orientation = (value.detach() for value in objective.similarity_terms(T, q))
    samples, _ = allegro.surface(allegro.link_poses(T, q.detach()))
    exact = torch.cdist(objective.points.expand(3, -1, -1), samples).amin(-1)
    reference_contact = (objective.heat_human - contact_heatmap(exact, objective.config.tau_m)).abs().mean(-1)
    assert torch.allclose(contact, reference_contact, rtol=0, atol=1e-9), (contact, reference_contact)
    reported_contact, reported_orientation = objective.similarity(T, q.detach(), batch=2)
    assert torch.equal(reported_contact, contact) and torch.equal(reported_orientation, orientation)
    assert abs(float(contact[0]) - result.contact_heatmap_difference) < 1e-9
    subset, _ = objective.similarity_terms(T, q, 500)
    assert (subset - contact).abs().max() < 0.02
    region, refinement = SimilarityRegion(max_contact_increase=0.02, max_orientation_difference=0.1), PhysicsRefinement()
    penalty = objective.trust_region_penalty(T, q, result.contact_heatmap_difference, region, refinement)
    assert penalty[0] == 0.0 and penalty[1] > 0.0 and penalty[2] > 0.0, penalty
    assert float(contact[1]) > result.contact_heatmap_difference + 0.02 and float(orientation[2]) > 0.1
    penalty.sum().backward()
    assert torch.isfinite(q.grad).all() and q.grad[1].abs().sum() > 0  # it pulls the joints back toward the contacts
    with pytest.raises(ValueError, match="num_starts"):
        PhysicsRefinement(num_starts=0)


def test_physics_refinement_keeps_the_grasp_near_the_demonstration(side_grasp, allegro, cylinder_sdf):
    """Refined by the synthesis core, with and without the trust region: both give 37-D grasps, best physics score
    first; the region (here with heavy weights) keeps the palm's orientation much closer to the human's."""
    from getagrip_ros.human_demo.transfer import PhysicsRefinement, refine_with_physics, transfer_objective
    from getagrip_ros.synthesis.optimizer import SynthesisConfig

    result = transfer_grasp(side_grasp, allegro, cylinder_sdf, FAST, T_object_table=np.eye(4))
    objective = transfer_objective(side_grasp, allegro, cylinder_sdf, FAST, np.eye(4))
    hand = allegro_hand_model(AllegroModelConfig(contact_links="distal", sampling=SurfaceSamplingConfig(num_samples=800)))
    fractions = []
    runs = {}
    for name, weights in (("free", dict(contact_weight=0.0, orientation_weight=0.0)),
                          ("region", dict(contact_weight=1e7, orientation_weight=1e7))):
        refinement = PhysicsRefinement(num_steps=60, num_starts=3, **weights)
        runs[name] = refine_with_physics(objective, result, hand, SynthesisConfig(chunk_steps=20), refinement,
                                         torch.Generator().manual_seed(0), progress=fractions.append)
    for refined in runs.values():
        assert len(refined.grasps) == 3 and refined.grasps.frame_id == "object"
        assert (refined.physics_score[:-1] <= refined.physics_score[1:]).all()  # best first
        assert torch.isfinite(refined.grasps.palm_position_m).all()
        assert torch.allclose(refined.grasps.palm_position_m, refined.T_object_palm[:, :3, 3])
    assert fractions[:3] == [pytest.approx(f) for f in (1 / 3, 2 / 3, 1.0)]
    assert float(runs["region"].orientation_difference.mean()) < 0.6 * float(runs["free"].orientation_difference.mean()), (
        runs["region"].orientation_difference, runs["free"].orientation_difference)
