"""`make demo`: the most complete simulated grasp this build can run, end to end.

1. a tabletop object stands on the table of a MuJoCo world (floating Allegro hand);
2. the FR3's wrist camera views it along the capture spirals (reachable poses only); the depth images are
   fused and the object is cut out of the box above the table (perception's depth backend, no masks);
3. the cloud goes over ROS 2 to the `plan_grasp` action server (a real node in its own process);
4. every returned grasp is tried in the physics: approach -> close -> lift 20 cm, judged by the
   paper's simulation criterion; results, physics settings and pictures are written to --out.
The stages that do not exist yet are listed at the end, so nobody mistakes this for the full task.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from getagrip_ros.models.shipped import default_method

MISSING_STAGES = (
    "perception from a NeRF in the demo: the stage exists (getagrip-perception, train_nerf / extract_object "
    "nodes), the demo uses the faster depth-fusion backend on 2 CPU cores",
    "arm motion planning and execution in the demo: they exist (plan_motion / execute_grasp: OMPL or cuRobo, the "
    "safety layer, franky, the Allegro topic driver; a planned grasp lifts the cube in the simulated arm world), "
    "but the demo still tries grasps with a floating hand",
    "the end-to-end grasp task with trial bags and scoring",
)
NO_MODELS = ("trained grasp models: the shipped checkpoints are missing from this install, so grasps here are "
             "geometric and unranked")


def capture_object_cloud(obj, xy_m: tuple[float, float], num_images: int) -> tuple[np.ndarray, str]:
    """(N, 3) cleaned world points of the object: spiral views from the FR3's wrist camera, fused depth."""
    from getagrip_ros.perception.capture_trajectory import SpiralConfig
    from getagrip_ros.perception.extract import extract_from_depth
    from getagrip_ros.sim.capture_views import render_capture_views
    from getagrip_ros.sim.scene import CameraConfig

    views = render_capture_views(obj, xy_m, CameraConfig(320, 180, 133.25), SpiralConfig(num_images=num_images))
    rep = extract_from_depth(views.depth_m, [views.K] * len(views.depth_m), views.T_world_camera, views.object_position_m)
    return rep.points_world_m, (f"{len(views.rgb)} of {num_images} spiral views reachable -> depth fusion -> "
                                f"{len(rep.points_world_m)} cleaned object points (no masks)")


