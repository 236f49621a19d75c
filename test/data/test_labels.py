"""Grasp labels in the floating-hand world: perturbed trials, y_coll at the pre-grasp, y_pick after a 20 cm lift."""

import math

import numpy as np
import pytest
import torch

from getagrip_ros.data.labels import FORBIDDEN_LINKS, LabelConfig, label_grasp, label_grasps
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.perturb import PerturbationConfig
from getagrip_ros.grasp.rotations import rotation_angle
from getagrip_ros.objects.mesh_object import ObjectSpec, PrepareConfig, prepare_object
from getagrip_ros.objects.procedural import BoxShape
from getagrip_ros.robot.allegro import OPEN_HAND_JOINT_ANGLES_RAD, AllegroHand, FingertipIKConfig, solve_fingertip_ik
from getagrip_ros.sim.grasp_trial import CloseLiftConfig, close_and_lift
from getagrip_ros.sim.scene import SceneConfig
from getagrip_ros.sim.world import SimWorld

BOX_HALF_M = 0.025


@pytest.fixture(scope="module")
def hand():
    return AllegroHand(dtype=torch.float64)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    spec = ObjectSpec("test/box_5cm", "procedural", BoxShape((0.05, 0.05, 0.05)))
    box = prepare_object(spec, PrepareConfig(cache_dir=str(tmp_path_factory.mktemp("convex"))))
    with SimWorld(SceneConfig(robot="floating_hand"), box) as w:  # the box rests at x, y = 0.65, 0
        yield w


@pytest.fixture(scope="module")
def pinch(hand) -> Grasp:
    """A pinch of the 5 cm box from above: finger pads 2 cm off the far face, the thumb's 2 cm off the near face,
    5 mm above the box centre (clear of the box and the table under every label perturbation)."""
    centre_palm = np.array([0.07, 0.0, 0.035])  # grasp centre in the palm frame
    far, near = centre_palm[2] + BOX_HALF_M + 0.02, centre_palm[2] - BOX_HALF_M - 0.02
    pads = torch.tensor([[[0.07, 0.03, far], [0.07, 0.0, far], [0.07, -0.03, far], [0.07, 0.0, near]]], dtype=torch.float64)
    pre = solve_fingertip_ik(hand, hand.tensor([OPEN_HAND_JOINT_ANGLES_RAD]), pads, FingertipIKConfig(num_iterations=200))
    assert bool(pre.converged.all())
    R_world_palm = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)  # palm down
    position = torch.tensor([0.65, 0.0, BOX_HALF_M + 0.005], dtype=torch.float64) - R_world_palm @ torch.as_tensor(centre_palm)
    finger_axis = R_world_palm[:, 2]
    directions = torch.stack([-finger_axis, -finger_axis, -finger_axis, finger_axis])  # squeeze toward each other
    return Grasp(position[None], R_world_palm[None], pre.joint_angles_rad, directions[None], frame_id="world")


def shifted(grasp: Grasp, offset_m: tuple[float, float, float]) -> Grasp:
    return Grasp(grasp.palm_position_m + torch.tensor(offset_m, dtype=torch.float64), grasp.palm_rotation,
                 grasp.joint_angles_rad, grasp.fingertip_directions, frame_id="world")


def test_good_pinch_is_labelled_collision_free_and_picked_over_distinct_perturbations(world, pinch, hand):
    label = label_grasp(world, pinch, hand, LabelConfig(), torch.Generator().manual_seed(0))
    assert len(label.trials) == 5
    assert label.y_coll == 1.0 and label.y_pick > 0.5, [t.reason for t in label.trials]
    assert label.y_pgs == pytest.approx(np.mean([t.y_coll * t.y_pick for t in label.trials]))
    for t in label.trials:
        assert t.colliding_bodies == () and "pre-grasp" not in t.reason
        if t.y_pick:
            assert t.object_lift_m > 0.17 and len(t.hand_links_touching) >= 3 and t.relative_motion_m < 0.10
            assert max(abs(a) for a in t.rotation_deg) < 45 and "lifted" in t.reason
    # every trial has its own wrist perturbation, within U[-5, 5] mm per axis and 2.5 deg per Euler angle
    poses = torch.as_tensor(np.stack([t.T_world_palm for t in label.trials]))
    nominal = pinch.T_frame_palm[0]
    offsets = poses[:, :3, 3] - nominal[:3, 3]
    assert offsets.abs().max() <= 0.005 + 1e-9 and torch.pdist(offsets).min() > 1e-4
    angles = rotation_angle(poses[:, :3, :3], nominal[:3, :3].expand(5, 3, 3))
    assert angles.max() <= math.radians(2.5) * math.sqrt(3) + 1e-9 and angles.min() > 1e-4


