"""Does the sim evaluator pick grasps that hold as firmly as the executor asks? Rankings of perceived graspd grasps.

For every object: observe it as the stack's depth backend does (noisy views along the capture spirals, fused,
cleaned and meshed), plan 32 graspd grasps on that mesh (``graspd@mesh + none``: the physics score's order),
then execute every grasp 5 times with the label noise twice:

- ``truth``: on the true object (the labelling protocol);
- ``sim``: on the sim evaluator's model of the perceived mesh (its own seed), as the planner would score them.

Every trial keeps its pre-grasp collision, pick, object rise and slip, so any ranking can be recomputed from the
JSON. A pick counts under two tolerances: the labels' (the object may move up to 10 cm in the hand) and the
executor's (the object rises at least ``--min-rise-cm`` of the 20 cm lift, 18 like ``object_lift_check``). The
report gives, per ranking of the sim trials, the mean truth success of the top 1 and top 5 under both tolerances.

    python benchmarks/bench_sim_evaluator.py --objects procedural/box_0007,pybullet/134 --out part1.json
    python benchmarks/bench_sim_evaluator.py --merge part1.json part2.json --out sim_evaluator.json

``docs/graspd/sim_evaluator_tolerance.json``: the 17 validation objects of ``sim_ranking_validation.json`` (two
processes of one thread each, 9 and 8 objects, merged), 2026-12-03.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from getagrip_ros.cli.generate import resolve_objects
from getagrip_ros.data.evaluate import observe_by_depth_fusion
from getagrip_ros.data.generate import object_seed
from getagrip_ros.data.labels import GraspLabel, LabelConfig, label_grasps
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.object_input import object_from_mesh
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.planning.simulation_evaluator import SimulationEvaluatorConfig, SimulationGraspEvaluator
from getagrip_ros.sim.scene import SceneConfig
from getagrip_ros.sim.world import ObjectPlacement, SimWorld

TRIAL_FIELDS = ("y_coll", "y_pick", "lift_m", "slip_m")


def trials_of(labels: list[GraspLabel]) -> dict[str, list[list[float]]]:
    """{field: [grasp][trial]} of the labels' trials."""
    return {"y_coll": [[t.y_coll for t in g.trials] for g in labels],
            "y_pick": [[t.y_pick for t in g.trials] for g in labels],
            "lift_m": [[round(t.object_lift_m, 4) for t in g.trials] for g in labels],
            "slip_m": [[round(t.relative_motion_m, 4) for t in g.trials] for g in labels]}


def success(trials: dict[str, list[list[float]]], min_rise_m: float | None) -> np.ndarray:
    """Per grasp: the mean over its trials of y_coll * y_pick, and with min_rise_m also object rise >= min_rise_m."""
    ok = np.asarray(trials["y_coll"]) * np.asarray(trials["y_pick"])
    if min_rise_m is not None:
        ok = ok * (np.asarray(trials["lift_m"]) >= min_rise_m)
    return ok.mean(axis=1)


def run_object(spec, planner: GraspPlanner, evaluator: SimulationGraspEvaluator, work: Path,
               num_grasps: int, trials: int) -> dict:
    obj = prepare_object(object_by_name(spec) if isinstance(spec, str) else spec)
    seed = object_seed(obj.name, 0)
    with SimWorld(SceneConfig(robot="floating_hand"), obj, ObjectPlacement()) as world:
        start = time.perf_counter()
        seen = observe_by_depth_fusion(world, work)
        perceive_s = time.perf_counter() - start
        start = time.perf_counter()
        plan = planner.plan(PlanRequest(points_m=seen.points_m, mesh_path=seen.mesh_path, frame_id="world",
                                        num_grasps=num_grasps, sampler="graspd", evaluator="none", seed=seed))
        plan_s = time.perf_counter() - start
        if not plan.success:
            return {"object": obj.name, "plan_status": plan.status.name, "plan_reason": plan.reason}
        grasps = plan.planned.grasps
        start = time.perf_counter()
        truth = label_grasps(world, grasps, planner.hand, LabelConfig(num_perturbations=trials),
                             torch.Generator().manual_seed(seed))
        truth_s = time.perf_counter() - start
    start = time.perf_counter()
    modelled = object_from_mesh(seen.mesh_path, "world", seen.points_m, planner.config.mesh_surface_points, seed)
    sim = evaluator.labeller(modelled)(grasps)
    sim_s = time.perf_counter() - start
    return {"object": obj.name, "plan_status": plan.status.name, "grasps": len(grasps),
            "truth": trials_of(truth), "sim": trials_of(sim),
            "seconds": {"perceive": perceive_s, "plan": plan_s, "truth": truth_s, "sim_model_and_trials": sim_s}}


