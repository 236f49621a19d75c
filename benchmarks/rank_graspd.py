"""How well rankings of graspd's grasps pick the 5 that lift, from `bench_graspd.py --per-grasp` outputs.

For every object the grasps are sorted by each ranking and the mean y_PGS of the first 5 is taken (the Get a Grip
protocol's success of the top 5); the table is the mean over the objects, next to a random 5 (the mean y_PGS) and
the best 5 (oracle). Rankings (lower first):

- ``physics_score``: the score the run wrote (the synthesis's ``physics_score`` of that version);
- ``+ clearance a/mm below t mm``: that score plus a * max(0, t - clearance) for a small grid of a and t, the
  clearance being the smallest gap of the labels' allowed links to the object and the table at the pre-grasp
  (``distal_gap_pregrasp_mm``). Meant for runs whose score has no clearance term yet (before 2026-12-02).

It also prints each feature's within-object Spearman correlation with y_PGS, y_coll and y_pick.

``--closing`` (runs written with the grasps' vectors, 2026-12-04 on) adds features of the protocol's closing computed on
the object's SDF alone, without a simulator: every pre-grasp, unperturbed and under ``--perturbations`` draws of the
labels' wrist noise, has each fingertip cast along its closing direction for the 5 cm the labels close; the fingers
that reach the surface give contacts (point, inward normal) whose epsilon-quality (mu 0.5) is taken. Features: the
mean epsilon, the share of draws in force closure, the mean number of fingers (and of thumbs) that reach, the mean
travel to the surface, the smallest cosine of a closing direction with the inward normal. Each is tried added to the
score, and all of them in a ridge ranking trained leave-one-object-out.

``--evaluators A.pt,B.pt`` (runs with the grasps' vectors) adds each learned evaluator's predicted y_PGS as a
ranking: the object's cloud observed as the data engine observes it (depth views along the capture spirals, the
same seed), the grasps moved into its Oy frame, the evaluator's prediction as the planner's ranking sees it
(calibrated where the checkpoint holds a calibration); then the rank of its prediction added to w x the rank of
the physics score, for a few w. ``shipped_bps`` and ``shipped_geometry`` name the package's evaluators.

``--sim-true-mesh`` (runs with the grasps' vectors) adds the stack's ``sim`` evaluator as a ranking, given the object's
true mesh (5 executions per grasp on its k-means convex parts, the executor's 18 cm rise, its own noise seed): the
ranking a user gets from ``graspd+sim`` with a perfect object model. It simulates with the same engine and the same
criteria as the labels it is judged by (other noise draws, another collision model of the object), so it shows how
much of the oracle's best 5 a simulation ranking recovers, not what a perceived object gives. ``--sim-trials N``
executes each grasp N times instead of 5 and ranks by the first 2, 5 and 10 of them as well (independent draws: the
evaluator with that many trials).

``--draw OBJECT --draw-out PNG`` draws one object's grasps instead (runs with the grasps' vectors): the score's top 5,
then the 4 best by their labels, the hand coloured by the labelled y_PGS, the first also closed on the object.

``--relabel`` labels the best 5 by the written labels (the oracle) and the top 5 by the score again, with fresh label
noise: the oracle's own labels are biased up (the best 5 of 32 noisy 5-trial estimates), the fresh ones are not.

    python benchmarks/rank_graspd.py docs/graspd/ranking_validation.json
    python benchmarks/rank_graspd.py docs/graspd/ranking_validation_flex.json --closing --relabel
    python benchmarks/rank_graspd.py --evaluators shipped_geometry,data/experiments/surface_evaluator_graspd_mined.pt \
        docs/graspd/ranking_test_vectors.json --out docs/graspd/ranking_evaluators_test.json
    python benchmarks/rank_graspd.py docs/graspd/ranking_test_vectors.json --sim-true-mesh --out docs/graspd/sim_true_mesh_test.json
    python benchmarks/rank_graspd.py docs/graspd/ranking_validation_flex.json --sim-true-mesh --sim-trials 20 \
        --out docs/graspd/sim_trials_validation.json
    python benchmarks/rank_graspd.py docs/graspd/ranking_test_vectors.json --draw tabletop20/squirrel \
        --draw-out docs/graspd/squirrel_score_top5.png
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from bench_graspd import distance_along, placed_mesh

FEATURES = ("opposition", "distal_gap_pregrasp_mm", "forbidden_gap_pregrasp_mm", "distal_gap_closed_mm",
            "forbidden_gap_closed_mm", "penetration_depth_mm", "contact_area_cm2", "penetration_volume_cm3")


def load(paths: list[Path]) -> list[tuple[str, dict[str, np.ndarray]]]:
    objects = []
    for path in paths:
        for row in json.loads(path.read_text())["objects"]:
            for method, result in row["methods"].items():
                grasps = result.get("per_grasp")
                if grasps is None:
                    raise SystemExit(f"{path}: {row['object']} {method} has no per-grasp data (run with --per-grasp)")
                objects.append((f"{row['object']} ({method})",
                                {k: np.asarray(v, dtype=float) for k, v in grasps.items() if v is not None}))
    return objects


def closing_features(objects, perturbations: int) -> None:
    """Add the ``--closing`` features (module docstring) to every object's grasps, in place."""
    from getagrip_ros.data.generate import GenerationConfig
    from getagrip_ros.data.labels import LabelConfig
    from getagrip_ros.grasp.grasp import Grasp
    from getagrip_ros.grasp.perturb import perturb_grasps
    from getagrip_ros.grasp.quality import epsilon_quality
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import prepare_object
    from getagrip_ros.synthesis.hand_model import AllegroModelConfig, allegro_hand_model
    from getagrip_ros.synthesis.object_sdf import ObjectSDF, SDFConfig

    base, labels = GenerationConfig(), LabelConfig()
    hand = allegro_hand_model(AllegroModelConfig(contact_links="all"))
    generator = torch.Generator().manual_seed(0)
    for title, g in objects:
        name = title.split(" (")[0]
        mesh = placed_mesh(prepare_object(object_by_name(name), base.prepare), base)  # where the labels had it
        sdf = ObjectSDF.from_mesh(mesh, SDFConfig(), frame_id="world")
        centre = mesh.center_mass
        radius = float(np.linalg.norm(mesh.vertices - centre, axis=1).max())
        grasps = Grasp.from_vector(torch.as_tensor(g["grasp_vector"]), "world").to("cpu", torch.float64)
        draws = [grasps] + [perturb_grasps(grasps, labels.perturbation, generator) for _ in range(perturbations)]
        eps, reach, travel, cosine = [], [], [], []
        for draw in draws:
            tips = hand.fingertip_points(hand.link_poses(draw.T_frame_palm, draw.joint_angles_rad))
            d = draw.fingertip_directions / draw.fingertip_directions.norm(dim=-1, keepdim=True)
            t = distance_along(sdf, tips, d, labels.close_distance_m + 0.01, iterations=30)
            points = tips + t[..., None] * d
            distance, normal = sdf.query(points)
            hit = ((t < labels.close_distance_m) & (distance.abs() < 0.002)).numpy()
            points, inward = points.numpy(), -normal.numpy()
            eps.append([epsilon_quality(points[b][hit[b]], inward[b][hit[b]], centre, radius) if hit[b].sum() >= 2
                        else 0.0 for b in range(len(draw))])
            reach.append(hit)
            travel.append(np.where(hit, t.numpy(), labels.close_distance_m))
            cosine.append(np.where(hit, -(normal * d).sum(-1).numpy(), 0.0))
        eps, reach = np.asarray(eps), np.asarray(reach)
        g.update({"eps_unperturbed": eps[0], "eps_mean": eps.mean(0), "force_closure_share": (eps > 0).mean(0),
                  "fingers_reaching": reach.sum(-1).mean(0), "thumb_reaching": reach[..., -1].mean(0),
                  "travel_mm": 1e3 * np.asarray(travel).mean((0, 2)), "cos_min": np.asarray(cosine).min(-1).mean(0)})
        print(f"  closing features: {name}", flush=True)


