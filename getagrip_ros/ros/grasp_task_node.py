"""`grasp_object` action server: the whole grasp task, one recorded trial per goal.

Runs the core `task.GraspTask` with stages that call the stack's own actions - ``capture_images``,
``train_nerf`` (NeRF perception), ``extract_object``, ``plan_grasp``, ``plan_motion``, ``execute_grasp`` -
so each stage stays callable on its own. While the robot moves it records ``joint_states`` and, in
simulation, ``sim/object_state`` into the trial bag; the bag path is in the result. After each trial it
publishes RViz markers on ``trial_markers`` (latched): the executed grasp and the outcome as text. Parameters mirror
:class:`GraspTaskNodeConfig` (config/grasp_task.yaml).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState as JointStateMsg
from visualization_msgs.msg import MarkerArray

from getagrip_interfaces.action import CaptureImages, ExecuteGrasp, ExtractObject, GraspObject, PlanGrasp, PlanMotion, TrainNerf
from getagrip_interfaces.msg import ObjectState
from getagrip_ros.execution.executor import ExecutionResult
from getagrip_ros.perception.nerf_dataset import read_nerf_dataset
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.description import FINGERTIP_LINK_NAMES, HAND_LINK_NAMES, PALM_LINK
from getagrip_ros.ros.action_calls import call_in_node, remote_parameters
from getagrip_ros.ros.actions import accepting_action_server, end_goal
from getagrip_ros.ros.markers import grasp_markers, outcome_marker
from getagrip_ros.ros.conversions import (
    grasp_msgs_to_core, grasps_to_msgs, joint_trajectory_from_msg, joint_trajectory_to_msg, matrix_from_pose,
    point_cloud2_to_numpy, numpy_to_point_cloud2, timings_to_msgs,
)
from getagrip_ros.ros.params import declare_config
from getagrip_ros.ros.spin import spin_node
from getagrip_ros.motion.planner import GraspStages
from getagrip_ros.status import StageError, StatusCode
from getagrip_ros.task.config import PERCEPTION_BACKENDS, GraspTaskConfig
from getagrip_ros.task.grasp_task import GraspTask, trial_name
from getagrip_ros.task.stages import (
    CaptureOutput, GraspPlanOutput, MotionOutput, PerceptionOutput, StageBudget, TraceSink,
)


@dataclass(frozen=True)
class GraspTaskNodeConfig:
    """Parameters of the grasp_task node (read at start-up)."""

    world_frame: str = "world"
    object_label: str = ""
    """What stands on the table (recorded with each trial; the sim launch sets it to the simulated object)."""
    work_dir: str = "~/getagrip_trials/work"
    """Capture datasets, NeRFs and meshes of each trial (<work_dir>/<trial>/...)."""
    nerf_profile: str = "cpu"
    """train_nerf profile for NeRF perception (paper | cpu)."""
    server_wait_s: float = 30.0
    """How long to wait for a stage's action server."""
    task: GraspTaskConfig = field(default_factory=lambda: GraspTaskConfig(trials_dir="~/getagrip_trials"))


def hand_contact_links() -> tuple[str, ...]:
    return (PALM_LINK, *HAND_LINK_NAMES, *FINGERTIP_LINK_NAMES)


def stamp_ns(msg) -> int:
    """A message's stamp (header.stamp, or .stamp for feedback), ns since the epoch."""
    stamp = msg.header.stamp if hasattr(msg, "header") else msg.stamp
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


class TraceWindow:
    """Forwards the robot's states stamped within [start, end] to the trial's trace. States travel on their own
    topics, later than the action's result under load: `close(end)` waits (at most `max_wait_s`) until every
    stream that delivered states has delivered one stamped at or after the end, so the trace is complete."""

    def __init__(self, trace: TraceSink, start_ns: int, max_wait_s: float = 10.0) -> None:
        self.trace, self.start_ns, self.end_ns, self.max_wait_s = trace, start_ns, None, max_wait_s
        self._latest: dict[str, int] = {}
        self._changed = threading.Condition()

    def accept(self, stream: str, stamp_ns: int) -> bool:
        """Record that `stream` delivered a state stamped stamp_ns; True when it belongs to the trace."""
        with self._changed:
            self._latest[stream] = max(self._latest.get(stream, 0), stamp_ns)
            self._changed.notify_all()
            return stamp_ns >= self.start_ns and (self.end_ns is None or stamp_ns <= self.end_ns)

    def close(self, end_ns: int) -> None:
        with self._changed:
            self.end_ns = end_ns
            self._changed.wait_for(lambda: all(v >= end_ns for v in self._latest.values()), timeout=self.max_wait_s)


