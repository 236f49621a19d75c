"""The capture_images action served by the robot node (simulated robot) in another process, called over ROS 2."""

import math
import time

import numpy as np
import pytest
import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from geometry_msgs.msg import Point, Pose
from sensor_msgs.msg import CameraInfo, Image, JointState
from tf2_msgs.msg import TFMessage

from getagrip_interfaces.action import CaptureImages
from getagrip_interfaces.msg import Status
from getagrip_ros.paths import config_path
from getagrip_ros.perception.nerf_dataset import read_nerf_dataset
from getagrip_ros.ros.client import call_action, cancel_after_feedback, send_goal
from getagrip_ros.ros.conversions import image_msg_to_rgb, matrix_from_pose
from getagrip_ros.ros.processes import NodeProcess

from ..loopback import free_loopback_address

OBJECT_XY = (0.55, 0.0)
SMALL_SIM = ["-p", "sim.camera_width_px:=160", "-p", "sim.camera_height_px:=120", "-p", "sim.camera_fy_px:=66.625",
             "-p", f"sim.object_xy_m:=[{OBJECT_XY[0]}, {OBJECT_XY[1]}]", "-p", "capture.min_images:=3"]


@pytest.fixture(scope="module")
def server(ros_env, tmp_path_factory):
    cache = tmp_path_factory.mktemp("convex_cache")
    args = ["--ros-args", "--params-file", str(config_path("robot.yaml")), *SMALL_SIM,
            "-p", f"sim.object_cache_dir:={cache}", "-p", f"data_roots:=[{tmp_path_factory.getbasetemp()}]"]
    with NodeProcess("getagrip_ros.ros.robot_node", args, env=ros_env) as proc:
        assert proc.wait_for_output("robot ready", timeout_s=60), proc.output()
        yield proc
    assert proc.process.returncode == 0, proc.output()  # clean shutdown on SIGINT


@pytest.fixture(scope="module")
def client(rclpy_node, server):
    client = ActionClient(rclpy_node, CaptureImages, "capture_images")
    yield client
    client.destroy()


def goal(output_dir, num_images=12, xyz=(*OBJECT_XY, 0.0), frame_id="world", **kwargs) -> CaptureImages.Goal:
    g = CaptureImages.Goal(num_images=num_images, output_dir=str(output_dir), **kwargs)
    g.look_at.header.frame_id = frame_id
    g.look_at.point.x, g.look_at.point.y, g.look_at.point.z = (float(v) for v in xyz)
    return g


def spin_for(node, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)


def test_capture_succeeds_with_feedback_images_and_a_dataset(rclpy_node, client, server, tmp_path):
    images, infos, tfs = [], [], []
    rclpy_node.create_subscription(Image, "camera/image_raw", images.append, 50)
    rclpy_node.create_subscription(CameraInfo, "camera/camera_info", infos.append, 50)
    rclpy_node.create_subscription(TFMessage, "/tf", tfs.append, 100)
    spin_for(rclpy_node, 0.5)  # let the subscriptions match the node's publishers
    feedback = []
    status, result = call_action(rclpy_node, client, goal(tmp_path / "ds", with_depth=True), timeout_s=60,
                                 feedback=feedback.append)
    assert status == GoalStatus.STATUS_SUCCEEDED, (result.status.reason, server.output())
    assert result.status.code == Status.SUCCEEDED and result.dataset_dir == str(tmp_path / "ds")
    n = result.num_captured
    assert n >= 3 and n + result.num_skipped + result.num_unreachable == 12
    assert [f.num_captured for f in feedback] == list(range(1, n + 1))
    assert {f.num_planned for f in feedback} == {12 - result.num_unreachable}
    assert {"validation", "planning", "motion", "grab", "writing"} <= {t.stage for t in result.timings}

    ds = read_nerf_dataset(tmp_path / "ds")
    assert len(ds) == n and ds.rgb.shape[1:] == (120, 160, 3) and ds.depth_m is not None
    for f, T in zip(feedback, ds.T_world_camera_optical):  # feedback poses = the dataset's
        assert f.camera_pose.header.frame_id == "world"
        assert np.allclose(matrix_from_pose(f.camera_pose.pose), T, atol=1e-6)

    spin_for(rclpy_node, 0.5)
    assert len(images) == n and len(infos) == n
    assert images[0].encoding == "rgb8" and images[0].header.frame_id == "zed2i_left_optical"
    assert np.array_equal(image_msg_to_rgb(images[-1]), ds.rgb[-1])
    assert infos[0].header.frame_id == "zed2i_left_optical" and np.allclose(np.reshape(infos[0].k, (3, 3)), ds.K)
    transforms = [t for msg in tfs for t in msg.transforms]  # the camera poses on /tf, as the dataset's
    assert len(transforms) == n and {(t.header.frame_id, t.child_frame_id) for t in transforms} == \
        {("world", "zed2i_left_optical")}
    r = transforms[-1].transform.rotation
    assert np.allclose(matrix_from_pose(Pose(position=Point(x=transforms[-1].transform.translation.x,
                                                            y=transforms[-1].transform.translation.y,
                                                            z=transforms[-1].transform.translation.z),
                                             orientation=r)), ds.T_world_camera_optical[-1], atol=1e-6)


