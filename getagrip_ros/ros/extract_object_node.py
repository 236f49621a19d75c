"""`extract_object` action server: NeRF or depth images -> cloud, BPS, mesh, object frame (thin wrapper of
perception.extract). Publishes the cloud (latched PointCloud2 on ``object_cloud``) and a mesh marker.

Parameters mirror :class:`ExtractObjectNodeConfig` (the extractor's settings and the folders NeRF runs may come
from; see config/extract_object.yaml).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from geometry_msgs.msg import Point, PointStamped
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import PointCloud2
from std_msgs.msg import Header
from visualization_msgs.msg import Marker

from getagrip_interfaces.action import ExtractObject
from getagrip_ros.perception.extract import ObjectExtractorConfig, extract_and_save
from getagrip_ros.ros.actions import StackNode, accepting_action_server, end_goal
from getagrip_ros.ros.conversions import numpy_to_point_cloud2, pose_stamped_from_matrix, timings_to_msgs
from getagrip_ros.ros.params import declare_config
from getagrip_ros.ros.spin import spin_node
from getagrip_ros.ros.stage_messages import extract_request
from getagrip_ros.safe_files import DEFAULT_DATA_ROOTS, UnsafeFile, check_goal_paths
from getagrip_ros.status import StageError, StatusCode

WORLD_FRAME = "world"


@dataclass(frozen=True)
class ExtractObjectNodeConfig(ObjectExtractorConfig):
    """The extractor's settings plus where NeRF runs may come from."""

    data_roots: tuple[str, ...] = DEFAULT_DATA_ROOTS
    """A goal's NeRF run, dataset and output folder must lie under one of these folders."""


class ExtractObjectNode(StackNode):
    def __init__(self) -> None:
        super().__init__("extract_object")
        self.config = declare_config(self, ExtractObjectNodeConfig())
        self._busy = threading.Lock()
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.cloud_pub = self.create_publisher(PointCloud2, "object_cloud", latched)
        self.mesh_pub = self.create_publisher(Marker, "object_mesh", latched)
        self.server = accepting_action_server(self, ExtractObject, "extract_object", self.execute)
        self.get_logger().info(f"extract_object ready (default backend {self.config.backend})")

    def execute(self, goal_handle) -> ExtractObject.Result:
        goal, result = goal_handle.request, ExtractObject.Result()
        running = self.running(goal_handle, "extract_object")

        def progress(stage: str, fraction: float) -> None:
            stop = running.stop_reason()
            if stop is not None:
                raise StageError(StatusCode.CANCELED, f"extraction stopped before {stage}: {stop}")
            running.feedback(ExtractObject.Feedback(stage=stage, progress=float(fraction)))

        try:
            request = extract_request(goal)
            try:
                check_goal_paths(self.config.data_roots, nerf_config_path=request.nerf_config_path,
                                 dataset_dir=request.dataset_dir, output_dir=request.output_dir)
            except UnsafeFile as err:
                raise StageError(StatusCode.INVALID_GOAL, str(err)) from err
            with running, self._busy:
                rep = extract_and_save(request.backend, request.output_dir, request.nerf_config_path, request.dataset_dir,
                                       self.config, progress)
        except StageError as err:
            return end_goal(self, goal_handle, result, err.code, err.reason)
        except Exception as err:  # noqa: BLE001 - a failed sub-step must not take the node down
            return end_goal(self, goal_handle, result, StatusCode.INTERNAL_ERROR, f"{type(err).__name__}: {err}")
        stamp = self.get_clock().now().to_msg()
        header = Header(frame_id=WORLD_FRAME, stamp=stamp)
        result.point_cloud = numpy_to_point_cloud2(rep.points_world_m, WORLD_FRAME, stamp)
        result.bps = rep.bps.distances_m.astype(float).tolist()
        result.bps_origin = PointStamped(header=header, point=Point(x=float(rep.bps.origin_world_m[0]),
                                                                    y=float(rep.bps.origin_world_m[1]),
                                                                    z=float(rep.bps.origin_world_m[2])))
        result.object_frame = pose_stamped_from_matrix(rep.T_world_object, WORLD_FRAME, stamp)
        c = rep.centroid_world_m
        result.centroid = PointStamped(header=header, point=Point(x=float(c[0]), y=float(c[1]), z=float(c[2])))
        result.mesh_path = str(rep.mesh_path or "")
        result.mesh_watertight = bool(rep.mesh.is_watertight)
        result.timings = timings_to_msgs(rep.timings_s)
        if not self.closing.is_set():
            self.cloud_pub.publish(result.point_cloud)
            self.mesh_pub.publish(self._mesh_marker(rep, header))
        return end_goal(self, goal_handle, result, StatusCode.SUCCEEDED,
                        f"{rep.backend}: {len(rep.points_world_m)} points, mesh {len(rep.mesh.faces)} faces"
                        f"{' (watertight)' if rep.mesh.is_watertight else ''}")

    @staticmethod
    def _mesh_marker(rep, header: Header) -> Marker:
        marker = Marker(header=header, ns="object_mesh", id=0, type=Marker.TRIANGLE_LIST, action=Marker.ADD)
        marker.pose.orientation.w = 1.0
        marker.scale.x = marker.scale.y = marker.scale.z = 1.0
        marker.color.r, marker.color.g, marker.color.b, marker.color.a = 0.2, 0.6, 0.9, 0.8
        triangles = rep.mesh.vertices[rep.mesh.faces].reshape(-1, 3)
        marker.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in triangles]
        return marker


def main(args: list[str] | None = None) -> None:
    spin_node(ExtractObjectNode, args)


if __name__ == "__main__":
    main()