class RosTaskStages:
    """`TaskStages` over the stage actions; the execution trace comes from the node's subscriptions."""

    def __init__(self, node: GraspTaskNode) -> None:
        self.node = node
        group = node.group
        self.clients = {name: ActionClient(node, kind, name, callback_group=group) for name, kind in (
            ("capture_images", CaptureImages), ("train_nerf", TrainNerf), ("extract_object", ExtractObject),
            ("plan_grasp", PlanGrasp), ("plan_motion", PlanMotion), ("execute_grasp", ExecuteGrasp))}
        self.trial_dir = Path()
        self.hand = AllegroHand()

    def describe(self) -> dict[str, Any]:
        actuators = remote_parameters(self.node, "grasp_execution",
                                      ["backend", "stages", "safety", "execution", "hardware", "sim", "hand"])
        return {"backend": "ros", "object": self.node.config.object_label or "unknown",
                "actuators": actuators or "grasp_execution did not answer its parameter services"}

    def hand_link_names(self) -> tuple[str, ...]:
        return hand_contact_links()

    def _call(self, name: str, goal: Any, budget: StageBudget, feedback=None) -> Any:
        return call_in_node(self.clients[name], goal, budget.cancelled, budget.deadline, feedback,
                            self.node.config.server_wait_s)

    def capture(self, object_position_m: np.ndarray, config: GraspTaskConfig, budget: StageBudget) -> CaptureOutput:
        goal = CaptureImages.Goal(num_images=config.num_images, output_dir=str(self.trial_dir / "capture"), with_depth=True)
        goal.look_at.header.frame_id = self.node.config.world_frame
        goal.look_at.point.x, goal.look_at.point.y, goal.look_at.point.z = (float(v) for v in object_position_m)
        result = self._call("capture_images", goal, budget,
                            lambda fb: budget.progress(fb.num_captured / max(fb.num_planned, 1), f"image {fb.num_captured}"))
        data = read_nerf_dataset(result.dataset_dir)
        depth = None if data.depth_m is None else list(data.depth_m)
        return CaptureOutput(list(data.rgb), data.K, data.T_world_camera_optical, depth, result.dataset_dir)

    def perceive(self, capture: CaptureOutput, object_position_m: np.ndarray, config: GraspTaskConfig,
                 budget: StageBudget) -> PerceptionOutput:
        goal = ExtractObject.Goal(backend=config.perception, dataset_dir=capture.dataset_dir,
                                  output_dir=str(self.trial_dir / "object"))
        if config.perception == "nerf":
            trained = self._call("train_nerf", TrainNerf.Goal(dataset_dir=capture.dataset_dir, seed=config.seed,
                                                              output_dir=str(self.trial_dir / "nerf"),
                                                              profile=self.node.config.nerf_profile), budget,
                                 lambda fb: budget.progress(0.9 * fb.iteration / max(fb.num_iterations, 1), "nerfacto"))
            goal.nerf_config_path = trained.config_path
        result = self._call("extract_object", goal, budget, lambda fb: budget.progress(fb.progress, fb.stage))
        origin = np.array([result.bps_origin.point.x, result.bps_origin.point.y, result.bps_origin.point.z])
        centroid = np.array([result.centroid.point.x, result.centroid.point.y, result.centroid.point.z])
        return PerceptionOutput(point_cloud2_to_numpy(result.point_cloud), np.asarray(result.bps, float), origin, centroid,
                                result.mesh_path)

    def plan_grasps(self, obj: PerceptionOutput, config: GraspTaskConfig, budget: StageBudget) -> GraspPlanOutput:
        goal = PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_POINT_CLOUD, num_grasps=config.num_grasps,
                              sampler=config.sampler, evaluator=config.evaluator, seed=config.seed,
                              timeout_s=max(budget.remaining_s(), 1.0))
        goal.point_cloud = numpy_to_point_cloud2(obj.points_world_m, self.node.config.world_frame)
        result = self._call("plan_grasp", goal, budget, lambda fb: budget.progress(fb.progress, fb.stage))
        self._grasp_msgs = list(result.grasps)
        grasps, labels = grasp_msgs_to_core(self._grasp_msgs)
        return GraspPlanOutput(grasps, labels, result.status.reason)

    def plan_motion(self, obj: PerceptionOutput, plan: GraspPlanOutput, config: GraspTaskConfig,
                    budget: StageBudget) -> MotionOutput:
        goal = PlanMotion.Goal(grasps=grasps_to_msgs(plan.grasps, plan.labels), object_mesh_path=obj.mesh_path,
                               planner=config.planner, timeout_s=max(budget.remaining_s(), 1.0))
        result = self._call("plan_motion", goal, budget,
                            lambda fb: budget.progress(fb.grasps_tried / max(fb.grasps_total, 1), "planning"))
        names = ("hand_shape", "approach", "close", "lift")
        stages = GraspStages(*(joint_trajectory_from_msg(getattr(result, n), n) for n in names))
        return MotionOutput(int(result.grasp_index), stages, list(result.rejected))

    def execute(self, motion: MotionOutput, config: GraspTaskConfig, budget: StageBudget, trace: TraceSink) -> ExecutionResult:
        stamp = self.node.get_clock().now().to_msg()
        goal = ExecuteGrasp.Goal(**{name: joint_trajectory_to_msg(t, stamp) for name, t in motion.stages.as_list()})
        phase = [""]

        def feedback(fb) -> None:
            if fb.phase != phase[0]:
                phase[0] = fb.phase
                trace.phase(fb.phase, stamp_ns(fb) or None)
            budget.progress(fb.progress, fb.phase)

        window = self.node.trace_window = TraceWindow(trace, self.node.get_clock().now().nanoseconds)
        try:
            result = self._call("execute_grasp", goal, budget, feedback)
            return ExecutionResult(True, StatusCode.SUCCEEDED, result.stage, result.status.reason, bool(result.lifted))
        except StageError as err:
            if err.code == StatusCode.NO_RESULT:  # every stage ran; the object is not in the hand
                return ExecutionResult(False, StatusCode.NO_RESULT, "done", err.reason, False)
            raise
        finally:
            window.close(self.node.get_clock().now().nanoseconds)
            self.node.trace_window = None


