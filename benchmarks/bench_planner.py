"""Full grasp-planning speed on this CPU with full-size learned models (random weights, public sizes).

Builds, in a temporary folder, a full-size BPS evaluator (4096 + 37 in, width 2048, blocks of 256; BatchNorm
statistics calibrated on a few object BPS so its outputs are not saturated), a fixed set of plausible grasps
(heuristic grasps on a box, jittered, in Oy) and a full-size diffusion sampler, then measures:

- whole ``GraspPlanner.plan`` calls on the box cloud (fixed / diffusion / heuristic sampler + BPS evaluator, and
  fixed + the shipped geometry evaluator), median wall time (first call excluded) and the planner's per-stage timings;
- evaluator throughput of the full forward and of ``BpsEvaluator.conditioned`` (BPS folded into the biases),
  in grasps/s and GFLOP/s (FLOPs counted from the Linear layer shapes), against a plain fp32 matmul measured
  in the same run;
- ranking + refinement against a reference written like the public code (full forward with the BPS repeated
  for every grasp, a Python loop of refinement steps), on the same grasps with the same perturbations.

Target (issue): one plan (fixed sampler, BPS evaluator, N=3200, K=40, 50 iterations) in <= 3 s on 2 CPU cores.
Usage:

    python benchmarks/bench_planner.py [--repeats 3] [--num-samples 3200] [--num-grasps 40] [--iterations 50]
                                       [--diffusion-steps 20 50] [--set-size 4000] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from getagrip_ros.grasp.filters import cable_filter_mask
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.perturb import PerturbationConfig, perturb_grasps
from getagrip_ros.models.bps_evaluator import Y_PGS, BpsEvaluator, BpsEvaluatorConfig
from getagrip_ros.models.bps_sampler import BpsSampler, BpsSamplerConfig
from getagrip_ros.models.checkpoints import load_checkpoint, save_checkpoint
from getagrip_ros.models.shipped import shipped_available
from getagrip_ros.objects.primitives import box_surface_points, cylinder_surface_points
from getagrip_ros.perception.bps import encode_bps, public_basis_points_By
from getagrip_ros.planning.heuristic_sampler import sample_heuristic_grasps
from getagrip_ros.planning.object_input import object_from_points
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest
from getagrip_ros.planning.refinement import refine_grasps
from getagrip_ros.planning.samplers import save_grasp_set
from getagrip_ros.robot.allegro import AllegroHand

STAGES = ("validation", "models", "object", "sampling", "filtering", "evaluation", "refinement", "closing_targets")
TARGET_S = 3.0
FULL, COND = "full forward model(bps.expand(B,-1), g)", "conditioned(bps)(g)"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def interleaved(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, tuple[list[float], object]]:
    """Seconds of each function over ``rounds`` rounds (one call of each per round, after a warm-up round) and its
    last result. Round-robin, so load from other jobs on the machine hits every candidate alike."""
    out = {name: ([], fn()) for name, fn in fns.items()}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            result = fn()
            out[name] = (out[name][0] + [time.perf_counter() - start], result)
    return out


def evaluator_flops_per_grasp(model: BpsEvaluator) -> tuple[int, int]:
    """(full forward, conditioned) FLOPs per grasp: 2 * in * out per Linear; BatchNorm and activations not counted.

    The conditioned scorer drops the BPS columns of every layer that sees the normalised input (fc1 and fc3 of
    each residual block): they are folded into the biases once per object.
    """
    full = sum(2 * m.in_features * m.out_features for m in model.modules() if isinstance(m, nn.Linear))
    n_bps = model.config.num_basis_points
    folded = sum(2 * n_bps * fc.out_features for rb in (model.rb1, model.rb2, model.rb3) for fc in (rb.fc1, rb.fc3))
    return full, full - folded


def calibration_bps() -> torch.Tensor:
    """(8, 4096) BPS of boxes and cylinders of several sizes (spread for the BatchNorm statistics)."""
    clouds = [box_surface_points(size, seed=i) for i, size in
              enumerate([(0.06, 0.06, 0.12), (0.10, 0.05, 0.08), (0.04, 0.04, 0.20), (0.15, 0.10, 0.05)])]
    clouds += [cylinder_surface_points(r, h, seed=i) for i, (r, h) in
               enumerate([(0.04, 0.10), (0.03, 0.15), (0.06, 0.08), (0.02, 0.05)])]
    return torch.from_numpy(np.stack([encode_bps(c).distances_m for c in clouds]))


@torch.no_grad()
def calibrated_evaluator(grasps_Oy: torch.Tensor, batch: int = 512) -> BpsEvaluator:
    """Full-size evaluator with random weights and BatchNorm running statistics of plausible inputs."""
    model = BpsEvaluator(BpsEvaluatorConfig())
    bps = calibration_bps()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm1d):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
    model.train()
    model.dropout.eval()
    g = torch.Generator().manual_seed(3)
    for _ in range(2):
        pick = torch.randint(0, len(grasps_Oy), (batch,), generator=g)
        model(bps[torch.arange(batch) % len(bps)], grasps_Oy[pick])
    return model.eval()


def build_grasp_set(points: np.ndarray, size: int, hand: AllegroHand, generator: torch.Generator) -> Grasp:
    """About ``size`` grasps in Oy: heuristic grasps on the box that pass the cable filter, plus jittered copies."""
    obj = object_from_points(points, "world")
    world = sample_heuristic_grasps(points, min(size, 2048), hand, "world", generator=generator)
    world = world[cable_filter_mask(world)]
    limits = (hand.lower_limits_rad.double(), hand.upper_limits_rad.double())
    jitter = PerturbationConfig(translation_m=0.01, rotation_rad=0.1, joint_rad=0.05)
    parts, count = [world], len(world)
    while count < size:
        moved = perturb_grasps(world, jitter, generator, limits)
        moved = moved[cable_filter_mask(moved)]
        parts.append(moved)
        count += len(moved)
    return Grasp.cat(parts)[:size].transformed(torch.linalg.inv(obj.T_frame_Oy), "Oy")


def build_models(folder: Path, points: np.ndarray, set_size: int, hand: AllegroHand) -> tuple[ModelFiles, Grasp]:
    torch.manual_seed(0)
    grasps_Oy = build_grasp_set(points, set_size, hand, torch.Generator().manual_seed(1))
    vectors = grasps_Oy.to_vector().float()
    save_grasp_set(folder / "fixed.npz", grasps_Oy)
    evaluator = calibrated_evaluator(vectors)
    save_checkpoint(folder / "evaluator.pt", "bps_evaluator", evaluator, evaluator.config, bps_basis=public_basis_points_By())
    sampler = BpsSampler(BpsSamplerConfig())
    save_checkpoint(folder / "sampler.pt", "bps_sampler", sampler, sampler.config, bps_basis=public_basis_points_By(),
                    grasp_mean=vectors.mean(0), grasp_std=vectors.std(0) + 1e-3)
    files = ModelFiles(bps_evaluator=str(folder / "evaluator.pt"), bps_sampler=str(folder / "sampler.pt"),
                       fixed_grasps=str(folder / "fixed.npz"))
    return files, grasps_Oy


@torch.no_grad()
def reference_rank_and_refine(model: BpsEvaluator, bps: torch.Tensor, samples_Oy: Grasp, num_grasps: int,
                              iterations: int, batch: int, generator: torch.Generator,
                              limits: tuple[torch.Tensor, torch.Tensor]) -> tuple[float, float, torch.Tensor]:
    """Like the public code: full forward with the BPS repeated for every grasp, a per-step refinement loop.

    Moves are kept when they raise y_PGS (as ours), so only the evaluation strategy differs.
    Returns (ranking s, refinement s, final (K, 3) labels).
    """
    start = time.perf_counter()
    vectors = samples_Oy.to_vector().float()
    labels = torch.cat([model(bps.repeat(len(chunk), 1), chunk) for chunk in vectors.split(batch)])
    top = labels[:, Y_PGS].argsort(descending=True, stable=True)[:num_grasps]
    grasps, labels = samples_Oy[top], labels[top]
    ranked = time.perf_counter()
    for _ in range(iterations):
        candidate = perturb_grasps(grasps, PerturbationConfig(), generator, limits)
        new = model(bps.repeat(len(candidate), 1), candidate.to_vector().float())
        better = new[:, Y_PGS] > labels[:, Y_PGS]
        m = better[:, None]
        grasps = Grasp(torch.where(m, candidate.palm_position_m, grasps.palm_position_m),
                       torch.where(m[..., None], candidate.palm_rotation, grasps.palm_rotation),
                       torch.where(m, candidate.joint_angles_rad, grasps.joint_angles_rad),
                       torch.where(m[..., None], candidate.fingertip_directions, grasps.fingertip_directions), frame_id="Oy")
        labels = torch.where(m, new, labels)
    return ranked - start, time.perf_counter() - ranked, labels


@torch.no_grad()
def ours_rank_and_refine(model: BpsEvaluator, bps: torch.Tensor, samples_Oy: Grasp, num_grasps: int, iterations: int,
                         batch: int, generator: torch.Generator,
                         limits: tuple[torch.Tensor, torch.Tensor]) -> tuple[float, float, torch.Tensor]:
    """The same work with our evaluation: ``conditioned`` scorer (folding included) and ``refine_grasps``."""
    start = time.perf_counter()
    score = model.conditioned(bps)
    labels = torch.cat([score(chunk) for chunk in samples_Oy.to_vector().float().split(batch)])
    top = labels[:, Y_PGS].argsort(descending=True, stable=True)[:num_grasps]
    grasps, labels = samples_Oy[top], labels[top]
    ranked = time.perf_counter()
    _, labels, _ = refine_grasps(grasps, labels, lambda g: score(g.to_vector().float()), iterations, PerturbationConfig(),
                                 generator, limits)
    return ranked - start, time.perf_counter() - ranked, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per number (after one warm-up run)")
    parser.add_argument("--num-samples", type=int, default=3200, help="N: grasps sampled and ranked per plan")
    parser.add_argument("--num-grasps", type=int, default=40, help="K: grasps refined and returned")
    parser.add_argument("--iterations", type=int, default=50, help="refinement iterations")
    parser.add_argument("--diffusion-steps", type=int, nargs="*", default=[20, 50], help="DDIM steps to time")
    parser.add_argument("--set-size", type=int, default=4000, help="grasps in the fixed set")
    parser.add_argument("--quick", action="store_true", help="smoke run: N=256, 5 iterations, 1 repeat, small set")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.num_samples, args.iterations, args.set_size, args.diffusion_steps = 1, 256, 5, 600, [5]
    N, K, iters, reps = args.num_samples, args.num_grasps, args.iterations, args.repeats
    torch.set_grad_enabled(False)
    t_begin = time.perf_counter()
    print(f"CPU: {cpu_name()}; torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}; load average {os.getloadavg()[0]:.2f}")
    print(f"plan: N={N} samples, K={K} grasps, {iters} refinement iterations; {reps} timed runs per number "
          f"(medians, first run excluded)")

    hand = AllegroHand()
    points = box_surface_points()
    with tempfile.TemporaryDirectory(prefix="bench_planner_") as tmp:
        start = time.perf_counter()
        files, grasps_Oy = build_models(Path(tmp), points, args.set_size, hand)
        print(f"built models + fixed set of {len(grasps_Oy)} grasps in {time.perf_counter() - start:.1f} s")

        # -- whole plans ----------------------------------------------------------------------
        base = GraspPlannerConfig(num_samples=N, models=files)
        cases = [("fixed + bps", base, "fixed", "bps")]
        cases += [(f"diffusion {s} steps + bps", dataclasses.replace(base, diffusion=dataclasses.replace(
            base.diffusion, num_steps=s)), "diffusion", "bps") for s in args.diffusion_steps]
        cases += [("heuristic + bps", base, "heuristic", "bps")]
        if shipped_available("geometry_evaluator"):  # the default evaluator; its shipped size is its only size
            cases += [("fixed + geometry", base, "fixed", "geometry")]
        plans = {}
        for label, cfg, sampler, evaluator in cases:
            planner = GraspPlanner(cfg, hand)
            request = PlanRequest(points_m=points, num_grasps=K, sampler=sampler, evaluator=evaluator,
                                  refinement_iterations=iters)
            plans[label] = lambda planner=planner, request=request: planner.plan(request)
        results: dict[str, list] = {label: [] for label in plans}
        timings = interleaved({label: lambda label=label: results[label].append(plans[label]()) or results[label][-1]
                               for label in plans}, reps)
        rows = []
        for label, (times, result) in timings.items():
            if not result.success:
                print(f"  {label}: FAILED {result.status.name}: {result.reason}")
            stages = {s: statistics.median(r.timings_s.get(s, 0.0) for r in results[label][1:]) for s in STAGES}
            rows.append((label, statistics.median(times), min(times), stages, result))
        print("\nwhole GraspPlanner.plan calls on the box cloud (seconds; stage columns are medians of result.timings_s)")
        short = {"validation": "valid", "closing_targets": "closing"}
        header = f"{'sampler + evaluator':<26}{'median':>8}{'min':>7}" + "".join(f"{short.get(s, s):>11}" for s in STAGES)
        print(header + "  y_PGS mean (K)")
        for label, wall, best, stages, result in rows:
            y = float(result.planned.y_pgs.mean()) if result.success else float("nan")
            print(f"{label:<26}{wall:8.3f}{best:7.3f}" + "".join(f"{stages[s]:11.3f}" for s in STAGES) + f"  {y:.3f}")
        fixed_wall = rows[0][1]
        print(f"target (fixed + bps, N=3200, K=40, 50 it.) <= {TARGET_S:.0f} s: median {fixed_wall:.2f} s -> "
              f"{'MET' if fixed_wall <= TARGET_S else 'NOT MET'}"
              + ("" if (N, K, iters) == (3200, 40, 50) else " (not the target sizes)"))

        # -- evaluator throughput vs matmul -----------------------------------------------------
        model = load_checkpoint(files.bps_evaluator, "bps_evaluator").model
        obj = object_from_points(points, "world")
        bps = torch.as_tensor(obj.bps_m, dtype=torch.float32)
        full_flops, cond_flops = evaluator_flops_per_grasp(model)
        width = model.config.hidden_width + model.config.grasp_dim
        hidden = model.config.hidden_width
        g = torch.Generator().manual_seed(4)
        vectors = grasps_Oy.to_vector().float()
        batch_all = vectors[torch.randint(0, len(vectors), (N,), generator=g)]
        fold = interleaved({"fold": lambda: model.conditioned(bps)}, max(reps, 3))["fold"]
        score = fold[1]
        t_fold = statistics.median(fold[0])
        print(f"\nevaluator: {full_flops / 1e6:.1f} MFLOP per grasp full forward, {cond_flops / 1e6:.1f} MFLOP conditioned "
              f"({full_flops / cond_flops:.2f}x fewer); folding the BPS (conditioned()) {t_fold * 1e3:.0f} ms per object")
        print(f"matmul reference: plain fp32 ({{B}} x {width}) @ ({width} x {hidden}), timed in the same rounds as the "
              "evaluator; 'of matmul' = median over rounds of the ratio")
        print(f"{'path':<40}{'batch':>6}{'ms/call':>9}{'grasps/s':>10}{'GFLOP/s':>9}{'of matmul':>10}"
              f"{'eff. GFLOP/s':>13}{'eff. of matmul':>15}")
        labels = {}
        for b in (N, K):
            x = batch_all[:b]
            a, w = torch.randn(b, width), torch.randn(width, hidden)
            mm_flops = 2 * b * width * hidden
            got = interleaved({"matmul": lambda: a @ w, FULL: lambda: model(bps.expand(len(x), -1), x), COND: lambda: score(x)},
                              max(reps, 3) * (1 if b == N else 10))
            mm_times = got["matmul"][0]
            t_mm = statistics.median(mm_times)
            print(f"{'matmul reference':<40}{b:6d}{t_mm * 1e3:9.1f}{'':>10}{mm_flops / t_mm / 1e9:9.1f}{'100%':>10}")
            for name, flops in ((FULL, full_flops), (COND, cond_flops)):
                times, labels[(name, b)] = got[name]
                t = statistics.median(times)
                share = statistics.median(b * flops / ti / (mm_flops / tm) for ti, tm in zip(times, mm_times))
                rate = b / t
                print(f"{name:<40}{b:6d}{t * 1e3:9.1f}{rate:10.0f}{rate * flops / 1e9:9.1f}{share:10.0%}"
                      f"{rate * full_flops / 1e9:13.1f}{share * full_flops / flops:15.0%}")
        diff = float((labels[(COND, N)] - labels[(FULL, N)]).abs().max())
        y = labels[(COND, N)][:, Y_PGS]
        print("('eff.' = grasps/s x full-forward FLOPs per grasp: the FLOP rate a plain full forward would need for the "
              "same grasps/s)")
        print(f"conditioned vs full forward: max |diff| {diff:.1e}; y_PGS over the batch min {float(y.min()):.3f} "
              f"median {float(y.median()):.3f} max {float(y.max()):.3f} (not saturated)")

        # -- ranking + refinement: ours vs a public-code-like loop ---------------------------------------
        limits = (hand.lower_limits_rad.double(), hand.upper_limits_rad.double())
        samples = grasps_Oy[torch.randperm(len(grasps_Oy), generator=g)[:N]].to(dtype=torch.float64)
        batch = base.evaluation_batch_size
        runs: dict[str, list] = {"ours": [], "reference": []}
        interleaved({name: lambda name=name, fn=fn: runs[name].append(
            fn(model, bps, samples, K, iters, batch, torch.Generator().manual_seed(5), limits))
            for name, fn in (("ours", ours_rank_and_refine), ("reference", reference_rank_and_refine))}, reps)
        res = {name: (statistics.median(r[0] for r in rs[1:]), statistics.median(r[1] for r in rs[1:]), rs[-1][2])
               for name, rs in runs.items()}  # rs[0] = warm-up
        (o_rank, o_ref, o_lab), (r_rank, r_ref, r_lab) = res["ours"], res["reference"]
        p_eval, p_ref = rows[0][3]["evaluation"], rows[0][3]["refinement"]
        print(f"\nranking {N} + refining {K} x {iters} iterations on the same grasps (Oy) with the same perturbations, seconds")
        print(f"{'':<34}{'ours':>9}{'reference':>11}{'speed-up':>10}   (planner stage, fixed + bps)")
        for name, o, r, p in (("ranking (evaluate N, top K)", o_rank, r_rank, p_eval),
                              ("refinement loop", o_ref, r_ref, p_ref),
                              ("ranking + refinement", o_rank + o_ref, r_rank + r_ref, p_eval + p_ref)):
            print(f"{name:<34}{o:9.3f}{r:11.3f}{r / o:9.2f}x   {p:.3f}  ({r / p:.2f}x)")
        print(f"final refined y_PGS, ours vs reference: max |diff| {float((o_lab - r_lab).abs().max()):.1e} "
              f"(same accept decisions up to float rounding); reference = full forward, BPS repeated per grasp, "
              f"Python loop of {iters} steps")
        gflop = (N * cond_flops + iters * K * cond_flops) / 1e9
        print(f"planner evaluation + refinement work: {gflop:.1f} GFLOP conditioned ({(N + iters * K) * full_flops / 1e9:.1f} "
              f"full-forward equivalent) in {p_eval + p_ref:.2f} s -> {gflop / (p_eval + p_ref):.1f} GFLOP/s")
    print(f"load average at the end {os.getloadavg()[0]:.2f} (other jobs on the machine slow every number down); "
          f"benchmark took {time.perf_counter() - t_begin:.0f} s")


if __name__ == "__main__":
    main()
