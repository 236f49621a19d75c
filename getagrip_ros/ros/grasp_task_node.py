"""`grasp_object` action server: the whole grasp task, one recorded trial per goal.

Runs the core `task.GraspTask` with stage calls that are the stack's own actions - ``reset_world``,
``capture_images``, ``train_nerf`` (NeRF perception), ``extract_object``, ``plan_grasp``, ``plan_motion``,
``execute_grasp`` - so each stage stays callable on its own; the in-process stack makes the same calls directly. While the robot moves it records ``joint_states`` and, in
simulation, ``sim/object_state`` into the trial bag; the bag path is in the result. After each trial it
publishes RViz markers on ``trial_markers`` (latched): the executed grasp and the outcome as text, and on
``trial_path`` (latched) the palm's path through the execution's recorded joint states. Parameters mirror
:class:`GraspTaskNodeConfig` (config/grasp_task.yaml).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from rclpy._rclpy_pybind11 import RCLError
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState as JointStateMsg
from visualization_msgs.msg import Marker, MarkerArray

from getagrip_interfaces.action import (
    CaptureImages, ExecuteGrasp, ExtractObject, GraspObject, PlanGrasp, PlanMotion, ResetWorld, TrainNerf,
)
from getagrip_interfaces.msg import ObjectState
from getagrip_ros.execution.executor import ExecutionResult
from getagrip_ros.perception.capture import CaptureRequest
from getagrip_ros.grasp.transform_tree import TransformTreeConfig
from getagrip_ros.human_demo.demonstration import HumanDemonstration
from getagrip_ros.planning.planner import DEMONSTRATION_SAMPLERS, PlanRequest
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.arm import RobotKinematics
from getagrip_ros.robot.backend import ResetReport, WorldReset
from getagrip_ros.robot.description import FINGERTIP_LINK_NAMES, HAND_LINK_NAMES, PALM_LINK
from getagrip_ros.robot.interfaces import JointState
from getagrip_ros.ros.action_calls import RemoteParameters, call_in_node
from getagrip_ros.ros.actions import StackNode, accepting_action_server, end_goal
from getagrip_ros.ros.conversions import grasp_msgs_to_core, grasps_to_msgs, matrix_from_pose, point_cloud2_to_numpy, timings_to_msgs
from getagrip_ros.ros.markers import grasp_markers, outcome_marker, palm_path_m, path_marker
from getagrip_ros.ros.params import declare_config
from getagrip_ros.ros.spin import spin_node
from getagrip_ros.ros.stage_messages import (
    capture_goal, execute_goal, extract_goal, human_demo_from_msg, motion_goal, nerf_goal, plan_goal, reset_goal,
    stages_from_msgs,
)
from getagrip_ros.ros.tf_listener import TfListener
from getagrip_ros.status import StatusCode
from getagrip_ros.task.config import PERCEPTION_BACKENDS, GraspTaskConfig
from getagrip_ros.task.grasp_task import GraspTask, TrialObject, check_trial_name, trial_name
from getagrip_ros.task.robot_stages import ExecuteRequest, MotionRequest
from getagrip_ros.task.stages import (
    CaptureOutput, ExtractRequest, GraspPlanOutput, MotionOutput, NerfRequest, PerceptionOutput, StageBudget, TraceSink,
)
from getagrip_ros.trials.bag import read_bag


@dataclass(frozen=True)
class GraspTaskNodeConfig:
    """Parameters of the grasp_task node (read at start-up)."""

    world_frame: str = "world"
    object_label: str = ""
    """What stands on the table, recorded with each trial whose goal names none ("" = in simulation the robot node's
    object, on hardware "unknown")."""
    server_wait_s: float = 30.0
    """How long to wait for a stage's action server."""
    tf: TransformTreeConfig = field(default_factory=TransformTreeConfig)
    """A human demonstration in another frame is moved into world_frame by /tf and /tf_static, at its stamp."""
    task: GraspTaskConfig = field(default_factory=lambda: GraspTaskConfig(trials_dir="~/getagrip_trials",
                                                                          work_dir="~/getagrip_trials/work"))


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


