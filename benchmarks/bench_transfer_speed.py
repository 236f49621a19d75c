"""Speed of the human-demonstration transfer (issue 23's target: <= 5 s for the 100 iterations on 2 CPU cores).

Transfers 9 of the kept demonstrations (`docs/human_demo/demos`: apple, spray_bottle and red_mug, each a power, a
tripod and a pinch grasp) with the `human_demo` sampler's defaults (both finger starts, 100 iterations each), on
the objects' true meshes, and prints each one's stage times (`TransferResult.timings_s`: step (b) per start,
step (c)'s 100 iterations per start, the whole call), the hand model's build time and the machine's 1024^2 fp32
matmul rate in the same run (the reference). Run it from a checkout's root; to compare two versions, run it in each
(e.g. a git worktree of the older commit, with `PYTHONPATH` set to that worktree) on the same idle machine.

    python benchmarks/bench_transfer_speed.py [--threads 2] [--out speed.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

import getagrip_ros
from getagrip_ros.data.generate import GenerationConfig, object_seed
from getagrip_ros.human_demo.demonstration import load_demonstration
from getagrip_ros.human_demo.transfer import transfer_grasp
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.human_demo_sampler import HumanDemoSamplerConfig, human_demo_hand_model
from getagrip_ros.sim.world import SimWorld
from getagrip_ros.synthesis.object_sdf import ObjectSDF, SDFConfig

OBJECTS = ("apple", "spray_bottle", "red_mug")
KINDS = ("power", "tripod", "pinch")


def matmul_gflops(size: int = 1024, repeats: int = 20) -> float:
    a = torch.randn(size, size)
    a @ a
    started = time.perf_counter()
    for _ in range(repeats):
        a @ a
    return 2 * size**3 * repeats / (time.perf_counter() - started) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--demos", type=Path, default=Path("docs/human_demo/demos"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gflops = matmul_gflops()
    print(f"code {Path(getagrip_ros.__file__).parent}, {args.threads} threads, matmul {gflops:.0f} GFLOP/s")
    base, sampler = GenerationConfig(), HumanDemoSamplerConfig()
    started = time.perf_counter()
    allegro = human_demo_hand_model(sampler.hand)
    hand_s = time.perf_counter() - started
    print(f"hand model {hand_s:.2f} s")
    rows = []
    for name in OBJECTS:
        prepared = prepare_object(object_by_name(f"tabletop20/{name}"), base.prepare)
        seed = object_seed(prepared.name, base.seed) % (2**31)
        with SimWorld(base.scene, prepared, base.placement) as world:  # the object where the demonstrations hold it
            mesh = prepared.mesh.copy()
            mesh.apply_transform(world.object_pose())
        sdf = ObjectSDF.from_mesh(mesh, SDFConfig(), frame_id="world", name=name)
        for kind in KINDS:
            demo = load_demonstration(args.demos / f"tabletop20_{name}__{kind}.json")
            started = time.perf_counter()
            result = transfer_grasp(demo, allegro, sdf, sampler.transfer, T_object_table=np.eye(4), seed=seed)
            rows.append({"demo": f"{name} {kind}", "call_s": time.perf_counter() - started, **result.timings_s,
                         "contact_heatmap_difference": result.contact_heatmap_difference})
            print(f"  {name:13s} {kind:7s} " + "  ".join(f"{k} {v:.2f}" for k, v in rows[-1].items() if k.endswith("_s")),
                  flush=True)
    means = {k: float(np.mean([r[k] for r in rows])) for k in rows[0] if k.endswith("_s")}
    print("mean " + "  ".join(f"{k} {v:.2f}" for k, v in means.items()))
    if args.out:
        args.out.write_text(json.dumps({"code": str(Path(getagrip_ros.__file__).parent), "threads": args.threads,
                                        "matmul_gflops": gflops, "hand_model_s": hand_s, "mean": means, "rows": rows,
                                        "date": time.strftime("%Y-%m-%d")}, indent=1))


if __name__ == "__main__":
    main()
