"""plan_grasp under faults, over ROS with real processes: a malformed model file at start-up, a client killed with
SIGKILL while its goal plans, and SIGINT with a goal running."""

import dataclasses
import signal
import sys
import time

import torch
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient

from getagrip_interfaces.action import PlanGrasp
from getagrip_interfaces.msg import Status
from getagrip_ros.models.bps_evaluator import BpsEvaluator, BpsEvaluatorConfig
from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.paths import config_path
from getagrip_ros.ros.client import call_action
from getagrip_ros.ros.conversions import numpy_to_point_cloud2
from getagrip_ros.ros.processes import NodeProcess

SLOW = ["-p", "num_samples:=3000000", "-p", "chunk_size:=64"]
"""Sampling this many heuristic grasps takes minutes: a goal that is still planning when the test acts."""


def _node(ros_env, namespace: str, *args: str) -> NodeProcess:
    return NodeProcess("getagrip_ros.ros.plan_grasp_node", ["--ros-args", "--params-file",
                       str(config_path("plan_grasp.yaml")), "-r", f"__ns:=/{namespace}", *args],
                       env={**ros_env, "OMP_NUM_THREADS": "1"},
                       log_path=f"{ros_env['ROS_LOG_DIR']}/plan_grasp_{namespace}.out")


def _goal(**kwargs) -> PlanGrasp.Goal:
    goal = PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_POINT_CLOUD, **{"sampler": "heuristic",
                          "evaluator": "none", "num_grasps": 3, **kwargs})
    goal.point_cloud = numpy_to_point_cloud2(box_surface_points(), "world")
    return goal


def test_a_malformed_model_at_start_up_leaves_the_node_serving_the_others(ros_env, rclpy_node, tiny_models, tmp_path):
    bad = tmp_path / "evaluator_0d.pth"
    torch.save({k: torch.tensor(1.0) for k in BpsEvaluator(BpsEvaluatorConfig(num_basis_points=64)).state_dict()}, bad)
    models = {**dataclasses.asdict(tiny_models), "bps_evaluator": str(bad)}
    params = [a for k, v in models.items() if v for a in ("-p", f"models.{k}:={v}")]
    with _node(ros_env, "malformed", "-p", "num_samples:=400", *params) as proc:
        assert proc.wait_for_output("plan_grasp ready", 60), proc.output()
        assert f"cannot load the evaluator bps: BPS evaluator: {bad}: malformed model checkpoint: IndexError" \
            in proc.output(), proc.output()
        client = ActionClient(rclpy_node, PlanGrasp, "/malformed/plan_grasp")
        try:
            status, result = call_action(rclpy_node, client, _goal(sampler="fixed"), timeout_s=120)
            assert status == GoalStatus.STATUS_SUCCEEDED and len(result.grasps) == 3, result.status.reason
            status, result = call_action(rclpy_node, client, _goal(sampler="fixed", evaluator="bps"), timeout_s=120)
            assert result.status.code == Status.INTERNAL_ERROR and str(bad) in result.status.reason, result.status.reason
        finally:
            client.destroy()
    assert proc.process.returncode == 0 and "Traceback" not in proc.output(), proc.output()


CLIENT = """
import rclpy
from rclpy.action import ActionClient
from getagrip_interfaces.action import PlanGrasp
from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.ros.conversions import numpy_to_point_cloud2

rclpy.init()
node = rclpy.create_node("plan_grasp_client")
client = ActionClient(node, PlanGrasp, "/slow/plan_grasp")
client.wait_for_server(timeout_sec=30)
goal = PlanGrasp.Goal(object_source=0, sampler="heuristic", evaluator="none", num_grasps=3, timeout_s=0.0)
goal.point_cloud = numpy_to_point_cloud2(box_surface_points(), "world")
future = client.send_goal_async(goal, feedback_callback=lambda f: print("feedback", f.feedback.stage, flush=True))
while True:
    rclpy.spin_once(node, timeout_sec=0.1)
"""
"""A client in its own process: sends one goal without a timeout (it would plan for minutes) and prints its feedback."""


def test_a_killed_clients_goal_is_dropped_and_sigint_stops_a_running_goal_cleanly(ros_env, tmp_path):
    with _node(ros_env, "slow", *SLOW) as proc:
        assert proc.wait_for_output("plan_grasp ready", 60), proc.output()
        with NodeProcess("orphan", env=ros_env, command=[sys.executable, "-c", CLIENT], log_path=tmp_path / "a") as orphan:
            assert orphan.wait_for_output("feedback sampling", 150), orphan.output() + proc.output()
            orphan.process.send_signal(signal.SIGKILL)
            orphan.process.wait(10)
        # the next client's goal waits behind the orphan's, which is dropped once the server sees no client that could
        # have sent it (when the killed client's DDS lease runs out, ~20 s); then it plans
        with NodeProcess("next", env=ros_env, command=[sys.executable, "-c", CLIENT], log_path=tmp_path / "b") as follower:
            assert follower.wait_for_output("feedback queued", 60), follower.output() + proc.output()
            start = time.monotonic()
            assert follower.wait_for_output("feedback sampling", 180), follower.output() + proc.output()
            print(f"the orphan's goal was dropped and the next one planned after {time.monotonic() - start:.1f} s")
            assert "CANCELED: its client is gone" in proc.output(), proc.output()
            # SIGINT while that goal plans: it stops, and the node exits cleanly without tracebacks
            proc.process.send_signal(signal.SIGINT)
            code = proc.process.wait(60)
    out = proc.output()
    assert code == 0, out
    for text in ("Traceback", "invalid", "Exception"):
        assert text not in out, out
    assert "CANCELED: the node is shutting down" in out, out
