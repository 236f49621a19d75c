import numpy as np
import pinocchio as pin
import pytest
import torch
from scipy.spatial.transform import Rotation

from getagrip_ros.grasp.closing import ClosingConfig, closing_targets
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.paths import urdf_path
from getagrip_ros.robot.allegro import (
    FINGERTIP_LINKS, GETAGRIP_TO_WONIK, JOINT_NAMES, OPEN_HAND_JOINT_ANGLES_RAD, STOW_HAND_JOINT_ANGLES_RAD,
    WONIK_JOINT_NAMES, WONIK_TO_GETAGRIP, AllegroHand, FingertipIKConfig, move_fingertips, reorder_by_name,
    solve_fingertip_ik,
)

# Fingertip (tip link origin) positions in palm_link, from the reference fact sheet (m).
FK_FACTS = {
    "zeros": ([0.0] * 16, [(0, 0.05531, 0.13344), (0, 0, 0.13620), (0, -0.05531, 0.13344), (-0.01320, 0.16770, -0.08607)]),
    "open": (OPEN_HAND_JOINT_ANGLES_RAD, [(0.05710, 0.05404, 0.11892), (0.05710, 0, 0.12162), (0.05710, -0.05404, 0.11892), (0.13175, 0.03769, -0.07470)]),
    "stow": (STOW_HAND_JOINT_ANGLES_RAD, [(0.06748, 0.04040, -0.03695), (0.06748, 0, -0.03485), (0.06748, -0.04040, -0.03695), (0.03152, 0.02682, -0.00628)]),
}


@pytest.fixture(scope="module")
def hand():
    return AllegroHand(dtype=torch.float64)


@pytest.mark.parametrize("name", FK_FACTS)
def test_fingertip_fk_matches_published_values(hand, name):
    q, expected = FK_FACTS[name]
    tips = hand.fingertip_positions(hand.tensor([q]))[0].numpy()
    assert np.allclose(tips, expected, atol=1e-4)


def test_fk_matches_pinocchio_on_random_configurations(hand):
    model = pin.buildModelFromUrdf(str(urdf_path("allegro_right.urdf")))
    data = model.createData()
    rng = np.random.default_rng(0)
    lo, hi = hand.lower_limits_rad.numpy(), hand.upper_limits_rad.numpy()
    qs = rng.uniform(lo, hi, size=(20, 16))
    ours = hand.fingertip_poses(torch.from_numpy(qs)).numpy()
    for q, T_ours in zip(qs, ours):
        q_pin = np.zeros(model.nq)
        q_pin[[model.joints[model.getJointId(n)].idx_q for n in JOINT_NAMES]] = q
        pin.framesForwardKinematics(model, data, q_pin)
        for i, link in enumerate(FINGERTIP_LINKS):
            M = data.oMf[model.getFrameId(link)]
            assert np.allclose(T_ours[i, :3, 3], M.translation, atol=1e-9)
            assert np.allclose(T_ours[i, :3, :3], M.rotation, atol=1e-9)


def test_joint_orders_round_trip():
    q = np.arange(16.0)
    wonik = q[GETAGRIP_TO_WONIK]
    assert wonik[:4].tolist() == [12, 13, 14, 15]  # thumb first in Wonik's driver
    assert np.array_equal(wonik[WONIK_TO_GETAGRIP], q)
    wonik_named = reorder_by_name(q, JOINT_NAMES, [JOINT_NAMES[i] for i in GETAGRIP_TO_WONIK])
    assert np.array_equal(wonik_named, wonik) and WONIK_JOINT_NAMES[0] == "ah_joint00"
    with pytest.raises(KeyError, match="joint_3.0"):
        reorder_by_name(q[:3], JOINT_NAMES[:3], JOINT_NAMES[:4])


def test_ik_reaches_targets_of_known_configurations(hand):
    rng = np.random.default_rng(1)
    lo, hi = hand.lower_limits_rad.numpy(), hand.upper_limits_rad.numpy()
    q_true = torch.from_numpy(rng.uniform(lo + 0.2 * (hi - lo), hi - 0.2 * (hi - lo), size=(64, 16)))
    targets = hand.contact_positions(q_true)
    q_start = hand.tensor(np.tile(OPEN_HAND_JOINT_ANGLES_RAD, (64, 1)))
    result = solve_fingertip_ik(hand, q_start, targets, FingertipIKConfig(num_iterations=100))
    assert result.converged.float().mean() > 0.95
    assert float(result.residual_m.median()) < 1e-4
    assert bool(hand.within_limits(result.joint_angles_rad).all())