def plan_over_ros(points: np.ndarray, num_grasps: int, num_samples: int, seed: int):
    """Start the plan_grasp node, send the cloud, show feedback; returns the PlanGrasp result."""
    from getagrip_ros.ros.processes import NodeProcess, isolated_ros_environment

    env = isolated_ros_environment()
    os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID", "ROS_LOG_DIR")})
    import rclpy
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient

    from getagrip_interfaces.action import PlanGrasp
    from getagrip_ros.ros.client import call_action
    from getagrip_ros.ros.conversions import numpy_to_point_cloud2

    print(f"[demo] starting the plan_grasp node (ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}, loopback only)")
    with NodeProcess("getagrip_ros.ros.plan_grasp_node", ["--ros-args", "-p", f"num_samples:={num_samples}"], env=env) as server:
        rclpy.init()
        node = rclpy.create_node("getagrip_demo")
        client = ActionClient(node, PlanGrasp, "plan_grasp")
        sampler, evaluator = default_method()
        goal = PlanGrasp.Goal(object_source=PlanGrasp.Goal.SOURCE_POINT_CLOUD, num_grasps=num_grasps,
                              sampler=sampler, evaluator=evaluator, seed=seed)
        goal.point_cloud = numpy_to_point_cloud2(points, "world")
        bar = tqdm(total=100, desc="[demo] plan_grasp", unit="%", bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix}")

        def on_feedback(fb) -> None:
            bar.n = int(100 * fb.progress)
            bar.set_postfix_str(fb.stage)

        try:
            status, result = call_action(node, client, goal, timeout_s=300, feedback=on_feedback)
        finally:
            bar.close()
            node.destroy_node()
            rclpy.try_shutdown()
        if status != GoalStatus.STATUS_SUCCEEDED:
            raise RuntimeError(f"plan_grasp failed: {result.status.reason}\n{server.output()[-2000:]}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/demo"), help="where results and pictures go")
    parser.add_argument("--object", default="tabletop20/green_tea", help="catalog object name")
    parser.add_argument("--num-grasps", type=int, default=10)
    parser.add_argument("--num-samples", type=int, default=1024, help="grasps the planner samples before filtering")
    parser.add_argument("--num-images", type=int, default=100, help="capture poses planned on the spirals")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from PIL import Image

    from getagrip_ros.grasp.closing import closing_targets
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import prepare_object
    from getagrip_ros.robot.allegro import AllegroHand
    from getagrip_ros.ros.conversions import grasp_msgs_to_core
    from getagrip_ros.perception.capture_trajectory import look_at
    from getagrip_ros.sim.grasp_trial import run_grasp_trial
    from getagrip_ros.sim.scene import CameraConfig, SceneConfig
    from getagrip_ros.sim.world import ObjectPlacement, SimWorld
    from getagrip_ros.viz.grasp_image import draw_grasps

    obj = prepare_object(object_by_name(args.object))
    placement = ObjectPlacement(xy_m=(0.65, 0.0))
    size = " x ".join(f"{100 * e:.1f}" for e in obj.extents_m)
    print(f"[demo] object {obj.name} ({size} cm, tags {', '.join(obj.tags)}) on the table at x=0.65 m, MuJoCo floating hand")
    args.out.mkdir(parents=True, exist_ok=True)
    points, how = capture_object_cloud(obj, placement.xy_m, args.num_images)
    print(f"[demo] FR3 wrist camera: {how}")
    with SimWorld(SceneConfig(robot="floating_hand", camera=CameraConfig(320, 240, 250.0)), obj, placement) as world:
        result = plan_over_ros(points, args.num_grasps, args.num_samples, args.seed)
        grasps, _ = grasp_msgs_to_core(list(result.grasps))
        print(f"[demo] plan_grasp: {result.status.reason}; "
              + ", ".join(f"{t.stage} {t.duration_s:.2f} s" for t in result.timings))

        hand = AllegroHand()
        targets = closing_targets(hand, grasps)
        trials = []
        print("[demo] trying each grasp in the physics (approach -> close -> lift 20 cm):")
        for i in range(len(grasps)):
            trial = run_grasp_trial(world, grasps.T_frame_palm[i].numpy(), targets.pregrasp.joint_angles_rad[i].numpy(),
                                    targets.closed.joint_angles_rad[i].numpy())
            trials.append(trial)
            print(f"  #{i:2d} {'LIFTED' if trial.success else 'failed'}: {trial.reason}")
            if trial.success and not (args.out / "lifted.png").exists():
                world.set_camera_pose(look_at(np.array([0.95, -0.35, 0.45]), world.object_pose()[:3, 3]))
                Image.fromarray(world.render().rgb).save(args.out / "lifted.png")
        physics = world.physics_settings()

    lifted = sum(t.success for t in trials)
    record = {"object": obj.name, "grasps_37d_world": grasps.to_numpy_vector().tolist(),
              "trials": [t.__dict__ | {"hand_links_touching": list(t.hand_links_touching)} for t in trials],
              "lifted": lifted, "physics": physics}
    (args.out / "trials.json").write_text(json.dumps(record, indent=1, default=float))
    np.save(args.out / "object_points_world.npy", points)
    sampler, evaluator = default_method()
    method = f"{sampler} grasps ranked by the {evaluator} evaluator" if evaluator != "none" else f"{sampler} grasps (unranked)"
    image = draw_grasps(points, grasps, hand, args.out / "grasps.png",
                        title=f"demo: {len(grasps)} {method} on {obj.name}; {lifted} lifted in simulation")
    print(f"[demo] {lifted}/{len(trials)} grasps lifted the object. Wrote {image}, {args.out / 'trials.json'}"
          + (f", {args.out / 'lifted.png'}" if lifted else ""))
    print("[demo] NOT yet in this build (later issues):")
    for stage in MISSING_STAGES + (() if evaluator != "none" else (NO_MODELS,)):
        print(f"  - {stage}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
