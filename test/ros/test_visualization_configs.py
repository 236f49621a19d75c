"""The shipped visualization configs show what the stack really publishes and records: rviz/getagrip.rviz against
the ROS graph of a sim bring-up (one process per node, as ros2 launch starts them), the Foxglove layout
foxglove/getagrip_trial_layout.json against a bag written by the trial recorder, and the palm path the grasp_task
node draws against an independent forward kinematics."""

from __future__ import annotations

import ast
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from getagrip_ros.bringup.description import arguments_for, profile
from getagrip_ros.robot.description import ARM_JOINT_NAMES, HAND_JOINT_NAMES

ROOT = Path(__file__).resolve().parents[2]
RVIZ = ROOT / "rviz" / "getagrip.rviz"
LAYOUT = ROOT / "foxglove" / "getagrip_trial_layout.json"

#: The message type each topic display of the RViz config subscribes to.
DISPLAY_TYPES = {
    "rviz_default_plugins/RobotModel": "std_msgs/msg/String",
    "rviz_default_plugins/Image": "sensor_msgs/msg/Image",
    "rviz_default_plugins/Pose": "geometry_msgs/msg/PoseStamped",
    "rviz_default_plugins/PointCloud2": "sensor_msgs/msg/PointCloud2",
    "rviz_default_plugins/Marker": "visualization_msgs/msg/Marker",
    "rviz_default_plugins/MarkerArray": "visualization_msgs/msg/MarkerArray",
}
#: Every topic the RViz config shows, the display showing it and the node that publishes it (default namespace).
RVIZ_TOPICS = {
    "/robot_description": ("rviz_default_plugins/RobotModel", "robot_state_publisher"),
    "/camera/image_raw": ("rviz_default_plugins/Image", "robot"),
    "/camera/pose": ("rviz_default_plugins/Pose", "robot"),
    "/object_cloud": ("rviz_default_plugins/PointCloud2", "extract_object"),
    "/object_mesh": ("rviz_default_plugins/Marker", "extract_object"),
    "/grasp_markers": ("rviz_default_plugins/MarkerArray", "plan_grasp"),
    "/trial_markers": ("rviz_default_plugins/MarkerArray", "grasp_task"),
    "/trial_path": ("rviz_default_plugins/Marker", "grasp_task"),
}
NODES = ("robot", "train_nerf", "extract_object", "plan_grasp", "grasp_task")


def _rviz() -> tuple[dict, list[dict]]:
    config = yaml.safe_load(RVIZ.read_text())
    return config, config["Visualization Manager"]["Displays"]


def _topic_property(display: dict) -> dict | None:
    return display.get("Topic") or display.get("Description Topic")


# -- RViz ---------------------------------------------------------------------------------------------------------
def test_rviz_config_shows_the_stack_in_the_world_frame():
    config, displays = _rviz()
    assert list(config) == ["Panels", "Visualization Manager", "Window Geometry"]
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "world"
    assert {p["Class"] for p in config["Panels"]} >= {"rviz_common/Displays", "rviz_common/Views"}
    assert manager["Views"]["Current"]["Target Frame"] == "<Fixed Frame>"
    names = [d["Name"] for d in displays]
    assert len(set(names)) == len(names) and all(d["Enabled"] is True and d["Value"] is True for d in displays)
    shown = {}
    for display in displays:
        topic = _topic_property(display)
        if display["Class"] in ("rviz_default_plugins/Grid", "rviz_default_plugins/TF"):
            assert topic is None, display["Name"]  # the TF display reads /tf and /tf_static itself
            continue
        assert display["Class"] in DISPLAY_TYPES, display["Class"]
        assert {"Depth", "Durability Policy", "History Policy", "Reliability Policy"} <= set(topic), display["Name"]
        assert topic["Value"] not in shown, topic["Value"]
        shown[topic["Value"]] = display["Class"]
    assert shown == {topic: display for topic, (display, _) in RVIZ_TOPICS.items()}
    assert any(d["Class"] == "rviz_default_plugins/TF" for d in displays)
    (robot,) = [d for d in displays if d["Class"] == "rviz_default_plugins/RobotModel"]
    assert robot["Description Source"] == "Topic"
    (image,) = [d for d in displays if d["Class"] == "rviz_default_plugins/Image"]
    assert image["Name"] in config["Window Geometry"]  # the image's dock


