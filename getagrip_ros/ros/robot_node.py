"""`robot` node: the one owner of the robot in a bring-up, serving the stages that use it.

Action servers ``reset_world``, ``capture_images``, ``plan_motion`` and ``execute_grasp`` translate goals for
the core `task.robot_stages.RobotStages`; the in-process stack runs the same code. Parameters mirror
:class:`RobotNodeConfig` (config/robot.yaml).

Backends: ``sim`` - one MuJoCo arm world with one catalog object, in this process (reset before every trial);
it also serves the Allegro driver's topics (commands as `sensor_msgs/JointState` on ``hand.command_topic`` and
as `std_msgs/Float64MultiArray` on ``sim_hand_array_topic``, state on ``hand.state_topic``, driver joint names),
so the hand topic driver can be run against it. ``hardware`` - the FR3 through franky (connected for each goal
and released after it: libfranka admits one controlling client), the Allegro hand through its driver's topics
and the ZED 2i through the ZED SDK.

Publishes ``joint_states`` (the whole robot; between goals at ``state_rate_hz``, during the capture every
``capture_sample_every_ms`` and during execution every ``sample_every_ms`` of robot time), per captured image ``camera/image_raw``, ``camera/camera_info`` and
``camera/pose`` (T_world_camera_optical), the camera pose on ``/tf`` (``publish_camera_tf``; off when a
robot_state_publisher publishes the robot's frames, so each frame has one parent), world -> fr3_link0 on
``/tf_static``, and in simulation ``sim/object_state`` (the object's pose and the robot links touching it).
A `std_msgs/Bool` true on ``estop_topic`` stops every motion and refuses new ones until false.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import CameraInfo, Image
from sensor_msgs.msg import JointState as JointStateMsg
from std_msgs.msg import Bool, Float64MultiArray
from tf2_msgs.msg import TFMessage

from getagrip_interfaces.action import CaptureImages, ExecuteGrasp, PlanMotion, ResetWorld
from getagrip_interfaces.msg import ObjectState
from getagrip_ros.execution.executor import ExecutionResult
from getagrip_ros.execution.safety import EStop
from getagrip_ros.perception.capture import CaptureResult
from getagrip_ros.robot.allegro import WONIK_TO_GETAGRIP, reorder_by_name
from getagrip_ros.robot.backend import RobotSample
from getagrip_ros.robot.description import BASE_LINK, LEFT_OPTICAL_FRAME
from getagrip_ros.safe_files import DEFAULT_DATA_ROOTS, check_goal_paths
from getagrip_ros.ros.actions import StackNode, accepting_action_server, end_goal
from getagrip_ros.ros.allegro_topic_hand import to_driver_order
from getagrip_ros.ros.conversions import (
    camera_info_msg, joint_state_msg, pose_from_matrix, pose_stamped_from_matrix, rgb_to_image_msg, timings_to_msgs,
    transform_stamped_from_matrix,
)
from getagrip_ros.ros.hardware import HandTopicParams, HardwareParams, HardwareRobot, ZedParams
from getagrip_ros.ros.params import declare_config
from getagrip_ros.ros.spin import spin_node
from getagrip_ros.ros.stage_messages import capture_request, execute_request, motion_request, reset_request, stages_to_msgs
from getagrip_ros.sim.robot_backend import SimRobot, SimRobotConfig
from getagrip_ros.status import StatusCode
from getagrip_ros.task.robot_stages import RobotStages, RobotStagesConfig

BACKENDS = ("sim", "hardware")


@dataclass(frozen=True)
class RobotNodeConfig(RobotStagesConfig):
    """Parameters of the robot node (read at start-up): the robot stages' build options, plus the robot."""

    backend: str = "sim"
    """"sim" (MuJoCo world in this process) or "hardware" (FR3 via franky + Allegro driver topics + ZED 2i)."""
    state_rate_hz: float = 20.0
    """joint_states between goals."""
    publish_camera_tf: bool = True
    """Publish world_frame -> the camera's optical frame on /tf per image (off next to a robot_state_publisher,
    which publishes that frame from the URDF: a frame must have one parent)."""
    estop_topic: str = "estop"
    data_roots: tuple[str, ...] = DEFAULT_DATA_ROOTS
    """A goal's capture output_dir and object mesh must lie under one of these folders (else INVALID_GOAL)."""
    sim_hand_array_topic: str = "/allegro_hand_position_controller/commands"
    """sim: also accepts hand commands here (std_msgs/Float64MultiArray, driver order)."""
    hand: HandTopicParams = field(default_factory=HandTopicParams)
    """The Allegro driver's topics (hardware: used; sim: served)."""
    sim: SimRobotConfig = field(default_factory=SimRobotConfig)
    hardware: HardwareParams = field(default_factory=HardwareParams)
    zed: ZedParams = field(default_factory=ZedParams)


