"""The robot's stages on one simulated robot (`RobotStages` on a `SimRobot`, what the robot node serves): the world
reset, one robot goal at a time, stateless planning with per-request worlds, and measured joints a little past
their limits (clamped and logged) or far past them (a state error, not the client's INVALID_GOAL)."""

from __future__ import annotations

import threading

import mujoco
import numpy as np
import pytest
import trimesh

from getagrip_ros.perception.capture import CaptureRequest
from getagrip_ros.robot.backend import WorldReset
from getagrip_ros.sim.robot_backend import SimRobot, SimRobotConfig
from getagrip_ros.status import StatusCode
from getagrip_ros.task.robot_stages import ExecuteRequest, MotionRequest, RobotStages, clamp_measured

from ..conftest import CUBE


@pytest.fixture(scope="module")
def robot():
    r = SimRobot(SimRobotConfig(object_name=CUBE["object"], object_yaw_rad=CUBE["object_yaw_rad"], real_time_factor=0.0,
                                camera_width_px=96, camera_height_px=54, camera_fy_px=40.0))
    yield r
    r.close()


@pytest.fixture(scope="module")
def stages(robot):
    notes: list[str] = []
    s = RobotStages(robot, log=notes.append)
    s.notes = notes
    return s


def _set_joint(robot: SimRobot, name: str, value: float) -> None:
    def set_it() -> None:
        world = robot.world
        world.data.qpos[world._qadr[name]] = value
        mujoco.mj_forward(world.model, world.data)

    robot.run(set_it)


def test_the_reset_puts_the_object_back_and_the_robot_home(stages, robot):
    first = stages.reset(WorldReset())
    assert first.status == StatusCode.SUCCEEDED, first.reason
    home = first.report.joint_state.positions_rad.copy()
    _set_joint(robot, "fr3_joint1", 0.4)
    robot.run(lambda: robot.world.data.qpos.__setitem__(slice(-7, -4), [0.5, 0.2, 0.3]))  # the cube knocked away
    again = stages.reset(WorldReset())
    assert again.status == StatusCode.SUCCEEDED and "world reset" in again.reason
    np.testing.assert_allclose(again.report.joint_state.positions_rad, home, atol=1e-9)
    np.testing.assert_allclose(again.report.T_world_object, first.report.T_world_object, atol=1e-9)
    moved = stages.reset(WorldReset(CUBE["object"], (0.6, 0.1), 0.2))
    assert moved.status == StatusCode.SUCCEEDED and "rebuilt" in moved.reason
    np.testing.assert_allclose(moved.report.T_world_object[:2, 3], [0.6, 0.1], atol=1e-6)
    bad = stages.reset(WorldReset("tabletop20/no_such_object"))
    assert bad.status == StatusCode.INVALID_GOAL and "no_such_object" in bad.reason
    assert stages.reset(WorldReset()).status == StatusCode.SUCCEEDED  # the configured pose again


def test_one_robot_goal_at_a_time(stages, robot, tmp_path):
    assert stages.reset(WorldReset()).status == StatusCode.SUCCEEDED
    started, release = threading.Event(), threading.Event()

    def on_image(*_) -> None:
        started.set()
        release.wait(30)

    outcome = []
    capture = threading.Thread(target=lambda: outcome.append(stages.capture(
        CaptureRequest(look_at_m=[0.65, 0.0, 0.0], output_dir=str(tmp_path / "ds"), num_images=30), True, on_image)))
    capture.start()
    try:
        assert started.wait(60), outcome[0].reason if outcome else "no image"
        busy = stages.reset(WorldReset())
        assert busy.status == StatusCode.BUSY and "capture" in busy.reason
        executed = stages.execute(ExecuteRequest(None))  # refused before it is even read
        assert executed.status == StatusCode.BUSY and executed.stage == "validation"
    finally:
        release.set()
        capture.join(60)
    assert stages.reset(WorldReset()).status == StatusCode.SUCCEEDED


