"""`capture_images` action server: moves the wrist camera along spirals around the object and writes a
nerfstudio dataset (translates CaptureImages goals for the core :func:`getagrip_ros.perception.capture.run_capture`).

Parameters mirror :class:`CaptureNodeConfig` (see config/capture_images.yaml). Backends: ``sim`` (a MuJoCo
world with the FR3, the wrist camera and one catalog object; between goals its physics runs in real
time) and ``hardware`` (the FR3 through franky, connected for each goal; the Allegro hand through its
driver's topics; the ZED 2i through the ZED SDK, opened when a goal needs it).
Publishes, per image: ``camera/image_raw`` (sensor_msgs/Image, rgb8) and
``camera/camera_info`` with frame_id = the camera's optical frame, ``camera/pose``
(geometry_msgs/PoseStamped, T_world_camera_optical in the world frame), the same pose on ``/tf``
(unless ``publish_camera_tf`` is off); and ``joint_states`` (sensor_msgs/JointState) of the robot.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image, JointState
from tf2_msgs.msg import TFMessage

from getagrip_interfaces.action import CaptureImages
from getagrip_ros.perception.cameras import CameraUnavailable
from getagrip_ros.perception.capture import CaptureConfig, CaptureRequest, CaptureResult, run_capture
from getagrip_ros.perception.capture_trajectory import SpiralConfig
from getagrip_ros.robot.description import LEFT_OPTICAL_FRAME
from getagrip_ros.ros.actions import accepting_action_server, end_goal
from getagrip_ros.ros.conversions import (
    camera_info_msg,
    joint_state_msg,
    pose_stamped_from_matrix,
    rgb_to_image_msg,
    timings_to_msgs,
    transform_stamped_from_matrix,
)
from getagrip_ros.ros.params import declare_config
from getagrip_ros.ros.hardware import HandTopicParams, HardwareParams, HardwareRobot, ZedParams
from getagrip_ros.ros.sim_backend import SimBackend, SimBackendConfig
from getagrip_ros.ros.spin import spin_node
from getagrip_ros.status import StatusCode

BACKENDS = ("sim", "hardware")
_SPIRAL = SpiralConfig()


@dataclass(frozen=True)
class SpiralParams:
    """The capture spirals (perception.capture_trajectory.SpiralConfig) as flat parameters; the number of
    images and an optional radius come with each goal."""

    radii_m: tuple[float, ...] = _SPIRAL.radii_m
    """Horizontal distance from the look-at point, per spiral (a goal's radius_m scales them)."""
    start_heights_m: tuple[float, ...] = tuple(h[0] for h in _SPIRAL.heights_m)
    """Camera height above the table at the start of each spiral."""
    end_heights_m: tuple[float, ...] = tuple(h[1] for h in _SPIRAL.heights_m)
    """Camera height above the table at the end of each spiral."""
    turns: float = _SPIRAL.turns
    """Turns around the object per spiral."""
    look_at_height_m: float = _SPIRAL.look_at_height_m
    """The cameras look at the goal's look_at point raised by this much."""

    def spiral(self) -> SpiralConfig:
        """The SpiralConfig (with one image per spiral; each goal sets num_images); ValueError if inconsistent."""
        if not (len(self.radii_m) == len(self.start_heights_m) == len(self.end_heights_m)):
            raise ValueError("spiral: radii_m, start_heights_m and end_heights_m need one value per spiral")
        return SpiralConfig(num_images=max(1, len(self.radii_m)), radii_m=self.radii_m,
                            heights_m=tuple(zip(self.start_heights_m, self.end_heights_m)), turns=self.turns,
                            look_at_height_m=self.look_at_height_m)


@dataclass(frozen=True)
class CaptureNodeConfig:
    """Parameters of the capture_images node (read at start-up)."""

    backend: str = "sim"
    """Robot and camera: "sim" (MuJoCo world) or "hardware" (FR3 + Allegro + ZED 2i)."""
    world_frame: str = "world"
    """frame_id of the published camera poses (the robot base fr3_link0 is the world frame)."""
    state_rate_hz: float = 20.0
    """joint_states rate between goals (the simulated physics advances in real time at this rate)."""
    publish_camera_tf: bool = True
    """Also publish world_frame -> camera optical frame on /tf per image (turn off when a
    robot_state_publisher publishes the robot's frames: a frame must have one parent)."""
    sim: SimBackendConfig = field(default_factory=SimBackendConfig)
    hardware: HardwareParams = field(default_factory=HardwareParams)
    hand: HandTopicParams = field(default_factory=HandTopicParams)
    """hardware: the Allegro driver's topics (the hand takes the curled capture posture)."""
    zed: ZedParams = field(default_factory=ZedParams)
    spiral: SpiralParams = field(default_factory=SpiralParams)
    capture: CaptureConfig = field(default_factory=CaptureConfig)


def capture_request_from_goal(goal: CaptureImages.Goal) -> CaptureRequest:
    """CaptureImages goal -> core request (validated by run_capture)."""
    p = goal.look_at.point
    return CaptureRequest(look_at_m=[p.x, p.y, p.z], output_dir=goal.output_dir, frame_id=goal.look_at.header.frame_id,
                          num_images=int(goal.num_images), radius_m=float(goal.radius_m))


class CaptureImagesNode(Node):
    def __init__(self) -> None:
        super().__init__("capture_images")
        self.config = declare_config(self, CaptureNodeConfig())
        self._closing = False
        self._busy = threading.Lock()  # one capture at a time; further goals wait their turn
        self.backend: SimBackend | HardwareRobot | None = None
        self.unavailable: tuple[StatusCode, str] | None = None
        self.spiral: SpiralConfig | None = None
        try:
            self.spiral = self.config.spiral.spiral()
        except ValueError as err:
            self.unavailable = (StatusCode.INVALID_GOAL, f"the node's spiral parameters are invalid: {err}")
        if self.config.backend == "sim":
            try:
                self.backend = SimBackend(self.config.sim)
            except Exception as err:  # noqa: BLE001 - report it with every goal instead of dying
                reason = f"the simulated world could not be built: {type(err).__name__}: {err}"
                self.unavailable = (StatusCode.HARDWARE_ERROR, reason)
        elif self.config.backend == "hardware":
            self.backend = HardwareRobot(self, self.config.hardware, self.config.hand, self.config.zed)
        else:
            self.unavailable = (StatusCode.INVALID_GOAL, f"unknown backend {self.config.backend!r}; known: {list(BACKENDS)}")

        self.image_pub = self.create_publisher(Image, "camera/image_raw", 10)
        self.info_pub = self.create_publisher(CameraInfo, "camera/camera_info", 10)
        self.pose_pub = self.create_publisher(PoseStamped, "camera/pose", 10)
        self.state_pub = self.create_publisher(JointState, "joint_states", 10)
        self.tf_pub = self.create_publisher(TFMessage, "/tf", 100) if self.config.publish_camera_tf else None
        group = ReentrantCallbackGroup()
        self.server = accepting_action_server(self, CaptureImages, "capture_images", self.execute, group)
        if self.backend is not None and self.config.state_rate_hz > 0:
            self.create_timer(1.0 / self.config.state_rate_hz, self._idle_tick, callback_group=group)
        if self.unavailable is None:
            tf = "on" if self.tf_pub else "off"
            self.get_logger().info(f"capture_images ready ({self.backend.description}; camera pose on /tf: {tf})")
        else:
            self.get_logger().error(f"capture_images ready, but every goal will fail: {self.unavailable[1]}")

    # -- publishing ------------------------------------------------------------------------------
    def _publish_state(self, state) -> None:
        self.state_pub.publish(joint_state_msg(state.joint_names, state.positions_rad, state.velocities_rad_s,
                                               self.get_clock().now().to_msg()))

    def _idle_tick(self) -> None:
        if self._closing or not self._busy.acquire(blocking=False):
            return
        try:
            state = self.backend.run(self.backend.advance_idle)
        except Exception:  # noqa: BLE001 - hardware: the arm is released between goals
            return
        finally:
            self._busy.release()
        self._publish_state(state)

    def _publish_image(self, image, T_world_camera: np.ndarray, stamp) -> PoseStamped:
        height, width = image.rgb.shape[:2]
        self.image_pub.publish(rgb_to_image_msg(image.rgb, LEFT_OPTICAL_FRAME, stamp))
        self.info_pub.publish(camera_info_msg(image.K, width, height, LEFT_OPTICAL_FRAME, stamp))
        pose = pose_stamped_from_matrix(T_world_camera, self.config.world_frame, stamp)
        self.pose_pub.publish(pose)
        if self.tf_pub is not None:
            self.tf_pub.publish(TFMessage(transforms=[transform_stamped_from_matrix(
                T_world_camera, self.config.world_frame, LEFT_OPTICAL_FRAME, stamp)]))
        return pose

    # -- the action ------------------------------------------------------------------------------
    def execute(self, goal_handle) -> CaptureImages.Result:
        if self.unavailable is not None:
            outcome = CaptureResult(*self.unavailable, None)
        else:
            with self._busy:
                problem = self.backend.prepare() if isinstance(self.backend, HardwareRobot) else ""
                try:
                    if problem:
                        outcome = CaptureResult(StatusCode.HARDWARE_ERROR, problem, None)
                    else:
                        outcome = self.backend.run(self._capture, goal_handle, goal_handle.request)
                except CameraUnavailable as err:
                    outcome = CaptureResult(StatusCode.HARDWARE_ERROR, f"the camera is not available: {err}", None)
                except Exception as err:  # noqa: BLE001 - the node keeps serving
                    outcome = CaptureResult(StatusCode.INTERNAL_ERROR, f"{type(err).__name__}: {err}", None)
                self.backend.mark_time()
        result = CaptureImages.Result(dataset_dir=str(outcome.dataset_dir or ""), num_captured=outcome.num_captured,
                                      num_unreachable=outcome.num_unreachable, num_skipped=len(outcome.skipped),
                                      timings=timings_to_msgs(outcome.timings_s))
        return end_goal(self, goal_handle, result, outcome.status, outcome.reason)

    def _capture(self, goal_handle, goal: CaptureImages.Goal) -> CaptureResult:
        """Runs in the simulation thread (sim backend)."""
        backend = self.backend

        def on_image(index: int, total: int, image, T_world_camera: np.ndarray) -> None:
            stamp = self.get_clock().now().to_msg()
            pose = self._publish_image(image, T_world_camera, stamp)
            goal_handle.publish_feedback(CaptureImages.Feedback(num_captured=index + 1, num_planned=total, camera_pose=pose))
            self._publish_state(backend.joint_state())

        try:
            request = capture_request_from_goal(goal)
        except (ValueError, TypeError) as err:
            return CaptureResult(StatusCode.INVALID_GOAL, f"malformed goal: {err}", None)
        outcome = run_capture(backend.arm, backend.camera(bool(goal.with_depth)), request, self.spiral,
                              self.config.capture, on_image=on_image,
                              should_stop=lambda: self._closing or goal_handle.is_cancel_requested, hand=backend.hand)
        self._publish_state(backend.joint_state())
        return outcome

    def close(self) -> None:
        """Stop a running capture (the arm stops) and release the simulation."""
        self._closing = True
        if self.backend is not None:
            with self._busy:
                self.backend.close()


def main(args: list[str] | None = None) -> None:
    spin_node(CaptureImagesNode, args)


if __name__ == "__main__":
    main()