class RobotNode(StackNode):
    def __init__(self) -> None:
        super().__init__("robot")
        self.config = cfg = declare_config(self, RobotNodeConfig())
        self.estop = EStop()
        self.stages: RobotStages | None = None
        self.unavailable: tuple[StatusCode, str] | None = None
        group = ReentrantCallbackGroup()
        self.state_pub = self.create_publisher(JointStateMsg, "joint_states", 100)
        self.image_pub = self.create_publisher(Image, "camera/image_raw", 10)
        self.info_pub = self.create_publisher(CameraInfo, "camera/camera_info", 10)
        self.pose_pub = self.create_publisher(PoseStamped, "camera/pose", 10)
        self.tf_pub = self.create_publisher(TFMessage, "/tf", 100) if cfg.publish_camera_tf else None
        if cfg.world_frame != BASE_LINK:  # the world is the robot base: one static frame joins them
            static = self.create_publisher(TFMessage, "/tf_static",
                                           QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
            static.publish(TFMessage(transforms=[transform_stamped_from_matrix(
                np.eye(4), cfg.world_frame, BASE_LINK, self.get_clock().now().to_msg())]))
        self.sim: SimRobot | None = None
        try:
            robot = self._build_robot(group)
            self.stages = RobotStages(robot, cfg, self.estop, log=lambda m: self.get_logger().warning(m))
        except Exception as err:  # noqa: BLE001 - report it with every goal instead of dying
            self.unavailable = (StatusCode.HARDWARE_ERROR, f"the {cfg.backend} robot is not available: "
                                                           f"{type(err).__name__}: {err}")
        self.create_subscription(Bool, cfg.estop_topic, self._on_estop, 10, callback_group=group)
        self.servers = [accepting_action_server(self, kind, name, fn, group) for kind, name, fn in (
            (ResetWorld, "reset_world", self.reset_world), (CaptureImages, "capture_images", self.capture_images),
            (PlanMotion, "plan_motion", self.plan_motion), (ExecuteGrasp, "execute_grasp", self.execute_grasp))]
        if cfg.state_rate_hz > 0:
            self.create_timer(1.0 / cfg.state_rate_hz, self._tick, callback_group=group)
        if self.unavailable is None:
            tf = "on" if self.tf_pub else "off"
            self.get_logger().info(f"robot ready ({self.stages.robot.description}; camera pose on /tf: {tf})")
        else:
            self.get_logger().error(f"robot ready, but every goal will fail: {self.unavailable[1]}")

    # -- the robot -------------------------------------------------------------------------------------
    def _build_robot(self, group):
        cfg = self.config
        if cfg.backend == "sim":
            self.sim = SimRobot(cfg.sim)
            hand = cfg.hand
            self._hand_state_pub = self.create_publisher(JointStateMsg, hand.state_topic, 10)
            self._object_pub = self.create_publisher(ObjectState, "sim/object_state", 1000)  # none lost to a slow recorder
            self.create_subscription(JointStateMsg, hand.command_topic, self._on_hand_joint_state, 10, callback_group=group)
            self.create_subscription(Float64MultiArray, cfg.sim_hand_array_topic, self._on_hand_array, 10,
                                     callback_group=group)
            self.sim.description += f"; serving the hand topics {hand.command_topic}, {hand.state_topic}"
            return self.sim
        if cfg.backend == "hardware":
            return HardwareRobot(self, cfg.hardware, cfg.hand, cfg.zed)
        raise ValueError(f"unknown backend {cfg.backend!r}; known: {list(BACKENDS)}")

    def _publish(self, publisher, msg) -> None:
        if self.closing.is_set():
            return
        try:
            publisher.publish(msg)
        except Exception:  # noqa: BLE001 - the context went down between the check and the call
            self.closing.set()

    def _publish_sample(self, sample: RobotSample) -> None:
        """The robot's state (and, in simulation, the object's and the hand driver's) now."""
        now = self.get_clock().now().to_msg()
        s = sample.joint_state
        if sample.object is not None:
            o = sample.object
            msg = ObjectState(pose=pose_from_matrix(o.T_world_object), touching_links=list(o.touching),
                              normal_forces_n=[float(v) for v in o.touching.values()], touches_table=o.touches_table)
            msg.header.frame_id, msg.header.stamp = self.config.world_frame, now
            self._publish(self._object_pub, msg)
        self._publish(self.state_pub, joint_state_msg(s.joint_names, s.positions_rad, s.velocities_rad_s, now))
        if self.sim is not None:  # the simulated hand's driver state, driver names and order
            hand = [s.joint_names.index(n) for n in self.sim.hand.joint_names]
            self._publish(self._hand_state_pub, joint_state_msg(
                self.config.hand.command_joint_names, to_driver_order(s.positions_rad[hand]),
                to_driver_order(s.velocities_rad_s[hand]), now))

    def _tick(self) -> None:
        stages = self.stages
        if self.closing.is_set() or stages is None or stages.busy_with:
            return
        robot = stages.robot
        if isinstance(robot, HardwareRobot) and not robot.connected:
            return  # released between goals
        try:
            sample = robot.run(lambda: (robot.advance_idle(), robot.sample())[1])
        except Exception as err:  # noqa: BLE001 - a silent driver must not stop the node
            self.get_logger().warning(f"no robot state: {err}", throttle_duration_sec=5.0)
            return
        self._publish_sample(sample)

    def _on_hand_joint_state(self, msg: JointStateMsg) -> None:
        try:
            q = reorder_by_name(np.asarray(msg.position, float), list(msg.name), list(self.config.hand.command_joint_names))
        except (KeyError, IndexError, ValueError) as err:
            self.get_logger().warning(f"ignored a malformed hand command: {err}", throttle_duration_sec=5.0)
            return
        self._set_hand(q[WONIK_TO_GETAGRIP])

    def _on_hand_array(self, msg: Float64MultiArray) -> None:
        if len(msg.data) != 16:
            self.get_logger().warning(f"ignored a hand command with {len(msg.data)} values (16 needed)",
                                      throttle_duration_sec=5.0)
            return
        self._set_hand(np.asarray(msg.data, float)[WONIK_TO_GETAGRIP])

    def _set_hand(self, q_rad: np.ndarray) -> None:
        if not np.isfinite(q_rad).all():
            self.get_logger().warning("ignored a hand command with NaN or inf", throttle_duration_sec=5.0)
        elif self.estop.triggered:
            self.get_logger().warning("ignored a hand command: e-stop active", throttle_duration_sec=5.0)
        else:
            self.sim.set_hand_target(q_rad)

    def _on_estop(self, msg: Bool) -> None:
        if msg.data and not self.estop.triggered:
            self.estop.trigger(f"e-stop on {self.config.estop_topic}")
            self.get_logger().error("e-stop: stopping every motion")
        elif not msg.data and self.estop.triggered:
            self.estop.reset()
            self.get_logger().info("e-stop released")

    # -- reset_world -----------------------------------------------------------------------------------
    def reset_world(self, goal_handle) -> ResetWorld.Result:
        result = ResetWorld.Result()
        if self.unavailable is not None:
            return end_goal(self, goal_handle, result, *self.unavailable)
        try:
            request = reset_request(goal_handle.request)
            name = request.object_name
            if name and Path(name).suffix and Path(name).expanduser().exists():  # a mesh file, not a catalog name
                check_goal_paths(self.config.data_roots, object_name=name)
        except ValueError as err:  # UnsafeFile included
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")
        outcome = self.stages.reset(request)
        if outcome.report is not None:
            report, stamp = outcome.report, self.get_clock().now().to_msg()
            result.object_name = report.object_name
            result.object_pose = pose_stamped_from_matrix(report.T_world_object, self.config.world_frame, stamp)
            s = report.joint_state
            result.joint_state = joint_state_msg(s.joint_names, s.positions_rad, s.velocities_rad_s, stamp)
            self._publish_sample(self.stages.robot.run(self.stages.robot.sample))
        result.timings = timings_to_msgs(outcome.timings_s)
        return end_goal(self, goal_handle, result, outcome.status, outcome.reason)

    # -- capture_images --------------------------------------------------------------------------------
    def _publish_image(self, image, T_world_camera: np.ndarray, stamp) -> PoseStamped:
        height, width = image.rgb.shape[:2]
        self._publish(self.image_pub, rgb_to_image_msg(image.rgb, LEFT_OPTICAL_FRAME, stamp))
        self._publish(self.info_pub, camera_info_msg(image.K, width, height, LEFT_OPTICAL_FRAME, stamp))
        pose = pose_stamped_from_matrix(T_world_camera, self.config.world_frame, stamp)
        self._publish(self.pose_pub, pose)
        if self.tf_pub is not None:
            self._publish(self.tf_pub, TFMessage(transforms=[transform_stamped_from_matrix(
                T_world_camera, self.config.world_frame, LEFT_OPTICAL_FRAME, stamp)]))
        return pose

    def capture_images(self, goal_handle) -> CaptureImages.Result:
        if self.unavailable is not None:
            outcome = CaptureResult(*self.unavailable, None)
        else:
            running = self.running(goal_handle, "capture_images")

            def on_image(index: int, total: int, image, T_world_camera: np.ndarray) -> None:
                stamp = self.get_clock().now().to_msg()
                pose = self._publish_image(image, T_world_camera, stamp)
                running.feedback(CaptureImages.Feedback(num_captured=index + 1, num_planned=total, camera_pose=pose))

            try:
                request, with_depth = capture_request(goal_handle.request)
                check_goal_paths(self.config.data_roots, output_dir=request.output_dir)
                with running:
                    outcome = self.stages.capture(request, with_depth, on_image, running.stopped, self._publish_sample)
            except (ValueError, TypeError) as err:  # UnsafeFile included
                outcome = CaptureResult(StatusCode.INVALID_GOAL, f"malformed goal: {err}", None)
        result = CaptureImages.Result(dataset_dir=str(outcome.dataset_dir or ""), num_captured=outcome.num_captured,
                                      num_unreachable=outcome.num_unreachable, num_skipped=len(outcome.skipped),
                                      timings=timings_to_msgs(outcome.timings_s))
        return end_goal(self, goal_handle, result, outcome.status, outcome.reason)

    # -- plan_motion -----------------------------------------------------------------------------------
    def plan_motion(self, goal_handle) -> PlanMotion.Result:
        result = PlanMotion.Result(grasp_index=-1)
        if self.unavailable is not None:
            return end_goal(self, goal_handle, result, *self.unavailable)
        try:
            request = motion_request(goal_handle.request)
            check_goal_paths(self.config.data_roots, object_mesh_path=request.object_mesh_path)
        except (ValueError, KeyError, TypeError) as err:  # UnsafeFile included
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")
        with self.running(goal_handle, "plan_motion") as running:
            running.feedback(PlanMotion.Feedback(grasps_tried=0, grasps_total=len(request.grasps)))
            planned = self.stages.plan_motion(request)
            running.feedback(PlanMotion.Feedback(grasps_tried=len(planned.attempts), grasps_total=len(request.grasps)))
        result.rejected = [f"{a.grasp_index}: {a.status.name}: {a.reason}" for a in planned.rejected]
        result.timings = timings_to_msgs(planned.timings_s)
        if not planned.success:
            return end_goal(self, goal_handle, result, planned.status, planned.reason)
        result.grasp_index = int(planned.grasp_index)
        for name, msg in stages_to_msgs(planned.stages, self.get_clock().now().to_msg()).items():
            setattr(result, name, msg)
        return end_goal(self, goal_handle, result, StatusCode.SUCCEEDED,
                        f"grasp {planned.grasp_index} planned ({len(planned.rejected)} better-ranked refused)")

    # -- execute_grasp ---------------------------------------------------------------------------------
    def execute_grasp(self, goal_handle) -> ExecuteGrasp.Result:
        result = ExecuteGrasp.Result(stage="validation", lifted=False)
        if self.unavailable is not None:
            return end_goal(self, goal_handle, result, *self.unavailable)
        try:
            request = execute_request(goal_handle.request)
            check_goal_paths(self.config.data_roots, object_mesh_path=request.object_mesh_path)
        except ValueError as err:  # UnsafeFile included
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")
        # a validated motion runs to its end unless cancelled or the node stops, also when its client is gone
        with self.running(goal_handle, "execute_grasp", drop_orphans=False) as running:
            def progress(stage: str, fraction: float) -> None:
                running.feedback(ExecuteGrasp.Feedback(phase=stage, progress=float(fraction),
                                                       stamp=self.get_clock().now().to_msg()))

            outcome: ExecutionResult = self.stages.execute(request, progress, running.stopped, self._publish_sample)
        result.stage, result.lifted = outcome.stage, bool(outcome.lifted)
        result.timings = timings_to_msgs(outcome.timings_s)
        return end_goal(self, goal_handle, result, outcome.status, outcome.reason)

    def close(self) -> None:
        """Stop a running motion (it polls the closing flag), wait for the goals to end and release the robot."""
        super().close()
        if self.stages is not None:
            self.stages.close()


def main(args: list[str] | None = None) -> None:
    spin_node(RobotNode, args)


if __name__ == "__main__":
    main()
