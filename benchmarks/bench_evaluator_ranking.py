"""How well do evaluators rank? Every candidate grasp labelled on held-out objects, then each evaluator scored offline.

The simulated evidence (``bench_evaluator_evidence.py``) measures a whole plan; this separates the two things
that limit it. For each object the candidates are made on the object's observed cloud as the planner does
(cable filter included), by the samplers of ``--candidates`` (``kind:count``, comma-separated):

- ``fixed``: the fixed set placed on the cloud, a seeded random subset of ``count`` (``fixed`` alone: all of it);
- ``diffusion``, ``heuristic``, ``graspd``: the planner's sampler with no evaluator (graspd: its physics-score order;
  ``graspd`` alone: 32).

Every candidate is executed ``--executions`` times with the label noise in the floating-hand world (``--threads``
replicas); the labelled pools are cached per object in ``--pool-dir`` (resumable): the Oy grasps, which sampler made
each, y_pick / y_coll / y_PGS, the BPS, the cloud in Oy and the table height. Pools kept in the project are the
frozen ranking diagnostic (``docs/data/ranking_diagnostic/``: the 59 validation objects, every sampler). Then, for
each evaluator, without refinement, within each sampler's candidates (what the planner ranks) and over all of them:

- random-5: mean y_PGS of the pool (what an unranked plan gets on average);
- oracle-1 / oracle-5: mean y_PGS of the best-labelled 1 / 5 (the most any ranking could get);
- top-1 / top-5: mean y_PGS of the evaluator's 1 / 5 best-predicted candidates;
- AUC: probability that a candidate with y_PGS > 0.5 is predicted above one without, per object with both;
- ECE: expected calibration error of the predicted y_PGS against the labelled y_PGS (10 equal bins, all candidates);
- ``--gate-y-coll T``: also each evaluator ranked with a y_coll gate (candidates predicted y_coll < T go last);
- ``--ensemble``: also the mean prediction of all evaluators; graspd candidates also in physics-score order;
- ``--cascade N``: also the planner's ``sim`` evaluator (5 simulated executions on a model made from the observed
  cloud, not the true object) re-ranking the first evaluator's top N (cached in ``--pool-dir``/sim_cascade).

``--reliability PNG`` draws the reliability diagram of every evaluator (predicted against labelled y_PGS).

    python benchmarks/bench_evaluator_ranking.py --objects "$(cat val_objects.txt)" --pool-dir runs/pool \\
        --candidates fixed --evaluators shipped.pt,geometry.pt [--ensemble] --out ranking.json
    python benchmarks/bench_evaluator_ranking.py --objects validation_59 --pool-dir docs/data/ranking_diagnostic \\
        --candidates fixed:48,diffusion:32,heuristic:32,graspd:16 --executions 3 --evaluators shipped_bps,shipped_geometry \\
        --ensemble --gate-y-coll 0.5 --reliability docs/data/ranking_diagnostic.png --out docs/data/ranking_diagnostic.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from getagrip_ros.cli.generate import resolve_objects
from getagrip_ros.data.generate import CloudConfig, GenerationConfig, object_seed, observe_object
from getagrip_ros.data.labels import LabelConfig, label_grasps
from getagrip_ros.grasp.filters import cable_filter_mask
from getagrip_ros.grasp.frames import invert_transform
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.models.bps_evaluator import LABEL_NAMES, Y_PGS
from getagrip_ros.models.calibration import expected_calibration_error, fit_platt_label, platt, predict_pool
from getagrip_ros.models.checkpoints import load_checkpoint
from getagrip_ros.models.shipped import resolve_model_file
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.object_input import PlanningObject, object_from_points
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.planning.samplers import FixedSampler, load_grasp_set
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.sim.world import ObjectPlacement, SimWorld

TOP_K = 5
SAMPLER_KINDS = ("fixed", "diffusion", "heuristic", "graspd")
DEFAULT_COUNTS = {"fixed": None, "graspd": 32}
"""Candidates of a kind given without a count: the whole fixed set, graspd's 32 (the planner's default)."""
Y_COLL = LABEL_NAMES.index("y_coll")
EVIDENCE_FILE = Path(__file__).resolve().parents[1] / "docs" / "data" / "evidence_variants.json"

CandidateFn = Callable[[str, np.ndarray, PlanningObject], Grasp]
"""(object name, its observed cloud (N, 3), the planning object) -> candidate grasps in the world frame."""


def fixed_candidates(grasp_set_Oy, hand: AllegroHand, count: int | None) -> CandidateFn:
    """The fixed set placed on the cloud as the planner does (joints clamped to the limits, cable filter), then a
    random subset of `count` seeded by the object (None: all)."""
    def candidates(name: str, cloud: np.ndarray, planning: PlanningObject) -> Grasp:
        grasps = FixedSampler(grasp_set_Oy).sample(planning, len(grasp_set_Oy), torch.Generator().manual_seed(0),
                                                   lambda _: None)
        lower, upper = hand.lower_limits_rad.double(), hand.upper_limits_rad.double()
        grasps.joint_angles_rad = torch.maximum(torch.minimum(grasps.joint_angles_rad, upper), lower)
        grasps = grasps[cable_filter_mask(grasps)]
        if count is None or count >= len(grasps):
            return grasps
        keep = np.sort(np.random.default_rng(object_seed(name, 2)).choice(len(grasps), count, replace=False))
        return grasps[torch.from_numpy(keep)]
    return candidates


def sampler_candidates(kind: str, count: int) -> CandidateFn:
    """The planner's `kind` sampler on the cloud with no evaluator: the first `count` samples that pass the cable
    filter, of the planner's 3200 (heuristic) or 8 x `count` (diffusion); graspd: `count` synthesised, in
    physics-score order."""
    base = GraspPlannerConfig()
    planner = GraspPlanner(dataclasses.replace(base, num_samples=base.num_samples if kind == "heuristic" else 8 * count,
                                               graspd=dataclasses.replace(base.graspd, num_grasps=count)))

    def candidates(name: str, cloud: np.ndarray, planning: PlanningObject) -> Grasp:
        result = planner.plan(PlanRequest(points_m=cloud, frame_id="world", num_grasps=count, sampler=kind,
                                          evaluator="none", seed=object_seed(name, 0)))
        if not result.success:
            raise ObjectRejected(f"{name}: {kind} planning failed: {result.status.name}: {result.reason}")
        return result.planned.grasps
    return candidates


def label_pool(name: str, makers: list[tuple[str, CandidateFn]], hand: AllegroHand, executions: int,
               threads: int) -> dict[str, np.ndarray]:
    """The candidates of every sampler on one object's observed cloud, each labelled (Oy grasps, the index of the
    sampler in `makers`, y_pick / y_coll / y_PGS, BPS), with the cloud and the table height in Oy (metres)."""
    obj = prepare_object(object_by_name(name))
    with SimWorld(GenerationConfig().scene, obj, ObjectPlacement()) as world:  # the data engine's labels
        cloud = observe_object(world, CloudConfig(), np.random.default_rng(object_seed(name, 0)))
        planning = object_from_points(cloud, "world")
        made = [(i, make(name, cloud, planning)) for i, (_, make) in enumerate(makers)]
        grasps = Grasp.cat([g for _, g in made])
        labels = label_grasps(world, grasps, hand, LabelConfig(num_perturbations=executions),
                              torch.Generator().manual_seed(object_seed(name, 1)), threads=threads)
    return {**evaluator_inputs(cloud, planning, grasps),
            "sampler": np.concatenate([np.full(len(g), i, np.int8) for i, g in made]),
            "sampler_names": np.array([kind for kind, _ in makers]),
            **{y: np.array([getattr(label, y.lower()) for label in labels], np.float32) for y in LABEL_NAMES}}


def evaluator_inputs(cloud: np.ndarray, planning: PlanningObject, grasps: Grasp) -> dict[str, np.ndarray]:
    """What a BPS or geometry evaluator reads, as the planner gives it: the grasps, the cloud and the table height in
    the cloud's Oy frame (metres), and the BPS (`planning`: the object made from the world-frame `cloud`)."""
    T_Oy_world = invert_transform(planning.T_frame_Oy)
    T = T_Oy_world.numpy()
    return {"grasps_Oy": grasps.transformed(T_Oy_world, "Oy").to_numpy_vector().astype(np.float32),
            "bps_m": planning.bps_m.astype(np.float32),
            "cloud_Oy_m": (cloud @ T[:3, :3].T + T[:3, 3]).astype(np.float32), "table_y_m": np.float32(T[1, 3])}


