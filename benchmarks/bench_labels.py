"""Grasp-labelling throughput: labelled trials per second, per core and per machine, against the previous labeller.

The data engine's own pre-grasps (``--generator``, on each object's true mesh, the object resting at x, y = 0.65, 0 m
in the floating-hand world) are labelled with the paper's protocol (5 perturbed trials: teleport -> close -> lift
20 cm, 2.2 s simulated per trial, less when a lift leaves the object on the table) three ways, object by object
in one run, on the same grasps and the same wrist noise:

- previous: the labeller as it was before 2026-12-03, rebuilt here as the reference: a world stepped by a loop that
  converts and writes the wrist pose at every step, MuJoCo's automatic (dense) constraint Jacobian, one thread;
- now, 1 thread: the data engine's labeller (:func:`getagrip_ros.data.labels.label_grasps` in its world: 4 ms steps,
  sparse Jacobian);
- now, N threads: the same on ``--threads`` replicas of the world (the simulation evaluator's setting).

``--timestep-s`` runs the new labellers with another step, and ``--mj-option NAME=VALUE`` (repeatable) with another
MuJoCo solver or collision setting (``tolerance=1e-5``, ``ls_iterations=10``, ``cone=pyramidal``, ``solver=cg``,
``ccd_tolerance=1e-4``, ``impratio=1``, ``iterations=10``), and ``--contact-dims 3`` with the hand's contacts
without torsional friction (the world's hand and table geoms use 4): what each cheaper physics would cost in agreement.

MuJoCo and torch run on one thread each. Prints trials per second, the ratios to the previous labeller (per core:
divided by the threads), and the agreement of every label with the previous labeller's: per trial (y_coll,
y_pick, y_PGS = y_coll * y_pick) and per grasp (the smooth labels, means of the 5 trials).

    python benchmarks/bench_labels.py [--objects cube,red_mug] [--grasps 16] [--threads 2] [--out labels.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
import types
from pathlib import Path

import mujoco
import numpy as np
import torch

from getagrip_ros.data.generate import GenerationConfig, object_seed, pregrasps_on_mesh
from getagrip_ros.data.labels import GraspLabel, label_grasps
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.interfaces import MotionResult
from getagrip_ros.sim.world import SimWorld

OBJECTS = "cube,red_mug,goblet,spray_bottle,milk_carton,dragon,bunny,mallet"
LABELS = ("y_coll", "y_pick", "y_pgs")


def previous_follow(self: SimWorld, trajectory, should_stop=None, settle_s: float = 0.0, wrist_path=None) -> MotionResult:
    """The reference: SimWorld.follow as it was, writing the wrist pose through set_wrist_pose at every step."""
    acts = np.array([self._act[n] for n in trajectory.joint_names])
    qadr = np.array([self._qadr[n] for n in trajectory.joint_names])
    dt = self.model.opt.timestep
    n_steps = max(1, int(math.ceil((trajectory.duration_s + settle_s) / dt)))
    t_grid = np.arange(1, n_steps + 1) * dt
    targets = np.stack([np.interp(t_grid, trajectory.times_s, trajectory.positions_rad[:, j]) for j in range(len(acts))], 1)
    velocity = np.gradient(targets, dt, axis=0) if n_steps > 1 else np.zeros_like(targets)
    commands = targets + velocity * (self.model.actuator_biasprm[acts, 2] / self.model.actuator_biasprm[acts, 1])
    max_err = np.zeros(len(acts))
    for k in range(n_steps):
        if should_stop is not None and k % max(1, int(round(0.01 / dt))) == 0 and should_stop():
            self.data.ctrl[acts] = self.data.qpos[qadr]
            err = np.abs(targets[k] - self.data.qpos[qadr])
            return MotionResult(False, "stopped on request", k * dt, err, np.maximum(max_err, err))
        self.data.ctrl[acts] = commands[k]
        if wrist_path is not None:
            self.set_wrist_pose(wrist_path(t_grid[k]))
        mujoco.mj_step(self.model, self.data)
        max_err = np.maximum(max_err, np.abs(targets[k] - self.data.qpos[qadr]))
    final = np.abs(targets[-1] - self.data.qpos[qadr])
    return MotionResult(True, "reached the end of the trajectory", n_steps * dt, final, max_err)


_ENUMS = {"cone": (mujoco.mjtCone, "mjCONE_"), "solver": (mujoco.mjtSolver, "mjSOL_")}


def parse_mj_option(text: str) -> tuple[str, float | int]:
    """'NAME=VALUE' -> (MjOption field, value); enums by name (cone=pyramidal, solver=cg)."""
    name, _, value = text.partition("=")
    if not value or not hasattr(mujoco.MjOption(), name):
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with NAME a field of mujoco.MjOption, got '{text}'")
    if name in _ENUMS:
        enum, prefix = _ENUMS[name]
        if not hasattr(enum, prefix + value.upper()):
            raise argparse.ArgumentTypeError(f"unknown {name} '{value}'")
        return name, int(getattr(enum, prefix + value.upper()))
    return name, type(getattr(mujoco.MjOption(), name))(float(value))


def timed_labels(world: SimWorld, grasps, hand, config: GenerationConfig, seed: int, threads: int):
    started = time.perf_counter()
    labels = label_grasps(world, grasps, hand, config.labels, torch.Generator().manual_seed(seed), threads=threads)
    return labels, time.perf_counter() - started


def agreement(reference: list[GraspLabel], other: list[GraspLabel]) -> dict[str, dict[str, float]]:
    """Per label: the share of trials with the same outcome, and of grasps with the same smooth label, and the mean
    |difference| of the smooth labels."""
    out = {}
    for y in LABELS:
        trial = [(a.y_coll * a.y_pick if y == "y_pgs" else getattr(a, y)) == (b.y_coll * b.y_pick if y == "y_pgs" else getattr(b, y))
                 for la, lb in zip(reference, other) for a, b in zip(la.trials, lb.trials, strict=True)]
        ya, yb = np.array([getattr(label, y) for label in reference]), np.array([getattr(label, y) for label in other])
        out[y] = {"trials_same": float(np.mean(trial)), "grasps_same": float(np.mean(ya == yb)),
                  "grasp_mean_abs_diff": float(np.mean(np.abs(ya - yb)))}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", default=OBJECTS, help="tabletop-20 object names, comma-separated")
    parser.add_argument("--grasps", type=int, default=16, help="pre-grasps per object")
    parser.add_argument("--generator", choices=("energy", "graspd"), default="energy")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timestep-s", type=float, help="another step for the new labellers (the data engine's: 0.004)")
    parser.add_argument("--mj-option", type=parse_mj_option, action="append", default=[], metavar="NAME=VALUE",
                        help="a MuJoCo option of the new labellers' world (repeatable)")
    parser.add_argument("--contact-dims", type=int, choices=(1, 3, 4, 6),
                        help="the contact dimension of the new labellers' hand and table geoms (the world's: 4)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = dataclasses.replace(GenerationConfig(), grasps_per_object=args.grasps, generator=args.generator)
    previous_scene = dataclasses.replace(config.scene, jacobian="auto")
    if args.timestep_s:
        config = dataclasses.replace(config, scene=dataclasses.replace(config.scene, timestep_s=args.timestep_s))
    hand = AllegroHand()
    ways = ("previous", "now_1_thread", f"now_{args.threads}_threads")
    wall = dict.fromkeys(ways, 0.0)
    labels: dict[str, list[GraspLabel]] = {way: [] for way in ways}
    rows = []
    for name in args.objects.split(","):
        prepared = prepare_object(object_by_name(f"tabletop20/{name}"), config.prepare)
        surface_seed, sample_seed, label_seed = (int(s) for s in np.random.SeedSequence(
            object_seed(prepared.name, config.seed)).generate_state(3, dtype=np.uint32))
        with SimWorld(previous_scene, prepared, config.placement) as old, SimWorld(config.scene, prepared, config.placement) as new:
            mesh = prepared.mesh.copy()
            mesh.apply_transform(new.object_pose())
            grasps, _ = pregrasps_on_mesh(prepared.name, mesh, config, hand, surface_seed, sample_seed)
            old.follow = types.MethodType(previous_follow, old)
            for option, value in args.mj_option:
                setattr(new.model.opt, option, value)
            if args.contact_dims:
                new.model.geom_condim[new.model.geom_condim == 4] = args.contact_dims
            row = {"object": prepared.name, "grasps": len(grasps)}
            for way, world, threads in zip(ways, (old, new, new), (1, 1, args.threads)):
                got, seconds = timed_labels(world, grasps, hand, config, label_seed, threads)
                labels[way] += got
                wall[way] += seconds
                row[f"{way}_s"] = round(seconds, 2)
        rows.append(row)
        print(f"{prepared.name:26s} {len(grasps):3d} grasps  " + "  ".join(f"{w} {row[f'{w}_s']:5.1f} s" for w in ways), flush=True)
    n_trials = len(labels["previous"]) * config.labels.num_perturbations
    rate = {way: n_trials / wall[way] for way in ways}
    per_core = {way: rate[way] / (args.threads if way == ways[2] else 1) for way in ways}
    summary = {"trials": n_trials, "trials_per_s": rate, "trials_per_s_per_core": per_core,
               "ratio_to_previous": {way: rate[way] / rate["previous"] for way in ways},
               "ratio_per_core_to_previous": {way: per_core[way] / per_core["previous"] for way in ways},
               "agreement_with_previous": {way: agreement(labels["previous"], labels[way]) for way in ways[1:]},
               "mean_labels": {way: {y: float(np.mean([getattr(label, y) for label in labels[way]])) for y in LABELS}
                               for way in ways}}
    print(f"\n{n_trials} trials ({len(labels['previous'])} grasps x {config.labels.num_perturbations}), "
          f"{args.generator} pre-grasps, {os.cpu_count()} CPU cores")
    for way in ways:
        print(f"  {way:18s} {rate[way]:6.2f} trials/s  x{summary['ratio_to_previous'][way]:.2f}  "
              f"per core {per_core[way]:6.2f}  x{summary['ratio_per_core_to_previous'][way]:.2f}")
    print("agreement with the previous labeller: trials with the same outcome / grasps with the same label / mean |diff|")
    for way in ways[1:]:
        for y, a in summary["agreement_with_previous"][way].items():
            print(f"  {way:18s} {y:7s} {100 * a['trials_same']:6.2f}%  {100 * a['grasps_same']:6.2f}%  "
                  f"{a['grasp_mean_abs_diff']:.4f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"summary": summary, "objects": rows, "settings": vars(args) | {"out": str(args.out)},
                                        "date": time.strftime("%Y-%m-%d")}, indent=1))


if __name__ == "__main__":
    main()
