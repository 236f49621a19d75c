"""The trial recorder: what each stage produced, written to the trial bag as it happens (thread-safe).
Each message keeps the time it happened (the robot's stamp for states and phases that arrive over topics) in its
header and as the bag's publish time; the bag's log time is when it was recorded, so it never goes back.

Topics (world frame unless noted):
  /trial/metadata, /trial/events, /trial/outcome   std_msgs/String (JSON)
  /camera/image_raw, /camera/camera_info           sensor_msgs (frame camera_optical)
  /tf                                              tf2_msgs/TFMessage (world -> camera_optical per image)
  /object/points                                   sensor_msgs/PointCloud2
  /object/bps                                      std_msgs/Float32MultiArray (4096 distances, metres)
  /object/bps_origin                               geometry_msgs/PoseStamped
  /grasps/candidates, /grasps/chosen               getagrip_interfaces/Grasp (ranked, best first)
  /motion/{hand_shape,approach,close,lift}         trajectory_msgs/JointTrajectory
  /joint_states                                    sensor_msgs/JointState (arm + hand, during capture and execution)
  /sim/object_state                                getagrip_interfaces/ObjectState (simulation ground truth, ditto)
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from getagrip_ros.trials import messages as m
from getagrip_ros.trials.bag import TrialBagWriter

CAMERA_FRAME = "camera_optical"


class TrialRecorder:
    """Writes one trial; also the `TraceSink` the execution stage reports to."""

    def __init__(self, bag_dir: str | Path, metadata: dict[str, Any]) -> None:
        self.bag = TrialBagWriter(bag_dir, metadata)
        self.path = self.bag.path
        self._lock = threading.Lock()

    def _write(self, topic: str, msg: Any, stamp_ns: int) -> None:
        with self._lock:
            if not self.bag.closed:
                self.bag.write(topic, msg, stamp_ns)

    def event(self, stamp_ns: int | None = None, **fields: Any) -> None:
        now = time.time_ns() if stamp_ns is None else int(stamp_ns)
        with self._lock:
            if not self.bag.closed:
                self.bag.write_json("/trial/events", {**fields, "time_ns": now}, now)

    def capture(self, rgb: list[np.ndarray], K: np.ndarray, T_world_camera: np.ndarray, stride: int = 1) -> None:
        for i in range(0, len(rgb), stride):
            now = time.time_ns()
            h, w = rgb[i].shape[:2]
            self._write("/tf", m.tf([("world", CAMERA_FRAME, T_world_camera[i])], now), now)
            self._write("/camera/camera_info", m.camera_info(K, w, h, now, CAMERA_FRAME), now)
            self._write("/camera/image_raw", m.image(rgb[i], now, CAMERA_FRAME), now)

    def object(self, points_world_m: np.ndarray, bps: np.ndarray, bps_origin_m: np.ndarray) -> None:
        now = time.time_ns()
        T = np.eye(4)
        T[:3, 3] = bps_origin_m
        self._write("/object/points", m.point_cloud(points_world_m, now), now)
        self._write("/object/bps", m.float_array(bps), now)
        self._write("/object/bps_origin", m.pose_stamped(T, now), now)

    def grasps(self, topic: str, grasps, labels: np.ndarray | None) -> None:
        now = time.time_ns()
        for msg in m.grasps(grasps, labels, now):
            self._write(topic, msg, now)

    def motion(self, stages) -> None:
        now = time.time_ns()
        for name, trajectory in stages.as_list():
            self._write(f"/motion/{name}", m.joint_trajectory(trajectory, now), now)

    # -- TraceSink ------------------------------------------------------------------------------
    def joint_state(self, names: tuple[str, ...], positions_rad: np.ndarray, velocities_rad_s: np.ndarray,
                    stamp_ns: int | None = None) -> None:
        now = time.time_ns() if stamp_ns is None else int(stamp_ns)
        self._write("/joint_states", m.joint_state(names, positions_rad, velocities_rad_s, now), now)

    def object_state(self, T_world_object: np.ndarray, touching: dict[str, float], touches_table: bool,
                     stamp_ns: int | None = None) -> None:
        now = time.time_ns() if stamp_ns is None else int(stamp_ns)
        self._write("/sim/object_state", m.object_state(T_world_object, touching, touches_table, now), now)

    def phase(self, name: str, stamp_ns: int | None = None) -> None:
        self.event(stamp_ns, event="phase", phase=name)

    def close(self, outcome: dict[str, Any]) -> None:
        """Write the outcome and finish the bag (idempotent)."""
        now = time.time_ns()
        with self._lock:
            if not self.bag.closed:
                self.bag.write_json("/trial/outcome", outcome, now)
                self.bag.close()
