"""Image, camera info, pose and joint-state message helpers (no ROS graph needed, only the message types)."""

import numpy as np
import pytest

from getagrip_ros.perception.capture_trajectory import look_at
from getagrip_ros.ros.conversions import (
    camera_info_msg,
    image_msg_to_rgb,
    joint_state_msg,
    matrix_from_pose,
    pose_stamped_from_matrix,
    rgb_to_image_msg,
    transform_stamped_from_matrix,
)


def test_rgb_images_round_trip_and_bad_images_are_refused():
    rgb = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    msg = rgb_to_image_msg(rgb, "zed2i_left_optical")
    assert (msg.height, msg.width, msg.step, msg.encoding, msg.header.frame_id) == (5, 7, 21, "rgb8", "zed2i_left_optical")
    assert np.array_equal(image_msg_to_rgb(msg), rgb)
    msg.encoding = "bgr8"
    assert np.array_equal(image_msg_to_rgb(msg), rgb[..., ::-1])
    with pytest.raises(ValueError, match="uint8 RGB"):
        rgb_to_image_msg(rgb.astype(np.float32), "cam")
    msg.encoding = "mono8"
    with pytest.raises(ValueError, match="encoding"):
        image_msg_to_rgb(msg)
    msg.encoding, msg.data = "rgb8", bytes(10)
    with pytest.raises(ValueError, match="bytes"):
        image_msg_to_rgb(msg)


def test_camera_info_pose_transform_and_joint_state():
    K = np.array([[266.5, 0.0, 320.0], [0.0, 266.5, 180.0], [0.0, 0.0, 1.0]])
    info = camera_info_msg(K, 640, 360, "zed2i_left_optical")
    assert (info.width, info.height, info.distortion_model) == (640, 360, "plumb_bob")
    assert np.allclose(np.reshape(info.k, (3, 3)), K) and np.allclose(info.d, 0.0)
    assert np.allclose(np.reshape(info.p, (3, 4))[:, :3], K) and np.allclose(np.reshape(info.r, (3, 3)), np.eye(3))

    T = look_at(np.array([0.4, -0.2, 0.3]), np.array([0.65, 0.0, 0.05]))
    pose = pose_stamped_from_matrix(T, "world")
    assert pose.header.frame_id == "world" and np.allclose(matrix_from_pose(pose.pose), T)
    tf = transform_stamped_from_matrix(T, "world", "zed2i_left_optical")
    assert (tf.header.frame_id, tf.child_frame_id) == ("world", "zed2i_left_optical")
    assert np.allclose([tf.transform.translation.x, tf.transform.translation.y, tf.transform.translation.z], T[:3, 3])
    assert tf.transform.rotation == pose.pose.orientation

    state = joint_state_msg(("a", "b"), np.array([0.1, 0.2]), np.array([0.0, -1.0]))
    assert list(state.name) == ["a", "b"] and list(state.position) == [0.1, 0.2] and list(state.velocity) == [0.0, -1.0]
