"""Conversions between ROS messages and the pure core. The only place quaternions change order (ROS xyzw)."""

from __future__ import annotations

import numpy as np
import torch
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, Pose, PoseStamped, Quaternion, Transform, TransformStamped, Vector3
from sensor_msgs.msg import CameraInfo, Image, JointState, PointCloud2, PointField
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg
from trajectory_msgs.msg import JointTrajectoryPoint

from getagrip_interfaces.msg import Grasp as GraspMsg
from getagrip_interfaces.msg import StageTiming, Status
from getagrip_ros.grasp.grasp import NUM_FINGERS, Grasp
from getagrip_ros.grasp.rotations import matrix_from_quat_wxyz, quat_wxyz_from_matrix
from getagrip_ros.planning.planner import PlannedGrasps
from getagrip_ros.robot.allegro import JOINT_NAMES, reorder_by_name
from getagrip_ros.robot.interfaces import JointTrajectory as CoreJointTrajectory
from getagrip_ros.status import StatusCode

_POINTFIELD_DTYPES = {
    PointField.INT8: "i1", PointField.UINT8: "u1", PointField.INT16: "i2", PointField.UINT16: "u2",
    PointField.INT32: "i4", PointField.UINT32: "u4", PointField.FLOAT32: "f4", PointField.FLOAT64: "f8",
}


def point_cloud2_to_numpy(msg: PointCloud2) -> np.ndarray:
    """(N, 3) float64 x, y, z of a PointCloud2 (any layout with x, y, z fields); ValueError if malformed."""
    fields = {f.name: f for f in msg.fields}
    missing = [n for n in "xyz" if n not in fields]
    if missing:
        raise ValueError(f"point cloud lacks fields {missing} (has {sorted(fields)})")
    n = msg.width * msg.height
    if msg.point_step <= 0 and n > 0:
        raise ValueError(f"point cloud point_step must be > 0, got {msg.point_step}")
    if len(msg.data) < n * msg.point_step:
        raise ValueError(f"point cloud data has {len(msg.data)} bytes, {n} points x {msg.point_step} B need {n * msg.point_step}")
    endian = ">" if msg.is_bigendian else "<"
    names, formats, offsets = [], [], []
    for name in "xyz":
        f = fields[name]
        if f.datatype not in _POINTFIELD_DTYPES or f.count not in (0, 1):
            raise ValueError(f"point cloud field {name!r} has unsupported datatype {f.datatype} / count {f.count}")
        if f.offset + np.dtype(_POINTFIELD_DTYPES[f.datatype]).itemsize > msg.point_step:
            raise ValueError(f"point cloud field {name!r} at offset {f.offset} does not fit in point_step {msg.point_step}")
        names.append(name)
        formats.append(endian + _POINTFIELD_DTYPES[f.datatype])
        offsets.append(f.offset)
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": max(msg.point_step, 1)})
    if n == 0:
        return np.zeros((0, 3))
    rows = np.frombuffer(bytes(msg.data), dtype=dtype, count=n) if msg.row_step in (0, msg.width * msg.point_step) else \
        np.concatenate([np.frombuffer(bytes(msg.data), dtype=dtype, count=msg.width, offset=r * msg.row_step)
                        for r in range(msg.height)])
    return np.stack([rows["x"], rows["y"], rows["z"]], axis=1).astype(np.float64)


def numpy_to_point_cloud2(points_m: np.ndarray, frame_id: str, stamp: Time | None = None) -> PointCloud2:
    """(N, 3) points -> unorganised float32 PointCloud2."""
    pts = np.ascontiguousarray(points_m, dtype="<f4").reshape(-1, 3)
    msg = PointCloud2(header=Header(frame_id=frame_id, stamp=stamp or Time()), height=1, width=len(pts),
                      is_bigendian=False, point_step=12, row_step=12 * len(pts), is_dense=bool(np.isfinite(pts).all()))
    msg.fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, n in enumerate("xyz")]
    msg.data = pts.tobytes()
    return msg


def pose_from_matrix(T: np.ndarray | torch.Tensor) -> Pose:
    """(4, 4) -> geometry_msgs/Pose."""
    T = torch.as_tensor(np.asarray(T), dtype=torch.float64)
    w, x, y, z = quat_wxyz_from_matrix(T[:3, :3]).tolist()
    px, py, pz = T[:3, 3].tolist()
    return Pose(position=Point(x=px, y=py, z=pz), orientation=Quaternion(x=x, y=y, z=z, w=w))