class RosStageCalls:
    """`StageCalls` over the stage actions; the execution trace comes from the node's subscriptions."""

    def __init__(self, node: GraspTaskNode) -> None:
        self.node = node
        group = node.group
        self.clients = {name: ActionClient(node, kind, name, callback_group=group) for name, kind in (
            ("reset_world", ResetWorld), ("capture_images", CaptureImages), ("train_nerf", TrainNerf),
            ("extract_object", ExtractObject), ("plan_grasp", PlanGrasp), ("plan_motion", PlanMotion),
            ("execute_grasp", ExecuteGrasp))}
        self.robot_parameters = RemoteParameters(node, "robot")

    def describe(self) -> dict[str, Any]:
        actuators = self.robot_parameters.read(["backend", "stages", "safety", "execution", "hardware", "sim", "hand",
                                                "capture", "lift_check_fraction", "sample_every_ms",
                                                "capture_sample_every_ms"])
        simulated = actuators.get("sim.object_name") if actuators.get("backend") == "sim" else None
        return {"backend": "ros", "object": self.node.config.object_label or simulated or "unknown",
                "actuators": actuators or "the robot node did not answer its parameter services"}

    def hand_link_names(self) -> tuple[str, ...]:
        return hand_contact_links()

    @contextmanager
    def _tracing(self, trace: TraceSink):
        """The robot's states stamped while the block runs go to `trace` (the capture's and the execution's)."""
        window = self.node.trace_window = TraceWindow(trace, self.node.get_clock().now().nanoseconds)
        try:
            yield
        finally:
            window.close(self.node.get_clock().now().nanoseconds)
            self.node.trace_window = None

    def _call(self, name: str, goal: Any, budget: StageBudget, feedback=None, any_outcome: bool = False) -> Any:
        return call_in_node(self.clients[name], goal, budget.cancelled, budget.deadline, feedback,
                            self.node.config.server_wait_s, any_outcome)

    def reset(self, request: WorldReset, budget: StageBudget) -> ResetReport:
        result = self._call("reset_world", reset_goal(request), budget)
        s = result.joint_state
        state = JointState(tuple(s.name), np.asarray(s.position, float), np.asarray(s.velocity, float))
        return ResetReport(result.object_name, matrix_from_pose(result.object_pose.pose), state, result.status.reason)

    def capture(self, request: CaptureRequest, budget: StageBudget, trace: TraceSink) -> CaptureOutput:
        with self._tracing(trace):
            result = self._call("capture_images", capture_goal(request, with_depth=True), budget,
                                lambda fb: budget.progress(fb.num_captured / max(fb.num_planned, 1),
                                                           f"image {fb.num_captured}/{fb.num_planned}"))
        return CaptureOutput(result.dataset_dir, int(result.num_captured), int(result.num_captured + result.num_skipped))

    def train_nerf(self, request: NerfRequest, budget: StageBudget) -> str:
        result = self._call("train_nerf", nerf_goal(request), budget,
                            lambda fb: budget.progress(fb.iteration / max(fb.num_iterations, 1), f"nerfacto {fb.iteration}"))
        return result.config_path

    def extract(self, request: ExtractRequest, budget: StageBudget) -> PerceptionOutput:
        result = self._call("extract_object", extract_goal(request), budget, lambda fb: budget.progress(fb.progress, fb.stage))
        origin = np.array([result.bps_origin.point.x, result.bps_origin.point.y, result.bps_origin.point.z])
        centroid = np.array([result.centroid.point.x, result.centroid.point.y, result.centroid.point.z])
        return PerceptionOutput(point_cloud2_to_numpy(result.point_cloud), np.asarray(result.bps, float), origin, centroid,
                                result.mesh_path)

    def plan_grasp(self, request: PlanRequest, budget: StageBudget) -> GraspPlanOutput:
        result = self._call("plan_grasp", plan_goal(request), budget, lambda fb: budget.progress(fb.progress, fb.stage))
        grasps, labels = grasp_msgs_to_core(list(result.grasps))
        return GraspPlanOutput(grasps, labels, result.status.reason)

    def plan_motion(self, request: MotionRequest, budget: StageBudget) -> MotionOutput:
        result = self._call("plan_motion", motion_goal(request), budget,
                            lambda fb: budget.progress(fb.grasps_tried / max(fb.grasps_total, 1), "planning"))
        return MotionOutput(int(result.grasp_index), stages_from_msgs(result), list(result.rejected))

    def execute(self, request: ExecuteRequest, budget: StageBudget, trace: TraceSink) -> ExecutionResult:
        def feedback(fb) -> None:
            trace.phase(fb.phase, stamp_ns(fb) or None)
            budget.progress(fb.progress, fb.phase)

        with self._tracing(trace):
            result = self._call("execute_grasp", execute_goal(request, self.node.get_clock().now().to_msg()), budget,
                                feedback, any_outcome=True)
        code = StatusCode(result.status.code)
        return ExecutionResult(code == StatusCode.SUCCEEDED, code, result.stage, result.status.reason,
                               bool(result.lifted) if result.stage == "done" else None)