def evaluator_predictions(objects, paths: list[str]) -> list[str]:
    """Add each evaluator's predicted y_PGS (key: the evaluator's name) to every object's grasps, in place."""
    from bench_evaluator_ranking import evaluator_inputs, load_evaluator

    from getagrip_ros.data.generate import CloudConfig, GenerationConfig, object_seed, observe_object
    from getagrip_ros.grasp.grasp import Grasp
    from getagrip_ros.models.bps_evaluator import Y_PGS
    from getagrip_ros.models.calibration import predict_pool
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import prepare_object
    from getagrip_ros.planning.object_input import object_from_points
    from getagrip_ros.robot.allegro import AllegroHand
    from getagrip_ros.sim.world import SimWorld

    base, hand = GenerationConfig(), AllegroHand()
    models = {p if p.startswith("shipped_") else Path(p).stem: load_evaluator(p) for p in paths}
    for title, g in objects:
        name = title.split(" (")[0]
        with SimWorld(base.scene, prepare_object(object_by_name(name), base.prepare), base.placement) as world:
            cloud = observe_object(world, CloudConfig(), np.random.default_rng(object_seed(name, 0)))
        grasps = Grasp.from_vector(torch.as_tensor(g["grasp_vector"], dtype=torch.float32), "world")
        pool = evaluator_inputs(cloud, object_from_points(cloud, "world"), grasps)
        for key, model in models.items():
            g[key] = model.calibrated(torch.from_numpy(predict_pool(model, hand, pool))).numpy()[:, Y_PGS]
        print(f"  evaluators: {name} ({len(cloud)} cloud points)", flush=True)
    return list(models)


