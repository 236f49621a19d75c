"""The whole stack in one process (`getagrip bringup --profile sim`): a grasp_object goal captures, perceives,
plans, moves and lifts the cube through the stage actions and records the trial bag; cancel and bad goals."""

from __future__ import annotations

import sys
import time

import pytest
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient

from getagrip_interfaces.action import GraspObject
from getagrip_interfaces.msg import Status
from getagrip_ros.ros.client import call_action, cancel_after_feedback, send_goal
from getagrip_ros.ros.processes import NodeProcess
from getagrip_ros.trials.bag import read_bag

pytest.importorskip("ompl")
def spin_until(node, condition, timeout_s: float) -> None:
    import rclpy

    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)


STAGES = ["capture", "perception", "grasp_planning", "motion_planning", "execution", "scoring"]


@pytest.fixture(scope="module")
def stack(ros_env, tmp_path_factory):
    root = tmp_path_factory.mktemp("bringup")
    params = {"grasp_task:work_dir": root / "work", "grasp_task:task.num_images": 40, "grasp_task:task.num_grasps": 20,
              "plan_grasp:num_samples": 512, "grasp_execution:sim.real_time_factor": 4.0,
              "capture_images:sim.camera_width_px": 320, "capture_images:sim.camera_height_px": 180,
              "capture_images:sim.camera_fy_px": 133.25}
    command = [sys.executable, "-m", "getagrip_ros.cli.getagrip", "bringup", "--profile", "sim",
               "--arg", "object=tabletop20/cube", "--arg", f"trials_dir={root / 'trials'}"]
    for key, value in params.items():
        command += ["--param", f"{key}={value}"]
    with NodeProcess("bringup", env=ros_env, command=command) as proc:
        assert proc.wait_for_output("[bringup] profile sim", 180), proc.output()
        assert proc.wait_for_output("grasp_task ready", 30), proc.output()
        yield proc, root
    assert proc.process.returncode == 0, proc.output()[-3000:]


@pytest.fixture(scope="module")
def client(rclpy_node, stack):
    c = ActionClient(rclpy_node, GraspObject, "grasp_object")
    yield c
    c.destroy()


def _goal(name: str, **kwargs) -> GraspObject.Goal:
    goal = GraspObject.Goal(trial_name=name, **kwargs)
    goal.object_position.header.frame_id = "world"
    goal.object_position.point.x = 0.65
    return goal


