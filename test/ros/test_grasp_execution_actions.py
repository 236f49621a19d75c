"""plan_motion, execute_grasp, the e-stop topic, joint_states and the Allegro topic driver against the simulated
robot served by a real robot node in another process."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from getagrip_interfaces.action import ExecuteGrasp, PlanMotion, ResetWorld
from getagrip_interfaces.msg import Status
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.robot.description import ARM_JOINT_NAMES, HAND_JOINT_NAMES
from getagrip_ros.ros.client import call_action, cancel_after_feedback, send_goal
from getagrip_ros.ros.conversions import grasps_to_msgs
from getagrip_ros.ros.processes import NodeProcess

from ..conftest import CUBE
from ..loopback import free_loopback_address



@pytest.fixture(scope="module")
def server(ros_env, tmp_path_factory):
    args = ["--ros-args", "-p", f"sim.object_name:={CUBE['object']}", "-p", f"sim.object_yaw_rad:={CUBE['object_yaw_rad']}",
            "-p", "sim.real_time_factor:=2.0", "-p", "state_rate_hz:=50.0",
            "-p", f"data_roots:=[{tmp_path_factory.getbasetemp()}]"]
    with NodeProcess("getagrip_ros.ros.robot_node", args, env=ros_env) as proc:
        assert proc.wait_for_output("robot ready (", 60), proc.output()
        yield proc
    assert proc.process.returncode == 0, proc.output()  # clean shutdown on SIGINT


@pytest.fixture(scope="module")
def clients(rclpy_node, server):
    plan, execute = ActionClient(rclpy_node, PlanMotion, "plan_motion"), ActionClient(rclpy_node, ExecuteGrasp, "execute_grasp")
    yield plan, execute
    plan.destroy()
    execute.destroy()


def _plan(rclpy_node, client, cube_grasps, mesh_path, **kwargs):
    goal = PlanMotion.Goal(grasps=grasps_to_msgs(cube_grasps), object_mesh_path=mesh_path, planner="ompl", **kwargs)
    return call_action(rclpy_node, client, goal, timeout_s=60)


def _execute_goal(plan_result, mesh_path: str) -> ExecuteGrasp.Goal:
    return ExecuteGrasp.Goal(hand_shape=plan_result.hand_shape, approach=plan_result.approach, close=plan_result.close,
                             lift=plan_result.lift, object_mesh_path=mesh_path)


#: The hand driver in its own process; generous timeouts: after the franky tests the test process keeps a core busy.
HAND_DRIVER_PROBE = """
import json, sys, threading, time
import numpy as np, rclpy
from rclpy.executors import SingleThreadedExecutor
from getagrip_ros.robot.description import HAND_JOINT_NAMES
from getagrip_ros.robot.interfaces import JointTrajectory
from getagrip_ros.ros.allegro_topic_hand import AllegroTopicConfig, AllegroTopicHand

rclpy.init()
node = rclpy.create_node("hand_driver_probe")
executor = SingleThreadedExecutor()
executor.add_node(node)
spinner = threading.Thread(target=executor.spin, daemon=True)
spinner.start()
# a loaded CI machine runs the simulated hand behind real time: give it long to settle (it stops waiting on arrival)
hand = AllegroTopicHand(node, AllegroTopicConfig(command_topic=sys.argv[1], command_type=sys.argv[2], settle_s=15.0,
                                                   state_timeout_s=5.0))
deadline = time.monotonic() + 20
while True:
    try:
        start = hand.state()
        break
    except RuntimeError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.1)
goal = start.positions_rad.copy()
goal[1] += 0.4  # index proximal flexes
goal[12] = 0.9  # thumb rotates in
there = hand.move(JointTrajectory.linear(HAND_JOINT_NAMES, start.positions_rad, goal, 1.0))
err_goal = float(np.abs(hand.state().positions_rad - goal).max())
back = hand.move(JointTrajectory.linear(HAND_JOINT_NAMES, goal, start.positions_rad, 0.5))
err_start = float(np.abs(hand.state().positions_rad - start.positions_rad).max())
print(json.dumps({"names": list(start.joint_names), "there": [there.success, there.reason], "err_goal": err_goal,
                  "back": [back.success, back.reason], "err_start": err_start}), flush=True)
