"""How well do evaluators rank? Every candidate grasp labelled on held-out objects, then each evaluator scored offline.

The simulated evidence (``bench_evaluator_evidence.py``) measures a whole plan; this separates the two things
that limit it. For each object the candidates are made on the object's observed cloud as the planner does
(cable filter included): the fixed set placed on it (``--candidates fixed``), or the graspd sampler's synthesised
grasps (``--candidates graspd``, ``--graspd-grasps`` of them, in its physics-score order). Every candidate is
executed ``--executions`` times with the label noise in the floating-hand world; the labelled pools are cached per
object in ``--pool-dir`` (resumable; one folder per kind of candidate). Then, for each evaluator, without
refinement:

- random-5: mean y_PGS of the pool (what an unranked plan gets on average),
- oracle-5: mean y_PGS of the 5 best-labelled candidates (the most any ranking could get; with 1 execution
  per candidate it is biased up),
- top-5: mean y_PGS of the evaluator's 5 best-predicted candidates,
- AUC: probability that a candidate with y_PGS > 0.5 is predicted above one without, per object with both,
- graspd pools also: physics-5, the first 5 in the synthesis's physics-score order (the planner without an
  evaluator), scored the same way.

Evaluators are compared on the same labelled candidates, so their differences are paired (no new simulation).
They may be BPS or geometry evaluators (the kind is read from the checkpoint); the pools keep each object's
observed cloud in Oy for the latter (pools written before they did are scored by BPS evaluators only).

    python benchmarks/bench_evaluator_ranking.py --objects "$(cat val_objects.txt)" --pool-dir runs/pool \\
        --fixed-grasps fixed.npz --evaluators shipped.pt,geometry.pt [--ensemble] --out ranking.json
    python benchmarks/bench_evaluator_ranking.py --objects "$(cat val_objects.txt)" --pool-dir runs/pool_graspd \
        --candidates graspd --executions 5 --evaluators geometry.pt,runs/geometry_graspd/best.pt --out ranking.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from getagrip_ros.cli.generate import resolve_objects
from getagrip_ros.data.generate import CloudConfig, object_seed, observe_object
from getagrip_ros.data.labels import LabelConfig, label_grasps
from getagrip_ros.grasp.filters import cable_filter_mask
from getagrip_ros.grasp.frames import invert_transform
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.models.bps_evaluator import Y_PGS
from getagrip_ros.models.checkpoints import load_checkpoint
from getagrip_ros.models.geometry_evaluator import HandObjectFeatures
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.object_input import PlanningObject, object_from_points
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest
from getagrip_ros.planning.samplers import FixedSampler, load_grasp_set
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.sim.scene import SceneConfig
from getagrip_ros.sim.world import ObjectPlacement, SimWorld

TOP_K = 5


CandidateFn = Callable[[str, np.ndarray, PlanningObject], Grasp]
"""(object name, its observed cloud (N, 3), the planning object) -> candidate grasps in the world frame."""


def fixed_candidates(grasp_set_Oy, hand: AllegroHand) -> CandidateFn:
    """The fixed set placed on the cloud as the planner does: joints clamped to the limits, cable filter."""
    def candidates(name: str, cloud: np.ndarray, planning: PlanningObject) -> Grasp:
        grasps = FixedSampler(grasp_set_Oy).sample(planning, len(grasp_set_Oy), torch.Generator().manual_seed(0),
                                                   lambda _: None)
        lower, upper = hand.lower_limits_rad.double(), hand.upper_limits_rad.double()
        grasps.joint_angles_rad = torch.maximum(torch.minimum(grasps.joint_angles_rad, upper), lower)
        return grasps[cable_filter_mask(grasps)]
    return candidates


def graspd_candidates(num_grasps: int) -> CandidateFn:
    """The planner's graspd sampler on the cloud (no evaluator: physics-score order, cable filter applied)."""
    planner = GraspPlanner(GraspPlannerConfig(models=ModelFiles(**{f: "" for f in ModelFiles.__dataclass_fields__})))

    def candidates(name: str, cloud: np.ndarray, planning: PlanningObject) -> Grasp:
        result = planner.plan(PlanRequest(points_m=cloud, frame_id="world", num_grasps=num_grasps, sampler="graspd",
                                          evaluator="none", seed=object_seed(name, 0)))
        if not result.success:
            raise ObjectRejected(f"{name}: graspd planning failed: {result.status.name}: {result.reason}")
        return result.planned.grasps
    return candidates


def label_pool(name: str, candidates: CandidateFn, hand: AllegroHand, executions: int) -> dict[str, np.ndarray]:
    """The candidates on one object's observed cloud, each grasp labelled (Oy grasps in the candidates' order, BPS,
    y_PGS), with the cloud and the table height in Oy (metres)."""
    obj = prepare_object(object_by_name(name))
    with SimWorld(SceneConfig(robot="floating_hand"), obj, ObjectPlacement()) as world:
        cloud = observe_object(world, CloudConfig(), np.random.default_rng(object_seed(name, 0)))
        planning = object_from_points(cloud, "world")
        grasps = candidates(name, cloud, planning)
        labels = label_grasps(world, grasps, hand, LabelConfig(num_perturbations=executions),
                              torch.Generator().manual_seed(object_seed(name, 1)))
    T_Oy_world = invert_transform(planning.T_frame_Oy)
    grasps_Oy = grasps.transformed(T_Oy_world, "Oy")
    T = T_Oy_world.numpy()
    return {"grasps_Oy": grasps_Oy.to_numpy_vector().astype(np.float32), "bps_m": planning.bps_m.astype(np.float32),
            "y_PGS": np.array([label.y_pgs for label in labels], np.float32),
            "cloud_Oy_m": (cloud @ T[:3, :3].T + T[:3, 3]).astype(np.float32), "table_y_m": np.float32(T[1, 3])}


