"""Human demonstrations transferred to the Allegro on the true meshes of tabletop-20 (issue 23).

For each object: human grasps made by the contact-rich synthesis core on the keypoint hand model (one power grasp,
every link in contact; one tripod, the thumb, index and middle distal segments; one pinch, the thumb and index),
their 21 keypoints written as demonstrations (JSON, world frame; ``--from-demos`` reads them back instead), then each
transferred with :func:`getagrip_ros.human_demo.transfer.transfer_grasp`. Reported per demonstration, next to step
(a) alone (the open Allegro at the human palm, the reference every later step must improve on) and the two baselines
of :mod:`getagrip_ros.human_demo.baselines` (DexPilot-like; the shipped fixed set's 687 grasps closed onto the
surface, the one with the lowest L_C + L_O): the contact-heatmap difference
(mean |H_human - H_robot| over 2000 object points, tau 1 cm), the orientation difference (|dn|_1 + |df|_1), the max
penetration depth (cm), the penetration volume (cm^3), the epsilon-quality of the contacts, the time, and the labelling
protocol's y_PGS of the grasp (5 perturbed executions in the floating-hand world: does it lift?). ``--ablations`` adds
the seed's Table II rows (:data:`ABLATIONS`); the method ``physics_refined`` is the transfer refined by the synthesis
core as the human_demo sampler refines it, judged by its first grasp (the best physics score).

    python benchmarks/bench_human_demo.py --objects tabletop-20 --out docs/human_demo/transfer.json \
        --demos docs/human_demo/demos            # --from-demos docs/human_demo/demos: the same demonstrations again
    python benchmarks/bench_human_demo.py --from-demos docs/human_demo/demos --ablations --threads 2 \
        --out docs/human_demo/transfer.json     # how docs/human_demo/transfer.json was made; then, after
                                                 # finger_init "both" became the default:
    python benchmarks/bench_human_demo.py --from-demos docs/human_demo/demos --methods transfer,contact_init --update \
        --out docs/human_demo/transfer.json     # recompute these columns, keep the others
    python benchmarks/bench_human_demo.py --from-demos docs/human_demo/demos_fr3 --kinds tripod,pinch --ablations \
        --methods step_a,dexpilot,fixed_set,transfer,contact_init,discrete_init --out docs/human_demo/transfer_fr3.json
                                                 # the same on demonstrations not used to choose finger_init
    python benchmarks/bench_human_demo.py --from-demos docs/human_demo/demos --kinds tripod,pinch --methods \
        transfer,fingertip_term --fingertip-weight 10 --out docs/human_demo/fingertip_term/weight10.json
                                                 # the fingertip term L_F (weight 100: weight100.json, fingertip_term only)
    python benchmarks/bench_human_demo.py --from-demos docs/human_demo/demos_fr3 --kinds tripod,pinch --methods \
        transfer,physics_refined --out docs/human_demo/physics_refinement/demos_fr3.json
                                                 # the transfer refined by the synthesis core (the sampler's
                                                 # physics_refinement, --refine-steps 200); the same with
                                                 # --from-demos docs/human_demo/demos: demos.json
    python benchmarks/bench_human_demo.py --wrist-filter --demos docs/human_demo/demos_fr3 --demos-only --kinds tripod,pinch
                                                 # demonstrations this robot's wrist can take (the whole-task benchmark)
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from getagrip_ros.cli.generate import resolve_objects
from getagrip_ros.data.generate import GenerationConfig, object_seed
from getagrip_ros.data.labels import label_grasps
from getagrip_ros.human_demo.baselines import dexpilot_grasp, fixed_set_grasp
from getagrip_ros.human_demo.demonstration import HumanDemonstration, load_demonstration, save_demonstration
from getagrip_ros.human_demo.human_hand import HumanHandModelConfig, human_hand_model, model_keypoints
from getagrip_ros.human_demo.transfer import (PhysicsRefinement, TransferConfig, TransferError, initial_palm_pose,
                                              refine_with_physics, robot_grasp_result, transfer_grasp, transfer_objective)
from getagrip_ros.grasp.filters import CableFilterConfig, cable_filter_rotation_mask
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.models.shipped import SHIPPED, resolve_model_file
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.planning.object_input import object_from_points
from getagrip_ros.planning.samplers import FixedSampler, load_grasp_set
from getagrip_ros.planning.graspd_sampler import GraspdSamplerConfig, graspd_hand_model
from getagrip_ros.planning.human_demo_sampler import HumanDemoSamplerConfig, human_demo_hand_model
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.sim.world import SimWorld
from getagrip_ros.synthesis.hand_model import SurfaceSamplingConfig
from getagrip_ros.synthesis.object_sdf import ObjectSDF, SDFConfig
from getagrip_ros.synthesis.optimizer import SynthesisConfig, SynthesisOptions, sample_starts, synthesize_grasps

KINDS = {"power": "all", "tripod": "tripod", "pinch": "pinch"}
BASELINES = ("step_a", "dexpilot", "fixed_set")
#: The seed's Table II: step (b) alone (the seed's contact optimisation; ours runs both starts) or replaced by discrete
#: closing; step (c)'s losses removed one by one; no step (c).
ABLATIONS = ("contact_init", "discrete_init", "without_L_C", "without_L_C_L_O", "without_L_C_L_O_L_S", "without_step_c")


def transfer_configs(transfer: TransferConfig, fingertip_weight: float) -> dict[str, TransferConfig]:
    """The transfer, step (a) alone and the ablations, as transfer configurations; "fingertip_term": the transfer with
    L_F weighted `fingertip_weight`."""
    def without(*names: str) -> TransferConfig:
        return replace(transfer, terms=tuple(t for t in transfer.terms if t not in names))

    return {"transfer": transfer, "step_a": replace(transfer, finger_iterations=0, iterations=0),
            "fingertip_term": replace(transfer, weights=replace(transfer.weights, fingertips=fingertip_weight)),
            "contact_init": replace(transfer, finger_init="contact"),
            "discrete_init": replace(transfer, finger_init="discrete"),
            "without_L_C": without("contact"), "without_L_C_L_O": without("contact", "orientation"),
            "without_L_C_L_O_L_S": without("contact", "orientation", "self_penetration"),
            "without_step_c": replace(transfer, iterations=0)}


def _wrist_corners_in_palm() -> np.ndarray:
    """(16, 3) corners of the wrist's connector plate and ZED 2i camera in the Allegro palm frame (the robot's mount)."""
    from scipy.spatial.transform import Rotation

    from getagrip_ros.robot.description import CONNECTOR_BOX, MOUNT_JOINTS, ZED2I_BOX

    def pose(name: str) -> np.ndarray:
        joint = next(j for j in MOUNT_JOINTS if j.name == name)
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = Rotation.from_euler("xyz", joint.rpy_rad).as_matrix(), joint.xyz_m
        return T

    def corners(box) -> np.ndarray:
        signs = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)])
        return np.c_[signs * np.array(box.size_m) + np.array(box.xyz_m), np.ones(8)]

    T_palm_connector = np.linalg.inv(pose("connector_algr_joint"))
    T_palm_camera = T_palm_connector @ pose("connector_zed2i_joint")
    return np.vstack([corners(CONNECTOR_BOX) @ T_palm_connector.T, corners(ZED2I_BOX) @ T_palm_camera.T])[:, :3]


WRIST_CORNERS_IN_PALM = torch.as_tensor(_wrist_corners_in_palm())


def _human_palm_ok(model, T: torch.Tensor, q: torch.Tensor, config: CableFilterConfig,
                   wrist_clearance_m: float) -> torch.Tensor:
    """(B,) the human hands at root poses T (B, 4, 4) and joints q (B, J) whose palm, as the Allegro would take it at
    step (a), passes the wrist-camera cable filter and keeps the robot's wrist (camera, connector) this far above
    the table (z = 0)."""
    keypoints = model_keypoints(model, T, q)
    palms = torch.stack([initial_palm_pose(k) for k in keypoints])
    wrist_z = (WRIST_CORNERS_IN_PALM @ palms[:, :3, :3].transpose(1, 2) + palms[:, None, :3, 3])[..., 2]
    return cable_filter_rotation_mask(palms[:, :3, :3], config) & (wrist_z.amin(-1) >= wrist_clearance_m)


def human_demonstrations(name: str, sdf: ObjectSDF, models: dict, steps: int, seed: int,
                         wrist_filter: bool = False) -> dict[str, HumanDemonstration]:
    """One synthesised human grasp per kind (the best physics score of 4 starts), as demonstrations. `wrist_filter`:
    only hands this robot's wrist can take: the planner's cable filter on the palm, and the wrist's camera and
    connector 3 cm above the table (16 starts that pass with a 15 deg and 5 cm margin, the best of those that still
    pass at the end)."""
    out = {}
    for kind, model in models.items():
        initial, starts = None, 4
        if wrist_filter:
            generator = torch.Generator().manual_seed(seed)
            T = sample_starts(model, sdf, 400, SynthesisConfig().approach_distance_m, SynthesisConfig().offset_start_m,
                              torch.eye(4, dtype=torch.float64), generator)
            q_open = model.open_joint_angles_rad[None].expand(len(T), -1)
            initial = T[_human_palm_ok(model, T, q_open, CableFilterConfig(75.0, 45.0), 0.05)][:16]
            starts = len(initial)
        result = synthesize_grasps(model, sdf, SynthesisConfig(num_steps=steps, chunk_steps=50),
                                   SynthesisOptions(num_grasps=starts, seed=seed, T_object_table=np.eye(4),
                                                    initial_T_object_root=initial))
        ok = ~result.failed
        if wrist_filter:
            ok &= _human_palm_ok(model, result.T_object_root, result.joint_angles_rad, CableFilterConfig(), 0.03)
        ok = torch.nonzero(ok).flatten()
        if len(ok) == 0:
            continue
        best = ok[result.physics_score()[ok].argmin()]
        keypoints = model_keypoints(model, result.T_object_root[best][None], result.joint_angles_rad[best][None])[0]
        out[kind] = HumanDemonstration("keypoints21", sdf.frame_id, keypoints.numpy())
    return out


def physics_refined(demo: HumanDemonstration, allegro, sdf: ObjectSDF, sampler: HumanDemoSamplerConfig,
                    refinement: PhysicsRefinement, seed: int):
    """The transfer refined by the synthesis core as the human_demo sampler refines it (the best physics score first),
    judged as a transfer is: the first refined grasp's contact state against the demonstration, its 37-D grasp as the
    sampler returns it."""
    graspd = GraspdSamplerConfig()
    result = transfer_grasp(demo, allegro, sdf, sampler.transfer, T_object_table=np.eye(4), seed=seed,
                            pregrasp=graspd.synthesis)
    objective = transfer_objective(demo, allegro, sdf, sampler.transfer, T_object_table=np.eye(4), seed=seed)
    refined = refine_with_physics(objective, result, graspd_hand_model(graspd.hand), graspd.synthesis, refinement,
                                  torch.Generator().manual_seed(seed), sampler.similarity_region)
    best = robot_grasp_result(objective, refined.T_object_palm[0], refined.joint_angles_rad[0], graspd.synthesis)
    best = replace(best, grasp=refined.grasps[:1], timings_s={"optimise_s": refined.elapsed_s})
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", default="tabletop-20")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--human-steps", type=int, default=300, help="synthesis steps of the human grasps")
    parser.add_argument("--out", type=Path, default=Path("human_demo_transfer.json"))
    parser.add_argument("--demos", type=Path, help="write the demonstrations here (one JSON per object and kind)")
    parser.add_argument("--from-demos", type=Path, help="read the demonstrations from here instead of synthesising them")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--wrist-filter", action="store_true",
                        help="synthesise only demonstrations whose palm this robot's wrist allows (the cable filter)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="grasp kinds (power, tripod, pinch)")
    parser.add_argument("--demos-only", action="store_true", help="write the demonstrations (--demos) and stop")
    parser.add_argument("--ablations", action="store_true", help="also the seed's Table II rows")
    parser.add_argument("--fingertip-weight", type=float, default=10.0,
                        help="method fingertip_term: the transfer with L_F (fingertips to the human fingertip contacts) "
                             "weighted this")
    parser.add_argument("--refine-steps", type=int, default=200,
                        help="method physics_refined: the transfer refined by the synthesis core for this many steps "
                             "(the sampler's physics_refinement, otherwise its defaults)")
    parser.add_argument("--methods", help="only these methods (comma-separated; default: all)")
    parser.add_argument("--update", action="store_true",
                        help="keep the other methods' columns of the rows already in --out and recompute only --methods")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    base = GenerationConfig()
    objects = resolve_objects(args.objects)
    objects = objects[: args.limit] if args.limit else objects
    kinds = args.kinds.split(",")
    human = {kind: human_hand_model(HumanHandModelConfig(contact=KINDS[kind], sampling=SurfaceSamplingConfig(num_samples=1500)))
             for kind in kinds}
    sampler = HumanDemoSamplerConfig()
    allegro = human_demo_hand_model(sampler.hand)
    configs = transfer_configs(sampler.transfer, args.fingertip_weight)
    refinement = replace(sampler.physics_refinement, num_steps=args.refine_steps)
    methods = args.methods.split(",") if args.methods else [*BASELINES, "transfer", *(ABLATIONS if args.ablations else ())]
    if unknown := set(methods) - {*BASELINES, *configs, "physics_refined"}:
        parser.error(f"unknown methods {sorted(unknown)}")
    previous = {(r["object"], r["kind"]): r for r in json.loads(args.out.read_text())["rows"]} if args.update else {}
    rows = []
    hand = AllegroHand()
    dexpilot_hand = AllegroHand(dtype=torch.float64)
    fixed_set = FixedSampler(load_grasp_set(resolve_model_file("fixed_grasps", SHIPPED)))
    for spec in objects:
        name = spec if isinstance(spec, str) else spec.name
        prepared = prepare_object(object_by_name(spec) if isinstance(spec, str) else spec, base.prepare)
        seed = object_seed(prepared.name, base.seed) % (2**31)
        with SimWorld(base.scene, prepared, base.placement) as world:
            mesh = prepared.mesh.copy()
            mesh.apply_transform(world.object_pose())
            sdf = ObjectSDF.from_mesh(mesh, SDFConfig(), frame_id="world", name=name)
            placed = None if args.demos_only else fixed_set.sample(object_from_points(np.asarray(mesh.sample(5000, seed=seed)), "world"),
                                      len(fixed_set.grasps_Oy), torch.Generator().manual_seed(seed), lambda fraction: None)
            started = time.perf_counter()
            if args.from_demos:
                demos = {kind: load_demonstration(path) for kind in kinds
                         if (path := args.from_demos / f"{name.replace('/', '_')}__{kind}.json").is_file()}
            else:
                demos = human_demonstrations(name, sdf, human, args.human_steps, seed, args.wrist_filter)
            made_s = time.perf_counter() - started
            for kind, demo in demos.items():
                if args.demos:
                    args.demos.mkdir(parents=True, exist_ok=True)
                    save_demonstration(demo, args.demos / f"{name.replace('/', '_')}__{kind}.json")
                    print(f"{name:28s} {kind:7s} demonstration written ({made_s / len(demos):.1f} s)", flush=True)
                if args.demos_only:
                    continue
                row = previous.get((name, kind), {"object": name, "kind": kind, "human_synthesis_s": made_s / len(demos)})
                for label in methods:
                    try:
                        t = time.perf_counter()
                        if label == "dexpilot":
                            objective = transfer_objective(demo, allegro, sdf, sampler.transfer, np.eye(4), seed)
                            result = dexpilot_grasp(objective, dexpilot_hand)
                        elif label == "fixed_set":
                            objective = transfer_objective(demo, allegro, sdf, sampler.transfer, np.eye(4), seed)
                            result = fixed_set_grasp(objective, placed, dexpilot_hand)[0]
                        elif label == "physics_refined":
                            result = physics_refined(demo, allegro, sdf, sampler, refinement, seed)
                        else:
                            result = transfer_grasp(demo, allegro, sdf, configs[label], T_object_table=np.eye(4), seed=seed)
                        elapsed = time.perf_counter() - t
                    except TransferError as err:
                        row[label] = {"refused": str(err)}
                        continue
                    grasp = result.grasp.to(dtype=torch.float32)
                    y = label_grasps(world, grasp, hand, base.labels, torch.Generator().manual_seed(seed))[0]
                    row[label] = {"contact_heatmap_difference": result.contact_heatmap_difference,
                                  "orientation_difference": result.orientation_difference,
                                  "penetration_depth_cm": 100 * result.penetration_depth_m,
                                  "penetration_volume_cm3": result.penetration_volume_cm3,
                                  "epsilon_quality": result.epsilon_quality,
                                  "fingertip_gap_cm": 100 * result.fingertip_gap_m,
                                  "time_s": elapsed, "optimise_s": result.timings_s.get("optimise_s", 0.0),
                                  "y_pgs": y.y_pgs, "y_coll": y.y_coll, "vector_37d": grasp.to_numpy_vector()[0].tolist()}
                rows.append(row)
                print(f"{name:28s} {kind:7s} " + "  | ".join(
                    f"{label} L_C {row[label].get('contact_heatmap_difference', float('nan')):.3f} "
                    f"L_O {row[label].get('orientation_difference', float('nan')):.3f} "
                    f"pen {row[label].get('penetration_depth_cm', float('nan')):.2f} cm "
                    f"y_PGS {row[label].get('y_pgs', float('nan')):.1f}" for label in methods), flush=True)

    if args.demos_only:
        return

    def mean(label: str, key: str, kind: str | None = None) -> float:
        values = [r[label][key] for r in rows if key in r.get(label, {}) and (kind is None or r["kind"] == kind)]
        return float(np.mean(values)) if values else float("nan")

    labels = [label for label in (*BASELINES, "transfer", "fingertip_term", "physics_refined", *ABLATIONS)
              if any(label in r for r in rows)]
    summary = {kind or "all": {label: {key: mean(label, key, kind) for key in
                                       ("contact_heatmap_difference", "orientation_difference", "penetration_depth_cm",
                                        "penetration_volume_cm3", "epsilon_quality", "fingertip_gap_cm", "time_s", "optimise_s", "y_pgs",
                                        "y_coll")} for label in labels}
               for kind in (None, *KINDS)}
    summary["demonstrations"] = len(rows)
    for baseline in ("dexpilot", "fixed_set"):
        pairs = [(r["transfer"], r[baseline]) for r in rows
                 if "contact_heatmap_difference" in r.get("transfer", {}) and "contact_heatmap_difference" in r.get(baseline, {})]
        for column in ("contact", "orientation"):
            key = "contact_heatmap_difference" if column == "contact" else "orientation_difference"
            summary[f"transfer_beats_{baseline}_on_{column}"] = sum(ours[key] < theirs[key] for ours, theirs in pairs)
    print(json.dumps(summary, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(_rounded({"summary": summary, "rows": rows, "threads": args.threads,
                                             "human_steps": args.human_steps}), separators=(",", ":")))


def _rounded(value, digits: int = 6):
    """``value`` with every float rounded to ``digits`` decimals, to keep the committed results small."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {key: _rounded(item, digits) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item, digits) for item in value]
    return value


if __name__ == "__main__":
    main()
