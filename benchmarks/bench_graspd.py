"""Contact-rich synthesis (Grasp'D) against the data engine's energy generator, on the objects' true meshes.

For every object and method, `--grasps` pre-grasps are made on the true mesh by the data engine's own code
(:func:`getagrip_ros.data.generate.pregrasps_on_mesh`, world frame, the object resting on the table of the
floating-hand world) and then:

- labelled with the paper's protocol (each grasp executed 5 times with the label noise): the mean y_PGS, the
  share of starts reaching y_PGS >= 0.9, and the Get a Grip success of the top 5 by the synthesis's physics
  score (the energy generator has none: its first 5) next to the best 5 (oracle);
- measured like the paper, on a finer SDF of the mesh than the optimiser uses (`--metric-resolution`), with the
  fingertips of each pre-grasp moved along their closing directions onto the surface (the same procedure for both
  methods): contact area (cm^2: hand-surface samples within 2 mm of the object), interpenetration volume (cm^3:
  sample area x depth inside) and their ratio;
- simulated displacement in MuJoCo (which the optimiser does not use): the object's motion relative to the palm
  while the closed hand lifts it 20 cm under gravity (the label trials; the paper holds the hand still in
  PyBullet and lets gravity act), the median of each grasp's trials, in cm; and, as the paper reports its top k
  (ranked by the displacement itself), the mean of the 2 and of the 5 lowest.

Ablations (`--methods`) follow the paper's Table 3: graspd_no_relaxation, graspd_no_coarse_to_fine (offset 0 from
the start), graspd_no_leak (leak alpha = 0); graspd_pregrasp_normal makes the pre-grasps by backing the fingertips
off along their contact normals (the default opens the fingers' flexion joints); graspd_all_links lets every link
carry contact (the paper's contact-rich power grasps; Get a Grip's labels fail palm and proximal contact);
graspd_steps<N> runs another step budget and graspd_sdf<N> another SDF resolution (grid points along the longest
side; the time includes the SDF's build). Everything is printed per object and summarised (medians over objects).

    python benchmarks/bench_graspd.py --objects tabletop-20 --methods energy,graspd --out docs/graspd/quality.json
    python benchmarks/bench_graspd.py --limit 8 --methods graspd,graspd_no_relaxation,graspd_no_coarse_to_fine,graspd_no_leak
    python benchmarks/bench_graspd.py --speed --threads 2   # ms per step, with the machine's matmul rate

`--per-grasp` also writes each grasp's labels, physics score, ranking features (the opposition of the thumb,
the smallest gaps of the forbidden and the other links to the object and the table at the pre-grasp and closed)
and its 37-D pre-grasp vector (world frame), so rankings can be compared offline (`rank_graspd.py`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from getagrip_ros.cli.generate import resolve_objects
from getagrip_ros.data.generate import GenerationConfig, object_seed, pregrasps_on_mesh
from getagrip_ros.data.labels import FORBIDDEN_LINKS, label_grasps
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.robot.allegro import AllegroHand, move_fingertips
from getagrip_ros.sim.world import SimWorld
from getagrip_ros.synthesis.contact import ContactConfig
from getagrip_ros.synthesis.hand_model import AllegroModelConfig, allegro_hand_model
from getagrip_ros.synthesis.losses import HandState, axis_wrenches, grasp_metrics
from getagrip_ros.synthesis.object_sdf import ObjectSDF, SDFConfig
from getagrip_ros.synthesis.optimizer import SynthesisOptions, synthesize_grasps


def method_config(name: str, base: GenerationConfig) -> GenerationConfig:
    """The generation settings of a method name (see the module docstring)."""
    if name == "energy":
        return dataclasses.replace(base, generator="energy")
    synthesis = base.graspd.synthesis
    if name == "graspd":
        pass
    elif name == "graspd_no_relaxation":
        synthesis = dataclasses.replace(synthesis, relaxation=False)
    elif name == "graspd_no_coarse_to_fine":
        synthesis = dataclasses.replace(synthesis, offset_start_m=0.0)
    elif name == "graspd_no_leak":
        synthesis = dataclasses.replace(synthesis, contact=ContactConfig(leak=0.0))
    elif name == "graspd_pregrasp_normal":
        synthesis = dataclasses.replace(synthesis, pregrasp="normal")
    elif name == "graspd_all_links":
        hand = dataclasses.replace(base.graspd.hand, contact_links="all")
        return dataclasses.replace(base, generator="graspd", graspd=dataclasses.replace(base.graspd, hand=hand))
    elif name.startswith("graspd_steps"):
        synthesis = dataclasses.replace(synthesis, num_steps=int(name.removeprefix("graspd_steps")))
    elif name.startswith("graspd_sdf"):
        sdf = dataclasses.replace(base.graspd.sdf, resolution=int(name.removeprefix("graspd_sdf")))
        return dataclasses.replace(base, generator="graspd", graspd=dataclasses.replace(base.graspd, sdf=sdf))
    else:
        raise ValueError(f"unknown method {name!r}")
    return dataclasses.replace(base, generator="graspd", graspd=dataclasses.replace(base.graspd, synthesis=synthesis))


PAPER_METRICS = ("contact_area_cm2", "penetration_volume_cm3", "penetration_depth_mm")


def distance_along(sdf: ObjectSDF, points: torch.Tensor, directions: torch.Tensor, max_m: float = 0.06,
                   iterations: int = 24) -> torch.Tensor:
    """(B, F) distance (m) from points (B, F, 3) along unit directions to the surface, by sphere tracing; rays that
    meet no surface within `max_m` stop there."""
    t = torch.zeros(points.shape[:-1], dtype=points.dtype)
    for _ in range(iterations):
        t = (t + sdf.distance(points + t[..., None] * directions, 0.0).clamp_min(0.0)).clamp_max(max_m)
    return t


def placed_mesh(prepared, base: GenerationConfig):
    """The object's mesh in the world frame, where the floating-hand world (and so the labels) puts it."""
    with SimWorld(base.scene, prepared, base.placement) as world:
        mesh = prepared.mesh.copy()
        mesh.apply_transform(world.object_pose())
    return mesh