def matrix_from_pose(pose: Pose) -> np.ndarray:
    """geometry_msgs/Pose -> (4, 4); ValueError for a zero or non-finite quaternion."""
    q = np.array([pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z])
    p = np.array([pose.position.x, pose.position.y, pose.position.z])
    if not (np.isfinite(q).all() and np.isfinite(p).all()):
        raise ValueError("pose has NaN or inf")
    if np.linalg.norm(q) < 1e-9:
        raise ValueError("pose quaternion is zero")
    T = np.eye(4)
    T[:3, :3] = matrix_from_quat_wxyz(torch.from_numpy(q)).numpy()
    T[:3, 3] = p
    return T


def planned_grasps_to_msgs(planned: PlannedGrasps, stamp: Time | None = None) -> list[GraspMsg]:
    """Ranked core grasps -> getagrip_interfaces/Grasp messages (same order)."""
    labels = np.stack([t.detach().cpu().numpy() for t in (planned.y_pgs, planned.y_coll, planned.y_pick)], axis=1)
    return grasps_to_msgs(planned.grasps, labels, stamp)


def grasps_to_msgs(g: Grasp, labels: np.ndarray | None = None, stamp: Time | None = None) -> list[GraspMsg]:
    """Core grasps and their (B, 3) labels [y_pgs, y_coll, y_pick] (None: NaN) -> getagrip_interfaces/Grasp messages."""
    T = g.T_frame_palm.detach().cpu().numpy()
    q = g.joint_angles_rad.detach().cpu().numpy()
    d = g.fingertip_directions.detach().cpu().numpy()
    vec = g.to_numpy_vector().astype(np.float32)
    labels = np.full((len(g), 3), np.nan) if labels is None else np.asarray(labels, dtype=float)
    msgs = []
    for i in range(len(g)):
        m = GraspMsg()
        m.header = Header(frame_id=g.frame_id, stamp=stamp or Time())
        m.palm_pose = pose_from_matrix(T[i])
        m.joint_names = list(JOINT_NAMES)
        m.pregrasp_joint_positions_rad = q[i].astype(float).tolist()
        m.fingertip_directions = [Vector3(x=float(a), y=float(b), z=float(c)) for a, b, c in d[i]]
        m.y_pgs, m.y_coll, m.y_pick = (float(v) for v in labels[i])
        m.vector = vec[i]
        msgs.append(m)
    return msgs


def grasp_msgs_to_core(msgs: list[GraspMsg]) -> tuple[Grasp, np.ndarray]:
    """Messages (one frame) -> (Grasp batch, (B, 3) labels [y_pgs, y_coll, y_pick]); ValueError if malformed.

    Joints are reordered by name, so messages may list them in any order (e.g. Wonik's).
    """
    if not msgs:
        raise ValueError("no grasps given")
    frames = {m.header.frame_id for m in msgs}
    if len(frames) != 1:
        raise ValueError(f"grasps are in different frames: {sorted(frames)}")
    T = np.stack([matrix_from_pose(m.palm_pose) for m in msgs])
    q = []
    for m in msgs:
        if len(m.joint_names) != len(m.pregrasp_joint_positions_rad):
            raise ValueError(f"grasp has {len(m.joint_names)} joint names but {len(m.pregrasp_joint_positions_rad)} positions")
        q.append(reorder_by_name(np.asarray(m.pregrasp_joint_positions_rad, float), list(m.joint_names), JOINT_NAMES))
    d = np.array([[[v.x, v.y, v.z] for v in m.fingertip_directions] for m in msgs]).reshape(len(msgs), NUM_FINGERS, 3)
    labels = np.array([[m.y_pgs, m.y_coll, m.y_pick] for m in msgs], dtype=float)
    return Grasp(T[:, :3, 3], T[:, :3, :3], np.stack(q), d, frame_id=frames.pop()), labels


def status_msg(code: StatusCode, reason: str) -> Status:
    return Status(code=int(code), reason=reason)


def timings_to_msgs(timings_s: dict[str, float]) -> list[StageTiming]:
    return [StageTiming(stage=k, duration_s=float(v)) for k, v in timings_s.items()]


def pose_stamped_from_matrix(T: np.ndarray, frame_id: str, stamp: Time | None = None) -> PoseStamped:
    """(4, 4) T_frame_x -> geometry_msgs/PoseStamped in frame_id."""
    return PoseStamped(header=Header(frame_id=frame_id, stamp=stamp or Time()), pose=pose_from_matrix(T))