def sim_predictions(objects, trials: int) -> list[str]:
    """Add the ``sim`` evaluator's y_PGS on each object's true mesh to its grasps, in place: with `trials` executions
    per grasp (key ``sim_true_mesh``, the evaluator's setting) and with the first 2, 5, 10 of them where fewer (keys
    ``sim_true_mesh_<k>``, the evaluator with ``num_trials`` k: its trials are independent draws)."""
    from getagrip_ros.data.generate import GenerationConfig
    from getagrip_ros.grasp.grasp import Grasp
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import prepare_object
    from getagrip_ros.planning.object_input import PlanningObject
    from getagrip_ros.planning.simulation_evaluator import SimulationEvaluatorConfig, SimulationGraspEvaluator

    base, evaluator = GenerationConfig(), SimulationGraspEvaluator(SimulationEvaluatorConfig(num_trials=trials))
    fewer = [k for k in (2, 5, 10) if k < trials]
    for title, g in objects:
        name = title.split(" (")[0]
        mesh = placed_mesh(prepare_object(object_by_name(name), base.prepare), base)  # where the labels had it
        obj = PlanningObject("world", torch.eye(4, dtype=torch.float64), np.zeros(4096), mesh=mesh)
        grasps = Grasp.from_vector(torch.as_tensor(g["grasp_vector"], dtype=torch.float32), "world")
        labels = evaluator.labeller(obj)(grasps)
        g["sim_true_mesh"] = np.array([label.y_pgs for label in labels])
        for k in fewer:
            g[f"sim_true_mesh_{k}"] = np.array([np.mean([t.y_coll * t.y_pick for t in label.trials[:k]]) for label in labels])
        top = np.lexsort((g["score"], -g["sim_true_mesh"]))[:5]
        print(f"  sim on the true mesh: {name}: top 5 {g['y_pgs'][top].mean():.2f} (score's "
              f"{g['y_pgs'][np.argsort(g['score'], kind='stable')[:5]].mean():.2f})", flush=True)
    return [f"sim_true_mesh_{k}" for k in fewer] + ["sim_true_mesh"]


def draw(objects, name: str, path: Path) -> None:
    """The ``--draw`` picture (module docstring) of the object `name`."""
    from getagrip_ros.data.generate import GenerationConfig
    from getagrip_ros.grasp.grasp import Grasp
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import prepare_object
    from getagrip_ros.robot.allegro import AllegroHand
    from getagrip_ros.viz.grasp_image import draw_grasps

    matches = [g for title, g in objects if title.split(" (")[0] == name]
    if not matches:
        raise SystemExit(f"--draw: {name} is not in the runs")
    g, base = matches[0], GenerationConfig()
    if "grasp_vector" not in g:
        raise SystemExit(f"--draw needs the grasps' vectors (runs from 2026-12-04 on): {name} has none")
    mesh = placed_mesh(prepare_object(object_by_name(name), base.prepare), base)  # where the labels had it
    top = np.argsort(g["score"], kind="stable")[:5].tolist()
    best = [int(i) for i in np.argsort(-g["y_pgs"], kind="stable") if i not in top][:4]
    grasps = Grasp.from_vector(torch.as_tensor(g["grasp_vector"][top + best], dtype=torch.float32), "world")
    draw_grasps(np.asarray(mesh.sample(3000, seed=0)), grasps, AllegroHand(), path, max_grasps=9,
                scores=g["y_pgs"][top + best], mesh=mesh,
                title=f"{name}: the physics score's top 5 (#1-#5), then the 4 best by their labels; colour = labelled y_PGS")
    print(f"wrote {path}")


