"""Grasp-core throughput on this machine: hand FK, fingertip IK, vector round trips, heuristic planning.

References measured in the same run: pinocchio's C++ forward kinematics (one configuration per call,
the way a per-grasp loop would use it) for FK, and a plain torch matmul for the machine's FLOP rate.
Prints one line per number; run with `make bench` or `python benchmarks/bench_grasp_core.py`.
"""

from __future__ import annotations

import time

import numpy as np
import pinocchio as pin
import torch

from getagrip_ros.grasp.closing import closing_targets
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.paths import urdf_path
from getagrip_ros.planning.heuristic_sampler import sample_heuristic_grasps
from getagrip_ros.planning.planner import GraspPlanner, PlanRequest
from getagrip_ros.robot.allegro import FINGERTIP_LINKS, JOINT_NAMES, AllegroHand


def best_time(fn, repeat: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    a = torch.randn(1024, 1024)
    t = best_time(lambda: a @ a)
    print(f"reference: torch 1024^2 float32 matmul      {2 * 1024**3 / t / 1e9:8.1f} GFLOP/s")

    hand = AllegroHand(dtype=torch.float32)
    B = 4096
    lo, hi = hand.lower_limits_rad, hand.upper_limits_rad
    q = lo + (hi - lo) * torch.rand(B, 16)
    t_ours = best_time(lambda: hand.fingertip_positions(q))
    model = pin.buildModelFromUrdf(str(urdf_path("allegro_right.urdf")))
    data = model.createData()
    idx = [model.joints[model.getJointId(n)].idx_q for n in JOINT_NAMES]
    frames = [model.getFrameId(f) for f in FINGERTIP_LINKS]
    qs = np.zeros((512, model.nq))
    qs[:, idx] = q[:512].numpy()

    def pin_loop() -> None:
        for qi in qs:
            pin.forwardKinematics(model, data, qi)
            for f in frames:
                pin.updateFramePlacement(model, data, f)

    t_pin = best_time(pin_loop, repeat=3) * B / 512
    print(f"hand FK, 4 fingertips, batch {B}:   torch {B / t_ours:10.0f} grasps/s | pinocchio loop {B / t_pin:10.0f} grasps/s")

    g = Grasp(torch.randn(B, 3), torch.linalg.qr(torch.randn(B, 3, 3))[0] * torch.tensor([1.0, 1.0, 1.0]), q,
              torch.nn.functional.normalize(torch.randn(B, 4, 3), dim=-1))
    g.palm_rotation[torch.linalg.det(g.palm_rotation) < 0, :, 2] *= -1
    t_vec = best_time(lambda: Grasp.from_vector(g.to_vector()))
    print(f"37-D vector round trip, batch {B}:  {B / t_vec:10.0f} grasps/s")

    planner = GraspPlanner()
    points = box_surface_points()
    sampled = sample_heuristic_grasps(points, 2048, hand, "world", generator=torch.Generator().manual_seed(0))
    for n in (40, 512):
        sub = sampled[:n]
        t_ik = best_time(lambda: closing_targets(hand, sub), repeat=2)
        res = closing_targets(hand, sub)
        pre, close = (100 * float(r.converged.float().mean()) for r in (res.pregrasp, res.closed))
        print(f"closing targets (pre-grasp -3 cm + close +6 cm IK), {n:4d} heuristic grasps: {t_ik:5.2f} s "
              f"({n / t_ik:6.0f} grasps/s); fingers within 1 mm of target: pre-grasp {pre:.0f}%, close {close:.0f}% "
              f"(the rest end at joint limits)")

    t_plan = best_time(lambda: planner.plan(PlanRequest(points_m=points, num_grasps=40)), repeat=2)
    print(f"plan (pinch sampler, {planner.config.num_samples} samples -> cable filter -> 40 grasps + closing targets): {t_plan:.2f} s")


if __name__ == "__main__":
    main()