def load_evaluator(spec: str):
    """A checkpoint path, or shipped_bps / shipped_geometry for the package's evaluators."""
    return load_checkpoint(resolve_model_file(f"{spec[8:]}_evaluator", "shipped") if spec.startswith("shipped_") else spec)


def ranking_scores(pools: list[dict[str, np.ndarray]], predict, kind: str | None = None,
                   calibrated: bool = True) -> dict[str, float]:
    """top-1 / top-5 success, mean per-object AUC and (when the scores are predicted y_PGS, `calibrated`) ECE of
    predict(pool) -> (n,) scores of the pool's candidates, over the candidates of sampler `kind` (None: all)."""
    top1, top5, aucs, predicted, labelled = [], [], [], [], []
    for pool in pools:
        keep = _of_kind(pool, kind)
        if not keep.any():
            continue
        scores, y = predict(pool)[keep], pool["y_PGS"][keep]
        order = np.argsort(-scores, kind="stable")
        top1.append(y[order[0]])
        top5.append(y[order[:TOP_K]].mean())
        good = y > 0.5
        if good.any() and (~good).any():
            aucs.append(float((scores[good][:, None] > scores[~good][None]).mean()))
        predicted.append(scores)
        labelled.append(y)
    out = {"top1": float(np.mean(top1)), "top5": float(np.mean(top5)), "auc": float(np.mean(aucs)) if aucs else float("nan"),
           "auc_objects": len(aucs)}
    if calibrated:
        out["ece"] = expected_calibration_error(np.concatenate(predicted), np.concatenate(labelled))
    return out