class GraspTaskNode(Node):
    def __init__(self) -> None:
        super().__init__("grasp_task")
        self.config = declare_config(self, GraspTaskNodeConfig())
        self.group = ReentrantCallbackGroup()
        self.trace_window: TraceWindow | None = None
        self._closing = False
        self._busy = threading.Lock()
        self.stages = RosTaskStages(self)
        trials_dir = str(Path(self.config.task.trials_dir).expanduser())
        self.task = GraspTask(self.stages, replace(self.config.task, trials_dir=trials_dir))
        self.create_subscription(JointStateMsg, "joint_states", self._on_joint_state, 1000, callback_group=self.group)
        self.create_subscription(ObjectState, "sim/object_state", self._on_object_state, 1000, callback_group=self.group)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.marker_pub = self.create_publisher(MarkerArray, "trial_markers", latched)
        self.server = accepting_action_server(self, GraspObject, "grasp_object", self.execute, self.group)
        self.get_logger().info(f"grasp_task ready (trials in {self.task.config.trials_dir})")

    def _on_joint_state(self, msg: JointStateMsg) -> None:
        window = self.trace_window
        if window is None or len(msg.name) != len(msg.position) or not window.accept("joint_states", stamp_ns(msg)):
            return
        velocity = msg.velocity if len(msg.velocity) == len(msg.name) else np.zeros(len(msg.name))
        window.trace.joint_state(tuple(msg.name), np.asarray(msg.position, float), np.asarray(velocity, float),
                                 stamp_ns(msg))

    def _on_object_state(self, msg: ObjectState) -> None:
        window = self.trace_window
        if window is None or not window.accept("object_state", stamp_ns(msg)):
            return
        try:
            T = matrix_from_pose(msg.pose)
        except ValueError:
            return
        window.trace.object_state(T, dict(zip(msg.touching_links, msg.normal_forces_n)), bool(msg.touches_table),
                                  stamp_ns(msg))

    def _goal_config(self, goal: GraspObject.Goal) -> GraspTaskConfig:
        base = self.task.config
        if goal.perception and goal.perception not in PERCEPTION_BACKENDS:
            raise ValueError(f"unknown perception {goal.perception!r}; known: {list(PERCEPTION_BACKENDS)}")
        position = goal.object_position
        if position.header.frame_id not in ("", self.config.world_frame, "fr3_link0"):
            raise ValueError(f"object_position must be in {self.config.world_frame!r}, got {position.header.frame_id!r}")
        if not np.isfinite([position.point.x, position.point.y, position.point.z]).all():
            raise ValueError("object_position has NaN or inf")
        return replace(base, perception=goal.perception or base.perception, sampler=goal.sampler or base.sampler,
                       evaluator=goal.evaluator or base.evaluator, num_grasps=int(goal.num_grasps or base.num_grasps),
                       seed=int(goal.seed))

    def execute(self, goal_handle) -> GraspObject.Result:
        goal = goal_handle.request
        result = GraspObject.Result(stage="validation")
        try:
            config = self._goal_config(goal)
        except ValueError as err:
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")
        if not self._busy.acquire(blocking=False):
            return end_goal(self, goal_handle, result, StatusCode.BUSY, "a grasp is running; one at a time")
        try:
            name = goal.trial_name or trial_name()
            if "/" in name or name.startswith("."):
                return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"trial_name {name!r} is not a plain name")
            if (Path(config.trials_dir) / name).exists():
                return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"trial {name!r} exists already")
            self.stages.trial_dir = Path(self.config.work_dir).expanduser() / name

            def feedback(stage: str, progress: float, detail: str) -> None:
                goal_handle.publish_feedback(GraspObject.Feedback(stage=stage, progress=float(progress), detail=detail))

            position = np.array([goal.object_position.point.x, goal.object_position.point.y, goal.object_position.point.z])
            outcome = self.task.run(position, name, config, lambda: goal_handle.is_cancel_requested or self._closing,
                                    feedback)
        finally:
            self._busy.release()
        result.success, result.stage, result.trial_bag_path = outcome.success, outcome.stage, outcome.bag_path
        result.scored = outcome.scored_success is not None
        result.scored_success = bool(outcome.scored_success)
        result.scorer_agrees = outcome.scorer_agrees is not False
        result.timings = timings_to_msgs(outcome.timings_s)
        markers = MarkerArray()
        if outcome.chosen_grasp is not None:
            from getagrip_ros.grasp.grasp import Grasp

            executed = Grasp.from_vector(outcome.chosen_grasp[None], self.config.world_frame)
            result.executed_grasp = grasps_to_msgs(executed, outcome.chosen_labels[None])[0]
            markers = grasp_markers(executed, outcome.chosen_labels[None, 0], self.stages.hand, namespace="executed_grasp")
        verdict = "LIFTED" if outcome.success else f"{outcome.status.name} in {outcome.stage}"
        markers.markers.append(outcome_marker(f"{name}: {verdict}", position, outcome.success, self.config.world_frame))
        self.marker_pub.publish(markers)
        return end_goal(self, goal_handle, result, outcome.status, outcome.reason)


    def close(self) -> None:
        """Shutting down: a running trial is cancelled (its sub-goals too) and still recorded."""
        self._closing = True


def main(args: list[str] | None = None) -> None:
    spin_node(GraspTaskNode, args)


if __name__ == "__main__":
    main()
