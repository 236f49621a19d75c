"""getagrip-train: train the learned grasp models from HDF5 grasp datasets (CPU or GPU, no ROS).

    getagrip-train bps-evaluator --dataset bps.h5 --output-dir runs/bps_evaluator --epochs 20
    getagrip-train bps-sampler --dataset bps.h5 --output-dir runs/bps_sampler --epochs 200
    getagrip-train nerf-evaluator --dataset nerf.h5 --output-dir runs/nerf_evaluator --no-global
    getagrip-train geometry-evaluator --dataset bps.h5 --output-dir runs/geometry_evaluator   # needs /object_points
    getagrip-train export runs/bps_evaluator/best.pt bps_evaluator.pt   # weights only, to ship or share
    getagrip-train calibrate runs/geometry_evaluator/best.pt docs/data/ranking_diagnostic geometry_evaluator.pt

Rerunning with the same --output-dir continues from its last.pt (same settings; --epochs is the total).
Unset options keep the trainer's defaults (getagrip_ros.training.trainers).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import torch

from getagrip_ros.models.bps_evaluator import LABEL_NAMES
from getagrip_ros.models.calibration import expected_calibration_error, fit_platt, predict_pool, read_pool
from getagrip_ros.models.checkpoints import CheckpointError, export_checkpoint, load_checkpoint
from getagrip_ros.models.geometry_evaluator import FEATURE_SETS, feature_count
from getagrip_ros.training.trainers import (
    BpsEvaluatorTrainConfig,
    BpsSamplerTrainConfig,
    GeometryEvaluatorTrainConfig,
    NerfEvaluatorTrainConfig,
    train_bps_evaluator,
    train_bps_sampler,
    train_geometry_evaluator,
    train_nerf_evaluator,
)

LOOP_OPTIONS = ("epochs", "batch_size", "lr", "weight_decay", "grad_clip_norm", "val_fraction", "test_fraction",
                "train_object_fraction", "seed", "device")


def _ints(text: str) -> tuple[int, ...]:
    """'32,64,128' -> (32, 64, 128)."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from err
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _replace(obj, args: argparse.Namespace, names: dict[str, str]):
    """obj with the fields (values of names) that were given on the command line (keys of names)."""
    given = {field: getattr(args, option) for option, field in names.items() if getattr(args, option) is not None}
    return dataclasses.replace(obj, **given)


