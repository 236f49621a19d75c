"""Core data -> the rosbags message dataclasses a trial bag holds (no rclpy: usable without a ROS install).

Frames: everything spatial is in the world frame (robot base fr3_link0, z up, table top at z = 0) unless
a frame_id says otherwise; metres, radians; camera poses are ROS optical frames.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.rotations import matrix_from_quat_wxyz, quat_wxyz_from_matrix
from getagrip_ros.robot.allegro import JOINT_NAMES
from getagrip_ros.robot.interfaces import JointTrajectory
from getagrip_ros.trials.bag import typestore


def _t(name: str):
    return typestore().types[name]


def stamp(stamp_ns: int):
    return _t("builtin_interfaces/msg/Time")(sec=int(stamp_ns // 1_000_000_000), nanosec=int(stamp_ns % 1_000_000_000))


def header(stamp_ns: int, frame_id: str = "world"):
    return _t("std_msgs/msg/Header")(stamp=stamp(stamp_ns), frame_id=frame_id)


def pose(T: np.ndarray):
    """(4, 4) T_frame_x -> geometry_msgs/Pose."""
    T = np.asarray(T, dtype=float)
    w, x, y, z = quat_wxyz_from_matrix(torch.as_tensor(T[:3, :3])).tolist()
    return _t("geometry_msgs/msg/Pose")(position=_t("geometry_msgs/msg/Point")(x=T[0, 3], y=T[1, 3], z=T[2, 3]),
                                        orientation=_t("geometry_msgs/msg/Quaternion")(x=x, y=y, z=z, w=w))


def matrix(pose_msg: Any) -> np.ndarray:
    """geometry_msgs/Pose -> (4, 4)."""
    o, p = pose_msg.orientation, pose_msg.position
    T = np.eye(4)
    T[:3, :3] = matrix_from_quat_wxyz(torch.tensor([o.w, o.x, o.y, o.z], dtype=torch.float64)).numpy()
    T[:3, 3] = [p.x, p.y, p.z]
    return T


def pose_stamped(T: np.ndarray, stamp_ns: int, frame_id: str = "world"):
    return _t("geometry_msgs/msg/PoseStamped")(header=header(stamp_ns, frame_id), pose=pose(T))


def image(rgb: np.ndarray, stamp_ns: int, frame_id: str):
    """(H, W, 3) uint8 -> sensor_msgs/Image rgb8."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w = rgb.shape[:2]
    return _t("sensor_msgs/msg/Image")(header=header(stamp_ns, frame_id), height=h, width=w, encoding="rgb8",
                                       is_bigendian=0, step=3 * w, data=rgb.reshape(-1))


def camera_info(K: np.ndarray, width_px: int, height_px: int, stamp_ns: int, frame_id: str):
    """Pinhole intrinsics (3, 3), no distortion -> sensor_msgs/CameraInfo."""
    K = np.asarray(K, dtype=float)
    P = np.zeros((3, 4))
    P[:, :3] = K
    return _t("sensor_msgs/msg/CameraInfo")(
        header=header(stamp_ns, frame_id), height=int(height_px), width=int(width_px), distortion_model="plumb_bob",
        d=np.zeros(5), k=K.reshape(-1), r=np.eye(3).reshape(-1), p=P.reshape(-1), binning_x=0, binning_y=0,
        roi=_t("sensor_msgs/msg/RegionOfInterest")(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))


def tf(transforms: list[tuple[str, str, np.ndarray]], stamp_ns: int):
    """[(parent, child, T_parent_child)] -> tf2_msgs/TFMessage."""
    out = []
    for parent, child, T in transforms:
        T = np.asarray(T, dtype=float)
        p = pose(T)
        out.append(_t("geometry_msgs/msg/TransformStamped")(
            header=header(stamp_ns, parent), child_frame_id=child,
            transform=_t("geometry_msgs/msg/Transform")(
                translation=_t("geometry_msgs/msg/Vector3")(x=T[0, 3], y=T[1, 3], z=T[2, 3]), rotation=p.orientation)))
    return _t("tf2_msgs/msg/TFMessage")(transforms=out)


def point_cloud(points_m: np.ndarray, stamp_ns: int, frame_id: str = "world"):
    """(N, 3) -> sensor_msgs/PointCloud2 with float32 x, y, z."""
    pts = np.ascontiguousarray(np.asarray(points_m, dtype=np.float32).reshape(-1, 3))
    field = _t("sensor_msgs/msg/PointField")
    fields = [field(name=n, offset=4 * i, datatype=7, count=1) for i, n in enumerate("xyz")]  # 7 = FLOAT32
    return _t("sensor_msgs/msg/PointCloud2")(
        header=header(stamp_ns, frame_id), height=1, width=len(pts), fields=fields, is_bigendian=False, point_step=12,
        row_step=12 * len(pts), data=pts.view(np.uint8).reshape(-1), is_dense=True)


