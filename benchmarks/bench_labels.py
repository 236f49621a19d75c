"""Grasp-labelling throughput: labelled trials per second on one core (torch and MuJoCo single-threaded).

Heuristic pinch grasps (fingertips backed off 1.5 cm) on one catalog object resting at x, y = 0.65, 0 m,
each labelled with the paper's protocol (5 perturbed trials: teleport -> close -> lift 20 cm, 2.2 s
simulated per trial, less when a lift leaves the object on the table) in the data engine's world.
Prints the rate, the simulated-to-wall time ratio, the mean labels and the most
common trial outcomes.
Run: python benchmarks/bench_labels.py [--object tabletop20/cube] [--grasps 20]
"""

from __future__ import annotations

import argparse
import collections
import re
import time

import numpy as np
import torch
import trimesh

from getagrip_ros.data.generate import GenerationConfig
from getagrip_ros.data.labels import LabelConfig, label_grasps
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.heuristic_sampler import HeuristicSamplerConfig, sample_heuristic_grasps
from getagrip_ros.robot.allegro import AllegroHand, move_fingertips
from getagrip_ros.sim.world import ObjectPlacement, SimWorld

PREGRASP_GAP_M = 0.015


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--object", default="tabletop20/cube")
    parser.add_argument("--grasps", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)

    obj = prepare_object(object_by_name(args.object))
    placement = ObjectPlacement(xy_m=(0.65, 0.0))
    points_world_m = trimesh.sample.sample_surface(obj.mesh, 2000, seed=0)[0] + np.array([*placement.xy_m, 0.0])
    hand = AllegroHand()
    sampler = HeuristicSamplerConfig(min_elevation_deg=60.0)
    grasps = sample_heuristic_grasps(points_world_m, 4 * args.grasps, hand, "world", sampler, torch.Generator().manual_seed(0))
    grasps = grasps[: args.grasps]
    # the sampler puts the fingertip pads on the surface; labelled grasps start 1.5 cm off it (as the paper's)
    directions_palm = grasps.fingertip_directions @ grasps.palm_rotation
    q_rad = move_fingertips(hand, grasps.joint_angles_rad, directions_palm, -PREGRASP_GAP_M).joint_angles_rad
    grasps = Grasp(grasps.palm_position_m, grasps.palm_rotation, q_rad, grasps.fingertip_directions, "world")
    config = LabelConfig()
    simulated_s = sum((config.motion.close_s, config.motion.hold_closed_s, config.motion.lift_s, config.motion.hold_lifted_s))
    with SimWorld(GenerationConfig().scene, obj, placement) as world:  # the data engine's world (4 ms steps)
        start = time.perf_counter()
        labels = label_grasps(world, grasps, hand, config, torch.Generator().manual_seed(0))
        wall_s = time.perf_counter() - start
    n_trials = len(grasps) * config.num_perturbations
    outcomes = collections.Counter(re.sub(r"[\d.]+", "N", t.reason) for label in labels for t in label.trials)
    print(f"{args.object}: {len(grasps)} grasps x {config.num_perturbations} trials in {wall_s:.1f} s on 1 core")
    print(f"{n_trials / wall_s:.2f} labelled trials/s per core; {n_trials * simulated_s / wall_s:.1f} simulated s per wall s")
    print("mean labels: " + ", ".join(f"{y} {np.mean([getattr(label, y) for label in labels]):.2f}"
                                      for y in ("y_coll", "y_pick", "y_pgs")))
    for reason, count in outcomes.most_common(6):
        print(f"  {count:3d} x {reason}")


if __name__ == "__main__":
    main()