def test_far_grasp_and_grasp_in_the_table_labelled_deterministically(world, pinch, hand):
    far = shifted(pinch, (0.0, 0.20, 0.0))  # 20 cm beside the box, in the air
    in_table = shifted(pinch, (0.0, 0.20, -0.10))  # palm origin on the table top, the fingers in it, away from the box
    config = LabelConfig(num_perturbations=2)
    calls = []
    labels = label_grasps(world, Grasp.cat([far, in_table]), hand, config, torch.Generator().manual_seed(3),
                          progress=lambda i, n: calls.append((i, n)))
    assert calls == [(1, 2), (2, 2)]
    miss, table = labels
    assert miss.y_coll == 1.0 and miss.y_pick == 0.0 and miss.y_pgs == 0.0
    assert all("still on the table" in t.reason and t.object_lift_m < 0.01 for t in miss.trials)
    assert table.y_coll == 0.0 and table.y_pgs == 0.0
    for t in table.trials:
        assert "pre-grasp touches the table" in t.reason and "object (" not in t.reason
        assert ("palm_link", "world") in t.colliding_bodies and all(b == "world" for _, b in t.colliding_bodies)
    again = label_grasps(world, Grasp.cat([far, in_table]), hand, config, torch.Generator().manual_seed(3))
    for la, lb in zip(labels, again):
        assert (la.y_coll, la.y_pick, la.y_pgs) == (lb.y_coll, lb.y_pick, lb.y_pgs)
        for a, b in zip(la.trials, lb.trials):
            assert np.array_equal(a.T_world_palm, b.T_world_palm)
            assert (a.reason, a.object_lift_m, a.rotation_deg) == (b.reason, b.object_lift_m, b.rotation_deg)


def test_threads_and_the_sparse_jacobian_give_the_same_labels(world, pinch, hand):
    """Trials on replicas of the world in parallel threads are the serial trials, number for number; the data engine's
    sparse constraint Jacobian keeps every outcome of these trials."""
    grasps = Grasp.cat([pinch, shifted(pinch, (0.0, 0.0, 0.004)), shifted(pinch, (0.0, 0.20, 0.0)),
                        shifted(pinch, (0.0, 0.20, -0.10))])
    config = LabelConfig(num_perturbations=3)

    def trials(w, threads):
        calls = []
        labels = label_grasps(w, grasps, hand, config, torch.Generator().manual_seed(5), lambda i, n: calls.append(i),
                              threads=threads)
        assert calls == [1, 2, 3, 4]
        return [t for label in labels for t in label.trials]

    serial, parallel = trials(world, 1), trials(world, 3)
    assert len(serial) == 12 and sum(t.y_pick for t in serial) >= 3  # the pinches lift, the others do not
    for a, b in zip(serial, parallel, strict=True):
        assert np.array_equal(a.T_world_palm, b.T_world_palm)
        assert (a.reason, a.object_lift_m, a.relative_motion_m, a.rotation_deg) == \
            (b.reason, b.object_lift_m, b.relative_motion_m, b.rotation_deg)
    with SimWorld(SceneConfig(robot="floating_hand", jacobian="sparse"), world.object) as sparse:
        assert sparse.model.opt.jacobian == 1 and world.model.opt.jacobian == 2  # mjJAC_SPARSE, mjJAC_AUTO
        for a, b in zip(serial, trials(sparse, 2), strict=True):
            assert (a.y_coll, a.y_pick) == (b.y_coll, b.y_pick), (a.reason, b.reason)
            assert b.object_lift_m == pytest.approx(a.object_lift_m, abs=0.005)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        label_grasps(world, pinch, hand, threads=0)