def _of_kind(pool: dict[str, np.ndarray], kind: str | None) -> np.ndarray:
    if kind is None:
        return np.ones(len(pool["y_PGS"]), bool)
    names = list(pool["sampler_names"])
    return pool["sampler"] == names.index(kind) if kind in names else np.zeros(len(pool["y_PGS"]), bool)


def oracle_scores(pools: list[dict[str, np.ndarray]], kind: str | None) -> dict[str, float]:
    ys = [pool["y_PGS"][_of_kind(pool, kind)] for pool in pools]
    ys = [y for y in ys if len(y)]
    return {"candidates_per_object": float(np.mean([len(y) for y in ys])), "random5": float(np.mean([y.mean() for y in ys])),
            "oracle1": float(np.mean([y.max() for y in ys])), "oracle5": float(np.mean([np.sort(y)[-TOP_K:].mean() for y in ys])),
            "objects_with_a_success": int(sum((y > 0.5).any() for y in ys))}


def platt_cross_fit(pools: list[dict[str, np.ndarray]], predict) -> Callable[[dict], np.ndarray]:
    """predict recalibrated by Platt scaling of its y_PGS (the ranking is unchanged), fitted to the labelled y_PGS of
    the even-numbered pools for the odd ones and the other way round."""
    def fit(half: list[dict]) -> tuple[float, float]:
        return fit_platt_label(np.concatenate([predict(p) for p in half]), np.concatenate([p["y_PGS"] for p in half]))

    params = {0: fit(pools[1::2]), 1: fit(pools[0::2])}  # pool i is scored with the fit on the other half
    position = {id(p): i % 2 for i, p in enumerate(pools)}

    def calibrated(pool: dict) -> np.ndarray:
        return platt(predict(pool), *params[position[id(pool)]])
    return calibrated