def touching_metrics(grasps, sdf: ObjectSDF, hand_model, allegro: AllegroHand) -> dict[str, np.ndarray]:
    """Contact area (cm^2), penetration volume (cm^3) and depth (mm) with each fingertip moved along its closing
    direction onto the surface (its distance to it along that direction)."""
    grasps = grasps.to("cpu", torch.float64)
    R, T = grasps.palm_rotation, grasps.T_frame_palm
    tips = hand_model.fingertip_points(hand_model.link_poses(T, grasps.joint_angles_rad))
    gap = distance_along(sdf, tips, grasps.fingertip_directions)
    directions_palm = grasps.fingertip_directions @ R
    q = move_fingertips(allegro, grasps.joint_angles_rad, directions_palm, gap).joint_angles_rad.double()
    C = hand_model.num_contact_samples
    state = HandState(T, q, torch.zeros(len(grasps), C, dtype=torch.float64), torch.zeros(len(grasps), 6, C, 3, dtype=torch.float64))
    m = grasp_metrics(hand_model, sdf, state, axis_wrenches("axes6"), 0.05, ContactConfig(), None, 0.002)
    return {"contact_area_cm2": m.contact_area_cm2.numpy(), "penetration_volume_cm3": m.penetration_volume_cm3.numpy(),
            "penetration_depth_mm": m.penetration_depth_m.numpy() * 1e3,
            **{f"{k}_closed_mm": v for k, v in _gaps_mm(hand_model, sdf, T, q).items()},
            **{f"{k}_pregrasp_mm": v for k, v in _gaps_mm(hand_model, sdf, T, grasps.joint_angles_rad).items()},
            "opposition": (grasps.fingertip_directions[:, -1] * grasps.fingertip_directions[:, :-1].mean(1)).sum(-1).numpy()}