def test_the_configs_are_installed_into_the_share_folder():
    text = ast.unparse(ast.parse((ROOT / "setup.py").read_text()))
    assert "(f'share/{PACKAGE}/rviz', glob('rviz/*.rviz'))" in text
    assert "(f'share/{PACKAGE}/foxglove', glob('foxglove/*.json'))" in text
    assert RVIZ in set(ROOT.glob("rviz/*.rviz")) and LAYOUT in set(ROOT.glob("foxglove/*.json"))
    from getagrip_ros.paths import share_dir

    assert (share_dir() / "rviz" / RVIZ.name).is_file() and (share_dir() / "foxglove" / LAYOUT.name).is_file()


@pytest.fixture(scope="module")
def sim_stack(ros_env, tmp_path_factory):
    """`getagrip bringup --profile sim`, one process per node (no robot_state_publisher: a C++ node)."""
    from getagrip_ros.ros.processes import NodeProcess

    from .test_grasp_object_bringup import bringup_command

    root = tmp_path_factory.mktemp("viz_bringup")
    arguments = {"object": "tabletop20/cube", "trials_dir": root / "trials", "work_dir": root / "work"}
    params = {"robot:sim.camera_width_px": 160, "robot:sim.camera_height_px": 90, "robot:sim.camera_fy_px": 66.6}
    with NodeProcess("bringup", env=ros_env, command=bringup_command("sim", arguments, params)) as proc:
        assert proc.wait_for_output("[bringup] profile sim", 120), proc.output()
        for node in NODES:
            assert proc.wait_for_output(f"{node} ready", 400), proc.output()
        yield proc
    assert proc.process.returncode == 0, proc.output()[-3000:]


def _publishers(node, topics: list[str], timeout_s: float) -> dict[str, list]:
    """Each topic's publishers in the graph, once every topic has one whose node is known (discovery announces an
    endpoint before its node's name), or at the timeout."""
    import rclpy

    deadline = time.monotonic() + timeout_s
    while True:
        found = {t: node.get_publishers_info_by_topic(t) for t in topics}
        known = all(i.node_name != "_NODE_NAME_UNKNOWN_" for infos in found.values() for i in infos)
        if (all(found.values()) and known) or time.monotonic() > deadline:
            return found
        rclpy.spin_once(node, timeout_sec=0.2)


def test_every_rviz_topic_is_published_by_the_sim_stack_with_its_type_and_qos(rclpy_node, sim_stack):
    """Each display's topic has one publisher, the expected node, with the display's message type; latched topics
    are shown with a transient-local subscription (RViz started after a trial still gets the last message) and
    volatile ones with a volatile one (a transient-local subscription would get nothing). /robot_description comes
    from robot_state_publisher, which ros2 launch starts in every profile that offers rviz:=true."""
    from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

    _, displays = _rviz()
    qos = {_topic_property(d)["Value"]: _topic_property(d) for d in displays if _topic_property(d)}
    live = [t for t in RVIZ_TOPICS if t != "/robot_description"]
    found = _publishers(rclpy_node, live + ["/tf", "/tf_static"], timeout_s=120)
    for topic in live:
        display, node = RVIZ_TOPICS[topic]
        assert len(found[topic]) == 1, (topic, found[topic])
        info = found[topic][0]
        assert (info.node_name, info.node_namespace, info.topic_type) == (node, "/", DISPLAY_TYPES[display]), topic
        latched = info.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
        assert (qos[topic]["Durability Policy"] == "Transient Local") == latched, topic
        assert qos[topic]["Reliability Policy"] == "Reliable"
        assert info.qos_profile.reliability == ReliabilityPolicy.RELIABLE, topic
    for topic in ("/tf", "/tf_static"):  # the TF display: the robot node's world -> fr3_link0 and camera poses
        assert [(i.node_name, i.topic_type) for i in found[topic]] == [("robot", "tf2_msgs/msg/TFMessage")], topic

    assert not rclpy_node.get_publishers_info_by_topic("/robot_description")  # no robot_state_publisher here
    for name in ("sim", "hardware"):
        declared = {a.name: a for a in arguments_for(profile(name))}
        assert profile(name).has_robot and declared["publish_robot"].default == "true" and "rviz" in declared
    source = (ROOT / "getagrip_ros" / "bringup" / "launch_description.py").read_text()
    assert 'Node(package="robot_state_publisher"' in source
    assert 'condition=IfCondition(LaunchConfiguration("publish_robot"))' in source
    assert qos["/robot_description"]["Durability Policy"] == "Transient Local"  # robot_state_publisher latches it


