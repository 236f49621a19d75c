"""A plan_grasp node process with graspd parameters serves graspd goals (feedback, physics-score ranking, and ranking
by the simulation evaluator) and human_demo goals (a demonstration message in, its grasp out, from another frame by
/tf; bad ones refused)."""

import time

import numpy as np
from scipy.spatial.transform import Rotation

from getagrip_ros.objects.primitives import box_surface_points, cylinder_surface_points

from ..human_demo.demos import SHORT_TRANSFER, side_power_grasp


def test_a_plan_grasp_node_with_graspd_parameters_serves_a_graspd_goal(ros_env, rclpy_node):
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient

    from getagrip_interfaces.action import PlanGrasp
    from getagrip_interfaces.msg import Status
    from getagrip_ros.paths import config_path
    from builtin_interfaces.msg import Time
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from tf2_msgs.msg import TFMessage

    from getagrip_ros.ros.client import call_action
    from getagrip_ros.ros.conversions import grasp_msgs_to_core, numpy_to_point_cloud2, transform_stamped_from_matrix
    from getagrip_ros.ros.processes import NodeProcess
    from getagrip_ros.ros.stage_messages import human_demo_to_msg

    fast = {"graspd.num_grasps": 4, "graspd.synthesis.num_steps": 40, "graspd.synthesis.chunk_steps": 10,
            "graspd.sdf.resolution": 48, "graspd.hand.contact_links": "distal", "simulation.num_trials": 1,
            **SHORT_TRANSFER}
    no_models = {f"models.{name}": '""' for name in ("bps_evaluator", "bps_sampler", "fixed_grasps", "geometry_evaluator")}
    args = ["--ros-args", "--params-file", str(config_path("plan_grasp.yaml"))]
    for name, value in {**fast, **no_models}.items():
        args += ["-p", f"{name}:={value}"]
    with NodeProcess("getagrip_ros.ros.plan_grasp_node", args, env={**ros_env, "OMP_NUM_THREADS": "1"}) as server:
        assert server.wait_for_output("plan_grasp ready", 60), server.output()
        client = ActionClient(rclpy_node, PlanGrasp, "plan_grasp")
        try:
            goal = PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_POINT_CLOUD, sampler="graspd", evaluator="none",
                                  num_grasps=4, seed=1, timeout_s=60.0)
            goal.point_cloud = numpy_to_point_cloud2(box_surface_points(), "world")
            feedback = []
            status, result = call_action(rclpy_node, client, goal, timeout_s=90, feedback=feedback.append)
            goal.evaluator = "sim"  # the same cloud, each grasp simulated on a surface made of it
            sim_status, sim_result = call_action(rclpy_node, client, goal, timeout_s=120)
            demo = side_power_grasp(centre_xy_m=(0.65, 0.0), radius_m=0.04, height_m=0.05, frame_id="fr3_link0",
                                    azimuth_deg=-90.0)
            goal = PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_POINT_CLOUD, sampler="human_demo",
                                  evaluator="none", num_grasps=1, timeout_s=60.0,
                                  human_demo=human_demo_to_msg(demo))
            goal.point_cloud = numpy_to_point_cloud2(cylinder_surface_points(0.04, 0.10, (0.65, 0.0)), "world")
            demo_status, demo_result = call_action(rclpy_node, client, goal, timeout_s=90)
            # the same demonstration from a motion-capture frame on /tf_static, and from a tracker frame that moves
            # on /tf, at the demonstration's stamp (between two samples: interpolated)
            T_world_mocap = np.eye(4)
            T_world_mocap[:3, :3] = Rotation.from_rotvec([0.3, -0.2, 1.2]).as_matrix()
            T_world_mocap[:3, 3] = [0.2, -0.5, 0.9]
            static_pub = rclpy_node.create_publisher(TFMessage, "/tf_static", QoSProfile(
                depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
            static_pub.publish(TFMessage(transforms=[transform_stamped_from_matrix(T_world_mocap, "world", "mocap")]))
            from_frames = {}
            goal.human_demo = human_demo_to_msg(demo.transformed(np.linalg.inv(T_world_mocap), "mocap"))
            from_frames["mocap"] = call_action(rclpy_node, client, goal, timeout_s=90)
            tf_pub = rclpy_node.create_publisher(TFMessage, "/tf", 10)
            deadline = time.monotonic() + 10
            while tf_pub.get_subscription_count() == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            T_world_tracker = [T_world_mocap.copy(), T_world_mocap.copy()]
            T_world_tracker[1][:3, 3] += [0.2, 0.0, 0.0]  # the tracker moved 20 cm in 1 s; the demo is at 0.5 s
            tf_pub.publish(TFMessage(transforms=[transform_stamped_from_matrix(T, "world", "tracker", Time(sec=100 + i))
                                                 for i, T in enumerate(T_world_tracker)]))
            T_world_tracker_at_demo = T_world_mocap.copy()
            T_world_tracker_at_demo[:3, 3] += [0.1, 0.0, 0.0]
            goal.human_demo = human_demo_to_msg(demo.transformed(np.linalg.inv(T_world_tracker_at_demo), "tracker"))
            goal.human_demo.header.stamp = Time(sec=100, nanosec=500_000_000)
            from_frames["tracker"] = call_action(rclpy_node, client, goal, timeout_s=90)
            goal.human_demo.header.stamp = Time(sec=105)  # no sample near this time: refused, no extrapolation
            from_frames["tracker_later"] = call_action(rclpy_node, client, goal, timeout_s=30)
            broken = transform_stamped_from_matrix(np.eye(4), "world", "broken")
            broken.transform.rotation.w = 0.0  # a zero quaternion: skipped with a warning, the node serves on
            tf_pub.publish(TFMessage(transforms=[broken]))
            goal.human_demo = human_demo_to_msg(demo.transformed(np.eye(4), "broken"))
            from_frames["broken"] = call_action(rclpy_node, client, goal, timeout_s=30)
            refused = []
            for change in ({"frame_id": "camera"}, {"nan": True}, {"format": ""}):
                bad = human_demo_to_msg(demo)
                bad.header.frame_id = change.get("frame_id", bad.header.frame_id)
                bad.format = change.get("format", bad.format)
                if change.get("nan"):
                    bad.keypoints[4].x = float("nan")
                goal.human_demo = bad
                refused.append(call_action(rclpy_node, client, goal, timeout_s=30)[1].status)
        finally:
            client.destroy()
        assert status == GoalStatus.STATUS_SUCCEEDED, (result.status.reason, server.output())
        assert result.status.code == Status.SUCCEEDED and "ranked by the graspd physics score" in result.status.reason
        assert sum(f.stage == "sampling" for f in feedback) >= 1 and 1 <= len(result.grasps) <= 4
        grasps, _ = grasp_msgs_to_core(list(result.grasps))
        assert grasps.frame_id == "world" and np.isfinite(grasps.to_numpy_vector()).all()
        assert sim_status == GoalStatus.STATUS_SUCCEEDED, (sim_result.status.reason, server.output())
        assert "ranked by the sim evaluator" in sim_result.status.reason and "no refinement" in sim_result.status.reason
        y_pgs = [g.y_pgs for g in sim_result.grasps]
        assert 1 <= len(y_pgs) <= 4 and all(y in (0.0, 1.0) for y in y_pgs) and y_pgs == sorted(y_pgs, reverse=True)
        assert demo_status == GoalStatus.STATUS_SUCCEEDED, (demo_result.status.reason, server.output())
        assert "transferred from the human demonstration" in demo_result.status.reason and len(demo_result.grasps) == 1
        transferred, _ = grasp_msgs_to_core(list(demo_result.grasps))
        assert transferred.frame_id == "world" and transferred.palm_position_m[0, 1] < -0.03  # on the can's -y side
        for frame in ("mocap", "tracker"):
            frame_status, frame_result = from_frames[frame]
            assert frame_status == GoalStatus.STATUS_SUCCEEDED, (frame, frame_result.status.reason)
            moved, _ = grasp_msgs_to_core(list(frame_result.grasps))
            assert moved.frame_id == "world"  # planned in the object's frame: the same grasp as from fr3_link0
            np.testing.assert_allclose(moved.palm_position_m, transferred.palm_position_m, atol=0.005)
        later = from_frames["tracker_later"][1].status
        assert later.code == Status.INVALID_GOAL and "not at 105.000 s" in later.reason, later.reason
        broken = from_frames["broken"][1].status
        assert broken.code == Status.INVALID_GOAL and "no transform names frame 'broken'" in broken.reason, broken.reason
        assert "skipped the transform 'world' -> 'broken': pose quaternion is zero" in server.output()
        assert all(s.code == Status.INVALID_GOAL for s in refused), [s.reason for s in refused]
        assert "frame 'camera': no transform from 'camera' to 'world'" in refused[0].reason, refused[0].reason
        assert "'mocap'" in refused[0].reason.split("known frames:")[1] and "NaN" in refused[1].reason
        assert "needs a human demonstration" in refused[2].reason
    assert server.process.returncode == 0, server.output()