def _config(args: argparse.Namespace):
    config = {"bps-evaluator": BpsEvaluatorTrainConfig, "bps-sampler": BpsSamplerTrainConfig,
              "nerf-evaluator": NerfEvaluatorTrainConfig, "geometry-evaluator": GeometryEvaluatorTrainConfig}[args.command]()
    config = dataclasses.replace(config, loop=_replace(config.loop, args, {k: k for k in LOOP_OPTIONS}))
    if args.command == "bps-evaluator":
        model = _replace(config.model, args, {"hidden_width": "hidden_width", "block_neurons": "block_neurons",
                                              "dropout": "dropout"})
        return dataclasses.replace(config, model=model, turn_objects=args.turn_objects)
    if args.command == "geometry-evaluator":
        model = _replace(config.model, args, {"hidden_widths": "hidden_widths", "dropout": "dropout",
                                              "feature_set": "feature_set"})
        return dataclasses.replace(config, model=dataclasses.replace(model, num_features=feature_count(model.feature_set)))
    if args.command == "bps-sampler":
        model = _replace(config.model, args, {k: k for k in ("d_model", "num_tokens", "num_heads", "block_neurons")})
        diffusion = _replace(config.diffusion, args, {"num_timesteps": "num_timesteps"})
        return _replace(dataclasses.replace(config, model=model, diffusion=diffusion), args,
                        {"y_pgs_threshold": "y_PGS_threshold"})
    model = _replace(config.model, args, {k: k for k in ("conv_channels", "global_conv_channels", "mlp_hidden",
                                                         "dropout")})
    return dataclasses.replace(config, model=dataclasses.replace(model, use_global=not args.no_global))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="getagrip-train", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dataset", type=Path, required=True, help="HDF5 grasp dataset")
    common.add_argument("--output-dir", type=Path, required=True, help="checkpoints, history.json, loss_curves.png")
    common.add_argument("--epochs", type=int, help="total epochs (resuming continues up to this)")
    common.add_argument("--batch-size", type=int)
    common.add_argument("--lr", type=float, help="learning rate")
    common.add_argument("--weight-decay", type=float)
    common.add_argument("--grad-clip-norm", type=float, help="clip the gradient to this L2 norm")
    common.add_argument("--val-fraction", type=float, help="fraction of the objects held out for validation")
    common.add_argument("--test-fraction", type=float, help="fraction of the objects held out for testing")
    common.add_argument("--train-object-fraction", type=float,
                        help="train on this seeded fraction of the training objects (dataset-size ablations)")
    common.add_argument("--seed", type=int)
    common.add_argument("--device", help="torch device, e.g. cpu or cuda")
    common.add_argument("--quiet", action="store_true", help="no progress bar")
    ev = sub.add_parser("bps-evaluator", parents=[common], help="BPS grasp evaluator (y_pick, y_coll, y_PGS)")
    ev.add_argument("--hidden-width", type=int, help="residual block width (public: 2048)")
    ev.add_argument("--block-neurons", type=int, help="inner width of each residual block (public: 256)")
    ev.add_argument("--dropout", type=float)
    ev.add_argument("--turn-objects", action="store_true",
                    help="show every training grasp with its object at a random heading (needs /bpss_turned: "
                         "getagrip-generate --merge ... --headings K)")
    sa = sub.add_parser("bps-sampler", parents=[common], help="BPS diffusion grasp sampler")
    sa.add_argument("--d-model", type=int, help="token width (public: 128)")
    sa.add_argument("--num-tokens", type=int, help="tokens per grasp (public: 4)")
    sa.add_argument("--num-heads", type=int, help="attention heads (public: 8)")
    sa.add_argument("--block-neurons", type=int, help="inner width of the residual block (public: 256)")
    sa.add_argument("--num-timesteps", type=int, help="diffusion steps (public: 1000)")
    sa.add_argument("--y-pgs-threshold", type=float, help="train on grasps with y_PGS >= this (default 0.9)")
    ne = sub.add_parser("nerf-evaluator", parents=[common], help="NeRF grasp evaluator (finger + global grids)")
    ne.add_argument("--conv-channels", type=_ints, help="finger CNN channels, e.g. 32,64,128")
    ne.add_argument("--global-conv-channels", type=_ints, help="global CNN channels, e.g. 32,64,128")
    ne.add_argument("--mlp-hidden", type=_ints, help="MLP widths, e.g. 256,256")
    ne.add_argument("--dropout", type=float)
    ne.add_argument("--no-global", action="store_true", help="do not use the global grid")
    ge = sub.add_parser("geometry-evaluator", parents=[common],
                        help="hand-object geometry evaluator (needs the object clouds: a dataset from getagrip-generate --merge)")
    ge.add_argument("--hidden-widths", type=_ints, help="MLP widths, e.g. 512,512")
    ge.add_argument("--dropout", type=float)
    ge.add_argument("--feature-set", choices=FEATURE_SETS, help="hand-object features (default: skeleton)")
    ex = sub.add_parser("export", help="copy a checkpoint's model without its training state (to ship or share)")
    ex.add_argument("checkpoint", type=Path, help="a training checkpoint (best.pt, last.pt) or a public one")
    ex.add_argument("out", type=Path, help="the exported checkpoint")
    ex.add_argument("--half", action="store_true", help="store the weights as float16 (half the size)")
    ca = sub.add_parser("calibrate", help="Platt-scale an evaluator's predicted labels on labelled candidates of held-out "
                        "objects (the ranking is unchanged) and write it with its calibration")
    ca.add_argument("checkpoint", type=Path, help="a BPS or geometry evaluator checkpoint (a calibration in it is refitted)")
    ca.add_argument("pools", type=Path, help="folder of labelled pools, one .npz per object "
                    "(benchmarks/bench_evaluator_ranking.py --pool-dir; the frozen diagnostic: docs/data/ranking_diagnostic)")
    ca.add_argument("out", type=Path, help="the calibrated checkpoint (weights only, as export writes)")
    ca.add_argument("--report", type=Path, help="also write the calibration errors as JSON")
    return parser