def test_grasp_object_lifts_the_cube_and_records_the_trial(rclpy_node, client, stack):
    proc, root = stack
    feedback = []
    status, result = call_action(rclpy_node, client, _goal("cube_ros"), timeout_s=400, feedback=feedback.append)
    assert status == GoalStatus.STATUS_SUCCEEDED and result.success, (result.status.reason, proc.output()[-3000:])
    assert result.scored and result.scored_success and result.scorer_agrees and result.stage == "done"
    assert [s for s in dict.fromkeys(f.stage for f in feedback)] == STAGES
    assert {t.stage for t in result.timings} == set(STAGES[:-1])
    assert len(result.executed_grasp.pregrasp_joint_positions_rad) == 16

    bag = read_bag(result.trial_bag_path)
    assert bag.complete and bag.outcome["success"] and bag.metadata["object"] == "tabletop20/cube"
    assert bag.metadata["method"] == {"sampler": "fixed", "evaluator": "geometry", "perception": "depth", "planner": "ompl"}
    actuators = bag.metadata["actuators"]  # the execution node's settings, read from its parameter services
    assert actuators["backend"] == "sim" and actuators["sim.real_time_factor"] == 4.0 and "safety.velocity_scale" in actuators
    for topic in ("/camera/image_raw", "/camera/camera_info", "/tf", "/object/points", "/object/bps", "/grasps/candidates",
                  "/grasps/chosen", "/motion/approach", "/joint_states", "/sim/object_state"):
        assert bag.topic(topic), topic
    assert len(bag.topic("/joint_states")[0].msg.name) == 23  # arm + hand, from the execution node's topic
    assert bag.topic("/sim/object_state")[-1].msg.pose.position.z > 0.15

    from rclpy.qos import DurabilityPolicy, QoSProfile
    from visualization_msgs.msg import Marker, MarkerArray

    received = []
    sub = rclpy_node.create_subscription(MarkerArray, "trial_markers", received.append,
                                         QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    try:
        spin_until(rclpy_node, lambda: received, 20)
    finally:
        rclpy_node.destroy_subscription(sub)
    texts = [m.text for m in received[-1].markers if m.type == Marker.TEXT_VIEW_FACING]
    assert texts == ["cube_ros: LIFTED"] and any(m.ns == "executed_grasp" for m in received[-1].markers)


def test_cancel_and_bad_goals_end_with_a_reason_and_the_server_keeps_serving(rclpy_node, client, stack):
    seen = []
    handle = send_goal(rclpy_node, client, _goal("cancelled"), timeout_s=30,
                       feedback=lambda fb: seen.append(fb) if fb.stage == "perception" else None)
    status, result = cancel_after_feedback(rclpy_node, handle, seen, feedback_timeout_s=200, result_timeout_s=120)
    assert status == GoalStatus.STATUS_CANCELED and result.status.code == Status.CANCELED, result.status.reason
    assert read_bag(result.trial_bag_path).outcome["status"] == "CANCELED"

    status, result = call_action(rclpy_node, client, _goal("bad", perception="lidar"), timeout_s=30)
    assert status == GoalStatus.STATUS_ABORTED and result.status.code == Status.INVALID_GOAL and "lidar" in result.status.reason
    status, result = call_action(rclpy_node, client, _goal("cube_ros"), timeout_s=30)  # the name is taken
    assert result.status.code == Status.INVALID_GOAL and "exists" in result.status.reason
    time.sleep(0.5)
    assert stack[0].process.poll() is None


def test_the_hardware_profile_without_a_robot_records_a_failed_trial_with_the_reason(ros_env, rclpy_node, tmp_path):
    """The same nodes on the robot's backends; with no FR3 at the address the trial ends in capture, recorded."""
    env = {**ros_env, "ROS_DOMAIN_ID": str((int(ros_env["ROS_DOMAIN_ID"]) + 1) % 100)}  # apart from the sim stack
    command = [sys.executable, "-m", "getagrip_ros.cli.getagrip", "bringup", "--profile", "hardware",
               "--arg", f"trials_dir={tmp_path / 'trials'}", "--param", f"grasp_task:work_dir={tmp_path / 'work'}",
               "--param", "capture_images:hardware.franky_host=127.0.0.1",
               "--param", "grasp_execution:hardware.franky_host=127.0.0.1"]
    script = """
import rclpy
from rclpy.action import ActionClient
from getagrip_interfaces.action import GraspObject
from getagrip_ros.ros.client import call_action
rclpy.init()
node = rclpy.create_node("hw_client")
goal = GraspObject.Goal(trial_name="hw")
goal.object_position.header.frame_id = "world"
goal.object_position.point.x = 0.65
status, result = call_action(node, ActionClient(node, GraspObject, "grasp_object"), goal, timeout_s=120)
print("RESULT", status, result.status.code, result.stage, result.trial_bag_path, "|", result.status.reason)
"""
    with NodeProcess("bringup_hw", env=env, command=command, log_path=tmp_path / "hw.out") as proc:
        assert proc.wait_for_output("[bringup] profile hardware", 180), proc.output()
        client = NodeProcess("client", env=env, command=[sys.executable, "-c", script], log_path=tmp_path / "client.out")
        with client:
            assert client.wait_for_output("RESULT", 150), client.output() + proc.output()[-2000:]
        line = client.output().split("RESULT", 1)[1]
    assert f" {Status.HARDWARE_ERROR} capture " in line and "the FR3 at 127.0.0.1 is not reachable" in line, line
    bag = read_bag(tmp_path / "trials" / "hw")
    assert bag.complete and bag.outcome["status"] == "HARDWARE_ERROR" and bag.outcome["stage"] == "capture"