@pytest.mark.parametrize("make_goal, code, reason", [
    (lambda d: goal(d, xyz=(math.nan, 0.0, 0.0)), Status.INVALID_GOAL, "3 finite numbers"),
    (lambda d: goal(d, num_images=0), Status.INVALID_GOAL, "num_images must be in"),
    (lambda d: goal(""), Status.INVALID_GOAL, "output_dir is empty"),
    (lambda d: goal(d, frame_id="map"), Status.INVALID_GOAL, "frame 'map' is not supported"),
    (lambda d: goal(d, xyz=(2.0, 0.0, 0.0)), Status.NO_RESULT, "none of the 12 capture poses"),
])
def test_bad_goals_abort_with_a_reason_and_the_node_keeps_serving(rclpy_node, client, server, tmp_path,
                                                                 make_goal, code, reason):
    status, result = call_action(rclpy_node, client, make_goal(tmp_path / "ds"), timeout_s=30)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.status.code == code and reason in result.status.reason, result.status.reason
    assert result.num_captured == 0 and result.dataset_dir == "" and not (tmp_path / "ds").exists()
    assert server.process.poll() is None


def test_cancel_stops_the_arm_and_ends_canceled(rclpy_node, client, server, tmp_path):
    states = []
    rclpy_node.create_subscription(JointState, "joint_states", states.append, 50)
    started = []
    handle = send_goal(rclpy_node, client, goal(tmp_path / "ds", num_images=60), timeout_s=30, feedback=started.append)
    status, result = cancel_after_feedback(rclpy_node, handle, started, 30, 30)
    assert status == GoalStatus.STATUS_CANCELED, result.status.reason
    assert result.status.code == Status.CANCELED and "arm stopped" in result.status.reason
    assert result.num_captured < started[0].num_planned
    assert result.dataset_dir == "" or result.num_captured >= 3  # kept only when it has min_images
    # the arm holds still afterwards (joint_states keep coming between goals)
    spin_for(rclpy_node, 1.5)
    states.clear()
    spin_for(rclpy_node, 0.5)
    arm = [np.array(s.position[:7]) for s in states if s.name[:1] == ["fr3_joint1"]]
    assert len(arm) >= 3, "no joint_states between goals"
    assert np.abs(arm[-1] - arm[0]).max() < 1e-3
    assert max(np.abs(s.velocity[:7]).max() for s in states) < 0.01
    # and the node serves the next goal
    status, result = call_action(rclpy_node, client, goal(tmp_path / "again"), timeout_s=60)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.status.reason


def test_hardware_backend_without_a_robot_fails_goals_with_the_reason(ros_env, rclpy_node, tmp_path):
    """FR3 through franky, Allegro topics, ZED 2i: with no robot at the address every goal ends HARDWARE_ERROR, saying why."""
    host = free_loopback_address()  # not 127.0.0.1: a franky-sim of a test on the other worker may listen there
    args = ["--ros-args", "--params-file", str(config_path("robot.yaml")), "-p", "backend:=hardware",
            "-p", f"hardware.franky_host:={host}", "-r", "__node:=robot_hw", "-r", "capture_images:=capture_images_hw",
            "-p", f"data_roots:=[{tmp_path}]"]
    with NodeProcess("getagrip_ros.ros.robot_node", args, env=ros_env,
                     log_path=tmp_path / "hw.out") as proc:
        assert proc.wait_for_output(f"robot ready (FR3 at {host} through franky", timeout_s=60), proc.output()
        client = ActionClient(rclpy_node, CaptureImages, "capture_images_hw")
        try:
            assert client.wait_for_server(timeout_sec=20)
            spin_for(rclpy_node, 1.0)  # let discovery finish both ways, or the goal response can be lost
            status, result = call_action(rclpy_node, client, goal(tmp_path / "ds"), timeout_s=60)
        finally:
            client.destroy()
        assert status == GoalStatus.STATUS_ABORTED and result.status.code == Status.HARDWARE_ERROR
        assert f"the FR3 at {host} is not reachable" in result.status.reason and proc.process.poll() is None
        assert not (tmp_path / "ds").exists()  # nothing moved, nothing written
    assert proc.process.returncode == 0, proc.output()
