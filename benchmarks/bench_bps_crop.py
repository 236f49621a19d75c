"""The public code's 3000-point crop before the BPS, measured on our clouds (`GraspPlannerConfig.bps_max_points`).

The public code measures an object's BPS from the first 3000 points of its cleaned NeRF cloud (random order); ours
uses every point of the cleaned cloud. For each object, perceived as the stack's depth backend sees it (noisy views
along the capture spirals, fused and cleaned), this prints the cloud's size, how far the BPS moves (per basis point,
mm) and what that does to the shipped BPS evaluator: its predicted y_PGS for the same fixed-set grasps, the rank
correlation and the overlap of the top 5, all points vs the crop.

    python benchmarks/bench_bps_crop.py [--objects tabletop-20] [--limit N] [--grasps 200] [--out crop.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from getagrip_ros.cli.generate import resolve_objects
from getagrip_ros.data.evaluate import EvaluationConfig, observe_by_depth_fusion
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.object_input import bps_points, object_from_points
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.sim.scene import SceneConfig
from getagrip_ros.sim.world import SimWorld

PUBLIC_CROP = 3000


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def predictions(planner: GraspPlanner, points: np.ndarray, grasps: int) -> tuple[np.ndarray, np.ndarray]:
    """(vectors sorted into a fixed order, their predicted y_PGS): the fixed set's first draw, ranked, unrefined."""
    result = planner.plan(PlanRequest(points_m=points, frame_id="world", num_grasps=grasps, sampler="fixed",
                                      evaluator="bps", refinement_iterations=0, seed=0))
    if not result.success:
        raise RuntimeError(result.reason)
    vectors, y = result.planned.grasps.to_numpy_vector(), result.planned.y_pgs.numpy()
    order = np.lexsort(vectors.T[::-1])
    return vectors[order], y[order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", default="tabletop-20")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--grasps", type=int, default=200, help="fixed-set grasps scored per object")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    base = GraspPlannerConfig(num_samples=args.grasps, apply_cable_filter=False)
    full, crop = GraspPlanner(base), GraspPlanner(dataclasses.replace(base, bps_max_points=PUBLIC_CROP))
    names = resolve_objects(args.objects)[: args.limit]
    rows = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for spec in names:
            try:
                obj = prepare_object(object_by_name(spec) if isinstance(spec, str) else spec)
            except ObjectRejected as err:
                print(f"{spec}: skipped ({err})")
                continue
            name = obj.name
            with SimWorld(SceneConfig(robot="floating_hand"), obj, EvaluationConfig().placement) as world:
                points = observe_by_depth_fusion(world, Path(tmp)).points_m
            bps_all = object_from_points(points, "world").bps_m
            bps_crop = object_from_points(points, "world", PUBLIC_CROP).bps_m
            moved_mm = 1000 * np.abs(np.asarray(bps_crop) - np.asarray(bps_all))
            v_all, y_all = predictions(full, points, args.grasps)
            v_crop, y_crop = predictions(crop, points, args.grasps)
            if not np.array_equal(v_all, v_crop):
                raise RuntimeError(f"{name}: the two runs scored different grasps")
            top_all, top_crop = set(np.argsort(-y_all)[:5]), set(np.argsort(-y_crop)[:5])
            row = {"object": name, "points": len(points), "bps_points": len(bps_points(points, PUBLIC_CROP)),
                   "bps_moved_mean_mm": float(moved_mm.mean()), "bps_moved_max_mm": float(moved_mm.max()),
                   "y_pgs_mean_abs_change": float(np.abs(y_crop - y_all).mean()),
                   "y_pgs_max_abs_change": float(np.abs(y_crop - y_all).max()),
                   "rank_correlation": spearman(y_all, y_crop), "top5_overlap": len(top_all & top_crop)}
            rows.append(row)
            print(f"{name:<28} {row['points']:6d} points -> BPS moves {row['bps_moved_mean_mm']:.2f} mm mean, "
                  f"{row['bps_moved_max_mm']:.1f} max; y_PGS |change| {row['y_pgs_mean_abs_change']:.4f} mean, "
                  f"{row['y_pgs_max_abs_change']:.3f} max; rank corr {row['rank_correlation']:.3f}; "
                  f"top 5 shared {row['top5_overlap']}/5", flush=True)
    summary = {key: float(np.median([r[key] for r in rows])) for key in
               ("points", "bps_moved_mean_mm", "bps_moved_max_mm", "y_pgs_mean_abs_change", "y_pgs_max_abs_change",
                "rank_correlation", "top5_overlap")}
    summary["objects"] = len(rows)
    summary["objects_under_crop"] = sum(r["points"] <= PUBLIC_CROP for r in rows)
    print(f"medians over {len(rows)} objects: {json.dumps(summary)}  ({time.monotonic() - start:.0f} s)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"crop": PUBLIC_CROP, "grasps_per_object": args.grasps, "summary": summary,
                                        "objects": rows}, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
