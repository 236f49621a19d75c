"""The simulated robot: model = description, trajectory tracking, stop, floating hand (no object needed)."""

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from getagrip_ros.robot.arm import RobotKinematics
from getagrip_ros.robot.description import ARM_JOINT_NAMES, FR3_Q_READY_RAD, HAND_JOINT_NAMES
from getagrip_ros.robot.interfaces import JointTrajectory
from getagrip_ros.sim.robots import SimArm, SimHand
from getagrip_ros.sim.scene import SceneConfig
from getagrip_ros.sim.world import SimWorld


@pytest.fixture(scope="module")
def world():
    with SimWorld() as w:
        yield w


def test_sim_kinematics_equal_the_planning_model(world):
    rng = np.random.default_rng(0)
    robot = RobotKinematics(dtype=torch.float64)
    lo, hi = robot.lower_limits_rad.numpy(), robot.upper_limits_rad.numpy()
    for _ in range(5):
        q = rng.uniform(lo, hi)
        world.reset(arm_rad=q[:7], hand_rad=q[7:])
        fk = robot.frames(torch.from_numpy(q)[None])
        for frame in ("palm_link", "zed2i_left_optical", "link_7.0_tip", "link_15.0_tip"):
            assert np.allclose(world.body_pose(frame), fk[frame][0].numpy(), atol=1e-9), frame
    world.reset()
    assert np.allclose(world.camera_pose()[:3, 3], [0.23621, -0.06, 0.58848], atol=1e-4)


def test_arm_follows_a_trajectory_within_tolerance(world):
    world.reset()
    arm = SimArm(world)
    goal = np.array(FR3_Q_READY_RAD) + np.array([0.4, 0.25, -0.2, 0.3, 0.3, -0.25, 0.4])
    # 3 s, within the FR3's velocity limits
    trajectory = JointTrajectory.linear(ARM_JOINT_NAMES, FR3_Q_READY_RAD, goal, 3.0, num_points=30)
    result = arm.move(trajectory)
    assert result.success and abs(result.duration_s - 3.0) < 0.01
    assert result.max_error_rad.max() < 0.05, result.max_error_rad
    assert result.final_error_rad.max() < 0.03, result.final_error_rad
    world.follow(JointTrajectory(ARM_JOINT_NAMES, [0.0], goal[None]), settle_s=1.0)
    assert np.abs(arm.state().positions_rad - goal).max() < 0.005  # settles on the target (gravity compensated)


def test_stop_holds_position_and_hand_moves_on_its_own(world):
    world.reset()
    arm, hand = SimArm(world), SimHand(world)
    goal = np.array(FR3_Q_READY_RAD) + 0.5
    t0 = world.time_s
    result = arm.move(JointTrajectory.linear(ARM_JOINT_NAMES, FR3_Q_READY_RAD, goal, 2.0),
                      should_stop=lambda: world.time_s - t0 > 0.5)
    assert not result.success and "stopped" in result.reason and result.duration_s < 0.6
    q_stop = arm.state().positions_rad
    closed = np.minimum(np.array(hand.state().positions_rad) + 0.3, 1.39)  # within every upper limit
    hand.move(JointTrajectory.linear(HAND_JOINT_NAMES, hand.state().positions_rad, closed, 0.5))
    assert np.abs(arm.state().positions_rad - q_stop).max() < 0.01  # the arm held still meanwhile
    assert np.abs(hand.state().positions_rad - closed).max() < 0.05
    with pytest.raises(ValueError, match="cannot move joints"):
        hand.move(JointTrajectory.linear(ARM_JOINT_NAMES, goal, goal, 1.0))
    with pytest.raises(ValueError, match="NaN"):
        JointTrajectory.linear(ARM_JOINT_NAMES, goal, goal * np.nan, 1.0)


def test_floating_hand_wrist_follows_commanded_pose():
    with SimWorld(SceneConfig(robot="floating_hand")) as world:
        T = np.eye(4)
        T[:3, :3] = np.array([[0, 0, 1], [0, 1, 0], [-1, 0, 0]])  # palm facing down
        T[:3, 3] = [0.6, 0.0, 0.3]
        world.reset(T_world_palm=T)
        T_up = T.copy()
        T_up[2, 3] += 0.2
        result = world.follow(JointTrajectory(HAND_JOINT_NAMES, [0.0], [world.joint_state(HAND_JOINT_NAMES).positions_rad]),
                              settle_s=1.0, wrist_path=lambda t: T if t < 0.2 else T_up)
        assert result.success
        assert np.allclose(world.body_pose("palm_link"), T_up, atol=2e-3)
        with pytest.raises(ValueError, match="no such joints"):
            SimArm(world)
        # a turning wrist (a quaternion per step), and a replica of the world that moves on its own
        turned = T.copy()
        turned[:3, :3] = T[:3, :3] @ Rotation.from_euler("x", 0.6).as_matrix()
        replica = world.replica()
        assert replica.model is world.model and replica.data is not world.data
        replica.reset(T_world_palm=T)
        still = world.body_pose("palm_link")

        def turning(t: float) -> np.ndarray:
            pose = T.copy()
            pose[:3, :3] = T[:3, :3] @ Rotation.from_euler("x", 0.6 * min(t / 0.5, 1.0)).as_matrix()
            return pose

        replica.follow(JointTrajectory(HAND_JOINT_NAMES, [0.0], [replica.joint_state(HAND_JOINT_NAMES).positions_rad]),
                       settle_s=1.0, wrist_path=turning)
        assert np.allclose(replica.body_pose("palm_link"), turned, atol=3e-3)
        assert np.array_equal(world.body_pose("palm_link"), still)


def test_actuators_use_the_published_gains_and_torque_limits(world):
    m = world.model
    expected = {"fr3_joint1": (600.0, 50.0, 87.0), "fr3_joint7": (50.0, 15.0, 12.0),
                "joint_1.0": (0.6667, 0.0417, 0.7), "joint_12.0": (0.8333, 0.0417, 0.7)}
    for name, (kp, kd, torque) in expected.items():
        a = m.actuator(name)
        assert a.gainprm[0] == pytest.approx(kp) and -a.biasprm[2] == pytest.approx(kd)
        assert tuple(a.forcerange) == pytest.approx((-torque, torque))
    settings = world.physics_settings()
    assert settings["scene"]["gains"]["arm_kp"][0] == 600.0 and settings["scene"]["friction"] == 0.9