def test_the_robot_node_names_the_arm_joints_first_as_the_layout_plots_them(rclpy_node, sim_stack):
    """The Foxglove layout plots /joint_states.position[0..6] as fr3_joint1..7: the order the robot node publishes
    (the trial bag records its messages as they come)."""
    from sensor_msgs.msg import JointState

    from getagrip_ros.ros.client import wait_for_message

    state = wait_for_message(rclpy_node, JointState, "/joint_states", timeout_s=60)
    assert state is not None
    names = list(state.name)
    assert names[:7] == list(ARM_JOINT_NAMES) and sorted(names[7:]) == sorted(HAND_JOINT_NAMES)
    (plot,) = [c for k, c in json.loads(LAYOUT.read_text())["configById"].items()
               if k.startswith("Plot!") and c["paths"][0]["value"].startswith("/joint_states")]
    for path in plot["paths"]:
        index = int(re.fullmatch(r"/joint_states\.position\[(\d)\]", path["value"]).group(1))
        assert path["label"].split()[0] == names[index]


# -- Foxglove -----------------------------------------------------------------------------------------------------
def _leaves(node) -> list[str]:
    """The panel ids of a layout tree (checking every split on the way)."""
    if isinstance(node, str):
        return [node]
    assert set(node) <= {"first", "second", "direction", "splitPercentage"} and node["direction"] in ("row", "column")
    assert 0 < node.get("splitPercentage", 50) < 100
    return _leaves(node["first"]) + _leaves(node["second"])


def _resolve(msg, fields: str):
    """The value at a Foxglove message path's fields (e.g. "pose.position.z", "position[3]") of a message."""
    value = msg
    for name, index in re.findall(r"\.?(\w+)(?:\[(\d+)\])?", fields):
        value = getattr(value, name)
        if index:
            value = value[int(index)]
    return value


def _trial_bag(folder: Path, grasps):
    """A short trial written by the trial recorder, every kind of record once."""
    from getagrip_ros.motion.planner import GraspStages
    from getagrip_ros.robot.interfaces import JointTrajectory
    from getagrip_ros.task.recording import TrialRecorder
    from getagrip_ros.trials.bag import read_bag

    recorder = TrialRecorder(folder / "trial", {"trial": "trial", "object": "tabletop20/cube"})
    recorder.event(event="stage_start", stage="capture")
    T_world_camera = np.eye(4)
    T_world_camera[:3, 3] = [0.4, 0.0, 0.5]
    recorder.capture([np.full((6, 8, 3), 90, np.uint8)], np.array([[8.0, 0, 4], [0, 8.0, 3], [0, 0, 1]]),
                     T_world_camera[None], 1)
    points = np.random.default_rng(0).uniform([0.6, -0.03, 0.0], [0.7, 0.03, 0.06], (50, 3))
    recorder.object(points, np.full(4096, 0.05), points.mean(0))
    labels = np.tile([0.9, 0.0, 0.0], (len(grasps), 1))
    recorder.grasps("/grasps/candidates", grasps, labels)
    recorder.grasps("/grasps/chosen", grasps[:1], labels[:1])
    arm, hand = np.zeros(7), np.zeros(16)
    recorder.motion(GraspStages(*(JointTrajectory.linear(names, start, start + 0.1, 1.0) for names, start in (
        (HAND_JOINT_NAMES, hand), (ARM_JOINT_NAMES, arm), (HAND_JOINT_NAMES, hand), (ARM_JOINT_NAMES, arm)))))
    T_world_object = np.eye(4)
    for k in range(3):
        T_world_object[2, 3] = 0.05 * k
        recorder.joint_state(ARM_JOINT_NAMES + HAND_JOINT_NAMES, np.full(23, 0.01 * k), np.zeros(23))
        recorder.object_state(T_world_object, {"link_3.0_tip": 2.0}, k == 0)
    recorder.phase("lift")
    recorder.close({"success": True, "status": "SUCCEEDED"})
    return read_bag(recorder.path)


