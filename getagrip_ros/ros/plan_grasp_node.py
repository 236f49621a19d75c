"""`plan_grasp` action server: translates PlanGrasp goals for the core GraspPlanner.

Parameters mirror :class:`PlanGraspNodeConfig` (the planner's config plus ``max_queued_goals``; see
config/plan_grasp.yaml). Publishes the returned grasps as RViz markers on `grasp_markers`.

One plan runs at a time. A goal that arrives while another runs waits in FIFO order (feedback stage
"queued"; a cancel while queued ends it without planning); when ``max_queued_goals`` goals already wait,
a new one is aborted at once with the reason "busy". A goal stops (CANCELED) when it is cancelled, when the node
shuts down, or when its client is gone; the planner's ``max_plan_time_s`` and ``max_refinement_iterations`` bound
every goal, whatever it asks for.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from rclpy.qos import DurabilityPolicy, QoSProfile
from visualization_msgs.msg import MarkerArray

from getagrip_interfaces.action import PlanGrasp
from getagrip_ros.grasp.transform_tree import TransformTreeConfig
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig
from getagrip_ros.ros.actions import RunningGoal, StackNode, accepting_action_server, end_goal
from getagrip_ros.ros.conversions import planned_grasps_to_msgs, timings_to_msgs
from getagrip_ros.ros.markers import grasp_markers
from getagrip_ros.ros.params import declare_config
from getagrip_ros.ros.spin import spin_node
from getagrip_ros.ros.stage_messages import plan_request
from getagrip_ros.ros.tf_listener import TfListener
from getagrip_ros.safe_files import DEFAULT_DATA_ROOTS, check_goal_paths
from getagrip_ros.status import StatusCode

QUEUE_POLL_S = 0.05
MAX_QUEUED_GOALS = 2
EXECUTOR_THREADS = 5
"""One plan, two waiting goals, one for cancel requests, one for /tf messages."""


@dataclass(frozen=True)
class PlanGraspNodeConfig(GraspPlannerConfig):
    """The planner's settings plus the node's goal queue."""

    max_queued_goals: int = 1
    """Goals that may wait while one plans (0-2); further goals are aborted as BUSY."""
    data_roots: tuple[str, ...] = DEFAULT_DATA_ROOTS
    """NeRF goals are accepted only for runs (config.yml) under one of these folders."""
    object_frames: tuple[str, ...] = ("world", "fr3_link0")
    """Frames a goal's object data may be in: z up with the table top at z = 0 (others are refused)."""
    tf: TransformTreeConfig = field(default_factory=TransformTreeConfig)
    """A human demonstration in another frame is moved into the object's frame by /tf and /tf_static, at its stamp."""


class PlanGraspNode(StackNode):
    def __init__(self) -> None:
        super().__init__("plan_grasp")
        self.config = declare_config(self, PlanGraspNodeConfig())
        self.max_queued_goals = self.config.max_queued_goals
        if not 0 <= self.max_queued_goals <= MAX_QUEUED_GOALS:
            self.get_logger().error(f"max_queued_goals must be in [0, {MAX_QUEUED_GOALS}] (each waiting goal holds an "
                                    f"executor thread); using {MAX_QUEUED_GOALS}")
            self.max_queued_goals = MAX_QUEUED_GOALS
        self.planner = GraspPlanner(self.config)
        loaded, failed = self.planner.preload()
        self.get_logger().info(f"loaded: {', '.join(loaded) or 'no learned models configured'}")
        for label, reason in failed.items():  # keep serving: goals that need this model abort with the reason
            self.get_logger().error(f"cannot load the {label}: {reason}")
        self._queue_lock = threading.Lock()
        self._queue: deque = deque()  # goal ids in arrival order; the head plans
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.marker_pub = self.create_publisher(MarkerArray, "grasp_markers", latched)
        self.tf = TfListener(self, self.config.tf)
        self.server = accepting_action_server(self, PlanGrasp, "plan_grasp", self.execute)
        self.get_logger().info(f"plan_grasp ready (device {self.config.device}, {self.config.num_samples} samples)")

    def _wait_turn(self, goal: RunningGoal) -> tuple[StatusCode, str] | None:
        """Join the queue and wait to be its head; returns (status, reason) if the goal ends before planning."""
        token = object()
        with self._queue_lock:
            if len(self._queue) > self.max_queued_goals:
                return StatusCode.BUSY, (f"busy: one plan running and {len(self._queue) - 1} queued "
                                         f"(max_queued_goals = {self.max_queued_goals}); try again later")
            self._queue.append(token)
            must_wait = len(self._queue) > 1
        if must_wait:
            goal.feedback(PlanGrasp.Feedback(stage="queued", progress=0.0, best_score=math.nan))
        while True:
            with self._queue_lock:
                if self._queue[0] is token:
                    return None
                stop = goal.stop_reason()
                if stop is not None:
                    self._queue.remove(token)
                    return StatusCode.CANCELED, f"{stop} while queued"
            time.sleep(QUEUE_POLL_S)

    def _leave_queue(self) -> None:
        with self._queue_lock:
            self._queue.popleft()

    def execute(self, goal_handle) -> PlanGrasp.Result:
        result = PlanGrasp.Result()
        try:
            request = plan_request(goal_handle.request)
            check_goal_paths(self.config.data_roots, nerf_config_path=request.nerf_config_path or "",
                             mesh_path=request.mesh_path or "")
            if (request.points_m is not None or request.mesh_path) and request.frame_id not in self.config.object_frames:
                raise ValueError(f"the object data is in frame {request.frame_id!r}; this node plans in "
                                 f"{list(self.config.object_frames)} (z up, the table top at z = 0): transform it first")
            if request.human_demo is not None:  # into the object's frame (the object frames are all the robot base)
                request.human_demo = self.tf.demonstration_in(request.human_demo, request.frame_id,
                                                              goal_handle.request.human_demo.header.stamp,
                                                              self.config.object_frames, self.closing.is_set)
        except (ValueError, TypeError) as err:  # UnsafeFile included
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")
        with self.running(goal_handle, "plan_grasp") as goal:
            refused = self._wait_turn(goal)
            if refused is not None:
                return end_goal(self, goal_handle, result, *refused)

            def progress(stage: str, fraction: float, best: float) -> None:
                goal.feedback(PlanGrasp.Feedback(stage=stage, progress=float(fraction), best_score=float(best)))

            try:
                outcome = self.planner.plan(request, progress, goal.stopped)
            finally:
                self._leave_queue()
            if outcome.status == StatusCode.CANCELED:
                outcome.reason = goal.stop_reason() or outcome.reason
        result.timings = timings_to_msgs(outcome.timings_s)
        if outcome.success:
            stamp = self.get_clock().now().to_msg()
            result.grasps = planned_grasps_to_msgs(outcome.planned, stamp)
            planned = outcome.planned
            if not self.closing.is_set():
                self.marker_pub.publish(grasp_markers(planned.grasps, planned.y_pgs.numpy(), self.planner.hand, stamp))
        return end_goal(self, goal_handle, result, outcome.status, outcome.reason)


def main(args: list[str] | None = None) -> None:
    spin_node(PlanGraspNode, args, EXECUTOR_THREADS)


if __name__ == "__main__":
    main()