def relabel(objects) -> dict[str, float]:
    """Fresh labels (another noise seed) of each object's best 5 by its written y_PGS and top 5 by its score."""
    from getagrip_ros.data.generate import GenerationConfig
    from getagrip_ros.data.labels import label_grasps
    from getagrip_ros.grasp.grasp import Grasp
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import prepare_object
    from getagrip_ros.robot.allegro import AllegroHand
    from getagrip_ros.sim.world import SimWorld

    base, allegro = GenerationConfig(), AllegroHand()
    fresh = {"best 5 (oracle)": [], "physics_score": []}
    for i, (title, g) in enumerate(objects):
        prepared = prepare_object(object_by_name(title.split(" (")[0]), base.prepare)
        grasps = Grasp.from_vector(torch.as_tensor(g["grasp_vector"], dtype=torch.float32), "world")
        picks = {"best 5 (oracle)": np.argsort(-g["y_pgs"], kind="stable")[:5],
                 "physics_score": np.argsort(g["score"], kind="stable")[:5]}
        with SimWorld(base.scene, prepared, base.placement) as world:
            for name, index in picks.items():
                labels = label_grasps(world, grasps[torch.as_tensor(index)], allegro, base.labels,
                                      torch.Generator().manual_seed(10_000 + i))
                fresh[name].append(np.mean([label.y_pgs for label in labels]))
        print(f"  relabelled: {title}: oracle {g['y_pgs'][picks['best 5 (oracle)']].mean():.2f} -> "
              f"{fresh['best 5 (oracle)'][-1]:.2f}, score {g['y_pgs'][picks['physics_score']].mean():.2f} -> "
              f"{fresh['physics_score'][-1]:.2f}", flush=True)
    return {name: float(np.mean(values)) for name, values in fresh.items()}


CLOSING = ("eps_unperturbed", "eps_mean", "force_closure_share", "fingers_reaching", "thumb_reaching", "travel_mm", "cos_min")


def ridge_top5(objects, keys: tuple[str, ...], alpha: float) -> float:
    """Top 5 of a linear ranking of the score and `keys`, trained on the other objects (features standardised and
    centred within each object, target y_PGS centred within each object)."""
    def features(g):
        return np.stack([np.nan_to_num(g[k], posinf=10.0) for k in ("score", *keys)], 1)

    every = np.concatenate([features(g) for _, g in objects])
    mu, sd = every.mean(0), every.std(0) + 1e-9

    def centred(g):
        x = (features(g) - mu) / sd
        return x - x.mean(0)

    tops = []
    for i, (_, g) in enumerate(objects):
        others = [o for j, (_, o) in enumerate(objects) if j != i]
        X = np.concatenate([centred(o) for o in others])
        y = np.concatenate([o["y_pgs"] - o["y_pgs"].mean() for o in others])
        w = np.linalg.solve(X.T @ X + alpha * np.eye(X.shape[1]), X.T @ y)
        tops.append(g["y_pgs"][np.argsort(-(centred(g) @ w), kind="stable")[:5]].mean())
    return float(np.mean(tops))


def planner_place(g: dict[str, np.ndarray], key: str, weight: float) -> np.ndarray:
    """Each grasp's place in the planner's rank-sum order of evaluator `key` and the physics score (0 = first)."""
    from getagrip_ros.planning.planner import rank_sum_order

    order = rank_sum_order(torch.as_tensor(g[key]), torch.as_tensor(g["score"]), weight).numpy()
    return np.argsort(order)