def rankings(row: dict, min_rise_m: float) -> dict[str, np.ndarray]:
    """Grasp orders (best first, ties in the physics score's order) by the sim trials."""
    lenient, strict = success(row["sim"], None), success(row["sim"], min_rise_m)
    picked = np.asarray(row["sim"]["y_pick"]) > 0
    mean_slip = np.where(picked.any(axis=1), (np.asarray(row["sim"]["slip_m"]) * picked).sum(axis=1)
                         / np.maximum(picked.sum(axis=1), 1), 1.0)  # over the picks; none: last
    order = np.arange(len(lenient))
    return {"physics score": order,
            "sim, labels' tolerance (today)": np.lexsort((order, -lenient)),
            "sim, executor's tolerance": np.lexsort((order, -strict)),
            "sim, executor's then labels'": np.lexsort((order, -lenient, -strict)),
            "sim, labels' then least slip": np.lexsort((order, mean_slip, -lenient))}


def report(rows: list[dict], min_rise_m: float, top: int) -> dict:
    done = [r for r in rows if "truth" in r]
    table: dict[str, dict[str, float]] = {}
    for r in done:
        truth = {"labels'": success(r["truth"], None), "executor's": success(r["truth"], min_rise_m)}
        ranked = rankings(r, min_rise_m)
        ranked["best (oracle, executor's)"] = np.argsort(-truth["executor's"], kind="stable")
        for name, order in ranked.items():
            cell = table.setdefault(name, {})
            for tol, values in truth.items():
                for k in (1, top):
                    key = f"top {k}, {tol}"
                    cell.setdefault(key, []).append(float(values[order[:k]].sum() / k))
    summary = {name: {key: float(np.mean(v)) for key, v in cells.items()} for name, cells in table.items()}
    keys = list(next(iter(summary.values()))) if summary else []
    print(f"{len(done)} objects ({len(rows) - len(done)} plans failed); truth success, mean over objects; "
          f"executor's tolerance: object rise >= {min_rise_m * 100:.0f} cm")
    print(f"{'ranking':34s}" + "".join(f"{k:>22s}" for k in keys))
    for name, cells in summary.items():
        print(f"{name:34s}" + "".join(f"{100 * cells[k]:21.1f}%" for k in keys))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", default="tabletop-20", help="sets or catalog names, comma-separated")
    parser.add_argument("--grasps", type=int, default=32)
    parser.add_argument("--trials", type=int, default=5, help="executions per grasp, truth and sim")
    parser.add_argument("--min-rise-cm", type=float, default=18.0, help="the executor's tolerance")
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--merge", nargs="+", type=Path, help="join the JSON files of earlier runs instead of running")
    args = parser.parse_args()
    min_rise_m = args.min_rise_cm / 100
    if args.merge:
        rows = [row for path in args.merge for row in json.loads(path.read_text())["objects"]]
    else:
        planner = GraspPlanner(GraspPlannerConfig())
        # the labels' criterion in the trials; the executor's is applied to their object rise here
        evaluator = SimulationGraspEvaluator(SimulationEvaluatorConfig(num_trials=args.trials, min_rise_fraction=0.0))
        work = Path(tempfile.mkdtemp(prefix="bench_sim_evaluator_"))
        rows = []
        for spec in resolve_objects(args.objects):
            name = spec if isinstance(spec, str) else spec.name
            try:
                rows.append(run_object(spec, planner, evaluator, work, args.grasps, args.trials))
            except ObjectRejected as exc:
                print(f"  skipped {name}: {exc}", flush=True)
                continue
            seconds = rows[-1].get("seconds", {})
            print(f"  {name}: " + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()), flush=True)
    summary = report(rows, min_rise_m, args.top)
    if args.out:
        args.out.write_text(json.dumps({"min_rise_m": min_rise_m, "summary": summary, "objects": rows}, indent=None))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
