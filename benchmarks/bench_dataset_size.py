"""Dataset-size ablation: the BPS evaluator trained on 5 / 25 / 100 % of the training objects.

Every fraction keeps the same validation objects (a seeded split; smaller fractions are subsets of larger
ones) and gets the same number of gradient steps (epochs / fraction), so only the data differs. Reports
each model's best validation loss and, with --objects, its success in simulation on held-out objects with
the fixed sampler (the paper's protocol: 5 grasps per object, each executed 5 times with the label
noise), next to the same sampler without the evaluator. Draws the curve as a PNG. Training runs resume
from their folders, so an interrupted ablation continues where it stopped.

    python benchmarks/bench_dataset_size.py --dataset data_v1.h5 --out-dir runs/ablation --epochs 20 \\
        --fixed-grasps fixed.npz --objects tabletop-20 --png docs/data/dataset_size.png
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from getagrip_ros.cli.generate import resolve_objects
from getagrip_ros.data.evaluate import Method, evaluate_methods, summarize
from getagrip_ros.data.generate import CloudConfig, object_seed, observe_object
from getagrip_ros.models.bps_evaluator import BpsEvaluatorConfig
from getagrip_ros.models.checkpoints import load_checkpoint
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles
from getagrip_ros.training.trainers import BpsEvaluatorTrainConfig, train_bps_evaluator


def _success(objects, files: ModelFiles, methods: list[Method]) -> dict[str, float]:
    planner = GraspPlanner(GraspPlannerConfig(models=files))

    def observe(world):
        return observe_object(world, CloudConfig(), np.random.default_rng(object_seed(world.object.name, 0)))

    return {name: row["success_rate"] for name, row in summarize(evaluate_methods(objects, planner, methods, observe)).items()}


def _plot(rows: list[dict], baseline: float | None, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.6), dpi=100)
    FigureCanvasAgg(fig)
    grasps = [r["train_grasps"] for r in rows]
    ax = fig.add_subplot(1, 2, 1)
    ax.plot(grasps, [r["best_val_loss"] for r in rows], "o-")
    ax.set_xscale("log")
    ax.set_xlabel("training grasps")
    ax.set_ylabel("best validation loss (MSE, 3 labels)")
    for r in rows:
        ax.annotate(f"{100 * r['fraction']:g}%", (r["train_grasps"], r["best_val_loss"]), textcoords="offset points",
                    xytext=(4, 4))
    if "success_rate" in rows[0]:
        ax = fig.add_subplot(1, 2, 2)
        ax.plot(grasps, [100 * r["success_rate"] for r in rows], "o-", label="fixed + BPS evaluator")
        if baseline is not None:
            ax.axhline(100 * baseline, color="gray", linestyle="--", label="fixed, no evaluator")
        ax.set_xscale("log")
        ax.set_xlabel("training grasps")
        ax.set_ylabel("simulated success (%)")
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--out-dir", type=Path, required=True, help="one training folder per fraction, results.json")
    parser.add_argument("--fractions", default="0.05,0.25,1.0")
    parser.add_argument("--epochs", type=int, default=20, help="epochs of the 100%% run (others: epochs / fraction)")
    parser.add_argument("--hidden-width", type=int, default=BpsEvaluatorConfig.hidden_width)
    parser.add_argument("--fixed-grasps", default="", help="fixed grasp set for the simulated success (with --objects)")
    parser.add_argument("--objects", help="held-out objects (sets or names) to measure simulated success on")
    parser.add_argument("--limit", type=int, help="only the first N objects")
    parser.add_argument("--png", type=Path, help="draw the curve here")
    args = parser.parse_args()
    if args.objects and not args.fixed_grasps:
        parser.error("--objects needs --fixed-grasps")

    objects = None
    if args.objects:
        specs = resolve_objects(args.objects)[: args.limit]
        objects = [prepare_object(object_by_name(s) if isinstance(s, str) else s) for s in specs]
    rows, baseline = [], None
    if objects:
        baseline = _success(objects, ModelFiles(fixed_grasps=args.fixed_grasps), [Method("fixed", "none")])["fixed + none"]
        print(f"fixed, no evaluator: {100 * baseline:.1f}% on {len(objects)} objects", flush=True)
    for fraction in (float(f) for f in args.fractions.split(",")):
        base = BpsEvaluatorTrainConfig()
        config = dataclasses.replace(
            base, loop=dataclasses.replace(base.loop, epochs=math.ceil(args.epochs / fraction), train_object_fraction=fraction),
            model=dataclasses.replace(base.model, hidden_width=args.hidden_width))
        result = train_bps_evaluator(args.dataset, args.out_dir / f"fraction_{fraction:g}", config)
        metadata = load_checkpoint(result.best_checkpoint).metadata
        row = {"fraction": fraction, "epochs": result.epochs_completed, "best_val_loss": result.best_val_loss,
               "best_epoch": result.best_epoch, "train_grasps": metadata["num_train_grasps"],
               "train_objects": len(metadata["train_objects"])}
        if objects:
            files = ModelFiles(bps_evaluator=str(result.best_checkpoint), fixed_grasps=args.fixed_grasps)
            row["success_rate"] = _success(objects, files, [Method("fixed", "bps")])["fixed + bps"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n{'fraction':>8s} {'objects':>8s} {'grasps':>8s} {'val loss':>9s} {'success':>8s}")
    for r in rows:
        success = f"{100 * r['success_rate']:7.1f}%" if "success_rate" in r else "      -"
        print(f"{100 * r['fraction']:7g}% {r['train_objects']:8d} {r['train_grasps']:8d} {r['best_val_loss']:9.4f} {success}")
    (args.out_dir / "results.json").write_text(json.dumps({"baseline_success_rate": baseline, "rows": rows}, indent=1))
    if args.png:
        _plot(rows, baseline, args.png)
        print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
