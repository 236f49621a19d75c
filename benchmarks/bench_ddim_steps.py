"""Diffusion sampler quality against DDIM steps: the public sampler's 1000 steps vs our 50 (and others).

For each object (observed as the data engine observes it: a noisy back-projected cloud), the shipped BPS diffusion
sampler draws grasps from the same initial noise with each number of DDIM steps; the first `--grasps` of them
(unranked: evaluator none) are executed `--perturbations` times each with the paper's labelling protocol in the
floating-hand world. Printed per setting: mean y_PGS (the success rate of a random sampled grasp), mean y_coll, the
sampling time relative to 50 steps, and how far the samples are from the 1000-step samples (palm position, mm).

    python benchmarks/bench_ddim_steps.py [--objects procedural:val] [--limit 12] [--steps 10,50,200,1000] \\
        [--out ddim_steps.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from getagrip_ros.cli.generate import resolve_objects
from getagrip_ros.data.evaluate import EvaluationConfig, Method, evaluate_methods
from getagrip_ros.data.generate import CloudConfig, object_seed, observe_object
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.sim.scene import SceneConfig
from getagrip_ros.sim.world import SimWorld


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", default="procedural:val")
    parser.add_argument("--limit", type=int, default=12)
    parser.add_argument("--steps", default="10,50,200,1000")
    parser.add_argument("--grasps", type=int, default=10, help="sampled grasps executed per object and setting")
    parser.add_argument("--perturbations", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    steps = [int(s) for s in args.steps.split(",")]
    objects = []
    for spec in resolve_objects(args.objects)[: args.limit]:
        try:
            objects.append(prepare_object(object_by_name(spec) if isinstance(spec, str) else spec))
        except ObjectRejected as err:
            print(f"{spec}: skipped ({err})")
    evaluation = EvaluationConfig(grasps_per_object=args.grasps, refinement_iterations=0,
                                  label=dataclasses.replace(EvaluationConfig().label, num_perturbations=args.perturbations))

    def cloud(world: SimWorld) -> np.ndarray:
        return observe_object(world, CloudConfig(), np.random.default_rng(object_seed(world.object.name, 0)))

    rows: dict[int, dict] = {}
    samples: dict[int, list[np.ndarray]] = {}
    for n in steps:
        base = GraspPlannerConfig(num_samples=args.grasps, apply_cable_filter=False)  # the shipped sampler
        planner = GraspPlanner(dataclasses.replace(base, diffusion=dataclasses.replace(base.diffusion, num_steps=n)))
        start = time.monotonic()
        results = evaluate_methods(objects, planner, [Method("diffusion", "none")], cloud, evaluation)
        seconds = time.monotonic() - start
        y_pgs = [np.mean(r.grasp_success) if r.grasp_success else 0.0 for r in results]
        rows[n] = {"steps": n, "mean_y_pgs": float(np.mean(y_pgs)), "objects": len(results), "seconds": seconds,
                   "per_object": {r.object_name: float(v) for r, v in zip(results, y_pgs)}}
        # the samples themselves, from the same noise: where the palms land
        palms = []
        for obj in objects:
            with SimWorld(SceneConfig(robot="floating_hand"), obj, evaluation.placement) as world:
                points = cloud(world)
            plan = planner.plan(PlanRequest(points_m=points, frame_id="world", num_grasps=args.grasps, sampler="diffusion",
                                            evaluator="none", seed=object_seed(obj.name, 0)))
            palms.append(plan.planned.grasps.palm_position_m.numpy() if plan.success else np.zeros((0, 3)))
        samples[n] = palms
        print(f"{n:5d} DDIM steps: mean y_PGS {rows[n]['mean_y_pgs']:.3f} over {len(results)} objects "
              f"({seconds:.0f} s with the labelling)", flush=True)
    reference = max(steps)
    for n in steps:
        gaps = [np.linalg.norm(a - b, axis=1).mean() for a, b in zip(samples[n], samples[reference]) if len(a) == len(b) > 0]
        rows[n]["palm_gap_to_%d_steps_mm" % reference] = float(1000 * np.mean(gaps)) if gaps else None
        print(f"{n:5d} steps: palms {rows[n]['palm_gap_to_%d_steps_mm' % reference]:.1f} mm from the {reference}-step "
              f"samples of the same noise (mean)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"grasps_per_object": args.grasps, "perturbations": args.perturbations,
                                        "objects": [o.name for o in objects], "settings": list(rows.values())}, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
