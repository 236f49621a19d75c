"""The stack as users launch it: `getagrip bringup --profile sim` starts every node in its own process (as
`ros2 launch getagrip_ros sim.launch.py` does). grasp_object goals, one after another, reset the world, capture,
perceive, plan, move and lift the cube through the stage actions and record one trial bag each; cancel and bad goals.
The hardware profile runs against franky-sim on loopback."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient

from getagrip_interfaces.action import GraspObject
from getagrip_interfaces.msg import Status
from getagrip_ros.ros.client import call_action, cancel_after_feedback, send_goal, wait_for_message
from getagrip_ros.ros.processes import NodeProcess
from getagrip_ros.ros.stage_messages import human_demo_to_msg
from getagrip_ros.trials.bag import read_bag

from ..human_demo.demos import SHORT_TRANSFER, side_power_grasp

STAGES = ["reset", "capture", "perception", "grasp_planning", "motion_planning", "execution", "scoring"]
NODES = ("robot", "train_nerf", "extract_object", "plan_grasp", "grasp_task")


def spin_until(node, condition, timeout_s: float) -> None:
    import rclpy

    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)


def bringup_command(profile: str, arguments: dict[str, object], params: dict[str, object]) -> list[str]:
    command = [sys.executable, "-m", "getagrip_ros.cli.getagrip", "bringup", "--profile", profile, "--processes", "per-node"]
    for key, value in arguments.items():
        command += ["--arg", f"{key}={value}"]
    for key, value in params.items():
        command += ["--param", f"{key}={value}"]
    return command


@pytest.fixture(scope="module")
def stack(ros_env, tmp_path_factory):
    root = tmp_path_factory.mktemp("bringup")
    params = {"grasp_task:task.num_images": 40, "grasp_task:task.num_grasps": 20, "plan_grasp:num_samples": 512,
              "robot:sim.real_time_factor": 4.0, "robot:sim.camera_width_px": 320, "robot:sim.camera_height_px": 180,
              "robot:sim.camera_fy_px": 133.25, **{f"plan_grasp:{name}": value for name, value in SHORT_TRANSFER.items()}}
    # the quick method by launch arguments (these tests are about the stack; the demo's test runs the default over ROS)
    arguments = {"object": "tabletop20/cube", "trials_dir": root / "trials", "work_dir": root / "work",
                 "sampler": "fixed", "evaluator": "geometry", "plan_with_mesh": "false"}
    with NodeProcess("bringup", env=ros_env, command=bringup_command("sim", arguments, params)) as proc:
        assert proc.wait_for_output("[bringup] profile sim", 60), proc.output()
        for node in NODES:
            assert proc.wait_for_output(f"{node} ready", 180), proc.output()
        yield proc, root
    assert proc.process.returncode == 0, proc.output()[-3000:]
    assert "Traceback" not in proc.output() and "context is invalid" not in proc.output(), proc.output()[-3000:]


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


def test_consecutive_goals_each_lift_the_cube_and_record_their_own_bag(rclpy_node, client, stack):
    """One bring-up, two trials in a row (the cancel test below runs two more on the same stack), separate processes
    and real actions: each starts from a reset world, gets past motion planning, lifts the cube and writes its own bag -
    the same grasp each time, as fresh bring-ups would (the world and the seed are the same)."""
    proc, root = stack
    executed, bags = [], set()
    for k in range(2):
        feedback = []
        status, result = call_action(rclpy_node, client, _goal(f"cube_{k}"), timeout_s=400, feedback=feedback.append)
        assert status == GoalStatus.STATUS_SUCCEEDED and result.success, (k, result.status.reason, proc.output()[-3000:])
        assert result.scored and result.scored_success and result.scorer_agrees and result.stage == "done"
        assert [s for s in dict.fromkeys(f.stage for f in feedback)] == STAGES
        assert {t.stage for t in result.timings} == set(STAGES[:-1])
        executed.append(np.asarray(result.executed_grasp.vector))
        bags.add(result.trial_bag_path)
        bag = read_bag(result.trial_bag_path)
        assert bag.complete and bag.outcome["success"] and bag.metadata["object"] == "tabletop20/cube"
        resets = [e for e in bag.json("/trial/events") if e.get("event") == "reset"]
        assert len(resets) == 1 and resets[0]["done"] and abs(resets[0]["T_world_object"][0][3] - 0.65) < 1e-6
        assert bag.topic("/sim/object_state")[-1].msg.pose.position.z > 0.15
    assert len(bags) == 2
    for vector in executed[1:]:
        np.testing.assert_allclose(vector, executed[0], atol=1e-4)

    bag = read_bag(root / "trials" / "cube_0")
    assert bag.metadata["method"] == {"sampler": "fixed", "evaluator": "geometry", "perception": "depth", "planner": "ompl"}
    actuators = bag.metadata["actuators"]  # the robot node's settings, read from its parameter services
    assert actuators["backend"] == "sim" and actuators["sim.real_time_factor"] == 4.0 and "safety.velocity_scale" in actuators
    for topic in ("/camera/image_raw", "/camera/camera_info", "/tf", "/object/points", "/object/bps", "/grasps/candidates",
                  "/grasps/chosen", "/motion/approach", "/joint_states", "/sim/object_state"):
        assert bag.topic(topic), topic
    assert len(bag.topic("/joint_states")[0].msg.name) == 23  # arm + hand, from the robot node's topic

    from visualization_msgs.msg import Marker, MarkerArray

    markers = wait_for_message(rclpy_node, MarkerArray, "trial_markers", latched=True)
    assert markers is not None, "nothing on trial_markers"
    texts = [m.text for m in markers.markers if m.type == Marker.TEXT_VIEW_FACING]
    assert texts == ["cube_1: LIFTED"] and any(m.ns == "executed_grasp" for m in markers.markers)

    # the palm's executed path (forward kinematics of the joint states recorded during execution): from where the arm
    # started to the grasp's palm pose, then straight up by the lift (stages.lift_m = 0.2 m)
    import torch

    from getagrip_ros.grasp.grasp import Grasp

    marker = wait_for_message(rclpy_node, Marker, "trial_path", latched=True)
    assert marker is not None and marker.type == Marker.LINE_STRIP and marker.header.frame_id == "world"
    path = np.array([[p.x, p.y, p.z] for p in marker.points])
    palm = Grasp.from_vector(torch.tensor(executed[-1])[None], "world").T_frame_palm[0, :3, 3].double().numpy()
    assert len(path) > 20 and np.linalg.norm(path[0] - palm) > 0.1, path
    np.testing.assert_allclose(path[-1], palm + [0.0, 0.0, 0.2], atol=0.03)
    assert abs(path[:, 2].min() - palm[2]) < 0.03  # the palm went no lower than the grasp


def test_cancel_and_bad_goals_end_with_a_reason_and_the_server_keeps_serving(rclpy_node, client, stack):
    seen = []
    handle = send_goal(rclpy_node, client, _goal("cancelled"), timeout_s=30,
                       feedback=lambda fb: seen.append(fb) if fb.stage == "perception" else None)
    status, result = cancel_after_feedback(rclpy_node, handle, seen, feedback_timeout_s=200, result_timeout_s=120)
    assert status == GoalStatus.STATUS_CANCELED and result.status.code == Status.CANCELED, result.status.reason
    assert read_bag(result.trial_bag_path).outcome["status"] == "CANCELED"

    status, result = call_action(rclpy_node, client, _goal("bad", perception="lidar"), timeout_s=30)
    assert status == GoalStatus.STATUS_ABORTED and result.status.code == Status.INVALID_GOAL and "lidar" in result.status.reason
    status, result = call_action(rclpy_node, client, _goal("cube_0"), timeout_s=30)  # the name is taken
    assert result.status.code == Status.INVALID_GOAL and "exists" in result.status.reason
    status, result = call_action(rclpy_node, client, _goal("../escape"), timeout_s=30)
    assert result.status.code == Status.INVALID_GOAL and "not a plain name" in result.status.reason
    status, result = call_action(rclpy_node, client, _goal("x" * 300), timeout_s=30)  # longer than a file name may be
    assert result.status.code == Status.INVALID_GOAL and "at most 128" in result.status.reason, result.status.reason
    status, result = call_action(rclpy_node, client, _goal("no_demo", sampler="human_demo"), timeout_s=30)
    assert result.status.code == Status.INVALID_GOAL and "needs a human demonstration" in result.status.reason
    demo = side_power_grasp(centre_xy_m=(0.65, 0.0), radius_m=0.03, height_m=0.03, frame_id="world", azimuth_deg=-90.0)
    status, result = call_action(rclpy_node, client, _goal("demo_unused", human_demo=human_demo_to_msg(demo)), timeout_s=30)
    assert result.status.code == Status.INVALID_GOAL and "human_demo sampler only" in result.status.reason
    # after a cancelled trial the next one starts from a reset world again
    status, result = call_action(rclpy_node, client, _goal("after_cancel"), timeout_s=400)
    assert status == GoalStatus.STATUS_SUCCEEDED and result.success, result.status.reason
    # a demonstration in a frame nothing publishes is refused once the node has waited for it
    lost = human_demo_to_msg(demo.transformed(np.eye(4), "nowhere"))
    status, result = call_action(rclpy_node, client, _goal("demo_lost", sampler="human_demo", human_demo=lost), timeout_s=30)
    assert result.status.code == Status.INVALID_GOAL and "no transform from 'nowhere' to 'world'" in result.status.reason
    # a whole trial with a demonstration, given in a motion-capture frame on /tf_static: the hand held the cube's -y
    # side, the fingers round its far side
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from tf2_msgs.msg import TFMessage

    from getagrip_ros.ros.conversions import transform_stamped_from_matrix

    T_world_mocap = np.array([[0.0, -1.0, 0.0, 0.3], [1.0, 0.0, 0.0, -0.2], [0.0, 0.0, 1.0, 1.1], [0.0, 0.0, 0.0, 1.0]])
    static_pub = rclpy_node.create_publisher(TFMessage, "/tf_static", QoSProfile(
        depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    static_pub.publish(TFMessage(transforms=[transform_stamped_from_matrix(T_world_mocap, "world", "mocap")]))
    in_mocap = human_demo_to_msg(demo.transformed(np.linalg.inv(T_world_mocap), "mocap"))
    status, result = call_action(rclpy_node, client, _goal("demo", sampler="human_demo", evaluator="none",
                                                           human_demo=in_mocap), timeout_s=400)
    bag = read_bag(result.trial_bag_path)
    assert bag.complete and bag.metadata["method"]["sampler"] == "human_demo", result.status.reason
    np.testing.assert_allclose(bag.metadata["method"]["human_demo"]["keypoints_m"], demo.keypoints_m, atol=1e-9)
    assert bag.metadata["method"]["human_demo"]["frame_id"] == "world"  # moved by /tf before planning
    assert result.stage != "grasp_planning", result.status.reason  # the demonstration was transferred and planned
    time.sleep(0.5)
    assert stack[0].process.poll() is None


FRANKY_SIM = """
import sys, time
from franky_sim import SimulationServer
from franky_sim.mujoco_simulator import MujocoSimulator
from getagrip_ros.robot.description import FR3_Q_READY_RAD
sim = MujocoSimulator()
sim.init()
sim.add_robot(initial_q=FR3_Q_READY_RAD, kv=(450.0, 450.0, 350.0, 350.0, 60.0, 60.0, 40.0))
server = SimulationServer(sim)
server.init()
server.run_async(realtime=False)
print("FRANKY_SIM", server.robot_servers[0].hostname, flush=True)
while True:
    time.sleep(1)