def simulated_top(pool: dict[str, np.ndarray], pool_dir: Path, score: Callable[[dict], np.ndarray], top_n: int,
                  kinds: list[str | None]) -> np.ndarray:
    """(n,) y_PGS of the sim evaluator (NaN where not simulated) for the top `top_n` candidates by `score` of each
    sampler group in `kinds`, on a model of the pool's observed cloud (table frame: z up, table top z = 0). Cached
    in pool_dir/sim_cascade."""
    from getagrip_ros.planning.object_input import T_frame_Oy_at
    from getagrip_ros.planning.simulation_evaluator import SimulationGraspEvaluator

    scores, chosen = score(pool), set()
    for kind in kinds:
        group = np.flatnonzero(_of_kind(pool, kind))
        chosen |= {int(i) for i in group[np.argsort(-scores[group], kind="stable")[:top_n]]}
    cache = pool_dir / "sim_cascade" / f"{pool['name']}__top{top_n}.npz"
    y = np.full(len(scores), np.nan)
    if cache.exists():
        with np.load(cache) as f:
            y[f["index"]] = f["y_PGS"]
    missing = [i for i in sorted(chosen) if np.isnan(y[i])]
    if missing:
        T_table_Oy = T_frame_Oy_at(np.array([0.0, 0.0, -float(pool["table_y_m"])]))
        T = T_table_Oy.numpy()
        planning = PlanningObject("table", T_table_Oy, pool["bps_m"], points_m=pool["cloud_Oy_m"].astype(float) @ T[:3, :3].T + T[:3, 3])
        grasps = Grasp.from_vector(pool["grasps_Oy"][missing], "Oy").to(dtype=torch.float64).transformed(T_table_Oy, "table")
        y[missing] = SimulationGraspEvaluator().prepare(planning)(grasps)[:, Y_PGS].numpy()
        cache.parent.mkdir(parents=True, exist_ok=True)
        done = np.flatnonzero(~np.isnan(y))
        np.savez_compressed(cache, index=done, y_PGS=y[done])
    return y