executor.shutdown()
spinner.join(timeout=5)
node.destroy_node()
rclpy.try_shutdown()
"""


@pytest.mark.parametrize("command_type, topic", [("joint_state", "/allegroHand_0/joint_cmd"),
                                                 ("float64_multi_array", "/allegro_hand_position_controller/commands")])
def test_the_allegro_topic_driver_moves_the_simulated_hand(ros_env, server, command_type, topic):
    run = subprocess.run([sys.executable, "-c", HAND_DRIVER_PROBE, topic, command_type], env=ros_env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["names"] == list(HAND_JOINT_NAMES)
    assert out["there"] == [True, "reached the end of the trajectory"] and out["err_goal"] < 0.05, out
    assert out["back"][0] and out["err_start"] < 0.05, out


def test_bad_goals_are_refused_with_reasons(rclpy_node, clients, cube_grasps, cube_mesh_path, tmp_path):
    plan, execute = clients
    status, result = _plan(rclpy_node, plan, cube_grasps, str(tmp_path / "nonexistent" / "cube.stl"))
    assert status == GoalStatus.STATUS_ABORTED and result.status.code == Status.INVALID_GOAL
    assert "cannot read the object mesh" in result.status.reason
    status, result = _plan(rclpy_node, plan, cube_grasps, "/etc/passwd")
    assert result.status.code == Status.INVALID_GOAL and "outside the configured roots" in result.status.reason
    (tmp_path / "nan.obj").write_text("v 0.6 0 0\nv 0.7 0 0\nv 0.6 0.1 0\nv nan 0 0.1\nf 1 2 3\nf 1 2 4\n")
    status, result = _plan(rclpy_node, plan, cube_grasps, str(tmp_path / "nan.obj"))
    assert result.status.code == Status.INVALID_GOAL and "1 vertices with NaN" in result.status.reason, result.status.reason
    for value, words in ((9.0, "joint_1.0 = 9.000 rad is"), (float("nan"), "grasps have NaN or inf")):
        bad = Grasp.from_vector(cube_grasps.to_vector().clone(), "world")
        bad.joint_angles_rad[0, 1] = value
        status, result = _plan(rclpy_node, plan, bad, cube_mesh_path)
        assert result.status.code == Status.INVALID_GOAL and words in result.status.reason, result.status.reason
    goal = PlanMotion.Goal(grasps=grasps_to_msgs(cube_grasps), object_mesh_path=cube_mesh_path, planner="curobo")
    status, result = call_action(rclpy_node, plan, goal, timeout_s=30)
    assert result.status.code == Status.NOT_IMPLEMENTED and "cuRobo" in result.status.reason
    goal.planner = "moveit"
    status, result = call_action(rclpy_node, plan, goal, timeout_s=30)
    assert result.status.code == Status.INVALID_GOAL and "unknown planner 'moveit'" in result.status.reason
    goal = PlanMotion.Goal(grasps=[], planner="ompl")
    status, result = call_action(rclpy_node, plan, goal, timeout_s=30)
    assert result.status.code == Status.INVALID_GOAL and "no grasps given" in result.status.reason
    status, result = call_action(rclpy_node, execute, ExecuteGrasp.Goal(), timeout_s=30)
    assert result.status.code == Status.INVALID_GOAL and "hand_shape has no points" in result.status.reason
    goal = PlanMotion.Goal(grasps=grasps_to_msgs(cube_grasps), planner="ompl", timeout_s=-1.0)
    status, result = call_action(rclpy_node, plan, goal, timeout_s=30)
    assert result.status.code == Status.INVALID_GOAL and "timeout_s must be >= 0" in result.status.reason


def test_plan_cancel_estop_then_lift_the_cube(rclpy_node, clients, cube_grasps, cube_mesh_path, server):
    plan, execute = clients
    states = []
    rclpy_node.create_subscription(JointState, "joint_states", states.append, 50)

    # plan from the measured joints: the best-ranked grasp with a plan, each better one refused with its reason
    # (which of the cube's grasps IK reaches depends on the CPU's float rounding: grasp 0 on some machines, 2 on others)
    status, planned = _plan(rclpy_node, plan, cube_grasps, cube_mesh_path)
    assert status == GoalStatus.STATUS_SUCCEEDED, (planned.status.reason, server.output())
    assert planned.grasp_index == len(planned.rejected) < len(cube_grasps), planned.rejected
    assert all(reason.startswith(f"{i}: ") and len(reason) > 20 for i, reason in enumerate(planned.rejected)), planned.rejected
    assert list(planned.approach.joint_names) == list(ARM_JOINT_NAMES)
    assert list(planned.close.joint_names) == list(HAND_JOINT_NAMES)

    # cancel stops the motion; the result names the stage
    feedback = []
    handle = send_goal(rclpy_node, execute, _execute_goal(planned, cube_mesh_path), feedback=feedback.append)
    status, cancelled = cancel_after_feedback(rclpy_node, handle, feedback)
    assert status == GoalStatus.STATUS_CANCELED and cancelled.status.code == Status.CANCELED, cancelled.status.reason
    assert cancelled.stage in ("validation", "hand_shape", "approach") and not cancelled.lifted

    # the old plan no longer starts where the robot is (unless it was cancelled before moving): plan again
    status, planned = _plan(rclpy_node, plan, cube_grasps, cube_mesh_path)
    assert status == GoalStatus.STATUS_SUCCEEDED, planned.status.reason

    # e-stop: refused while active, released by false
    estop = rclpy_node.create_publisher(Bool, "estop", 10)
    for _ in range(5):
        estop.publish(Bool(data=True))
        rclpy.spin_once(rclpy_node, timeout_sec=0.05)
    assert server.wait_for_output("e-stop: stopping every motion", 10)
    status, refused = call_action(rclpy_node, execute, _execute_goal(planned, cube_mesh_path), timeout_s=30)
    assert refused.status.code == Status.HARDWARE_ERROR and "e-stop is active" in refused.status.reason
    for _ in range(5):
        estop.publish(Bool(data=False))
        rclpy.spin_once(rclpy_node, timeout_sec=0.05)
    assert server.wait_for_output("e-stop released", 10)

    # the full grasp: feedback per stage, the cube 20 cm up in the hand
    feedback = []
    status, done = call_action(rclpy_node, execute, _execute_goal(planned, cube_mesh_path), timeout_s=120, feedback=feedback.append)
    assert status == GoalStatus.STATUS_SUCCEEDED, (done.status.reason, server.output()[-3000:])
    assert done.lifted and done.stage == "done" and "object rose" in done.status.reason
    phases = list(dict.fromkeys(f.phase for f in feedback))
    assert phases == ["validation", "hand_shape", "approach", "close", "lift", "done"]
    assert {t.stage for t in done.timings} == {"validation", "hand_shape", "approach", "close", "lift"}
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        rclpy.spin_once(rclpy_node, timeout_sec=0.05)
    assert states and list(states[-1].name) == list(ARM_JOINT_NAMES + HAND_JOINT_NAMES)
    arm_final = np.array(states[-1].position[:7])
    lift_end = np.array(planned.lift.points[-1].positions)
    assert np.abs(arm_final - lift_end).max() < 0.05  # joint_states show the arm up at the end of the lift


def test_hardware_backend_without_a_robot_refuses_goals_with_the_reason(ros_env, rclpy_node, cube_grasps):
    host = free_loopback_address()  # not 127.0.0.1: a franky-sim of a test on the other worker may listen there
    args = ["--ros-args", "-r", "__ns:=/hw", "-p", "backend:=hardware", "-p", f"hardware.franky_host:={host}"]
    log = Path(ros_env["ROS_LOG_DIR"]) / "robot_node_hw.out"
    with NodeProcess("getagrip_ros.ros.robot_node", args, env=ros_env, log_path=log) as proc:
        assert proc.wait_for_output("robot ready (", 60), proc.output()
        client = ActionClient(rclpy_node, PlanMotion, "/hw/plan_motion")  # apart from the sim node's
        try:  # planning from the measured joints needs the arm
            status, result = call_action(rclpy_node, client, PlanMotion.Goal(grasps=grasps_to_msgs(cube_grasps),
                                                                             planner="ompl"), timeout_s=60)
        finally:
            client.destroy()
        assert status == GoalStatus.STATUS_ABORTED and result.status.code == Status.HARDWARE_ERROR
        assert f"the FR3 at {host} is not reachable" in result.status.reason
    assert proc.process.returncode == 0, proc.output()


def test_a_reset_to_a_mesh_file_outside_the_data_roots_is_refused(rclpy_node, server):
    outside = Path(tempfile.mkdtemp(prefix="getagrip_outside_")) / "thing.obj"  # not under this session's roots
    outside.write_text("v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n")
    client = ActionClient(rclpy_node, ResetWorld, "reset_world")
    try:
        status, result = call_action(rclpy_node, client, ResetWorld.Goal(object_name=str(outside)), timeout_s=60)
        assert result.status.code == Status.INVALID_GOAL and "is outside the configured roots" in result.status.reason, \
            result.status.reason
    finally:
        client.destroy()
        outside.unlink()
        outside.parent.rmdir()