def test_lift_leaving_the_object_on_the_table_stops_early_and_a_held_object_is_lifted_all_the_way(world, pinch):
    def lift(grasp: Grasp, give_up_after_m):
        T, q = grasp.T_frame_palm[0].numpy(), grasp.joint_angles_rad[0].numpy()
        world.reset(hand_rad=q, T_world_palm=T)
        z0 = world.object_pose()[2, 3]
        closed = q + np.where(np.arange(16) % 4 > 0, 0.4, 0.0)  # flex every finger
        outcome = close_and_lift(world, T, q, closed, CloseLiftConfig(give_up_after_m=give_up_after_m))
        return outcome, world.time_s, outcome.T_world_object[2, 3] - z0

    far = shifted(pinch, (0.0, 0.20, 0.0))
    (full, full_s, _), (early, early_s, early_rise) = lift(far, None), lift(far, 0.05)
    assert not full.gave_up and full_s == pytest.approx(2.2, abs=0.01)
    assert early.gave_up and 0.95 < early_s < 1.1  # closed + held at 0.7 s, the wrist 5 cm up ~0.25 s later
    assert "world" in early.touching and early.hand_links_touching == () and abs(early_rise) < 0.01
    held, held_s, held_rise = lift(pinch, 0.05)
    assert not held.gave_up and held_s == pytest.approx(2.2, abs=0.01) and held_rise > 0.15, held.touching


def test_custom_forbidden_link_fails_the_pick_and_names_the_link(world, pinch, hand):
    config = LabelConfig(num_perturbations=1, perturbation=PerturbationConfig(0.0, 0.0, 0.0))  # the nominal grasp
    ok = label_grasp(world, pinch, hand, config).trials[0]
    assert ok.y_pick == 1.0, ok.reason
    assert set(FORBIDDEN_LINKS) < set(world.hand_link_names()) and not set(FORBIDDEN_LINKS) & set(ok.hand_links_touching)
    tip = ok.hand_links_touching[-1]
    banned = label_grasp(world, pinch, hand, LabelConfig(num_perturbations=1, perturbation=config.perturbation,
                                                         forbidden_links=(tip,))).trials[0]
    assert banned.y_pick == 0.0 and f"forbidden link {tip} touches the object" in banned.reason


def test_a_pick_can_also_ask_the_executors_rise(world, pinch, hand):
    """min_rise_fraction: the object must rise that fraction of the 20 cm lift (the executor's check is 0.9)."""
    nominal = PerturbationConfig(0.0, 0.0, 0.0)
    ok = label_grasp(world, pinch, hand, LabelConfig(num_perturbations=1, perturbation=nominal,
                                                     min_rise_fraction=0.9)).trials[0]
    assert ok.y_pick == 1.0 and ok.object_lift_m >= 0.18, ok.reason
    asked = ok.object_lift_m / 0.20 + 0.01  # just above what this lift reaches
    short = label_grasp(world, pinch, hand, LabelConfig(num_perturbations=1, perturbation=nominal,
                                                        min_rise_fraction=asked)).trials[0]
    assert short.y_pick == 0.0 and short.object_lift_m == ok.object_lift_m
    assert f"object rose {ok.object_lift_m * 100:.1f} cm of the 20 cm lift" == short.reason


def test_bad_input_raises(world, pinch, hand):
    with pytest.raises(ValueError, match="world frame"):
        label_grasp(world, Grasp(pinch.palm_position_m, pinch.palm_rotation, pinch.joint_angles_rad,
                                 pinch.fingertip_directions, frame_id="Oy"), hand)
    nan = shifted(pinch, (float("nan"), 0.0, 0.0))
    with pytest.raises(ValueError, match="palm_position_m has NaN"):
        label_grasp(world, nan, hand)
    with pytest.raises(ValueError, match="one grasp"):
        label_grasp(world, Grasp.cat([pinch, pinch]), hand)
    with SimWorld(SceneConfig(robot="floating_hand")) as empty, pytest.raises(ValueError, match="with an object"):
        label_grasps(empty, pinch, hand)
