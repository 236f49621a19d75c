"""`make demo`: the whole simulated grasp task through the ROS 2 stack, recorded as a trial bag.

1. `getagrip bringup --profile sim` starts every node in its own process, as `ros2 launch getagrip_ros
   sim.launch.py` does (robot, train_nerf, extract_object, plan_grasp, grasp_task); the robot node owns one
   MuJoCo world: FR3 + Allegro + wrist camera and one catalog object on the table;
2. a `grasp_object` goal runs the task: the world is reset, the arm carries the camera along the capture spirals, the depth
   images are fused into the object (or a NeRF is trained: --nerf), plan_grasp samples and ranks grasps,
   plan_motion plans the approach and the lift (OMPL), execute_grasp runs hand shaping -> approach ->
   close -> lift with the safety checks, and the physics judges the lift;
3. the trial bag (mcap) is read back and drawn as a PNG report (the hand rendered on the perceived object), and
   re-rendered as an MP4 video of the trial beside the bag (--no-video skips it).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from tqdm import tqdm

from getagrip_ros.models.shipped import default_method

NO_MODELS = ("trained grasp models: the shipped checkpoints are missing from this install, so grasps here are "
             "geometric and unranked")


def bringup_command(args: argparse.Namespace, out: Path, sampler: str, evaluator: str) -> list[str]:
    """The bring-up (a process per node) with the CPU-friendly demo profile (ZED 2i HD720 / 4 images)."""
    params = {"grasp_task:task.num_images": args.num_images,
              "grasp_task:task.num_grasps": args.num_grasps, "plan_grasp:num_samples": args.num_samples,
              "robot:sim.camera_width_px": 320, "robot:sim.camera_height_px": 180,
              "robot:sim.camera_fy_px": 133.25, "robot:sim.real_time_factor": args.real_time_factor}
    command = [sys.executable, "-m", "getagrip_ros.cli.getagrip", "bringup", "--profile", "sim",
               "--processes", args.processes,
               "--arg", f"object={args.object}", "--arg", f"trials_dir={out / 'trials'}", "--arg", f"work_dir={out / 'work'}",
               "--arg", f"sampler={sampler}", "--arg", f"evaluator={evaluator}"]
    for key, value in params.items():
        command += ["--param", f"{key}={value}"]
    return command


def _import_drawing(video: bool) -> None:
    """Import what draws the report and films the trial (a few seconds of a single core) while this process only waits
    for the goal's result."""
    import matplotlib.pyplot  # noqa: F401
    import mujoco  # noqa: F401

    import getagrip_ros.trials.report  # noqa: F401
    import getagrip_ros.viz.grasp_image  # noqa: F401

    if video:
        import av  # noqa: F401
        import trimesh  # noqa: F401

        import getagrip_ros.objects.catalog  # noqa: F401
        import getagrip_ros.trials.video  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/demo"), help="trial bags and the report go here")
    parser.add_argument("--object", default="tabletop20/cube", help="catalog object name (tabletop-20: tabletop20/...)")
    parser.add_argument("--nerf", action="store_true", help="perceive with a NeRF (nerfacto on the CPU: minutes)")
    parser.add_argument("--num-images", type=int, default=100, help="capture poses planned on the spirals")
    parser.add_argument("--num-grasps", type=int, default=20, help="ranked grasps handed to motion planning")
    parser.add_argument("--num-samples", type=int, default=1024, help="grasps sampled before ranking")
    parser.add_argument("--real-time-factor", type=float, default=1.0, help="arm motions at this multiple of real time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-video", dest="video", action="store_false",
                        help="skip the trial's video (an MP4 re-rendered from the bag, beside it)")
    parser.add_argument("--processes", choices=("per-node", "one"), default="per-node",
                        help="per-node: each node in its own process (as ros2 launch); one: all in one process")
    args = parser.parse_args(argv)

    import rclpy
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient

    from getagrip_interfaces.action import GraspObject
    from getagrip_ros.ros.client import call_action
    from getagrip_ros.ros.processes import NodeProcess, isolated_ros_environment
    from getagrip_ros.task.grasp_task import trial_name
    from getagrip_ros.trials.bag import read_bag
    from getagrip_ros.trials.report import write_report

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    sampler, evaluator = default_method()
    env = isolated_ros_environment()
    import os

    os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID", "ROS_LOG_DIR")})
    print(f"[demo] {args.object} on the table at x = 0.65 m; {sampler} grasps ranked by the {evaluator} evaluator; "
          f"{'NeRF' if args.nerf else 'depth'} perception; ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}, loopback only")
    start = time.monotonic()
    with NodeProcess("bringup", env=env, command=bringup_command(args, out, sampler, evaluator),
                     log_path=out / "bringup.log") as stack:
        if not stack.wait_for_output("grasp_task ready", 300):
            print(f"[demo] the stack did not start:\n{stack.output()[-3000:]}", file=sys.stderr)
            return 1
        print(f"[demo] stack up in {time.monotonic() - start:.0f} s (log: {out / 'bringup.log'})")
        rclpy.init()
        node = rclpy.create_node("getagrip_demo")
        client = ActionClient(node, GraspObject, "grasp_object")
        goal = GraspObject.Goal(perception="nerf" if args.nerf else "depth", seed=args.seed, trial_name=trial_name("demo"))
        goal.object_position.header.frame_id = "world"
        goal.object_position.point.x = 0.65
        bar = tqdm(total=100, desc="[demo] grasp_object", unit="%", disable=None, bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix}")
        last = [""]

        def on_feedback(fb) -> None:
            if fb.stage != last[0]:
                last[0] = fb.stage
                bar.write(f"[demo] {time.monotonic() - start:5.0f} s  stage {fb.stage}")
            bar.n = int(100 * fb.progress)
            bar.set_postfix_str(f"{fb.stage}: {fb.detail[:60]}")

        threading.Thread(target=_import_drawing, args=(args.video,), daemon=True).start()  # while the stack works
        try:
            status, result = call_action(node, client, goal, timeout_s=3600, feedback=on_feedback)
        finally:
            bar.close()
            client.destroy()
            node.destroy_node()
            rclpy.try_shutdown()
    verdict = "LIFTED the object" if result.success else f"did not lift it ({result.status.reason})"
    print(f"[demo] {verdict}; {'; '.join(f'{t.stage} {t.duration_s:.1f} s' for t in result.timings)}")
    if result.scored:
        print(f"[demo] independent scorer (from the recorded trace): {'lifted' if result.scored_success else 'not lifted'}"
              f" - {'agrees' if result.scorer_agrees else 'DISAGREES'} with the executor")
    if not result.trial_bag_path:
        return 1
    bag = read_bag(result.trial_bag_path)
    trial_s = time.monotonic() - start
    report = write_report(bag, out / "report.png")
    report_s = time.monotonic() - start - trial_s
    print(f"[demo] trial bag {result.trial_bag_path} ({len(bag.messages)} messages on {len({m.topic for m in bag.messages})} "
          f"topics); report {report}")
    if args.video:
        from getagrip_ros.trials.video import write_trial_video

        video = write_trial_video(result.trial_bag_path, bag=bag)
        print(f"[demo] video {video.path} ({video.num_frames} frames, {video.duration_s:.0f} s) and its frames "
              f"{video.sheet_path}")
    total_s = time.monotonic() - start
    drawn_s = total_s - trial_s
    print(f"[demo] total {total_s:.0f} s: the trial {trial_s:.0f} s, then the report {report_s:.1f} s"
          + (f" and the video {drawn_s - report_s:.1f} s" if args.video else "")
          + f" ({100 * drawn_s / total_s:.0f}% of the total)")
    if evaluator == "none":
        print(f"[demo] note: {NO_MODELS}")
    return 0 if status in (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_ABORTED) else 1


if __name__ == "__main__":
    sys.exit(main())
