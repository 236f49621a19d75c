"""How much the simulated Allegro hand holds: the labels of grasps that hold an object, with the object made heavier,
the fingers closed further, or the finger gains raised.

An object's own pre-grasps (the data engine's graspd generator on its true mesh, the floating-hand world of the
labels) are labelled with the paper's protocol; those with y_PGS >= `--min-y-pgs` (they hold the object) are then
labelled again, on the same wrist noise:

- with the object's mass (and inertia) times each of `--mass-scales`;
- closing each fingertip `--close-m` along d_i instead of the protocol's 5 cm;
- with the fingers' PD gains (kp and kd, the Wonik driver's values) times each of `--gain-scales`.

At the nominal settings it also prints, for each kept grasp closed once without noise, the largest finger torque
(N m; the actuators' limit is 0.7), the largest joint error (rad) and the hand's summed normal force on the object (N)
at the end of the closing. Settings are changed on the world's model in place, one at a time; 1 thread.

``--out X.json`` also draws X.png: y_pick against the object's mass for each setting.

``--stored RUN.json --objects a,b --mass-kg M`` instead labels the grasps a ``bench_graspd.py --per-grasp`` run kept for
each named object (all of them, with the run's labels next to them) with the object at its own mass and at M kg.

    python benchmarks/hand_strength.py [--object cube] [--out docs/data/hand_strength_cube.json]
    python benchmarks/hand_strength.py --stored docs/graspd/ranking_test_vectors.json \
        --objects milk_carton,lunchbox,red_box --mass-kg 0.1 --out docs/data/hand_strength_boxes.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import mujoco
import numpy as np
import torch

from getagrip_ros.data.generate import GenerationConfig, object_seed, pregrasps_on_mesh
from getagrip_ros.data.labels import closing_joints, label_grasps
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.description import HAND_JOINT_NAMES
from getagrip_ros.robot.interfaces import JointTrajectory
from getagrip_ros.sim.world import OBJECT_BODY, SimWorld


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",")]


def closed_state(world: SimWorld, grasps, hand: AllegroHand, config: GenerationConfig) -> list[dict[str, float]]:
    """Each grasp closed once at its unperturbed pose as the labels close it: torque, joint error, normal force."""
    closed = closing_joints(grasps, hand, config.labels)
    model, data = world.model, world.data
    hand_acts = [i for i in range(model.nu)
                 if mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, model.actuator_trnid[i, 0]) in HAND_JOINT_NAMES]
    qadr = model.jnt_qposadr[model.actuator_trnid[hand_acts, 0]]
    rows = []
    for T, q0, q1 in zip(grasps.T_frame_palm.numpy(), grasps.joint_angles_rad.double().numpy(), closed):
        world.reset(hand_rad=q0, T_world_palm=T)
        motion = config.labels.motion
        world.follow(JointTrajectory.linear(HAND_JOINT_NAMES, q0, q1, motion.close_s), settle_s=motion.hold_closed_s,
                     wrist_path=lambda t, T=T: T)
        links = set(world.hand_link_names())
        rows.append({"max_torque_nm": float(np.abs(data.actuator_force[hand_acts]).max()),
                     "max_joint_error_rad": float(np.abs(data.ctrl[hand_acts] - data.qpos[qadr]).max()),
                     "hand_normal_force_n": float(sum(v for k, v in world.object_contacts().items() if k in links))})
    return rows


def plot(rows: list[dict], title: str, path: Path) -> None:
    """y_pick against the object's mass, one line per closing distance and gain scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for close_m, gain in sorted({(r["close_m"], r["gain_scale"]) for r in rows}):
        line = sorted((r["mass_kg"], r["y_pick"]) for r in rows if (r["close_m"], r["gain_scale"]) == (close_m, gain))
        ax.plot(*zip(*line), marker="o", label=f"close {100 * close_m:.0f} cm, gains x{gain:g}")
    ax.set(xlabel="object mass (kg)", ylabel="y_pick (share of perturbed trials lifted)", ylim=(-0.02, 1.02), title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def set_mass(world: SimWorld, scale: float, mass: float, inertia: np.ndarray) -> None:
    """The object's mass and inertia at `scale` times (`mass`, `inertia`), MuJoCo's derived constants recomputed."""
    body = mujoco.mj_name2id(world.model, mujoco.mjtObj.mjOBJ_BODY, OBJECT_BODY)
    world.model.body_mass[body], world.model.body_inertia[body] = mass * scale, inertia * scale
    mujoco.mj_setConst(world.model, world.data)  # e.g. the constraints' weights, derived from the masses


def stored_grasps(args, config: GenerationConfig, hand: AllegroHand) -> None:
    """The ``--stored`` mode (module docstring)."""
    from getagrip_ros.grasp.grasp import Grasp

    runs = {row["object"]: row for row in json.loads(args.stored.read_text())["objects"]}
    rows = []
    for name in args.objects.split(","):
        per_grasp = runs[f"tabletop20/{name}"]["methods"]["graspd"]["per_grasp"]
        grasps = Grasp.from_vector(torch.tensor(per_grasp["grasp_vector"]), "world")
        prepared = prepare_object(object_by_name(f"tabletop20/{name}"), config.prepare)
        with SimWorld(config.scene, prepared, config.placement) as world:
            body = mujoco.mj_name2id(world.model, mujoco.mjtObj.mjOBJ_BODY, OBJECT_BODY)
            mass, inertia = float(world.model.body_mass[body]), world.model.body_inertia[body].copy()
            for kg in (mass, args.mass_kg):
                set_mass(world, kg / mass, mass, inertia)
                y = np.array([label.y_pgs for label in label_grasps(world, grasps, hand, config.labels,
                                                                     torch.Generator().manual_seed(0))])
                rows.append({"object": prepared.name, "mass_kg": kg, "grasps": len(y), "mean_y_pgs": float(y.mean()),
                             "best5_y_pgs": float(np.sort(y)[-5:].mean()), "run_mean_y_pgs": float(np.mean(per_grasp["y_pgs"]))})
                print(f"{prepared.name:24s} {kg:.3f} kg: mean y_PGS {y.mean():.3f}, best 5 {np.sort(y)[-5:].mean():.2f} "
                      f"(the run's labels at its own mass: {np.mean(per_grasp['y_pgs']):.3f})", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"stored": str(args.stored), "rows": rows, "date": time.strftime("%Y-%m-%d")}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--object", default="cube", help="a tabletop-20 object")
    parser.add_argument("--min-y-pgs", type=float, default=0.8)
    parser.add_argument("--mass-scales", type=_floats, default=[1.0, 1.5, 2.0, 4.0])
    parser.add_argument("--close-m", type=_floats, default=[0.08, 0.12])
    parser.add_argument("--gain-scales", type=_floats, default=[3.0, 10.0])
    parser.add_argument("--stored", type=Path, help="a bench_graspd.py --per-grasp run (see the module docstring)")
    parser.add_argument("--objects", default="milk_carton,lunchbox,red_box", help="--stored: tabletop-20 objects")
    parser.add_argument("--mass-kg", type=float, default=0.1, help="--stored: the lighter mass")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = dataclasses.replace(GenerationConfig(), generator="graspd")
    hand = AllegroHand()
    if args.stored:
        return stored_grasps(args, config, hand)
    prepared = prepare_object(object_by_name(f"tabletop20/{args.object}"), config.prepare)
    surface_seed, sample_seed, label_seed = (int(s) for s in np.random.SeedSequence(
        object_seed(prepared.name, config.seed)).generate_state(3, dtype=np.uint32))
    rows = []
    with SimWorld(config.scene, prepared, config.placement) as world:
        mesh = prepared.mesh.copy()
        mesh.apply_transform(world.object_pose())
        grasps, _ = pregrasps_on_mesh(prepared.name, mesh, config, hand, surface_seed, sample_seed)
        model = world.model
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, OBJECT_BODY)
        mass, inertia = float(model.body_mass[body]), model.body_inertia[body].copy()
        gain, bias = model.actuator_gainprm.copy(), model.actuator_biasprm.copy()

        def set_model(mass_scale: float, gain_scale: float) -> None:
            model.actuator_gainprm[:, 0] = gain[:, 0] * gain_scale
            model.actuator_biasprm[:, 1:3] = bias[:, 1:3] * gain_scale
            set_mass(world, mass_scale, mass, inertia)

        def labelled(batch, mass_scale=1.0, close_m=config.labels.close_distance_m, gain_scale=1.0):
            set_model(mass_scale, gain_scale)
            labels = label_grasps(world, batch, hand, dataclasses.replace(config.labels, close_distance_m=close_m),
                                  torch.Generator().manual_seed(label_seed))
            set_model(1.0, 1.0)
            return labels

        first = labelled(grasps)
        keep = [i for i, label in enumerate(first) if label.y_pgs >= args.min_y_pgs]
        if not keep:
            raise SystemExit(f"no grasp of {prepared.name} reaches y_PGS >= {args.min_y_pgs}")
        held = grasps[torch.tensor(keep)]
        print(f"{prepared.name}: {mass:.3f} kg, {len(grasps)} graspd grasps, {len(keep)} with y_PGS >= {args.min_y_pgs}")
        state = closed_state(world, held, hand, config)
        closing = {k: [float(np.median([r[k] for r in state])), float(np.max([r[k] for r in state]))] for k in state[0]}
        print("closed, unperturbed (median, max): " + ", ".join(f"{k} {v[0]:.2f}, {v[1]:.2f}" for k, v in closing.items()))
        runs = ([{"mass_scale": s} for s in args.mass_scales]
                + [{"close_m": c, "mass_scale": s} for c in args.close_m for s in (1.0, 2.0)]
                + [{"gain_scale": g, "mass_scale": s} for g in args.gain_scales for s in (1.0, 2.0)])
        for run in runs:
            started = time.perf_counter()
            labels = labelled(held, **run)
            row = {**{"mass_scale": 1.0, "close_m": config.labels.close_distance_m, "gain_scale": 1.0}, **run}
            row.update(mass_kg=mass * row["mass_scale"], y_pick=float(np.mean([label.y_pick for label in labels])),
                       y_pgs=float(np.mean([label.y_pgs for label in labels])), seconds=time.perf_counter() - started)
            rows.append(row)
            print(f"  mass {row['mass_kg']:.3f} kg  close {row['close_m']:.2f} m  gains x{row['gain_scale']:g}: "
                  f"y_pick {row['y_pick']:.2f}  y_PGS {row['y_pgs']:.2f}", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"object": prepared.name, "mass_kg": mass, "grasps": len(grasps),
                                        "held_grasps": len(keep), "closed_unperturbed": closing, "runs": rows,
                                        "settings": {k: str(v) for k, v in vars(args).items()},
                                        "date": time.strftime("%Y-%m-%d")}, indent=1))
        plot(rows, f"{prepared.name}: its {len(keep)} grasps with y_PGS >= {args.min_y_pgs} at {mass:.3f} kg",
             args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
