"""Does the evaluator help? Grasp-planning methods judged in simulation with the paper's protocol.

Every method (sampler x evaluator) plans for each held-out object from its observed cloud (noisy rendered
depth along the capture spirals); the top 5 grasps are each executed 5 times with the label noise in the
floating-hand world; a method's success rate is the mean y_PGS of those executions (missing grasps count
as failures). Samplers and evaluators without a model file are left out; objects that cannot be prepared are
skipped with the reason.

    python benchmarks/bench_evaluator_evidence.py --objects tabletop-20 --bps-evaluator runs/eval/best.pt \\
        --fixed-grasps fixed.npz [--bps-sampler runs/sampler/best.pt] [--geometry-evaluator geometry.pt] \\
        [--samplers fixed,diffusion] [--evaluators none,geometry,bps+geometry] [--out evidence.json]

``--perception depth`` observes the object as the stack's depth backend does (TSDF fusion of the same noisy views,
cleaning, the fused mesh) instead of the data engine's back-projected cloud; a sampler written ``graspd@mesh`` then
plans with that mesh as well (its SDF comes from the mesh).

Objects can be split over processes (``--objects`` takes names) and the parts joined with
``--merge part1.json part2.json --out evidence.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from getagrip_ros.cli.generate import resolve_objects
from getagrip_ros.data.evaluate import (EvaluationConfig, Method, ObjectResult, evaluate_methods, observe_by_depth_fusion,
                                       paired_gains, result_rows, summarize)
from getagrip_ros.data.generate import CloudConfig, object_seed, observe_object
from getagrip_ros.data.labels import LabelConfig
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", default="tabletop-20", help="sets (set or set:split) or catalog names, comma-separated")
    parser.add_argument("--limit", type=int, help="only the first N objects")
    parser.add_argument("--bps-evaluator", default="")
    parser.add_argument("--geometry-evaluator", default="")
    parser.add_argument("--fixed-grasps", default="")
    parser.add_argument("--bps-sampler", default="")
    parser.add_argument("--num-samples", type=int, default=GraspPlannerConfig.num_samples)
    parser.add_argument("--grasps-per-object", type=int, default=5)
    parser.add_argument("--perturbations", type=int, default=5)
    parser.add_argument("--refinement-iterations", type=int, default=EvaluationConfig.refinement_iterations,
                        help="with an evaluator (paper: 50)")
    parser.add_argument("--samplers", default="heuristic,fixed,diffusion",  # graspd too (slow: ~30 s a plan)
                        help="samplers to judge (those without a model file are left out)")
    parser.add_argument("--evaluators", default="none,bps,geometry,bps+geometry",
                        help="evaluators to judge (those without a model file are left out; sim needs none)")
    parser.add_argument("--perception", choices=("cloud", "depth"), default="cloud",
                        help="cloud: the data engine's back-projected cloud; depth: the stack's depth backend (TSDF "
                             "fusion, cleaning and the fused mesh, which samplers written graspd@mesh plan with)")
    parser.add_argument("--work-dir", type=Path, help="with --perception depth: keep each object's mesh here")
    parser.add_argument("--out", type=Path, help="write every result as JSON")
    parser.add_argument("--merge", nargs="+", type=Path, help="join the JSON files of earlier runs instead of running")
    args = parser.parse_args()
    if args.merge:
        rows = [row for path in args.merge for row in json.loads(path.read_text())["results"]]
        results = [ObjectResult(**{**row, "grasp_success": tuple(row["grasp_success"]),
                                   "predicted_y_pgs": tuple(math.nan if v is None else v for v in row["predicted_y_pgs"])})
                   for row in rows]
        _report(results, args.out)
        return

    files = ModelFiles(bps_evaluator=args.bps_evaluator, fixed_grasps=args.fixed_grasps, bps_sampler=args.bps_sampler,
                       geometry_evaluator=args.geometry_evaluator)
    available = {"heuristic": True, "graspd": True, "graspd@mesh": True, "fixed": bool(args.fixed_grasps),
                 "diffusion": bool(args.bps_sampler)}
    samplers = [s for s in args.samplers.split(",") if available.get(s)]
    if any(s.endswith("@mesh") for s in samplers) and args.perception != "depth":
        parser.error("a sampler planning with the mesh (graspd@mesh) needs --perception depth")
    have = {"none": True, "sim": True, "bps": bool(args.bps_evaluator), "geometry": bool(args.geometry_evaluator)}
    have["bps+geometry"] = have["bps"] and have["geometry"]
    evaluators = [e for e in args.evaluators.split(",") if have.get(e)]
    methods = [Method(s.removesuffix("@mesh"), e, s.endswith("@mesh")) for s in samplers for e in evaluators]
    planner = GraspPlanner(GraspPlannerConfig(num_samples=args.num_samples, models=files))
    specs = resolve_objects(args.objects)[: args.limit]
    objects = []
    for spec in specs:
        try:
            objects.append(prepare_object(object_by_name(spec) if isinstance(spec, str) else spec))
        except ObjectRejected as exc:
            print(f"  skipped: {exc}", flush=True)
    config = EvaluationConfig(grasps_per_object=args.grasps_per_object,
                              label=LabelConfig(num_perturbations=args.perturbations),
                              refinement_iterations=args.refinement_iterations)

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="evidence_meshes_"))

    def observe(world):
        if args.perception == "cloud":
            return observe_object(world, CloudConfig(), np.random.default_rng(object_seed(world.object.name, 0)))
        return observe_by_depth_fusion(world, work)

    start = time.perf_counter()
    results = evaluate_methods(objects, planner, methods, observe, config,
                               lambda name, method: print(f"  {name}: {method}", flush=True))
    print(f"\n{len(objects)} objects, {args.grasps_per_object} grasps x {args.perturbations} executions each, "
          f"{time.perf_counter() - start:.0f} s")
    _report(results, args.out)


def _report(results: list[ObjectResult], out: Path | None) -> None:
    print(f"{'method':28s} {'success':>8s} {'objects':>8s} {'plans failed':>13s}")
    for method, row in summarize(results).items():
        print(f"{method:28s} {100 * row['success_rate']:7.1f}% {row['objects']:>8d} {row['plans_failed']:>13d}")
    gains = paired_gains(results)
    for method, row in gains.items():
        print(f"{method:28s} gain over no evaluator {100 * row['gain']:+.1f} points (SE {100 * row['standard_error']:.1f}, "
              f"{row['objects']} objects)")
    if out:
        out.write_text(json.dumps({"methods": summarize(results), "gains": gains, "results": result_rows(results)},
                                  indent=1))
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
