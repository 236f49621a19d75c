"""Arm motion planning on the CPU (OMPL RRTConnect + coal): time to the first feasible of 40 ranked grasps.

For each tabletop-20 object (placed at x, y = 0.65, 0 m on the table): 40 grasps from the geometric
(heuristic) sampler on points of the object's surface, kept in the sampler's order (no evaluator) and
through the wrist-camera cable filter, as the grasp planner returns them. From the FR3 ready pose:

- time to the first feasible grasp: one ``MotionPlanner.plan_grasps`` call (pre-grasp hand joints, arm IK,
  collision checks, RRTConnect, shortcutting, time-parameterisation), cold (world compiled in the call)
  and warm (same world again), for a few seeds; target <= 2 s;
- the straight 20 cm lift from the first feasible grasp (``plan_lift``), against the same lift with every IK
  iteration run (no early stop);
- fraction of the 40 solved: every grasp planned (no stop at the first), with the reasons of the others
  counted, and the planning time of the solved ones.

Usage:

    python benchmarks/bench_motion_planning.py [--objects green_tea conditioner yellow_cup] [--style pinch]
                                               [--num-grasps 40] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from dataclasses import replace

import numpy as np
import torch

from getagrip_ros.grasp.closing import closing_targets
from getagrip_ros.grasp.filters import cable_filter_rotation_mask
from getagrip_ros.motion.backend import PalmGoals, PlanOptions, PlanStatus
from getagrip_ros.motion.planner import MotionPlanner
from getagrip_ros.motion.world import ObjectMesh, PlanningWorld, table_box, translation
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.heuristic_sampler import HeuristicSamplerConfig, sample_heuristic_grasps
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.description import FR3_Q_READY_RAD

OBJECT_XY_M = (0.65, 0.0)


def ranked_grasps(points_m: np.ndarray, num_grasps: int, style: str, seed: int):
    """`num_grasps` heuristic grasps that pass the cable filter, in the sampler's order (world frame)."""
    hand = AllegroHand(dtype=torch.float64)
    generator = torch.Generator().manual_seed(seed)
    config = HeuristicSamplerConfig(style=style)
    grasps = sample_heuristic_grasps(points_m, 20 * num_grasps, hand, "world", config, generator,
                                     rotation_ok=cable_filter_rotation_mask)
    if len(grasps) < num_grasps:
        raise RuntimeError(f"the sampler returned {len(grasps)} grasps, need {num_grasps}")
    return grasps[:num_grasps]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", nargs="+", default=["green_tea", "conditioner", "yellow_cup"],
                        help="tabletop-20 object names")
    parser.add_argument("--style", default="pinch", choices=["pinch", "open"], help="heuristic sampler style")
    parser.add_argument("--num-grasps", type=int, default=40)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()

    torch.set_num_threads(1)  # small batched IK: one thread avoids contention on a shared 2-core machine
    q_start = np.array(FR3_Q_READY_RAD)
    planner = MotionPlanner()
    print(f"torch threads {torch.get_num_threads()}; start = FR3 ready pose; object at x, y = {OBJECT_XY_M} m; "
          f"{args.num_grasps} {args.style} grasps per object; per-grasp search limit "
          f"{planner.config.planning_time_limit_s:g} s")
    all_first, all_lift, all_solved, all_total, all_hand_hits = [], [], 0, 0, 0
    for name in args.objects:
        obj = prepare_object(object_by_name(f"tabletop20/{name}"))
        T_world_object = translation((*OBJECT_XY_M, 0.0))
        points = np.asarray(obj.mesh.sample(5000, seed=0)) + T_world_object[:3, 3]
        for seed in args.seeds:
            grasps = ranked_grasps(points, args.num_grasps, args.style, seed)
            world = PlanningWorld((table_box(),), (ObjectMesh(name, obj.mesh.vertices, obj.mesh.faces, T_world_object),))
            times = []
            for _ in range(2):  # cold (world compiled in the call), then warm
                start = time.perf_counter()
                result = planner.plan_grasps(q_start, world, grasps, seed=seed)
                times.append(time.perf_counter() - start)
            all_first.append(times[0])
            chosen = (f"grasp #{result.grasp_index} ({len(result.path_rad)} waypoints, "
                      f"{result.trajectory.duration_s:.1f} s trajectory)") if result.success else result.reason[:80]
            stages = ", ".join(f"{k} {v:.2f}" for k, v in result.timings_s.items())
            print(f"{name:12s} seed {seed}: first feasible in {times[0]:.2f} s cold / {times[1]:.2f} s warm -> {chosen}"
                  f"  [{stages} s]")
            hand_targets = closing_targets(planner.hand, grasps.to(dtype=torch.float64), planner.config.closing)
            if result.success:  # the straight lift from there: IK points stopped once reached, and every iteration run
                lift_ik, lift_times = planner._lift_ik, []
                shipped = lift_ik.config
                for config in (shipped, replace(shipped, stop_tolerance_scale=0.0)):
                    lift_ik.config = config
                    start = time.perf_counter()
                    held_hand_rad = hand_targets.closed.joint_angles_rad[result.grasp_index].numpy()
                    lift = planner.plan_lift(result.q_goal_arm_rad, held_hand_rad, world)
                    lift_times.append(time.perf_counter() - start)
                lift_ik.config = shipped
                all_lift.append(lift_times)
                print(f"{'':12s}         lift {planner.config.stages.lift_m:.2f} m: {lift_times[0]:.2f} s "
                      f"(every IK iteration run: {lift_times[1]:.2f} s) -> {'ok' if lift.success else lift.reason}")
            # every grasp, to count the feasible ones
            goals = PalmGoals(grasps.T_frame_palm.numpy(), hand_targets.pregrasp.joint_angles_rad.numpy())
            start = time.perf_counter()
            plans = planner.backend.plan_to_palm_poses(q_start, goals, PlanOptions(stop_at_first_success=False, seed=seed))
            elapsed = time.perf_counter() - start
            solved = [p for p in plans if p.status == PlanStatus.SUCCESS]
            searched = [p for p in solved if not p.details.get("direct")]
            counts = Counter(p.status.name for p in plans)
            hand_hits = sum(bool(p.details.get("end_effector_in_collision")) for p in plans)
            all_solved += len(solved)
            all_total += len(plans)
            all_hand_hits += hand_hits
            solve_times = [p.planning_time_s for p in solved]
            print(f"{'':12s}         all {len(plans)}: {len(solved)} solved ({len(searched)} needed RRTConnect) in "
                  f"{elapsed:.2f} s; {dict(counts)} ({hand_hits} with the hand or mount itself in collision at the "
                  f"pre-grasp); solved in median "
                  f"{statistics.median(solve_times) if solve_times else float('nan'):.3f} s, max "
                  f"{max(solve_times) if solve_times else float('nan'):.3f} s")
    print(f"time to the first feasible grasp (cold): median {statistics.median(all_first):.2f} s, "
          f"max {max(all_first):.2f} s over {len(all_first)} runs (target <= 2 s)")
    if all_lift:
        print(f"straight lift: median {statistics.median(t[0] for t in all_lift):.2f} s; every IK iteration run: median "
              f"{statistics.median(t[1] for t in all_lift):.2f} s over {len(all_lift)} lifts")
    print(f"fraction of grasps solved: {all_solved}/{all_total} = {all_solved / max(all_total, 1):.1%}; "
          f"{all_hand_hits} had the hand or mount itself in collision at the pre-grasp (no arm motion can help), "
          f"so {all_solved}/{all_total - all_hand_hits} of the others")
    print(f"machine load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