def _calibrate(args: argparse.Namespace) -> int:
    """Fit on every pool; report each label's ECE raw, cross-fitted (halves of the objects, each scored with the other
    half's fit: what to expect on new objects) and in-sample."""
    from getagrip_ros.robot.allegro import AllegroHand

    paths = sorted(args.pools.glob("*.npz"))
    if not paths:
        print(f"error: no labelled pools (*.npz) in {args.pools}", file=sys.stderr)
        return 2
    try:
        loaded = load_checkpoint(args.checkpoint)
        hand = AllegroHand()
        pools = [read_pool(path) for path in paths]
        predicted = [predict_pool(loaded, hand, pool) for pool in pools]
    except (CheckpointError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    labelled = [np.stack([pool[name] for name in LABEL_NAMES], axis=1) for pool in pools]
    halves = (slice(0, None, 2), slice(1, None, 2))

    def stacked(arrays: list[np.ndarray], half: slice) -> np.ndarray:
        return np.concatenate(arrays[half])

    n = sum(len(y) for y in labelled)
    calibration = fit_platt(np.concatenate(predicted), np.concatenate(labelled),
                            f"{len(pools)} objects, {n} labelled candidates in {args.pools.name}")
    cross = np.concatenate([fit_platt(stacked(predicted, other), stacked(labelled, other))(
        torch.from_numpy(stacked(predicted, half))).numpy() for half, other in (halves, halves[::-1])])
    raw, truth = np.concatenate([stacked(predicted, h) for h in halves]), np.concatenate([stacked(labelled, h) for h in halves])
    fitted = calibration(torch.from_numpy(raw)).numpy()
    report = {"objects": len(pools), "candidates": n, "scale": list(calibration.scale), "offset": list(calibration.offset),
              "ece": {name: {"raw": expected_calibration_error(raw[:, i], truth[:, i]),
                             "cross_fitted": expected_calibration_error(cross[:, i], truth[:, i]),
                             "in_sample": expected_calibration_error(fitted[:, i], truth[:, i])}
                      for i, name in enumerate(LABEL_NAMES)}}
    print(f"{len(pools)} objects, {n} labelled candidates; ECE raw / cross-fitted on object halves / in-sample:")
    for name, ece in report["ece"].items():
        print(f"  {name:7s} {ece['raw']:.3f} / {ece['cross_fitted']:.3f} / {ece['in_sample']:.3f}")
    try:
        path = export_checkpoint(args.checkpoint, args.out, calibration=calibration,
                                 metadata={"calibration_ece": report["ece"]})
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report, indent=1))
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "calibrate":
        return _calibrate(args)
    if args.command == "export":
        try:
            path = export_checkpoint(args.checkpoint, args.out, half=args.half)
        except CheckpointError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
        return 0
    train = {"bps-evaluator": train_bps_evaluator, "bps-sampler": train_bps_sampler,
             "nerf-evaluator": train_nerf_evaluator, "geometry-evaluator": train_geometry_evaluator}[args.command]
    try:
        result = train(args.dataset, args.output_dir, _config(args), progress=not args.quiet)
    except (FileNotFoundError, ValueError) as err:  # bad dataset, settings or checkpoint
        print(f"error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{result.kind}: {result.epochs_run} epochs trained now, {result.epochs_completed} in total; "
          f"train loss {result.final_train_loss:.5g}, validation loss {result.final_val_loss:.5g}, "
          f"best {result.best_val_loss:.5g} (epoch {result.best_epoch})")
    for path in (result.best_checkpoint, result.last_checkpoint, result.history_path, result.loss_curves_path):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
