"""Call the plan_grasp action from your own node: send an object point cloud, print the ranked grasps.

    ros2 launch getagrip_ros planner.launch.py      # or: plan_grasp_node --ros-args --params-file ...
    python examples/plan_grasp_client.py cloud.npy --sampler fixed --evaluator bps

cloud.npy holds (N, 3) object points in metres, in a z-up frame whose table top is at z = 0 (here "world").
"""

import argparse
import math

import numpy as np
import rclpy
from rclpy.action import ActionClient
from rclpy.node import Node

from getagrip_interfaces.action import PlanGrasp
from getagrip_interfaces.msg import Status
from getagrip_ros.ros.conversions import numpy_to_point_cloud2


class GraspClient(Node):
    def __init__(self) -> None:
        super().__init__("grasp_client")
        self.client = ActionClient(self, PlanGrasp, "plan_grasp")
        self.stage = ""

    def plan(self, points_m: np.ndarray, sampler: str, evaluator: str, num_grasps: int) -> PlanGrasp.Result:
        goal = PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_POINT_CLOUD, sampler=sampler, evaluator=evaluator,
                              num_grasps=num_grasps, refinement_iterations=50, seed=0, timeout_s=120.0)
        goal.point_cloud = numpy_to_point_cloud2(points_m, "world")
        if not self.client.wait_for_server(timeout_sec=30.0):
            raise RuntimeError("no plan_grasp action server")
        sent = self.client.send_goal_async(goal, feedback_callback=self.on_feedback)
        rclpy.spin_until_future_complete(self, sent)
        handle = sent.result()
        if not handle.accepted:
            raise RuntimeError("goal rejected")
        done = handle.get_result_async()
        rclpy.spin_until_future_complete(self, done)
        return done.result().result

    def on_feedback(self, message) -> None:
        """Log each new stage (feedback also comes per sampling step and refinement iteration)."""
        f = message.feedback
        if f.stage != self.stage:
            self.stage = f.stage
            best = "" if math.isnan(f.best_score) else f", best y_PGS so far {f.best_score:.3f}"
            self.get_logger().info(f"{f.stage} ({100 * f.progress:.0f}%){best}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cloud", help=".npy file with (N, 3) object points, metres, world frame")
    parser.add_argument("--sampler", default="heuristic")
    parser.add_argument("--evaluator", default="none")
    parser.add_argument("--num-grasps", type=int, default=5)
    args = parser.parse_args()
    rclpy.init()
    node = GraspClient()
    try:
        result = node.plan(np.load(args.cloud), args.sampler, args.evaluator, args.num_grasps)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    if result.status.code != Status.SUCCEEDED:
        print(f"planning failed ({result.status.code}): {result.status.reason}")
        return 1
    for rank, g in enumerate(result.grasps):
        p = g.palm_pose.position
        print(f"#{rank}: palm at ({p.x:.3f}, {p.y:.3f}, {p.z:.3f}) m in {g.header.frame_id}, predicted y_PGS {g.y_pgs:.3f}")
    print("; ".join(f"{t.stage} {t.duration_s:.2f} s" for t in result.timings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