def top5(objects, rank) -> float:
    """Mean y_PGS of each object's first 5 by `rank` (lower first; ties in physics-score order, as the planner breaks them)."""
    return float(np.mean([g["y_pgs"][np.lexsort((g["score"], rank(g)))[:5]].mean() for _, g in objects]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, default=[Path("docs/graspd/ranking_validation_flex.json")],
                        help="bench_graspd.py --per-grasp JSON outputs (default: the committed validation run)")
    parser.add_argument("--closing", action="store_true", help="add the closing features (needs grasp vectors)")
    parser.add_argument("--perturbations", type=int, default=8, help="--closing: wrist-noise draws per grasp")
    parser.add_argument("--relabel", action="store_true", help="label the oracle's and the score's top 5 again")
    parser.add_argument("--out", type=Path, help="also write the table and the correlations as JSON")
    parser.add_argument("--evaluators", default="", help="BPS or geometry evaluator checkpoints, comma-separated "
                        "(shipped_bps, shipped_geometry: the package's), each added as a ranking")
    parser.add_argument("--sim-true-mesh", action="store_true", help="add the sim evaluator on the true mesh as a ranking")
    parser.add_argument("--sim-trials", type=int, default=5, help="--sim-true-mesh: executions per grasp (fewer are "
                        "ranked too, from the first of them)")
    parser.add_argument("--draw", help="draw this object's grasps (see the module docstring) and stop")
    parser.add_argument("--draw-out", type=Path, default=Path("graspd_grasps.png"), help="--draw: the PNG")
    args = parser.parse_args()
    torch.set_num_threads(1)
    objects = load(args.runs)
    if args.draw:
        return draw(objects, args.draw, args.draw_out)
    if (args.closing or args.relabel or args.evaluators or args.sim_true_mesh) and (missing := [t for t, g in objects if "grasp_vector" not in g]):
        raise SystemExit(f"--closing, --relabel, --evaluators and --sim-true-mesh need the grasps' vectors (runs from 2026-12-04 on): {missing[0]} has none")
    if args.closing:
        closing_features(objects, args.perturbations)
    evaluators = evaluator_predictions(objects, args.evaluators.split(",")) if args.evaluators else []
    if args.sim_true_mesh:
        evaluators += sim_predictions(objects, args.sim_trials)
    print(f"{len(objects)} objects x {int(np.mean([len(g['y_pgs']) for _, g in objects]))} grasps")
    rows = [("random 5 (mean y_PGS)", float(np.mean([g["y_pgs"].mean() for _, g in objects]))),
            ("best 5 (oracle)", float(np.mean([np.sort(g["y_pgs"])[-5:].mean() for _, g in objects]))),
            ("physics_score (as written)", top5(objects, lambda g: g["score"]))]
    for a, t in itertools.product((0.25, 0.5, 1.0, 2.0), (1.0, 2.0, 3.0, 5.0)):
        rows.append((f"+ clearance {a:g}/mm below {t:g} mm",
                     top5(objects, lambda g, a=a, t=t: g["score"] + a * np.maximum(t - g["distal_gap_pregrasp_mm"], 0))))
    if args.closing:
        for key in CLOSING:
            for weight in (0.5, 1.0, 2.0, 4.0):  # the feature scaled to its largest value on the object
                rows.append((f"score - {weight:g} x {key}/max", top5(objects, lambda g, k=key, w=weight: g["score"] - w * g[k]
                                                                     / (np.abs(g[k]).max() + 1e-9))))
        for alpha in (1.0, 10.0, 100.0):
            rows.append((f"ridge on score + closing, alpha {alpha:g}", ridge_top5(objects, CLOSING, alpha)))
            rows.append((f"ridge on score + closing + gaps, alpha {alpha:g}", ridge_top5(objects, CLOSING + FEATURES, alpha)))
    for key in evaluators:
        rows.append((f"{key} (predicted y_PGS)", top5(objects, lambda g, k=key: -g[k])))
        for weight in (0.5, 1.0, 2.0):  # ranks within the object, lower first
            rows.append((f"rank of {key} + {weight:g} x rank of score", top5(objects, lambda g, k=key, w=weight:
                                                                            planner_place(g, k, w))))
    if args.relabel:
        rows += [(f"{name}, labelled again", value) for name, value in relabel(objects).items()]
    for name, value in rows:
        print(f"{name:<64s} top 5 {100 * value:5.1f}%")
    print(f"\n{'feature':<32s} Spearman with y_PGS / y_coll / y_pick (mean within objects)")
    correlations = {}
    for feature in ("score",) + FEATURES + (CLOSING if args.closing else ()) + tuple(evaluators):
        r = [[spearmanr(g[feature], g[y]).statistic for y in ("y_pgs", "y_coll", "y_pick")]
             for _, g in objects if feature in g and g["y_pgs"].std() > 0]
        if r:
            correlations[feature] = np.nanmean(np.asarray(r), 0).tolist()
            print(f"{feature:<32s} " + " / ".join(f"{v:+.2f}" for v in correlations[feature]))
    if args.out:
        args.out.write_text(json.dumps({"runs": [str(p) for p in args.runs], "objects": len(objects),
                                        "evaluators": args.evaluators.split(",") if args.evaluators else [],
                                        "top5": dict(rows), "spearman_y_pgs_y_coll_y_pick": correlations}, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