def test_foxglove_layout_panels_read_what_a_trial_bag_records(tmp_path, cube_grasps):
    layout = json.loads(LAYOUT.read_text())
    assert set(layout) == {"configById", "globalVariables", "userNodes", "playbackConfig", "layout"}
    panels = _leaves(layout["layout"])
    assert sorted(panels) == sorted(layout["configById"])  # every panel has a config, every config a place
    assert {p.split("!")[0] for p in panels} == {"3D", "Image", "Plot", "RawMessages"}

    bag = _trial_bag(tmp_path, cube_grasps)
    first = {}
    for message in bag.messages:
        first.setdefault(message.topic, message)
    paths = []  # (panel, message path)
    for panel, config in layout["configById"].items():
        kind = panel.split("!")[0]
        if kind in ("3D", "Image"):
            paths += [(panel, topic) for topic in config["topics"]]
            paths += [(panel, config["imageMode"][k]) for k in ("imageTopic", "calibrationTopic") if k in config["imageMode"]]
        elif kind == "Plot":
            assert all(p["enabled"] and p["timestampMethod"] in ("receiveTime", "headerStamp") for p in config["paths"])
            paths += [(panel, p["value"]) for p in config["paths"]]
        else:
            paths.append((panel, config["topicPath"]))
    assert paths
    for panel, path in paths:
        topic, _, fields = path.partition(".")
        assert topic in first, (panel, path, sorted(first))  # a topic the trial recorder writes
        value = _resolve(first[topic].msg, fields)
        if panel.startswith("Plot!"):
            assert isinstance(value, (float, int, np.floating)) and hasattr(first[topic].msg, "header"), path
    scene, image = (layout["configById"][p] for p in panels if p.split("!")[0] in ("3D", "Image"))
    assert first["/object/points"].msgtype == "sensor_msgs/msg/PointCloud2"
    assert scene["topics"]["/object/points"]["colorField"] in [f.name for f in first["/object/points"].msg.fields]
    assert scene["followTf"] in {t.header.frame_id for t in first["/tf"].msg.transforms}  # world -> camera_optical
    assert first[image["imageMode"]["imageTopic"]].msgtype == "sensor_msgs/msg/Image"
    assert first[image["imageMode"]["calibrationTopic"]].msgtype == "sensor_msgs/msg/CameraInfo"
    shown = {p.split(".")[0] for _, p in paths}
    assert {"/trial/outcome", "/trial/events", "/sim/object_state", "/joint_states"} <= shown
    assert json.loads(_resolve(first["/trial/outcome"].msg, "data"))["success"] is True


# -- the palm path ------------------------------------------------------------------------------------------------
def test_palm_path_is_the_forward_kinematics_of_the_arm_joints_by_name():
    """Against pinocchio's kinematics (the motion planner's): joints matched by name in any order, hand joints
    optional, states without every arm joint left out; two points or more make a line strip, fewer a deletion."""
    from visualization_msgs.msg import Marker

    from getagrip_ros.motion.robot_geometry import RobotCollisionModel
    from getagrip_ros.robot.arm import RobotKinematics
    from getagrip_ros.ros.markers import palm_path_m, path_marker

    rng = np.random.default_rng(3)
    reference = RobotCollisionModel()
    arm = rng.uniform(reference.lower_limits_rad, reference.upper_limits_rad, (5, 7))
    order = rng.permutation(23)
    names = np.array(ARM_JOINT_NAMES + HAND_JOINT_NAMES)[order]
    states = [(list(names), np.concatenate([q, rng.uniform(0, 1, 16)])[order]) for q in arm[:3]]
    states += [(ARM_JOINT_NAMES, q) for q in arm[3:]]  # arm only
    states.insert(2, (HAND_JOINT_NAMES, np.zeros(16)))  # the hand alone: no palm position
    states.insert(1, (ARM_JOINT_NAMES[:6], np.zeros(6)))  # an incomplete arm
    path = palm_path_m(states, RobotKinematics())
    expected = np.array([reference.frame_pose(q, "palm_link")[:3, 3] for q in arm])
    np.testing.assert_allclose(path, expected, atol=1e-5)
    assert palm_path_m([], RobotKinematics()).shape == (0, 3)

    marker = path_marker(path, "world", namespace="trial_path")
    assert (marker.type, marker.action, marker.header.frame_id, marker.ns) == (Marker.LINE_STRIP, Marker.ADD, "world",
                                                                               "trial_path")
    np.testing.assert_allclose([[p.x, p.y, p.z] for p in marker.points], path)
    assert marker.scale.x > 0 and marker.color.a == 1.0 and marker.pose.orientation.w == 1.0
    assert path_marker(path[:1]).action == Marker.DELETEALL and path_marker(np.zeros((0, 3))).action == Marker.DELETEALL
