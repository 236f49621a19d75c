"""Grasp'D synthesis on a GPU against the CPU: time per step, grasps per second, and whether the grasps lift as often.

The GPU machine has neither MuJoCo nor open3d, so the work is split in three steps:

- ``prepare`` (here): the world-frame SDFs of `tabletop-20` meshes, placed as ``bench_graspd.py`` places them, with
  the seeds it uses, one ``.npz`` per object (:meth:`ObjectSDF.save`);
- ``run`` (on the GPU machine; imports only the synthesis core and torch): the time per optimisation step for 32
  grasps on each device (the difference of a 120- and a 20-step run, as ``bench_graspd.py --speed``), grasps per second
  at larger batches over a whole 500-step synthesis, each device's fp32 matmul rate as the reference, and the 32
  grasps of every object synthesised on the GPU with the default settings -> ``grasps.npz`` and ``speed.json``;
- ``label`` (here): those grasps labelled by the paper's protocol (5 perturbed executions each): the mean y_PGS, the
  top 5 by the physics score and the best 5, next to the CPU synthesis of the same objects and seeds
  (``--cpu docs/graspd/all_links.json``, method ``graspd``).

    python benchmarks/bench_graspd_device.py prepare --objects tabletop20/apple,tabletop20/cube --out .device_sdf
    python benchmarks/bench_graspd_device.py run --sdfs .device_sdf --out $OUT          # on the GPU machine
    python benchmarks/bench_graspd_device.py label --grasps grasps.npz --cpu docs/graspd/all_links.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from getagrip_ros.synthesis.hand_model import AllegroModelConfig, allegro_hand_model
from getagrip_ros.synthesis.object_sdf import ObjectSDF, SDFConfig
from getagrip_ros.synthesis.optimizer import SynthesisConfig, SynthesisOptions, synthesize_grasps

HAND = AllegroModelConfig(contact_links="distal")  # the graspd generator's and sampler's hand


def _stem(name: str) -> str:
    return name.replace("/", "__")


def prepare(objects: str, out: Path) -> None:
    from getagrip_ros.cli.generate import resolve_objects
    from getagrip_ros.data.generate import GenerationConfig, object_seed
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import prepare_object

    from bench_graspd import placed_mesh  # MuJoCo: here only, not on the GPU machine

    base = GenerationConfig()
    out.mkdir(parents=True, exist_ok=True)
    for spec in resolve_objects(objects):
        prepared = prepare_object(object_by_name(spec) if isinstance(spec, str) else spec, base.prepare)
        _, sample_seed, label_seed = (int(s) for s in np.random.SeedSequence(object_seed(prepared.name, base.seed))
                                      .generate_state(3, dtype=np.uint32))
        mesh = placed_mesh(prepared, base)
        path = out / f"{_stem(prepared.name)}.npz"
        ObjectSDF.from_mesh(mesh, base.graspd.sdf, frame_id="world", name=prepared.name).save(path)
        (out / f"{_stem(prepared.name)}.json").write_text(json.dumps({"object": prepared.name, "sample_seed": sample_seed,
                                                                       "label_seed": label_seed}))
        print(f"{prepared.name}: {path} ({path.stat().st_size / 1e6:.1f} MB)", flush=True)


def _matmul_gflops(device: torch.device, n: int = 4096, repeats: int = 10) -> float:
    a = torch.randn(n, n, device=device)
    a @ a
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(repeats):
        a @ a
    if device.type == "cuda":
        torch.cuda.synchronize()
    return repeats * 2 * n**3 / (time.perf_counter() - started) / 1e9


def _synthesis_s(hand, sdf, device: str, steps: int, grasps: int) -> float:
    started = time.perf_counter()
    synthesize_grasps(hand, sdf, SynthesisConfig(num_steps=steps), SynthesisOptions(num_grasps=grasps, device=device))
    return time.perf_counter() - started  # the results come back as CPU tensors: the GPU has finished


def run(sdfs: Path, out: Path, devices: list[str], batches: list[int], rounds: int) -> None:
    hand = allegro_hand_model(HAND)
    paths = sorted(sdfs.glob("*.npz"))
    speed: dict = {"torch": torch.__version__, "threads": torch.get_num_threads(),
                   "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, "devices": {}}
    probe = ObjectSDF.load(paths[0])
    for name in devices:
        device = torch.device(name)
        _synthesis_s(hand, probe, name, 5, 32)  # warm-up (CUDA context, kernels)
        per_step = [(_synthesis_s(hand, probe, name, 120, 32) - _synthesis_s(hand, probe, name, 20, 32)) / 100
                    for _ in range(rounds)]
        row = {"ms_per_step_32": 1e3 * float(np.median(per_step)), "rounds_ms": [round(1e3 * t, 2) for t in per_step],
               "matmul_fp32_gflops": _matmul_gflops(device), "grasps_per_s_500_steps": {}}
        for batch in batches if device.type == "cuda" else [32]:
            seconds = _synthesis_s(hand, probe, name, 500, batch)
            row["grasps_per_s_500_steps"][str(batch)] = batch / seconds
            print(f"{name}: {batch} grasps x 500 steps in {seconds:.1f} s ({batch / seconds:.1f} grasps/s)", flush=True)
        speed["devices"][name] = row
        print(f"{name}: {row['ms_per_step_32']:.1f} ms per step (32 grasps), matmul {row['matmul_fp32_gflops']:.0f} GFLOP/s",
              flush=True)
        out.mkdir(parents=True, exist_ok=True)
        (out / "speed.json").write_text(json.dumps(speed, indent=1))
    grasps = {}
    device = devices[0]
    out.mkdir(parents=True, exist_ok=True)
    for path in paths:
        meta = json.loads(path.with_suffix(".json").read_text())
        sdf = ObjectSDF.load(path)
        started = time.perf_counter()
        result = synthesize_grasps(hand, sdf, SynthesisConfig(), SynthesisOptions(num_grasps=32, seed=meta["sample_seed"],
                                                                                  device=device))
        seconds = time.perf_counter() - started
        stem = _stem(meta["object"])
        grasps[f"{stem}.vector"] = result.grasp.to_vector().double().numpy()
        grasps[f"{stem}.score"] = result.physics_score().numpy()
        grasps[f"{stem}.failed"] = result.failed.numpy()
        grasps[f"{stem}.seconds"] = np.float64(seconds)
        print(f"{meta['object']}: 32 grasps on {device} in {seconds:.1f} s, {int(result.failed.sum())} failed", flush=True)
        np.savez(out / "grasps.npz", **grasps)  # after every object: a run cut short keeps what it made


def label(grasps_path: Path, sdfs: Path, cpu: Path | None, out: Path | None) -> None:
    from getagrip_ros.data.generate import GenerationConfig
    from getagrip_ros.data.labels import label_grasps
    from getagrip_ros.grasp.grasp import Grasp
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import prepare_object
    from getagrip_ros.robot.allegro import AllegroHand
    from getagrip_ros.sim.world import SimWorld

    base, allegro = GenerationConfig(), AllegroHand()
    reference = {}
    if cpu is not None:
        reference = {r["object"]: r["methods"]["graspd"] for r in json.loads(cpu.read_text())["objects"]}
    rows = []
    with np.load(grasps_path, allow_pickle=False) as data:
        stems = sorted({key.split(".")[0] for key in data.files})
        for stem in stems:
            meta = json.loads((sdfs / f"{stem}.json").read_text())
            keep = ~data[f"{stem}.failed"]
            grasps = Grasp.from_vector(torch.as_tensor(data[f"{stem}.vector"][keep], dtype=torch.float32), "world")
            score = data[f"{stem}.score"][keep]
            prepared = prepare_object(object_by_name(meta["object"]), base.prepare)
            with SimWorld(base.scene, prepared, base.placement) as world:
                labels = label_grasps(world, grasps, allegro, base.labels, torch.Generator().manual_seed(meta["label_seed"]))
            y = np.array([lab.y_pgs for lab in labels])
            row = {"object": meta["object"], "gpu_seconds": float(data[f"{stem}.seconds"]), "mean_y_pgs": float(y.mean()),
                   "top5_success": float(y[np.argsort(score, kind="stable")[:5]].mean()),
                   "oracle5_success": float(np.sort(y)[-5:].mean())}
            if meta["object"] in reference:
                row["cpu"] = {k: reference[meta["object"]][k] for k in ("mean_y_pgs", "top5_success", "oracle5_success", "time_s")}
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {k: float(np.mean([r[k] for r in rows])) for k in ("mean_y_pgs", "top5_success", "oracle5_success")}
    if all("cpu" in r for r in rows):
        summary["cpu"] = {k: float(np.mean([r["cpu"][k] for r in rows])) for k in ("mean_y_pgs", "top5_success", "oracle5_success")}
    print(json.dumps(summary, indent=1))
    if out is not None:
        out.write_text(json.dumps({"summary": summary, "objects": rows}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--objects", default="tabletop20/apple,tabletop20/cube,tabletop20/yellow_cup,tabletop20/goblet")
    p.add_argument("--out", type=Path, default=Path(".device_sdf"))
    r = sub.add_parser("run")
    r.add_argument("--sdfs", type=Path, default=Path(".device_sdf"))
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--devices", default="cuda,cpu", help="the first one also synthesises every object's grasps")
    r.add_argument("--batches", default="32,128,512,2048", help="grasps per synthesis for grasps/s (GPU only)")
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    lab = sub.add_parser("label")
    lab.add_argument("--grasps", type=Path, required=True)
    lab.add_argument("--sdfs", type=Path, default=Path(".device_sdf"))
    lab.add_argument("--cpu", type=Path, help="bench_graspd.py output of the same objects (method graspd)")
    lab.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.objects, args.out)
    elif args.step == "run":
        if args.threads:
            torch.set_num_threads(args.threads)
        run(args.sdfs, args.out, args.devices.split(","), [int(b) for b in args.batches.split(",")], args.rounds)
    else:
        label(args.grasps, args.sdfs, args.cpu, args.out)


if __name__ == "__main__":
    main()
