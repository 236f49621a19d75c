"""How well rankings of graspd's grasps pick the 5 that lift, from `bench_graspd.py --per-grasp` outputs.

For every object the grasps are sorted by each ranking and the mean y_PGS of the first 5 is taken (the Get a Grip
protocol's success of the top 5); the table is the mean over the objects, next to a random 5 (the mean y_PGS) and
the best 5 (oracle). Rankings (lower first):

- ``physics_score``: the score the run wrote (the synthesis's ``physics_score`` of that version);
- ``+ clearance a/mm below t mm``: that score plus a * max(0, t - clearance) for a small grid of a and t, the
  clearance being the smallest gap of the labels' allowed links to the object and the table at the pre-grasp
  (``distal_gap_pregrasp_mm``). Meant for runs whose score has no clearance term yet (before 2026-12-02).

It also prints each feature's within-object Spearman correlation with y_PGS, y_coll and y_pick.

    python benchmarks/rank_graspd.py docs/graspd/ranking_validation.json
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

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


def top5(objects, rank) -> float:
    return float(np.mean([g["y_pgs"][np.argsort(rank(g), kind="stable")[:5]].mean() for _, g in objects]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="bench_graspd.py --per-grasp JSON outputs")
    args = parser.parse_args()
    objects = load(args.runs)
    print(f"{len(objects)} objects x {int(np.mean([len(g['y_pgs']) for _, g in objects]))} grasps")
    rows = [("random 5 (mean y_PGS)", float(np.mean([g["y_pgs"].mean() for _, g in objects]))),
            ("best 5 (oracle)", float(np.mean([np.sort(g["y_pgs"])[-5:].mean() for _, g in objects]))),
            ("physics_score (as written)", top5(objects, lambda g: g["score"]))]
    for a, t in itertools.product((0.25, 0.5, 1.0, 2.0), (1.0, 2.0, 3.0, 5.0)):
        rows.append((f"+ clearance {a:g}/mm below {t:g} mm",
                     top5(objects, lambda g, a=a, t=t: g["score"] + a * np.maximum(t - g["distal_gap_pregrasp_mm"], 0))))
    for name, value in rows:
        print(f"{name:<36s} top 5 {100 * value:5.1f}%")
    print(f"\n{'feature':<28s} Spearman with y_PGS / y_coll / y_pick (mean within objects)")
    for feature in ("score",) + FEATURES:
        r = [[spearmanr(g[feature], g[y]).statistic for y in ("y_pgs", "y_coll", "y_pick")]
             for _, g in objects if feature in g and g["y_pgs"].std() > 0]
        if r:
            print(f"{feature:<28s} " + " / ".join(f"{v:+.2f}" for v in np.nanmean(np.asarray(r), 0)))


if __name__ == "__main__":
    main()
