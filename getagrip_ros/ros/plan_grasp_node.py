"""`plan_grasp` action server: translates PlanGrasp goals for the core GraspPlanner.

Parameters mirror :class:`getagrip_ros.planning.planner.GraspPlannerConfig` (see config/plan_grasp.yaml).
Publishes the returned grasps as RViz markers on `grasp_markers`.
"""

from __future__ import annotations

import threading

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from visualization_msgs.msg import MarkerArray

from getagrip_interfaces.action import PlanGrasp
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.ros.actions import accepting_action_server, end_goal
from getagrip_ros.ros.conversions import planned_grasps_to_msgs, point_cloud2_to_numpy, timings_to_msgs
from getagrip_ros.ros.markers import grasp_markers
from getagrip_ros.ros.params import declare_config
from getagrip_ros.ros.spin import spin_node
from getagrip_ros.status import StatusCode


def plan_request_from_goal(goal: PlanGrasp.Goal) -> PlanRequest:
    """PlanGrasp goal -> core request; ValueError names what is malformed."""
    request = PlanRequest(num_grasps=goal.num_grasps, sampler=goal.sampler, evaluator=goal.evaluator,
                          refinement_iterations=goal.refinement_iterations, seed=goal.seed, timeout_s=goal.timeout_s)
    if goal.object_source == PlanGrasp.Goal.SOURCE_POINT_CLOUD:
        request.points_m = point_cloud2_to_numpy(goal.point_cloud)
        request.frame_id = goal.point_cloud.header.frame_id
    elif goal.object_source == PlanGrasp.Goal.SOURCE_BPS:
        request.bps = goal.bps.tolist() if hasattr(goal.bps, "tolist") else list(goal.bps)
        request.frame_id = goal.bps_frame_id
    elif goal.object_source == PlanGrasp.Goal.SOURCE_NERF:
        request.nerf_config_path = goal.nerf_config_path
        request.frame_id = "world"
    else:
        raise ValueError(f"unknown object_source {goal.object_source} (0 = point cloud, 1 = BPS, 2 = NeRF)")
    if not request.frame_id:
        raise ValueError("the object data has no frame_id")
    return request


class PlanGraspNode(Node):
    def __init__(self) -> None:
        super().__init__("plan_grasp")
        self.config = declare_config(self, GraspPlannerConfig())
        self.planner = GraspPlanner(self.config)
        self._busy = threading.Lock()  # one plan at a time; further goals wait their turn
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.marker_pub = self.create_publisher(MarkerArray, "grasp_markers", latched)
        self.server = accepting_action_server(self, PlanGrasp, "plan_grasp", self.execute)
        self.get_logger().info(f"plan_grasp ready (device {self.config.device}, {self.config.num_samples} samples)")

    def execute(self, goal_handle) -> PlanGrasp.Result:
        result = PlanGrasp.Result()
        try:
            request = plan_request_from_goal(goal_handle.request)
        except (ValueError, TypeError) as err:
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")

        def progress(stage: str, fraction: float, best: float) -> None:
            goal_handle.publish_feedback(PlanGrasp.Feedback(stage=stage, progress=float(fraction), best_score=float(best)))

        with self._busy:
            outcome = self.planner.plan(request, progress, lambda: goal_handle.is_cancel_requested)
        result.timings = timings_to_msgs(outcome.timings_s)
        if outcome.success:
            stamp = self.get_clock().now().to_msg()
            result.grasps = planned_grasps_to_msgs(outcome.planned, stamp)
            planned = outcome.planned
            self.marker_pub.publish(grasp_markers(planned.grasps, planned.y_pgs.numpy(), self.planner.hand, stamp))
        return end_goal(self, goal_handle, result, outcome.status, outcome.reason)


def main(args: list[str] | None = None) -> None:
    spin_node(PlanGraspNode, args)


if __name__ == "__main__":
    main()
