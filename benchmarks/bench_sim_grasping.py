"""Baseline grasp success in simulation: the geometric pinch sampler (no evaluator) on tabletop-20.

For every object: the wrist camera along the capture spirals -> depth fusion -> object cloud -> plan 10
grasps -> try each in the floating-hand world (approach -> close -> lift 20 cm, the paper's criterion). Prints the lift rate
per object and per difficulty tag. This is the number the learned evaluator must beat.
"""

from __future__ import annotations

import collections
import time

from getagrip_ros.demo import capture_object_cloud
from getagrip_ros.objects.catalog import list_objects
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.sim.grasp_trial import run_grasp_trial
from getagrip_ros.sim.scene import CameraConfig, SceneConfig
from getagrip_ros.sim.world import SimWorld

GRASPS_PER_OBJECT = 10
NUM_IMAGES = 100


def main() -> None:
    planner = GraspPlanner(GraspPlannerConfig(num_samples=1024))  # the setting the baseline was measured with
    by_tag: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    start, trials_s, n_trials = time.perf_counter(), 0.0, 0
    for spec in list_objects("tabletop-20"):
        obj = prepare_object(spec)
        with SimWorld(SceneConfig(robot="floating_hand", camera=CameraConfig(320, 240, 250.0)), obj) as world:
            cloud, _ = capture_object_cloud(obj, (0.65, 0.0), NUM_IMAGES)
            result = planner.plan(PlanRequest(points_m=cloud, num_grasps=GRASPS_PER_OBJECT, seed=0))
            lifted = 0
            if result.success:
                g = result.planned
                t = time.perf_counter()
                for i in range(len(g.grasps)):
                    lifted += run_grasp_trial(world, g.grasps.T_frame_palm[i].numpy(), g.pregrasp_joints_rad[i].numpy(),
                                              g.closed_joints_rad[i].numpy()).success
                trials_s += time.perf_counter() - t
                n_trials += len(g.grasps)
        tag = spec.tags[0] if spec.tags else "untagged"
        by_tag[tag][0] += lifted
        by_tag[tag][1] += GRASPS_PER_OBJECT
        print(f"{spec.name:28s} {tag:7s} lifted {lifted}/{GRASPS_PER_OBJECT}" + ("" if result.success else f"  ({result.reason})"))
    total = [sum(v[0] for v in by_tag.values()), sum(v[1] for v in by_tag.values())]
    print("per tag: " + ", ".join(f"{k} {v[0]}/{v[1]} ({100 * v[0] / v[1]:.0f}%)" for k, v in sorted(by_tag.items())))
    print(f"all: {total[0]}/{total[1]} ({100 * total[0] / total[1]:.0f}%); {trials_s / max(n_trials, 1):.2f} s per trial "
          f"(3.2 s simulated); total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