"""


def test_the_hardware_profile_against_franky_sim_serves_goal_after_goal(ros_env, rclpy_node, tmp_path):
    """The hardware profile's nodes with the FR3 simulated by franky-sim on loopback (no ZED SDK here): each goal takes
    the arm, ends in capture with its own reason and releases it, so the next one is not blocked by the first."""
    env = {**ros_env, "ROS_DOMAIN_ID": str((int(ros_env["ROS_DOMAIN_ID"]) + 1) % 100)}  # apart from the sim stack
    script = """
import rclpy
from rclpy.action import ActionClient
from getagrip_interfaces.action import GraspObject
from getagrip_ros.ros.client import call_action
rclpy.init()
node = rclpy.create_node("hw_client")
client = ActionClient(node, GraspObject, "grasp_object")
for name in ("hw_1", "hw_2"):
    goal = GraspObject.Goal(trial_name=name, object_name="red mug")
    goal.object_position.header.frame_id = "world"
    goal.object_position.point.x = 0.65
    status, result = call_action(node, client, goal, timeout_s=120)
    print("RESULT", name, status, result.status.code, result.stage, "|", result.status.reason, flush=True)
"""
    with NodeProcess("franky_sim", env=env, command=[sys.executable, "-c", FRANKY_SIM],
                     log_path=tmp_path / "franky_sim.out") as franky_sim:
        assert franky_sim.wait_for_output("FRANKY_SIM", 60), franky_sim.output()
        host = franky_sim.output().split("FRANKY_SIM", 1)[1].split()[0]
        assert host.startswith("127."), host  # every hardware address here is loopback (127.0.0.1 unless taken)
        arguments = {"trials_dir": tmp_path / "trials", "work_dir": tmp_path / "work", "franky_host": host}
        with NodeProcess("bringup_hw", env=env, command=bringup_command("hardware", arguments, {}),
                         log_path=tmp_path / "hw.out") as proc:
            for node in NODES:
                assert proc.wait_for_output(f"{node} ready", 180), proc.output()
            client = NodeProcess("client", env=env, command=[sys.executable, "-c", script], log_path=tmp_path / "client.out")
            with client:
                assert client.wait_for_output("RESULT hw_2", 200), client.output() + proc.output()[-3000:]
            log = proc.output()
        lines = [line.split("RESULT ", 1)[1] for line in client.output().splitlines() if line.startswith("RESULT")]
    assert len(lines) == 2
    for line in lines:  # the arm was taken (capture got as far as the camera), and the ZED SDK is missing
        assert f" {Status.HARDWARE_ERROR} capture |" in line and "the camera is not available" in line, line
        assert "not reachable" not in line and "busy" not in line, line
    assert log.count(f"FR3 at {host} connected") == 2 and log.count(f"FR3 at {host} released") == 2, log[-3000:]
    for name in ("hw_1", "hw_2"):
        bag = read_bag(tmp_path / "trials" / name)
        assert bag.complete and bag.outcome["status"] == "HARDWARE_ERROR" and bag.outcome["stage"] == "capture"
        assert bag.metadata["object"] == "red mug"  # the goal's label
        reset = next(e for e in bag.json("/trial/events") if e.get("event") == "reset")
        assert not reset["done"] and "reset by a person" in reset["reason"]