def test_move_fingertips_backs_off_and_closes_along_directions(hand):
    q = hand.tensor([[0.1, 0.7, 0.6, 0.5, 0.0, 0.7, 0.6, 0.5, -0.1, 0.7, 0.6, 0.5, 1.2, 0.4, 0.5, 0.5]])
    p0 = hand.contact_positions(q)
    d = torch.tensor([[[1.0, 0.0, 0.0]] * 3 + [[0.0, -1.0, 0.0]]], dtype=torch.float64)  # toward the palm's front / thumb inward
    for dist in (-0.03, 0.02):
        res = move_fingertips(hand, q, d, dist)
        moved = hand.contact_positions(res.joint_angles_rad) - p0
        assert bool(res.converged.all()), res.residual_m
        assert torch.allclose(moved, d * dist, atol=1.5e-3)
    # a target far out of reach: the solution stays in limits and reports the residual honestly
    far = move_fingertips(hand, q, d, 0.5)
    assert bool(hand.within_limits(far.joint_angles_rad).all())
    assert float(far.residual_m.min()) > 0.3 and not bool(far.converged.any())


def test_closing_targets_use_directions_of_the_grasp_frame(hand):
    q = torch.tensor([[0.0, 0.6, 0.5, 0.4] * 3 + [1.2, 0.3, 0.4, 0.4]], dtype=torch.float64)
    d_palm = torch.tensor([[[1.0, 0.0, 0.0]] * 3 + [[0.0, -1.0, 0.0]]], dtype=torch.float64)
    R_world_palm = torch.from_numpy(Rotation.from_euler("xyz", [0.3, -1.0, 2.0]).as_matrix())[None]
    g = Grasp(torch.tensor([[0.5, 0.1, 0.2]], dtype=torch.float64), R_world_palm, q, d_palm @ R_world_palm.transpose(-1, -2))
    targets = closing_targets(hand, g, ClosingConfig(pregrasp_distance_m=-0.03, close_distance_m=0.06))
    p0 = hand.contact_positions(q)
    pre = hand.contact_positions(targets.pregrasp.joint_angles_rad) - p0
    assert torch.allclose(pre[targets.pregrasp.converged], (d_palm * -0.03)[targets.pregrasp.converged], atol=2e-3)
    assert int(targets.pregrasp.converged.sum()) >= 3
    closed = hand.contact_positions(targets.closed.joint_angles_rad) - p0
    # closing moves every fingertip toward +d (into the object), as far as the joint limits allow
    assert bool(((closed * d_palm).sum(-1) > 0.01).all())


def test_robot_kinematics_match_the_published_ready_pose():
    from getagrip_ros.robot.arm import RobotKinematics

    robot = RobotKinematics(dtype=torch.float64)
    q = torch.tensor([list(robot.q_ready_arm_rad) + [0.0] * 16], dtype=torch.float64)
    frames = robot.frames(q)
    assert np.allclose(frames["palm_link"][0, :3, 3].numpy(), [0.44087, 0.0, 0.56378], atol=1e-4)
    assert np.allclose(frames["palm_link"][0, :3, :3].numpy(), [[0, 0, 1], [0, 1, 0], [-1, 0, 0]], atol=1e-6)
    assert np.allclose(frames["zed2i_left_optical"][0, :3, 3].numpy(), [0.23621, -0.06, 0.58848], atol=1e-4)
    assert np.allclose(frames["fr3_flange"][0, :3, 3].numpy(), [0.30689, 0.0, 0.59028], atol=1e-4)
    # fingertips through the arm = palm pose composed with the hand-only kinematics
    hand = AllegroHand(dtype=torch.float64)
    tips_palm = hand.fingertip_positions(torch.zeros(1, 16, dtype=torch.float64))[0]
    T = frames["palm_link"][0]
    for i, link in enumerate(FINGERTIP_LINKS):
        assert torch.allclose(frames[link][0, :3, 3], T[:3, :3] @ tips_palm[i] + T[:3, 3], atol=1e-12)
    assert torch.allclose(robot.T_world_palm(q), frames["palm_link"])
