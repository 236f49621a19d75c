"""Message <-> core conversions (no ROS graph needed, only the message types)."""

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import PointField

from getagrip_interfaces.action import PlanGrasp
from getagrip_interfaces.msg import Grasp as GraspMsg
from getagrip_interfaces.msg import Status
from getagrip_ros.planning.planner import PlannedGrasps
from getagrip_ros.robot.allegro import GETAGRIP_TO_WONIK, WONIK_JOINT_NAMES
from getagrip_ros.ros.conversions import (
    grasp_msgs_to_core, matrix_from_pose, numpy_to_point_cloud2, planned_grasps_to_msgs, point_cloud2_to_numpy,
    pose_from_matrix,
)
from getagrip_ros.status import StatusCode

from ..grasp.test_grasp import random_grasps


def test_interface_defaults_and_status_codes_agree():
    goal = PlanGrasp.Goal()
    assert (goal.num_grasps, goal.sampler, goal.evaluator, goal.refinement_iterations, goal.timeout_s) == (40, "diffusion", "bps", 50, 120.0)
    assert len(GraspMsg().vector) == 37 and len(GraspMsg().fingertip_directions) == 4
    for code in StatusCode:
        assert getattr(Status, code.name) == code.value


def test_point_cloud_round_trip_and_other_layouts():
    pts = np.random.default_rng(0).normal(size=(100, 3))
    assert np.allclose(point_cloud2_to_numpy(numpy_to_point_cloud2(pts, "world")), pts, atol=1e-6)
    # float64, big-endian, padded xyz + intensity, organised 10 x 10 with row padding
    msg = numpy_to_point_cloud2(pts, "cam")
    rec = np.zeros(100, dtype=[("x", ">f8"), ("y", ">f8"), ("z", ">f8"), ("i", ">f4"), ("pad", "V4")])
    rec["x"], rec["y"], rec["z"] = pts.T
    rows = rec.reshape(10, 10)
    msg.height, msg.width, msg.is_bigendian, msg.point_step = 10, 10, True, 32
    msg.row_step = 10 * 32 + 8
    msg.fields = [PointField(name=n, offset=8 * i, datatype=PointField.FLOAT64, count=1) for i, n in enumerate("xyz")]
    msg.fields.append(PointField(name="intensity", offset=24, datatype=PointField.FLOAT32, count=1))
    msg.data = b"".join(r.tobytes() + b"\0" * 8 for r in rows)
    assert np.array_equal(point_cloud2_to_numpy(msg), pts)


@pytest.mark.parametrize("breakage, error", [
    (lambda m: m.fields.pop(2), "lacks fields"),
    (lambda m: setattr(m, "data", bytes(m.data)[:-1]), "bytes"),
    (lambda m: setattr(m.fields[0], "datatype", 99), "unsupported datatype"),
    (lambda m: setattr(m.fields[1], "offset", 10), "does not fit"),
])
def test_malformed_point_clouds_raise_clear_errors(breakage, error):
    msg = numpy_to_point_cloud2(np.zeros((5, 3)), "world")
    breakage(msg)
    with pytest.raises(ValueError, match=error):
        point_cloud2_to_numpy(msg)


def test_pose_quaternion_order_at_the_boundary():
    R = Rotation.from_euler("xyz", [0.2, -0.4, 1.3])
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R.as_matrix(), [0.1, 0.2, 0.3]
    pose = pose_from_matrix(T)
    x, y, z, w = R.as_quat()
    sign = 1 if w > 0 else -1
    assert np.allclose([pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w], np.array([x, y, z, w]) * sign)
    assert np.allclose(matrix_from_pose(pose), T)
    pose.orientation.w = pose.orientation.x = pose.orientation.y = pose.orientation.z = 0.0
    with pytest.raises(ValueError, match="quaternion is zero"):
        matrix_from_pose(pose)


def test_grasp_messages_round_trip_and_reorder_joints_by_name():
    g = random_grasps(3, frame_id="world")
    labels = torch.tensor([0.9, 0.5, 0.1], dtype=torch.float64)
    planned = PlannedGrasps(g, labels, labels * 0.5, labels * 0.25, g.joint_angles_rad, g.joint_angles_rad, np.zeros(3))
    msgs = planned_grasps_to_msgs(planned)
    assert msgs[0].header.frame_id == "world" and msgs[0].joint_names[0] == "joint_0.0"
    back, y = grasp_msgs_to_core(msgs)
    assert torch.allclose(back.to_vector(), g.to_vector(), atol=1e-9)
    assert np.allclose(y[:, 0], [0.9, 0.5, 0.1], atol=1e-6) and np.allclose(y[:, 2], [0.225, 0.125, 0.025], atol=1e-6)
    # a driver that lists joints in Wonik order, under Get a Grip names, is reordered by name
    m = msgs[1]
    names = list(m.joint_names)
    m.joint_names = [names[i] for i in GETAGRIP_TO_WONIK]
    m.pregrasp_joint_positions_rad = [m.pregrasp_joint_positions_rad[i] for i in GETAGRIP_TO_WONIK]
    back2, _ = grasp_msgs_to_core(msgs)
    assert torch.allclose(back2.joint_angles_rad, g.joint_angles_rad, atol=1e-12)
    m.joint_names = list(WONIK_JOINT_NAMES)
    with pytest.raises(KeyError, match="joints missing"):
        grasp_msgs_to_core(msgs)
    msgs[2].header.frame_id = "table"
    with pytest.raises(ValueError, match="different frames"):
        grasp_msgs_to_core(msgs)


def test_human_demonstrations_round_trip_through_plan_grasp_goals():
    from getagrip_ros.human_demo.demonstration import REFERENCE_KEYPOINTS_M, DemonstrationError, HumanDemonstration
    from getagrip_ros.planning.planner import PlanRequest
    from getagrip_ros.ros.stage_messages import human_demo_from_msg, human_demo_to_msg, plan_goal, plan_request

    rng = np.random.default_rng(0)
    mano = HumanDemonstration("mano_mesh", "world", REFERENCE_KEYPOINTS_M + 0.5, rng.normal(size=(778, 3)), "left")
    request = PlanRequest(frame_id="world", points_m=rng.uniform(0.0, 0.1, (50, 3)), sampler="human_demo",
                          human_demo=mano)
    back = plan_request(plan_goal(request)).human_demo
    assert back.format == "mano_mesh" and back.handedness == "left" and back.frame_id == "world"
    np.testing.assert_allclose(back.keypoints_m, mano.keypoints_m)
    np.testing.assert_allclose(back.vertices_m, mano.vertices_m)
    assert plan_request(plan_goal(PlanRequest(frame_id="world", points_m=request.points_m))).human_demo is None
    msg = human_demo_to_msg(HumanDemonstration("keypoints21", "world", REFERENCE_KEYPOINTS_M))
    msg.keypoints = msg.keypoints[:20]
    with pytest.raises(DemonstrationError, match="21 points"):
        human_demo_from_msg(msg)
