"""Labels with less noise: a training pack's grasps near the decision boundary executed more times (issue 24's lever).

A grasp's labels are means over 5 perturbed executions, so a grasp that succeeds half the time can be labelled
anywhere from 0.2 to 0.8. This executes every grasp of a pack (generated and mined) with 0 < y_pick < 1 or
0 < y_PGS < 1 ``--extra`` more times in the world it was labelled in (the floating-hand world rebuilt from the shard:
the object prepared again, at the shard's yaw, checked to settle where it did), and writes a copy of the pack whose
boundary labels are the means over all 5 + extra executions. The copy is a run folder without ``pack.json`` (its
labels are no longer the pack's): merge and train on it as on the pack, then score the models on the frozen ranking
diagnostic (``bench_evaluator_ranking.py``). Prints how the 5-execution labels compare with the extra executions.

Extra executions are seeded per object: the generated grasps with ``object_seed(name, --seed)``, the mined ones with
that seed + 1. One file per object in ``OUT/relabel/`` (resumable); ``OUT/relabel.json`` holds the statistics.

    python benchmarks/relabel_boundary.py --pack data/training_v1 --out runs/pack_relabelled --extra 10 --workers 2
    getagrip-generate --out runs/pack_relabelled --merge runs/relabelled.h5
    getagrip-train geometry-evaluator --dataset runs/relabelled.h5 --output-dir runs/geometry_relabelled
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import torch

from getagrip_ros.data.generate import MINED_DIR, SHARDS_DIR, GenerationConfig, load_shard, object_seed, shard_world
from getagrip_ros.data.labels import label_grasps
from getagrip_ros.data.mining import SETTLE_TOLERANCE_M
from getagrip_ros.data.pack import PACK_FILE
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.robot.allegro import AllegroHand

LABELS = ("y_pick", "y_coll", "y_PGS")


def boundary(y: np.ndarray) -> np.ndarray:
    """Rows of (n, 3) [y_pick, y_coll, y_PGS] labels with y_pick or y_PGS strictly between 0 and 1."""
    return np.flatnonzero(((y[:, 0] > 0) & (y[:, 0] < 1)) | ((y[:, 2] > 0) & (y[:, 2] < 1)))


def _labels(arrays) -> np.ndarray:
    return np.stack([np.asarray(arrays[k], np.float64) for k in LABELS], 1)


def relabel_object(job: tuple[Path, Path, Path, int, int]) -> tuple[str, str]:
    """Execute one object's boundary grasps `extra` more times; writes OUT/relabel/<set>__<id>.npz."""
    shard_file, pack, out_dir, extra, seed = job
    torch.set_num_threads(1)
    shard = load_shard(shard_file)
    out = out_dir / f"{shard.object_name.replace('/', '__')}.npz"
    if out.exists():
        return shard.object_name, "done before"
    parts = {"generated": (shard.grasps_Oy, _labels({k: getattr(shard, k) for k in LABELS}))}
    mined_file = pack / MINED_DIR / shard_file.relative_to(pack / SHARDS_DIR)
    if mined_file.exists():
        with np.load(mined_file) as f:
            parts["mined"] = (f["grasps_Oy"], _labels(f))
    start = time.perf_counter()
    config = GenerationConfig()
    hand, result = AllegroHand(), {}
    try:
        world = shard_world(shard, config, SETTLE_TOLERANCE_M)
    except ObjectRejected as exc:
        return shard.object_name, f"skipped: {exc}"
    with world:
        for offset, (kind, (grasps_Oy, y)) in enumerate(parts.items()):
            rows = boundary(y)
            result[f"{kind}_rows"], result[f"{kind}_extra"] = rows, np.zeros((len(rows), 3))
            if len(rows):
                grasps = Grasp.from_vector(torch.as_tensor(grasps_Oy[rows], dtype=torch.float64), "Oy").transformed(
                    torch.as_tensor(shard.T_world_Oy), "world")
                labels = label_grasps(world, grasps, hand, dataclasses.replace(config.labels, num_perturbations=extra),
                                      torch.Generator().manual_seed(object_seed(shard.object_name, seed) + offset))
                result[f"{kind}_extra"] = np.array([[label.y_pick, label.y_coll, label.y_pgs] for label in labels])
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **result, seconds=time.perf_counter() - start)
    tmp.replace(out)
    n = sum(len(result[f"{kind}_rows"]) for kind in parts)
    return shard.object_name, f"{n} grasps x {extra} executions in {time.perf_counter() - start:.0f} s"