def points_from_cloud(msg: Any) -> np.ndarray:
    return np.frombuffer(np.asarray(msg.data, dtype=np.uint8).tobytes(), dtype=np.float32).reshape(-1, 3)


def float_array(values: np.ndarray):
    """1-D values -> std_msgs/Float32MultiArray (e.g. the BPS, metres)."""
    values = np.asarray(values, dtype=np.float32).reshape(-1)
    layout = _t("std_msgs/msg/MultiArrayLayout")(
        dim=[_t("std_msgs/msg/MultiArrayDimension")(label="values", size=len(values), stride=len(values))], data_offset=0)
    return _t("std_msgs/msg/Float32MultiArray")(layout=layout, data=values)


def grasps(g: Grasp, labels: np.ndarray | None, stamp_ns: int) -> list[Any]:
    """Core grasps and (B, 3) labels [y_pgs, y_coll, y_pick] -> getagrip_interfaces/Grasp messages."""
    T = g.T_frame_palm.detach().cpu().numpy()
    q = g.joint_angles_rad.detach().cpu().numpy().astype(float)
    d = g.fingertip_directions.detach().cpu().numpy().astype(float)
    vec = g.to_numpy_vector().astype(np.float32)
    labels = np.full((len(g), 3), np.nan) if labels is None else np.asarray(labels, dtype=float)
    Vector3 = _t("geometry_msgs/msg/Vector3")
    return [_t("getagrip_interfaces/msg/Grasp")(
        header=header(stamp_ns, g.frame_id), palm_pose=pose(T[i]), joint_names=list(JOINT_NAMES),
        pregrasp_joint_positions_rad=q[i], fingertip_directions=[Vector3(x=a, y=b, z=c) for a, b, c in d[i]],
        y_pgs=float(labels[i, 0]), y_coll=float(labels[i, 1]), y_pick=float(labels[i, 2]), vector=vec[i])
        for i in range(len(g))]


def grasp_from_msgs(msgs: list[Any]) -> tuple[Grasp, np.ndarray]:
    """getagrip_interfaces/Grasp messages (as recorded) -> (Grasp batch, (B, 3) labels)."""
    vectors = np.stack([np.asarray(m.vector, dtype=float) for m in msgs])
    labels = np.array([[m.y_pgs, m.y_coll, m.y_pick] for m in msgs], dtype=float)
    return Grasp.from_vector(vectors, frame_id=msgs[0].header.frame_id), labels


def joint_trajectory(trajectory: JointTrajectory, stamp_ns: int):
    """Core trajectory -> trajectory_msgs/JointTrajectory (times from the header stamp)."""
    Duration = _t("builtin_interfaces/msg/Duration")
    Point = _t("trajectory_msgs/msg/JointTrajectoryPoint")
    points = [Point(positions=q.astype(float), velocities=np.zeros(0), accelerations=np.zeros(0), effort=np.zeros(0),
                    time_from_start=Duration(sec=int(t // 1), nanosec=int(round((t % 1) * 1e9)) % 1_000_000_000))
              for t, q in zip(trajectory.times_s, trajectory.positions_rad)]
    return _t("trajectory_msgs/msg/JointTrajectory")(header=header(stamp_ns, ""), joint_names=list(trajectory.joint_names),
                                                     points=points)


def joint_state(names: tuple[str, ...], positions_rad: np.ndarray, velocities_rad_s: np.ndarray, stamp_ns: int):
    return _t("sensor_msgs/msg/JointState")(header=header(stamp_ns, ""), name=list(names),
                                            position=np.asarray(positions_rad, float),
                                            velocity=np.asarray(velocities_rad_s, float), effort=np.zeros(0))


def object_state(T_world_object: np.ndarray, touching: dict[str, float], touches_table: bool, stamp_ns: int):
    """Simulated ground truth: the object's pose and the robot links touching it (normal force, newtons)."""
    return _t("getagrip_interfaces/msg/ObjectState")(
        header=header(stamp_ns, "world"), pose=pose(T_world_object), touching_links=list(touching),
        normal_forces_n=np.asarray(list(touching.values()), dtype=float), touches_table=bool(touches_table))