def _short(name: str) -> str:
    """An evaluator's name for tables and plots: a checkpoint file with the folder it is in (runs' best.pt differ)."""
    path = Path(name)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def draw_reliability(path: Path, curves: dict[str, tuple[np.ndarray, np.ndarray]], bins: int = 10) -> None:
    """Reliability diagram: mean labelled y_PGS against mean predicted y_PGS per bin, with the share of candidates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, share) = plt.subplots(2, 1, figsize=(5.5, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", label="calibrated")
    edges = np.linspace(0, 1, bins + 1)
    for name, (predicted, labelled) in curves.items():
        which = np.clip((np.clip(predicted, 0, 1) * bins).astype(int), 0, bins - 1)
        used = [b for b in range(bins) if (which == b).any()]
        ax.plot([predicted[which == b].mean() for b in used], [labelled[which == b].mean() for b in used], marker="o",
                label=f"{name} (ECE {expected_calibration_error(predicted, labelled):.3f})")
        share.step(edges[:-1], np.bincount(which, minlength=bins) / len(which), where="post")
    ax.set_ylabel("labelled y_PGS (mean in bin)")
    ax.set_title("Ranking diagnostic: calibration of the predicted y_PGS")
    ax.legend(fontsize=7, loc="upper left")
    share.set_xlabel("predicted y_PGS")
    share.set_ylabel("share")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def object_names(spec: str) -> list[str]:
    """Catalog names: 'validation_59' (the validation objects of the evidence runs) or sets / names for resolve_objects."""
    if spec == "validation_59":
        return json.loads(EVIDENCE_FILE.read_text())["validation_59"]["objects"]
    return [s if isinstance(s, str) else s.name for s in resolve_objects(spec)]


def parse_candidates(spec: str) -> list[tuple[str, int | None]]:
    out = []
    for part in spec.split(","):
        kind, _, count = part.partition(":")
        if kind not in SAMPLER_KINDS:
            raise SystemExit(f"--candidates: unknown sampler {kind!r} (one of {', '.join(SAMPLER_KINDS)})")
        if not count and kind in ("diffusion", "heuristic"):
            raise SystemExit(f"--candidates: give a count for {kind} ({kind}:N)")
        out.append((kind, int(count) if count else DEFAULT_COUNTS[kind]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", required=True, help="validation_59, sets (set or set:split) or catalog names, comma-separated")
    parser.add_argument("--pool-dir", type=Path, required=True, help="labelled pools, one .npz per object (resumable)")
    parser.add_argument("--candidates", default="fixed", help="kind[:count] of each sampler, comma-separated "
                        f"({', '.join(SAMPLER_KINDS)})")
    parser.add_argument("--fixed-grasps", default="shipped", help="the fixed grasp set ('shipped': the package's)")
    parser.add_argument("--executions", type=int, default=1, help="labelling trials per candidate")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="labelling threads")
    parser.add_argument("--evaluators", default="", help="BPS or geometry evaluator checkpoints, comma-separated "
                        "(shipped_bps, shipped_geometry: the package's)")
    parser.add_argument("--ensemble", action="store_true", help="also score the mean prediction of all evaluators")
    parser.add_argument("--gate-y-coll", type=float, help="also rank with this gate on the predicted y_coll")
    parser.add_argument("--cascade", type=int, default=0, help="also: the sim evaluator (5 simulated executions on a "
                        "model of the observed cloud) re-ranks the first evaluator's top N of each --cascade-groups group")
    parser.add_argument("--cascade-groups", default="fixed,all", help="sampler groups the cascade is scored on")
    parser.add_argument("--calibrate", action="store_true", help="also each evaluator with Platt scaling of its y_PGS, "
                        "fitted on half the objects and scored on the other half (both ways)")
    parser.add_argument("--reliability", type=Path, help="draw the reliability diagram to this PNG")
    parser.add_argument("--label-only", action="store_true", help="make and label the pools, score nothing")
    parser.add_argument("--out", type=Path, help="write the numbers as JSON")
    args = parser.parse_args()

    hand = AllegroHand()
    kinds = parse_candidates(args.candidates)
    makers = [(kind, fixed_candidates(load_grasp_set(resolve_model_file("fixed_grasps", args.fixed_grasps)), hand, count)
               if kind == "fixed" else sampler_candidates(kind, count)) for kind, count in kinds]
    args.pool_dir.mkdir(parents=True, exist_ok=True)
    pools = []
    for name in object_names(args.objects):
        path = args.pool_dir / f"{name.replace('/', '__')}.npz"
        if not path.exists():
            started = time.perf_counter()
            try:
                np.savez_compressed(path, **label_pool(name, makers, hand, args.executions, args.threads))
            except ObjectRejected as exc:
                print(f"  skipped: {exc}", flush=True)
                continue
            print(f"  {name}: made and labelled in {time.perf_counter() - started:.0f} s", flush=True)
        with np.load(path) as f:
            pools.append({k: f[k] for k in f.files} | {"name": path.stem})
        if "sampler" not in pools[-1]:
            parser.error(f"{path} predates the diagnostic's layout (no sampler, y_coll); use a new --pool-dir")
        print(f"  {name}: {len(pools[-1]['y_PGS'])} candidates, {int((pools[-1]['y_PGS'] > 0.5).sum())} with y_PGS > 0.5",
              flush=True)
    if args.label_only or not pools:
        return

    present = [k for k in SAMPLER_KINDS if any(k in list(p["sampler_names"]) for p in pools)]
    groups = [(k, k) for k in present] + ([("all", None)] if len(present) > 1 else [])
    report = {"objects": len(pools), "executions": args.executions, "candidates": args.candidates,
              "pools": {group: oracle_scores(pools, kind) for group, kind in groups}, "evaluators": {}}
    models = {path: load_evaluator(path) for path in args.evaluators.split(",") if path}
    unknown = {path: m.kind for path, m in models.items() if m.kind not in ("bps_evaluator", "geometry_evaluator")}
    if unknown:
        parser.error(f"not BPS or geometry evaluators: {unknown}")

    cache: dict[tuple[str, int], np.ndarray] = {}

    def predictions(path: str, pool: dict[str, np.ndarray], calibrated: bool = True) -> np.ndarray:
        """(n, 3) predicted [y_pick, y_coll, y_PGS] of the pool's candidates as the planner sees them: an evaluator's
        calibrated when its checkpoint holds a calibration, the ensemble's members uncalibrated."""
        if (path, id(pool)) not in cache:
            cache[path, id(pool)] = predict_pool(models[path], hand, pool)
        raw = cache[path, id(pool)]
        return models[path].calibrated(torch.from_numpy(raw)).numpy() if calibrated else raw

    rankers: dict[str, Callable[[dict], np.ndarray]] = {}
    for path in models:
        rankers[path] = lambda pool, path=path: predictions(path, pool)[:, Y_PGS]
    if args.ensemble and len(models) > 1:
        rankers["mean of all"] = lambda pool: np.mean([predictions(p, pool, False)[:, Y_PGS] for p in models], axis=0)
    if args.calibrate:
        for name in list(rankers):
            rankers[f"{name} + Platt (cross-fit)"] = platt_cross_fit(pools, rankers[name])
    if args.gate_y_coll is not None:
        for path in list(models) + (["mean of all"] if "mean of all" in rankers else []):
            paths = list(models) if path == "mean of all" else [path]

            def gated(pool, paths=paths, ranked=rankers[path]):
                y_coll = np.mean([predictions(p, pool, len(paths) == 1)[:, Y_COLL] for p in paths], axis=0)
                return ranked(pool) - 2.0 * (y_coll < args.gate_y_coll)  # below the gate: after every candidate above it
            rankers[f"{path} + y_coll gate {args.gate_y_coll:g}"] = gated
    cascaded = {}
    if args.cascade and models:
        first = next(iter(models))
        cascade_groups = [(g, k) for g, k in groups if g in args.cascade_groups.split(",")]
        simulated = {id(pool): simulated_top(pool, args.pool_dir, lambda p: predictions(first, p)[:, Y_PGS], args.cascade,
                                             [k for _, k in cascade_groups]) for pool in pools}

        def cascade(pool, kind):
            base = predictions(first, pool)[:, Y_PGS].copy()
            sim = simulated[id(pool)]
            top = np.flatnonzero(_of_kind(pool, kind))
            top = top[np.argsort(-base[top], kind="stable")[: args.cascade]]
            base[top] = 10.0 + sim[top] + 1e-3 * base[top]  # the simulated top N first, by their simulated y_PGS
            return base

        cascaded = {f"{first} -> sim top {args.cascade}": {
            group: ranking_scores(pools, lambda pool, kind=kind: cascade(pool, kind), kind, calibrated=False)
            for group, kind in cascade_groups}}
    if "graspd" in present:  # the pool keeps the synthesis's order: the planner without an evaluator
        def physics(pool):
            return -np.arange(len(pool["y_PGS"]), dtype=float)

        report["graspd_physics_order"] = ranking_scores(pools, physics, "graspd", calibrated=False)
    for name, rank in rankers.items():
        report["evaluators"][name] = {group: ranking_scores(pools, rank, kind, "gate" not in name) for group, kind in groups}
    report["evaluators"].update(cascaded)

    print(f"\n{report['objects']} objects, {args.executions} executions per candidate")
    for group, row in report["pools"].items():
        print(f"  {group:10s} {row['candidates_per_object']:5.0f} candidates per object, {row['objects_with_a_success']} "
              f"objects with a success; random-5 {100 * row['random5']:5.1f}%, oracle-1 {100 * row['oracle1']:5.1f}%, "
              f"oracle-5 {100 * row['oracle5']:5.1f}%")
    if "graspd_physics_order" in report:
        row = report["graspd_physics_order"]
        print(f"  {'graspd physics-score order':44s} graspd     top-1 {100 * row['top1']:5.1f}%  top-5 {100 * row['top5']:5.1f}%  "
              f"AUC {row['auc']:.3f}")
    for name, groups_row in report["evaluators"].items():
        for group, row in groups_row.items():
            print(f"  {_short(name):44s} {group:10s} top-1 {100 * row['top1']:5.1f}%  top-5 {100 * row['top5']:5.1f}%  "
                  f"AUC {row['auc']:.3f}" + (f"  ECE {row['ece']:.3f}" if "ece" in row else ""))
    if args.reliability and rankers:
        curves = {}
        for name, rank in rankers.items():
            if "gate" not in name:
                curves[_short(name)] = (np.concatenate([rank(p) for p in pools]), np.concatenate([p["y_PGS"] for p in pools]))
        draw_reliability(args.reliability, curves)
        print(f"wrote {args.reliability}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
