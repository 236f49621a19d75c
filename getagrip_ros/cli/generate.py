"""getagrip-generate: generate a labelled BPS grasp dataset over catalog objects (resumable; local workers or Ray).

    getagrip-generate --objects tabletop-20 --out runs/data --grasps-per-object 64 --workers 2 --merge data.h5
    getagrip-generate --objects tabletop-20 --out runs/graspd --generator graspd --grasps-per-object 32
    getagrip-generate --objects procedural:train,tabletop20/cube,meshes/bunny.obj --out runs/data --limit 50
    getagrip-generate --out runs/data --merge data.h5 --histograms labels.png   # merge the finished shards only
    getagrip-generate --objects procedural:train,pybullet-random:train --grasps-per-object 96 --shuffle \
        --workers 2 --out runs/data_v1 --merge data_v1.h5      # the dataset of the shipped models
    getagrip-generate --objects procedural,pybullet-random --ray auto --out runs/data   # on a Ray cluster
    getagrip-generate --out runs/data --pack data/my_pack     # a compact, versioned copy of the run (a run folder too)
    getagrip-generate --out data/training_v1 --merge data.h5 --generated-only   # the kept pack -> training dataset
    getagrip-generate --out runs/data_v1 --mine --limit 300 --workers 2   # label the shipped planner's proposals
    getagrip-generate --out runs/graspd_mined --mine --mine-samplers graspd --workers 2   # and graspd's synthesis
    getagrip-generate --out runs/data_v1 --nerf-subset nerf.h5 --nerf-count 4   # NeRF grids of 4 objects' grasps

--mine labels, per generated object, the evaluator's top grasps and unranked draws of the fixed and diffusion
samplers (models: the shipped ones unless --mine-evaluator/--mine-sampler/--mine-fixed-grasps name others), or every
grasp graspd synthesises on the observed cloud (--mine-samplers graspd: top-k + random-k of them, --graspd-steps
steps), and writes them under <out>/mined/; --merge then joins them (any folder under mined/) to the generated grasps.
--mine-refinement-iterations N refines the ranked proposals first (the planner refines 50 iterations by default).

--nerf-subset renders each chosen object in the world it was labelled in, trains nerfacto on the views and writes
its grasps' finger and global density grids in the public NeRF layout (the NeRF evaluator's data; minutes per
object on a CPU; finished objects in --nerf-work-dir are kept).

--objects takes comma-separated set names (procedural, pybullet-random, tabletop-20; "set:split" for one split),
catalog names (procedural/mug_0003) and mesh files (obj/stl/ply/glb, metres). Rerunning with the same --out
continues: finished objects are kept, skipped ones (reasons in skipped.json) are not retried unless asked.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from getagrip_ros.data.generate import (
    SHARDS_DIR,
    GenerationConfig,
    GenerationSummary,
    ObjectOutcome,
    generate_dataset,
    merge_shards,
    write_fixed_grasp_set,
)
from getagrip_ros.data.pack import PACK_FILE, pack_run, verify_pack
from getagrip_ros.data.mining import MINING_EVALUATORS, MINING_SAMPLERS, MiningConfig, MiningSummary, mine_dataset
from getagrip_ros.data.stats import dataset_stats, plot_label_histograms
from getagrip_ros.objects.catalog import SETS, list_objects, user_object
from getagrip_ros.objects.mesh_object import MESH_FILE_SUFFIXES, ObjectSpec
from getagrip_ros.planning.graspd_sampler import GraspdSamplerConfig
from getagrip_ros.planning.planner import ModelFiles
from getagrip_ros.training.datasets import read_bps_dataset
from getagrip_ros.synthesis.optimizer import SynthesisConfig


def resolve_objects(text: str) -> list[ObjectSpec | str]:
    """Comma-separated set names ("set" or "set:split"), catalog names and mesh files -> specs and names.

    Catalog names stay names: an unknown one is skipped (with its reason) by the run, not an error here.
    """
    objects: list[ObjectSpec | str] = []
    for item in (s.strip() for s in text.split(",")):
        set_name, _, split = item.partition(":")
        if set_name in SETS:
            objects.extend(list_objects(set_name, split or None))
        elif Path(item).suffix.lower() in MESH_FILE_SUFFIXES:
            objects.append(user_object(item))
        elif item:
            objects.append(item)
    return objects


def _percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "n/a"


def _report(summary: GenerationSummary) -> None:
    c = summary.counts
    print(f"generated {len(summary.generated)} objects in {summary.wall_s:.1f} s with {summary.num_workers} worker(s) "
          f"({len(summary.already_done)} already done, {len(summary.skipped)} skipped, {len(summary.failed)} failed)")
    if summary.generated:
        print(f"  {c['grasps']} grasps, {c['trials']} labelled trials: {summary.trials_per_s_per_core:.2f} labelled "
              f"trials/s per core, {summary.grasps_per_s:.2f} grasps/s")
        for kind in ("starts", "augmented"):
            print(f"  {kind}: {c[kind]} grasps, y_PGS > 0: {_percent(c[f'{kind}_positive'], c[kind])}, "
                  f">= 0.9: {_percent(c[f'{kind}_good'], c[kind])}")
    for name, reason in summary.skipped.items():
        print(f"  skipped {name}: {reason}")
    for name, error in summary.failed.items():
        print(f"  failed {name}: {error.strip().splitlines()[-1]}")


def _report_mining(summary: MiningSummary) -> None:
    c = summary.counts
    print(f"mined {len(summary.mined)} objects in {summary.wall_s:.1f} s with {summary.num_workers} worker(s) "
          f"({summary.already_done} already done, {len(summary.skipped)} skipped, {len(summary.failed)} failed)")
    kinds = [k for k in c if k not in ("grasps", "trials") and not k.endswith(("_positive", "_good"))]
    for kind in kinds:
        print(f"  {kind}: {c[kind]} grasps, y_PGS > 0: {_percent(c[f'{kind}_positive'], c[kind])}, "
              f">= 0.9: {_percent(c[f'{kind}_good'], c[kind])}")
    for name, error in summary.failed.items():
        print(f"  failed {name}: {error.strip().splitlines()[-1]}")


def _nerf_subset(args: argparse.Namespace, config: GenerationConfig) -> None:
    from getagrip_ros.data.nerf_subset import NerfSubsetConfig, build_nerf_subset
    from getagrip_ros.perception.nerf.config import nerf_profile

    if args.nerf_objects:
        names = [n.strip() for n in args.nerf_objects.split(",") if n.strip()]
    else:
        shards = args.out / SHARDS_DIR
        names = sorted(str(p.relative_to(shards).with_suffix("")) for p in shards.rglob("*.npz"))[: args.nerf_count]
    if not names:
        raise ValueError(f"no objects with shards in {args.out / SHARDS_DIR} for --nerf-subset")
    # simulated poses are exact: no pose refinement (it moves the reconstruction off the world frame)
    subset = NerfSubsetConfig(nerf=nerf_profile(args.nerf_profile, device=args.nerf_device, camera_optimizer="off"),
                              max_grasps_per_object=args.nerf_max_grasps)
    with tqdm(total=len(names), unit="object", desc="nerf subset", disable=True if args.quiet else None, dynamic_ncols=True) as bar:
        def on_object(name: str, status: str) -> None:
            bar.update(1)
            bar.write(f"  {name}: {status}")

        path = build_nerf_subset(args.out, names, args.nerf_subset, args.nerf_work_dir or args.out / "nerf_subset",
                                 config, subset, on_object, progress=bar.set_postfix_str)
    print(f"wrote {path}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="getagrip-generate", description=__doc__.splitlines()[0])
    parser.add_argument("--objects", help="comma-separated sets (set or set:split), catalog names and mesh files")
    parser.add_argument("--out", type=Path, required=True, help="run folder: shards/, config.json, skipped.json")
    parser.add_argument("--grasps-per-object", type=int, help=f"starts per object "
                                                              f"(default {GenerationConfig.grasps_per_object})")
    parser.add_argument("--generator", choices=("energy", "graspd"), default=GenerationConfig.generator,
                        help="how pre-grasps are made on the true mesh: heuristic starts refined on a small energy, "
                             "or contact-rich synthesis (Grasp'D)")
    parser.add_argument("--graspd-steps", type=int, help=f"with --generator graspd or --mine-samplers graspd: optimisation steps "
                                                        f"(default {SynthesisConfig.num_steps})")
    parser.add_argument("--perturbations", type=int, help="labelling trials per grasp (paper and default: 5)")
    parser.add_argument("--workers", type=int, default=1, help="local worker processes")
    parser.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster instead: auto, ray://head:10001, or local "
                                                         "(pip install 'getagrip_ros[ray]'; shards are written here)")
    parser.add_argument("--limit", type=int, help="only the first N objects")
    parser.add_argument("--shuffle", action="store_true",
                        help="visit the objects in a seeded random order (a stopped run then covers every set evenly)")
    parser.add_argument("--seed", type=int, default=0, help="run seed (each object's seed derives from it and its name)")
    parser.add_argument("--retry-skipped", action="store_true", help="try the objects skipped before again")
    parser.add_argument("--merge", type=Path, metavar="OUT.h5", help="then write every shard into one HDF5 dataset")
    parser.add_argument("--generated-only", action="store_true", help="with --merge: leave the mined grasps out")
    parser.add_argument("--headings", type=int, default=1,
                        help="with --merge: also store every object's BPS at this many headings about the vertical "
                             "(for getagrip-train bps-evaluator --turn-objects)")
    parser.add_argument("--histograms", type=Path, metavar="OUT.png", help="with --merge: draw the label histograms")
    parser.add_argument("--pack", type=Path, metavar="DIR",
                        help="then write the run's compact, versioned copy (a run folder that --out accepts) into DIR")
    parser.add_argument("--fixed-grasps", type=Path, metavar="OUT.npz",
                        help="write the fixed sampler's set: the best grasp with y_PGS >= 0.9 of every object")
    parser.add_argument("--mine", action="store_true", help="label the planner's proposals on the generated objects")
    for flag, what in (("--mine-evaluator", "evaluator of --mine-evaluator-kind"), ("--mine-sampler", "diffusion sampler"),
                       ("--mine-fixed-grasps", "fixed grasp set")):
        parser.add_argument(flag, default="shipped", metavar="PATH", help=f"with --mine: the {what} (default: shipped)")
    parser.add_argument("--mine-evaluator-kind", choices=MINING_EVALUATORS, default="bps",
                        help="with --mine: the evaluator that ranks the proposals (its mistakes are mined)")
    parser.add_argument("--mine-samplers", default="fixed,diffusion",
                        help=f"with --mine: comma-separated samplers whose proposals are labelled ({', '.join(MINING_SAMPLERS)})")
    parser.add_argument("--mine-top-k", type=int, default=MiningConfig.top_k, help="ranked grasps per sampler and object")
    parser.add_argument("--mine-random-k", type=int, default=MiningConfig.random_k, help="unranked draws per sampler and object")
    parser.add_argument("--mine-refinement-iterations", type=int, default=MiningConfig.refinement_iterations,
                        help="with --mine: refine the ranked proposals this many iterations before labelling them "
                             "(the planner's default is 50: the grasps it executes)")
    parser.add_argument("--nerf-subset", type=Path, metavar="OUT.h5", help="write NeRF grids of a few objects' grasps")
    parser.add_argument("--nerf-objects", help="with --nerf-subset: comma-separated catalog names (default: --nerf-count)")
    parser.add_argument("--nerf-count", type=int, default=4, help="with --nerf-subset: the first N objects with a shard")
    parser.add_argument("--nerf-work-dir", type=Path, help="captures, NeRFs and grids per object (default: OUT/nerf_subset)")
    parser.add_argument("--nerf-profile", default="cpu", choices=("cpu", "paper"), help="nerfacto settings")
    parser.add_argument("--nerf-device", default="cpu", help="where nerfacto trains (cpu, cuda)")
    parser.add_argument("--nerf-max-grasps", type=int, default=0, help="grasps per object (0: all; 630 kB each)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _pack(args: argparse.Namespace, argv: list[str]) -> None:
    """Pack the run; the manifest records this command without --pack when it named the objects (it rebuilds the run)
    or mined (it rebuilds the mined shards)."""
    i = argv.index("--pack") if "--pack" in argv else None
    kept = argv[:i] + argv[i + 2:] if i is not None else [a for a in argv if not a.startswith("--pack=")]
    command = " ".join(["getagrip-generate", *kept])
    manifest = pack_run(args.out, args.pack, command if args.objects is not None else "", command if args.mine else "")
    size_mb = sum(p.stat().st_size for p in args.pack.rglob("*") if p.is_file()) / 1e6
    print(f"packed {manifest['num_objects']} objects, {manifest['counts']['grasps']} grasps into {args.pack} "
          f"({size_mb:.1f} MB)")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if (args.objects is None and args.merge is None and args.fixed_grasps is None and not args.mine
            and args.nerf_subset is None and args.pack is None):
        print("error: give --objects to generate, --mine, --merge to merge, --pack, --fixed-grasps and/or "
              "--nerf-subset", file=sys.stderr)
        return 2
    if (args.histograms is not None or args.headings != 1) and args.merge is None:
        print("error: --histograms and --headings need --merge", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")  # reasons are printed below
    config = GenerationConfig(seed=args.seed, generator=args.generator)
    if args.graspd_steps is not None:
        config = dataclasses.replace(config, graspd=dataclasses.replace(
            config.graspd, synthesis=dataclasses.replace(config.graspd.synthesis, num_steps=args.graspd_steps)))
    if args.grasps_per_object is not None:
        config = dataclasses.replace(config, grasps_per_object=args.grasps_per_object)
    if args.perturbations is not None:
        config = dataclasses.replace(config, labels=dataclasses.replace(config.labels, num_perturbations=args.perturbations))
    failed = False
    try:
        if args.objects is not None:
            objects = resolve_objects(args.objects)
            if args.shuffle:
                order = np.random.default_rng(args.seed).permutation(len(objects))
                objects = [objects[i] for i in order]
            objects = objects[: args.limit]
            with tqdm(unit="object", desc="generate", disable=True if args.quiet else None, dynamic_ncols=True) as bar:
                def on_object(outcome: ObjectOutcome, total: int) -> None:
                    bar.total = total
                    bar.update(1)
                    bar.set_postfix_str(f"{outcome.name} {outcome.status}")

                summary = generate_dataset(objects, args.out, config, args.workers, args.retry_skipped, on_object, args.ray)
            _report(summary)
            failed = bool(summary.failed)
        if args.mine:
            models = ModelFiles(**{f"{args.mine_evaluator_kind}_evaluator": args.mine_evaluator}, bps_sampler=args.mine_sampler,
                                fixed_grasps=args.mine_fixed_grasps)
            graspd = GraspdSamplerConfig()
            if args.graspd_steps is not None:
                graspd = dataclasses.replace(graspd, synthesis=dataclasses.replace(graspd.synthesis,
                                                                                   num_steps=args.graspd_steps))
            mining = MiningConfig(models, evaluator=args.mine_evaluator_kind,
                                  samplers=tuple(s.strip() for s in args.mine_samplers.split(",") if s.strip()),
                                  top_k=args.mine_top_k, random_k=args.mine_random_k,
                                  refinement_iterations=args.mine_refinement_iterations, graspd=graspd, generation=config,
                                  seed=args.seed)
            with tqdm(unit="object", desc="mine", disable=True if args.quiet else None, dynamic_ncols=True) as bar:
                def on_mined(outcome: ObjectOutcome, total: int) -> None:
                    bar.total = total
                    bar.update(1)
                    bar.set_postfix_str(f"{outcome.name} {outcome.status}")

                mined = mine_dataset(args.out, mining, args.workers, args.limit, on_mined)
            _report_mining(mined)
            failed = failed or bool(mined.failed)
        if args.pack is not None:
            _pack(args, sys.argv[1:] if argv is None else argv)
        if (args.out / PACK_FILE).is_file():
            this_mining = args.mine and bool(mined.mined)  # mined/ now holds this run's round, not the pack's listed one
            version = verify_pack(args.out, check_mined=not this_mining)["version"]
            checked = "generated shard as listed (mined/ holds this run's mining)" if this_mining else "shard as listed"
            print(f"{args.out}: training pack version {version}, every {checked}")
        if args.merge is not None:
            path = merge_shards(args.out, args.merge, include_mined=not args.generated_only, headings=args.headings)
            print(f"wrote {path}")
            data = read_bps_dataset(path)
            print("\n".join(f"  {line}" for line in dataset_stats(data).lines()))
            if args.histograms is not None:
                print(f"wrote {plot_label_histograms(data, args.histograms)}")
        if args.fixed_grasps is not None:
            path = write_fixed_grasp_set(args.out, args.fixed_grasps)
            print(f"wrote {path} ({len(np.load(path)['y_PGS'])} grasps)")
        if args.nerf_subset is not None:
            _nerf_subset(args, config)
    except (ValueError, ImportError) as err:  # other settings in the run folder, nothing to merge, bad names, no Ray
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 1 if failed else 0