def _gaps_mm(hand_model, sdf: ObjectSDF, T: torch.Tensor, q: torch.Tensor) -> dict[str, np.ndarray]:
    """Smallest distance (mm) of the hand's surface to the object, and above the table (z = 0), at joints q: of
    the links the labels forbid to touch (palm, proximal) and of the others."""
    points = hand_model.surface_points(hand_model.link_poses(T, q))
    gap = torch.minimum(sdf.distance(points, 0.0), points[..., 2])
    forbidden = torch.tensor([hand_model.link_names[i] in FORBIDDEN_LINKS for i in hand_model.sample_link.tolist()])
    return {"forbidden_gap": gap[:, forbidden].amin(-1).numpy() * 1e3, "distal_gap": gap[:, ~forbidden].amin(-1).numpy() * 1e3}


def run_object(spec, methods: list[str], base: GenerationConfig, metric_sdf: SDFConfig, hand_model, allegro,
               per_grasp: bool = False) -> dict:
    name = spec if isinstance(spec, str) else spec.name
    prepared = prepare_object(object_by_name(spec) if isinstance(spec, str) else spec, base.prepare)
    seed = object_seed(prepared.name, base.seed)
    surface_seed, sample_seed, label_seed = (int(s) for s in np.random.SeedSequence(seed).generate_state(3, dtype=np.uint32))
    out = {"object": name, "methods": {}}
    with SimWorld(base.scene, prepared, base.placement) as world:
        mesh = prepared.mesh.copy()
        mesh.apply_transform(world.object_pose())
        sdf = ObjectSDF.from_mesh(mesh, metric_sdf, frame_id="world", name=name)
        for method in methods:
            config = method_config(method, base)
            started = time.perf_counter()
            grasps, score = pregrasps_on_mesh(name, mesh, config, allegro, surface_seed, sample_seed)
            made_s = time.perf_counter() - started
            labels = label_grasps(world, grasps, allegro, base.labels, torch.Generator().manual_seed(label_seed))
            y = np.array([label.y_pgs for label in labels])
            displacement_cm = np.array([100 * np.median([t.relative_motion_m for t in label.trials]) for label in labels])
            order = np.arange(len(y)) if score is None else np.argsort(score.numpy(), kind="stable")
            geo = touching_metrics(grasps, sdf, hand_model, allegro)
            top = order[:5]
            row = {"grasps": len(y), "time_s": round(made_s, 2), "mean_y_pgs": float(y.mean()),
                   "good_share": float((y >= 0.9).mean()), "top5_success": float(y[top].mean()),
                   "oracle5_success": float(np.sort(y)[-5:].mean()),
                   "y_coll": float(np.mean([label.y_coll for label in labels])),
                   "displacement_cm_median": float(np.median(displacement_cm)),
                   "displacement_cm_top5_median": float(np.median(displacement_cm[top])),
                   # the paper's own ranking of its top k: by the simulated displacement itself (mean of the k lowest)
                   "displacement_cm_best2": float(np.sort(displacement_cm)[:2].mean()),
                   "displacement_cm_best5": float(np.sort(displacement_cm)[:5].mean()),
                   **{f"{k}_median": float(np.median(geo[k])) for k in PAPER_METRICS},
                   "area_per_volume_median": float(np.median(geo["contact_area_cm2"] / np.maximum(geo["penetration_volume_cm3"], 1e-3)))}
            if per_grasp:
                row["per_grasp"] = {"y_pgs": y.tolist(), "y_coll": [label.y_coll for label in labels],
                                    "y_pick": [label.y_pick for label in labels],
                                    "score": None if score is None else score.tolist(),
                                    **{k: v.tolist() for k, v in geo.items()},
                                    # the pre-grasps themselves (world frame, public 37-D layout), to rank offline
                                    "grasp_vector": np.round(grasps.to_vector().double().numpy(), 6).tolist()}
            out["methods"][method] = row
            print(f"{name:26s} {method:26s} {len(y):3d} grasps {made_s:6.1f} s  y_PGS {row['mean_y_pgs']:.3f} "
                  f">=0.9 {row['good_share']:.2f}  top5 {row['top5_success']:.2f} (best5 {row['oracle5_success']:.2f})  "
                  f"area {row['contact_area_cm2_median']:.1f} cm2  pen {row['penetration_volume_cm3_median']:.3f} cm3  "
                  f"disp {row['displacement_cm_median']:.1f} cm (top5 {row['displacement_cm_top5_median']:.1f})", flush=True)
    return out