class GraspTaskNode(StackNode):
    def __init__(self) -> None:
        super().__init__("grasp_task")
        self.config = declare_config(self, GraspTaskNodeConfig())
        self.group = ReentrantCallbackGroup()
        self.trace_window: TraceWindow | None = None
        self._busy = threading.Lock()
        self.calls = RosStageCalls(self)
        task = self.config.task
        self.task = GraspTask(self.calls, replace(task, trials_dir=str(Path(task.trials_dir).expanduser()),
                                                  work_dir=str(Path(task.work_dir).expanduser())))
        self.hand = AllegroHand()
        self.kinematics = RobotKinematics()
        self._start_trace_listener()
        self.tf = TfListener(self, self.config.tf)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.marker_pub = self.create_publisher(MarkerArray, "trial_markers", latched)
        self.path_pub = self.create_publisher(Marker, "trial_path", latched)
        self.server = accepting_action_server(self, GraspObject, "grasp_object", self.execute, self.group)
        self.get_logger().info(f"grasp_task ready (trials in {self.task.config.trials_dir}, work data in "
                               f"{self.task.config.work_dir})")

    def _start_trace_listener(self) -> None:
        """The robot's states arrive at up to a few hundred messages a second while it moves (50 ms of robot time
        apart, faster than real time in simulation): a node of their own on a single-threaded executor keeps up,
        where this node's executor, whose wait set holds every action client, falls seconds behind."""
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        # its own name whatever the command line renames (ros2 launch renames every node of the process), and this
        # node's resolved topic names (remaps and namespace included)
        self.trace_node = rclpy.create_node("grasp_task_trace", context=self.context, use_global_arguments=False,
                                            start_parameter_services=False)
        self.trace_node.create_subscription(JointStateMsg, self.resolve_topic_name("joint_states"), self._on_joint_state,
                                            1000)
        self.trace_node.create_subscription(ObjectState, self.resolve_topic_name("sim/object_state"),
                                            self._on_object_state, 1000)
        self._trace_executor = SingleThreadedExecutor(context=self.context)
        self._trace_executor.add_node(self.trace_node)
        self._trace_thread = threading.Thread(target=self._spin_trace, name="trace", daemon=True)
        self._trace_thread.start()

    def _spin_trace(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            while self.context.ok() and not self.closing.is_set():  # a bounded wait, so close() can join this thread
                self._trace_executor.spin_once(timeout_sec=0.1)
        except ExternalShutdownException:  # SIGINT: the context is going down
            pass
        except Exception:  # noqa: BLE001 - the context went down mid-wait (SIGINT): nothing is left to record
            if self.context.ok():
                raise

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
        if not np.isfinite([position.point.x, position.point.y, position.point.z, goal.object_yaw_rad]).all():
            raise ValueError("object_position or object_yaw_rad has NaN or inf")
        return replace(base, perception=goal.perception or base.perception, sampler=goal.sampler or base.sampler,
                       evaluator=goal.evaluator or base.evaluator, num_grasps=int(goal.num_grasps or base.num_grasps),
                       seed=int(goal.seed))

    def _goal_demonstration(self, goal: GraspObject.Goal, config: GraspTaskConfig) -> HumanDemonstration | None:
        """The goal's demonstration in the world frame, from its own frame by /tf at its stamp (ValueError: malformed,
        in a frame with no transform to the world, or not matching the sampler)."""
        demo = human_demo_from_msg(goal.human_demo)
        if (config.sampler in DEMONSTRATION_SAMPLERS) != (demo is not None):
            raise ValueError(f"the {config.sampler} sampler needs a human demonstration" if demo is None else
                             f"a human demonstration is used by the human_demo sampler only, not by {config.sampler!r}")
        if demo is None:
            return None
        return self.tf.demonstration_in(demo, self.config.world_frame, goal.human_demo.header.stamp,
                                        (self.config.world_frame, "fr3_link0"), self.closing.is_set)

    def execute(self, goal_handle) -> GraspObject.Result:
        goal = goal_handle.request
        result = GraspObject.Result(stage="validation")
        name = goal.trial_name or trial_name()
        try:
            config = self._goal_config(goal)
            check_trial_name(name, config)
            demonstration = self._goal_demonstration(goal, config)
        except ValueError as err:
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")
        if not self._busy.acquire(blocking=False):
            return end_goal(self, goal_handle, result, StatusCode.BUSY, "a grasp is running; one at a time")
        position = np.array([goal.object_position.point.x, goal.object_position.point.y, goal.object_position.point.z])
        try:
            with self.running(goal_handle, "grasp_object") as running:
                def feedback(stage: str, progress: float, detail: str) -> None:
                    running.feedback(GraspObject.Feedback(stage=stage, progress=float(progress), detail=detail))

                outcome = self.task.run(position, name, config, running.stopped, feedback,
                                        TrialObject(goal.object_name, bool(goal.place_object), float(goal.object_yaw_rad)),
                                        running.stop_reason, demonstration)
        except ValueError as err:  # the trial name was taken meanwhile
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")
        except Exception as err:  # noqa: BLE001 - the trial record itself could not be written (e.g. trials_dir)
            return end_goal(self, goal_handle, result, StatusCode.INTERNAL_ERROR,
                            f"the trial could not be recorded: {type(err).__name__}: {err}")
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
            markers = grasp_markers(executed, outcome.chosen_labels[None, 0], self.hand, namespace="executed_grasp")
        verdict = "LIFTED" if outcome.success else f"{outcome.status.name} in {outcome.stage}"
        markers.markers.append(outcome_marker(f"{name}: {verdict}", position, outcome.success, self.config.world_frame))
        path = self._executed_path(outcome.bag_path)  # reads the bag: the node may start shutting down meanwhile
        if not self.closing.is_set():
            try:
                self.marker_pub.publish(markers)
                self.path_pub.publish(path)
            except RCLError:  # the context went down after the check: the trial is recorded, RViz is gone
                pass
        return end_goal(self, goal_handle, result, outcome.status, outcome.reason)

    def _executed_path(self, bag_path: str) -> Marker:
        """The palm's path (forward kinematics) through the joint states the trial's bag recorded during the execution
        stage (the capture's come before); none (no execution): a deletion."""
        try:
            states = read_bag(bag_path, {"/trial/events", "/joint_states"}).stage_messages("/joint_states", "execution")
            points = palm_path_m([(m.msg.name, m.msg.position) for m in states], self.kinematics)
        except Exception as err:  # noqa: BLE001 - a path that cannot be drawn does not fail the goal
            self.get_logger().warning(f"no executed path for RViz: {type(err).__name__}: {err}")
            points = np.zeros((0, 3))
        return path_marker(points, self.config.world_frame)

    def close(self) -> None:
        """Shutting down: a running trial is cancelled (its sub-goals too) and still recorded."""
        self.closing.set()
        # the trace thread leaves its wait first: shutting its executor down under a running wait, or exiting with the
        # thread still in it, can abort the process ("terminate called without an active exception", seen under load)
        self._trace_thread.join(timeout=5.0)
        self._trace_executor.shutdown(timeout_sec=5.0)  # before waiting: its wait set goes with the context
        super().close()
        self.trace_node.destroy_node()


def main(args: list[str] | None = None) -> None:
    spin_node(GraspTaskNode, args)


if __name__ == "__main__":
    main()