def test_each_request_carries_its_world(stages, robot, cube_grasps, cube_mesh_path, tmp_path):
    """Planning keeps nothing: with the cube's mesh the best grasp is planned; executing that plan in a world where a
    box stands on the approach is refused before anything moves - the execute request's world is the one checked."""
    assert stages.reset(WorldReset()).status == StatusCode.SUCCEEDED
    planned = stages.plan_motion(MotionRequest(cube_grasps, object_mesh_path=cube_mesh_path, seed=0, timeout_s=60))
    assert planned.success, planned.reason
    pregrasp = planned.stages.approach.positions_rad[-1]
    from getagrip_ros.motion.robot_geometry import RobotCollisionModel

    palm = RobotCollisionModel().frame_pose(pregrasp, "palm_link")[:3, 3]
    blocker = trimesh.creation.box((0.08, 0.08, 0.08))
    blocker.apply_translation(palm)
    blocked = tmp_path / "blocker.stl"
    blocker.export(blocked)
    before = robot.run(robot.sample).joint_state.positions_rad
    refused = stages.execute(ExecuteRequest(planned.stages, str(blocked)))
    assert refused.status == StatusCode.INVALID_GOAL and refused.stage == "validation", refused.reason
    assert "approach" in refused.reason
    np.testing.assert_allclose(robot.run(robot.sample).joint_state.positions_rad, before, atol=1e-9)  # nothing moved
    missing = stages.plan_motion(MotionRequest(cube_grasps, object_mesh_path=str(tmp_path / "none.stl")))
    assert missing.status == StatusCode.INVALID_GOAL and "cannot read the object mesh" in missing.reason
    assert stages.plan_motion(MotionRequest(cube_grasps, planner="moveit")).status == StatusCode.INVALID_GOAL
    assert stages.plan_motion(MotionRequest(cube_grasps, planner="curobo")).status == StatusCode.NOT_IMPLEMENTED


def test_measured_joints_a_little_past_a_limit_are_clamped_and_far_past_are_a_state_error(stages, robot, cube_grasps,
                                                                                         cube_mesh_path):
    """An Allegro encoder reads a few hundredths of a radian past its limit after a grasp: clamped (and logged), the
    plan starts on the limit. Far past it, plan_motion answers HARDWARE_ERROR naming the joint, not INVALID_GOAL."""
    assert stages.reset(WorldReset()).status == StatusCode.SUCCEEDED
    lower = float(stages.planner.hand.lower_limits_rad[15])
    _set_joint(robot, "joint_15.0", lower - 0.03)
    stages.notes.clear()
    planned = stages.plan_motion(MotionRequest(cube_grasps, object_mesh_path=cube_mesh_path, timeout_s=60))
    assert planned.success, planned.reason
    assert planned.stages.hand_shape.positions_rad[0, 15] == pytest.approx(lower)
    assert len(stages.notes) == 1 and "joint_15.0" in stages.notes[0] and "clamped" in stages.notes[0]
    _set_joint(robot, "joint_15.0", lower - 0.2)
    far = stages.plan_motion(MotionRequest(cube_grasps, object_mesh_path=cube_mesh_path, timeout_s=60))
    assert far.status == StatusCode.HARDWARE_ERROR and "joint_15.0" in far.reason and "past its limits" in far.reason
    given = stages.plan_motion(MotionRequest(cube_grasps, robot.run(robot.sample).joint_state.positions_rad[:7],
                                             np.full(16, 9.0), cube_mesh_path))
    assert given.status == StatusCode.INVALID_GOAL  # a start the client gives is the client's problem
    assert stages.reset(WorldReset()).status == StatusCode.SUCCEEDED


def test_clamping_rules():
    q, notes = clamp_measured(("a", "b"), np.array([1.02, 0.5]), np.zeros(2), np.ones(2), 0.05)
    assert q.tolist() == [1.0, 0.5] and notes == ["a 1.0200 -> 1.0000 rad"]
    with pytest.raises(ValueError, match="the measured b = -0.0600 rad is 0.0600 rad past"):
        clamp_measured(("a", "b"), np.array([0.5, -0.06]), np.zeros(2), np.ones(2), 0.05)
    with pytest.raises(ValueError, match="NaN"):
        clamp_measured(("a",), np.array([np.nan]), np.zeros(1), np.ones(1), 0.05)