def write_copy(pack: Path, out: Path, extra: int, base_executions: int) -> dict:
    """The pack's shards and mined shards under out/, boundary labels averaged over all executions; statistics."""
    for sub in (SHARDS_DIR, MINED_DIR):
        if (out / sub).exists():
            shutil.rmtree(out / sub)
        if (pack / sub).exists():
            shutil.copytree(pack / sub, out / sub)
    for name in ("config.json", "skipped.json", "failed.json", "mining.json"):
        if (pack / name).exists():
            shutil.copy2(pack / name, out / name)
    before, after, seconds = [], [], 0.0
    for result_file in sorted((out / "relabel").glob("*.npz")):
        set_name, object_id = result_file.stem.split("__")
        with np.load(result_file) as r:
            seconds += float(r["seconds"])
            for kind, sub in (("generated", SHARDS_DIR), ("mined", MINED_DIR)):
                target = out / sub / set_name / f"{object_id}.npz"
                if f"{kind}_rows" not in r.files or not len(r[f"{kind}_rows"]):
                    continue
                with np.load(target) as f:
                    arrays = {k: f[k] for k in f.files}
                rows, y_extra = r[f"{kind}_rows"], r[f"{kind}_extra"]
                y = _labels(arrays)
                before.append(y[rows])
                after.append(y_extra)
                mean = (base_executions * y[rows] + extra * y_extra) / (base_executions + extra)
                for j, key in enumerate(LABELS):
                    arrays[key] = arrays[key].copy()
                    arrays[key][rows] = mean[:, j]
                np.savez_compressed(target, **arrays)
    y5, yx = np.concatenate(before), np.concatenate(after)
    levels = np.arange(1, base_executions) / base_executions
    return {"grasps": len(y5), "executions": len(y5) * extra, "worker_seconds": round(seconds, 1),
            "executions_per_s_per_worker": round(len(y5) * extra / seconds, 2),
            "y_PGS_of_the_extra_executions_by_5_execution_label": {
                f"{v:.1f}": {"grasps": int(np.isclose(y5[:, 2], v).sum()),
                             "extra_mean": round(float(yx[np.isclose(y5[:, 2], v), 2].mean()), 4)}
                for v in levels if np.isclose(y5[:, 2], v).any()},
            "y_PGS_correlation": round(float(np.corrcoef(y5[:, 2], yx[:, 2])[0, 1]), 4),
            "mean_abs_change_y_PGS": round(float(np.abs(y5[:, 2] - (base_executions * y5[:, 2] + extra * yx[:, 2])
                                                        / (base_executions + extra)).mean()), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", type=Path, default=Path("data/training_v1"), help="a training pack (or run folder)")
    parser.add_argument("--out", type=Path, required=True, help="the copy with the averaged labels")
    parser.add_argument("--extra", type=int, default=10, help="more executions per boundary grasp")
    parser.add_argument("--seed", type=int, default=4242, help="run seed of the extra executions")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, help="only the first N objects (by name)")
    args = parser.parse_args()
    if args.out.resolve() == args.pack.resolve():
        raise SystemExit("--out must differ from --pack: the pack keeps its labels")
    base = GenerationConfig().labels.num_perturbations
    shard_files = sorted((args.pack / SHARDS_DIR).rglob("*.npz"))[: args.limit]
    jobs = [(f, args.pack, args.out / "relabel", args.extra, args.seed) for f in shard_files]
    with Pool(args.workers, maxtasksperchild=8) as pool:
        for i, (name, message) in enumerate(pool.imap_unordered(relabel_object, jobs)):
            print(f"[{i + 1}/{len(jobs)}] {name}: {message}", flush=True)
    stats = write_copy(args.pack, args.out, args.extra, base)
    (args.out / PACK_FILE).unlink(missing_ok=True)
    (args.out / "relabel.json").write_text(json.dumps({"settings": {k: str(v) for k, v in vars(args).items()}, **stats}, indent=1))
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