def transform_stamped_from_matrix(T: np.ndarray, parent_frame: str, child_frame: str,
                                  stamp: Time | None = None) -> TransformStamped:
    """(4, 4) T_parent_child -> geometry_msgs/TransformStamped (what /tf carries)."""
    pose = pose_from_matrix(T)
    p = pose.position
    return TransformStamped(header=Header(frame_id=parent_frame, stamp=stamp or Time()), child_frame_id=child_frame,
                            transform=Transform(translation=Vector3(x=p.x, y=p.y, z=p.z), rotation=pose.orientation))


def rgb_to_image_msg(rgb: np.ndarray, frame_id: str, stamp: Time | None = None) -> Image:
    """(H, W, 3) uint8 RGB -> sensor_msgs/Image with encoding rgb8."""
    rgb = np.ascontiguousarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"expected an (H, W, 3) uint8 RGB image, got {rgb.shape} {rgb.dtype}")
    height, width = rgb.shape[:2]
    msg = Image(header=Header(frame_id=frame_id, stamp=stamp or Time()), height=height, width=width, encoding="rgb8",
                is_bigendian=0, step=3 * width)
    msg.data = rgb.tobytes()
    return msg


def image_msg_to_rgb(msg: Image) -> np.ndarray:
    """sensor_msgs/Image (rgb8 or bgr8) -> (H, W, 3) uint8 RGB; ValueError for other encodings or short data."""
    if msg.encoding not in ("rgb8", "bgr8"):
        raise ValueError(f"unsupported image encoding {msg.encoding!r} (rgb8 or bgr8)")
    if msg.step < 3 * msg.width or len(msg.data) < msg.step * msg.height:
        raise ValueError(f"image data has {len(msg.data)} bytes, {msg.height} rows x {msg.step} B need {msg.step * msg.height}")
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8, count=msg.step * msg.height).reshape(msg.height, msg.step)
    image = rows[:, : 3 * msg.width].reshape(msg.height, msg.width, 3)
    return np.ascontiguousarray(image[..., ::-1] if msg.encoding == "bgr8" else image)


def camera_info_msg(K: np.ndarray, width: int, height: int, frame_id: str, stamp: Time | None = None) -> CameraInfo:
    """sensor_msgs/CameraInfo of an undistorted (rectified) pinhole camera with intrinsics K (pixels)."""
    K = np.asarray(K, dtype=float)
    P = np.zeros((3, 4))
    P[:, :3] = K
    return CameraInfo(header=Header(frame_id=frame_id, stamp=stamp or Time()), width=int(width), height=int(height),
                      distortion_model="plumb_bob", d=[0.0] * 5, k=K.reshape(-1).tolist(),
                      r=np.eye(3).reshape(-1).tolist(), p=P.reshape(-1).tolist())


def joint_state_msg(names: tuple[str, ...] | list[str], positions_rad: np.ndarray, velocities_rad_s: np.ndarray,
                    stamp: Time | None = None) -> JointState:
    """Joint names, positions and velocities -> sensor_msgs/JointState."""
    return JointState(header=Header(stamp=stamp or Time()), name=list(names),
                      position=np.asarray(positions_rad, dtype=float).tolist(),
                      velocity=np.asarray(velocities_rad_s, dtype=float).tolist())


def joint_trajectory_to_msg(trajectory: CoreJointTrajectory, stamp: Time | None = None) -> JointTrajectoryMsg:
    """Core trajectory -> trajectory_msgs/JointTrajectory (positions and times from the start)."""
    points = []
    for t, q in zip(trajectory.times_s, trajectory.positions_rad):
        sec = int(np.floor(t))
        points.append(JointTrajectoryPoint(positions=q.tolist(),
                                           time_from_start=Duration(sec=sec, nanosec=int(round((t - sec) * 1e9)))))
    return JointTrajectoryMsg(header=Header(stamp=stamp or Time()), joint_names=list(trajectory.joint_names), points=points)


def joint_trajectory_from_msg(msg: JointTrajectoryMsg, label: str = "trajectory") -> CoreJointTrajectory:
    """trajectory_msgs/JointTrajectory -> core trajectory; ValueError says what is malformed."""
    if not msg.points:
        raise ValueError(f"{label} has no points")
    n = len(msg.joint_names)
    bad = [i for i, p in enumerate(msg.points) if len(p.positions) != n]
    if bad:
        raise ValueError(f"{label}: point {bad[0]} has {len(msg.points[bad[0]].positions)} positions for {n} joints")
    times = [p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points]
    try:
        return CoreJointTrajectory(tuple(msg.joint_names), np.array(times), np.array([list(p.positions) for p in msg.points]))
    except ValueError as err:
        raise ValueError(f"{label}: {err}") from None