def summarize(rows: list[dict]) -> dict[str, dict[str, float]]:
    methods = sorted({m for r in rows for m in r["methods"]})
    summary = {}
    for m in methods:
        values = [r["methods"][m] for r in rows if m in r["methods"]]
        keys = [k for k in values[0] if isinstance(values[0][k], float)]
        summary[m] = {"objects": len(values), **{f"mean_{k}": float(np.mean([v[k] for v in values])) for k in
                                                 ("mean_y_pgs", "good_share", "top5_success", "oracle5_success", "y_coll", "time_s")},
                      **{f"median_{k}": float(np.median([v[k] for v in values])) for k in keys
                         if k.endswith("median") or k.startswith("displacement_cm_best")}}
    return summary


def speed(steps: int, rounds: int) -> None:
    """ms per optimisation step for 32 grasps on `apple` (96^3 SDF, distal contact), round-robin with a plain fp32
    matmul whose rate is the machine's reference in the same run."""
    mesh = prepare_object(object_by_name("tabletop20/apple")).mesh
    hand = allegro_hand_model(AllegroModelConfig(contact_links="distal"))
    sdf = ObjectSDF.from_mesh(mesh, SDFConfig())
    config = GenerationConfig().graspd.synthesis
    a = torch.randn(2048, 2048)

    def synthesize(n: int) -> float:
        started = time.perf_counter()
        synthesize_grasps(hand, sdf, dataclasses.replace(config, num_steps=n), SynthesisOptions(num_grasps=32))
        return time.perf_counter() - started

    def matmul() -> float:
        started = time.perf_counter()
        for _ in range(8):
            a @ a
        return 8 * 2 * 2048**3 / (time.perf_counter() - started) / 1e9

    synthesize(5)
    per_step, rates = [], []
    for _ in range(rounds):
        rates.append(matmul())
        # the per-step time: the difference of two budgets cancels the fixed cost (starts, metrics, pre-grasps)
        per_step.append((synthesize(steps + 20) - synthesize(20)) / steps)
        rates.append(matmul())
    ms, rate = 1e3 * float(np.median(per_step)), float(np.median(rates))
    print(f"{torch.get_num_threads()} threads: {ms:.1f} ms per step (32 grasps; rounds {[round(1e3 * t, 1) for t in per_step]}), "
          f"fp32 matmul {rate:.0f} GFLOP/s; 500 steps ~ {ms * 0.5:.0f} s + the fixed cost")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", default="tabletop-20")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--methods", default="energy,graspd")
    parser.add_argument("--grasps", type=int, default=32, help="grasps per object and method")
    parser.add_argument("--metric-resolution", type=int, default=160, help="SDF grid of the contact metrics")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--per-grasp", action="store_true", help="also write each grasp's labels, score and metrics")
    parser.add_argument("--speed", action="store_true", help="only time the optimisation steps (see speed())")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.speed:
        speed(100, 3)
        return
    base = GenerationConfig(grasps_per_object=args.grasps, seed=args.seed)
    methods = args.methods.split(",")
    for m in methods:
        method_config(m, base)  # unknown names fail before any work
    hand_model = allegro_hand_model(AllegroModelConfig(contact_links="all"))
    allegro = AllegroHand()
    rows, skipped = [], {}
    for spec in resolve_objects(args.objects)[: args.limit]:
        try:
            rows.append(run_object(spec, methods, base, SDFConfig(resolution=args.metric_resolution), hand_model, allegro,
                                   args.per_grasp))
        except ObjectRejected as exc:
            skipped[str(spec if isinstance(spec, str) else spec.name)] = str(exc)
            print(f"skipped: {exc}", flush=True)
    summary = summarize(rows)
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"summary": summary, "objects": rows, "skipped": skipped,
                                        "settings": {"methods": methods, "grasps": args.grasps, "seed": args.seed,
                                                     "metric_resolution": args.metric_resolution}},
                                       indent=1, default=lambda v: None if isinstance(v, float) and math.isnan(v) else str(v)))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