def ranking_scores(pools: list[dict[str, np.ndarray]], predict) -> dict[str, float]:
    """top-5 success and mean per-object AUC of predict(pool) -> (n,) scores of the pool's candidates."""
    top, aucs = [], []
    for pool in pools:
        scores = predict(pool)
        top.append(pool["y_PGS"][np.argsort(-scores, kind="stable")[:TOP_K]].mean())
        good = pool["y_PGS"] > 0.5
        if good.any() and (~good).any():
            aucs.append(float((scores[good][:, None] > scores[~good][None]).mean()))
    return {"top5": float(np.mean(top)), "auc": float(np.mean(aucs)), "auc_objects": len(aucs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", required=True, help="sets (set or set:split) or catalog names, comma-separated")
    parser.add_argument("--pool-dir", type=Path, required=True, help="labelled pools, one .npz per object (resumable)")
    parser.add_argument("--candidates", choices=("fixed", "graspd"), default="fixed",
                        help="the fixed set placed on each cloud, or the graspd sampler's grasps")
    parser.add_argument("--fixed-grasps", help="with --candidates fixed: the grasp set")
    parser.add_argument("--graspd-grasps", type=int, default=32, help="with --candidates graspd: grasps per object")
    parser.add_argument("--executions", type=int, default=1, help="labelling trials per candidate")
    parser.add_argument("--evaluators", default="", help="BPS or geometry evaluator checkpoints, comma-separated")
    parser.add_argument("--ensemble", action="store_true", help="also score the mean prediction of all evaluators")
    parser.add_argument("--out", type=Path, help="write the numbers as JSON")
    args = parser.parse_args()

    hand = AllegroHand()
    if args.candidates == "fixed":
        if not args.fixed_grasps:
            parser.error("--candidates fixed needs --fixed-grasps")
        candidates = fixed_candidates(load_grasp_set(args.fixed_grasps), hand)
    else:
        candidates = graspd_candidates(args.graspd_grasps)
    args.pool_dir.mkdir(parents=True, exist_ok=True)
    pools = []
    for spec in resolve_objects(args.objects):
        name = spec if isinstance(spec, str) else spec.name
        path = args.pool_dir / f"{name.replace('/', '__')}.npz"
        if not path.exists():
            try:
                np.savez(path, **label_pool(name, candidates, hand, args.executions))
            except ObjectRejected as exc:
                print(f"  skipped: {exc}", flush=True)
                continue
        with np.load(path) as f:
            pools.append({k: f[k] for k in f.files})
        print(f"  {name}: {len(pools[-1]['y_PGS'])} candidates, {int((pools[-1]['y_PGS'] > 0.5).sum())} with y_PGS > 0.5",
              flush=True)

    report = {"objects": len(pools), "candidates_per_object": float(np.mean([len(p["y_PGS"]) for p in pools])),
              "executions": args.executions, "random5": float(np.mean([p["y_PGS"].mean() for p in pools])),
              "oracle5": float(np.mean([np.sort(p["y_PGS"])[-TOP_K:].mean() for p in pools])),
              "objects_with_a_success": int(sum((p["y_PGS"] > 0.5).any() for p in pools)),
              "candidates": args.candidates, "evaluators": {}}
    if args.candidates == "graspd":  # the pool keeps the synthesis's order: the planner without an evaluator
        report["physics5"] = ranking_scores(pools, lambda pool: -np.arange(len(pool["y_PGS"]), dtype=float))
    models = {path: load_checkpoint(path) for path in args.evaluators.split(",") if path}
    unknown = {path: m.kind for path, m in models.items() if m.kind not in ("bps_evaluator", "geometry_evaluator")}
    if unknown:
        parser.error(f"not BPS or geometry evaluators: {unknown}")
    if any(m.kind == "geometry_evaluator" for m in models.values()) and not all("cloud_Oy_m" in p for p in pools):
        parser.error("geometry evaluators need pools with clouds: these pools predate them (use a new --pool-dir)")

    @torch.no_grad()
    def y_pgs(loaded, pool: dict[str, np.ndarray]) -> np.ndarray:
        if loaded.kind == "bps_evaluator":
            score = loaded.model.conditioned(torch.from_numpy(pool["bps_m"]))
            return score(torch.from_numpy(pool["grasps_Oy"]))[:, Y_PGS].numpy()
        features = HandObjectFeatures(hand, pool["cloud_Oy_m"], float(pool["table_y_m"]), loaded.config.max_distance_m)
        return loaded.model(features(Grasp.from_vector(pool["grasps_Oy"], "Oy")))[:, Y_PGS].numpy()

    def predictor(chosen):
        return lambda pool: np.mean([y_pgs(m, pool) for m in chosen], axis=0)

    for path, model in models.items():
        report["evaluators"][path] = ranking_scores(pools, predictor([model]))
    if args.ensemble and len(models) > 1:
        report["evaluators"]["mean of all"] = ranking_scores(pools, predictor(list(models.values())))
    print(f"\n{report['objects']} objects, {report['candidates_per_object']:.0f} candidates each, "
          f"{report['objects_with_a_success']} with a success; random-5 {100 * report['random5']:.1f}%, "
          f"oracle-5 {100 * report['oracle5']:.1f}%")
    if "physics5" in report:
        print(f"{'graspd physics-score order':40s} top-5 {100 * report['physics5']['top5']:5.1f}%  "
              f"AUC {report['physics5']['auc']:.3f}")
    for path, row in report["evaluators"].items():
        print(f"{Path(path).name:40s} top-5 {100 * row['top5']:5.1f}%  AUC {row['auc']:.3f} ({row['auc_objects']} objects)")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
