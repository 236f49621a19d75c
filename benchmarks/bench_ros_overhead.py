"""What the launched stack costs: the same sim trial in-process and through the ROS bring-up, stage by stage.

Every configuration runs `--trials` trials of one object (after one warm-up trial per stack) with the same
protocol settings in three stacks that share the stage code:
  - in_process: `InProcessStack` (the stage calls made directly);
  - ros_per_node: `getagrip bringup --processes per-node` (every node in its own process, as ros2 launch starts
    them) and one grasp_object goal per trial;
  - ros_one_process: `getagrip bringup --processes one` (every node on one executor in one process).
and varies one cause at a time: the image size (640 x 360, the default, or 320 x 180), the pacing (execution in
real time, the default, or as fast as the CPU allows) and the load (a second process spinning on one core).
Prints a per-stage table (medians, seconds) with each ROS row's ratio to the in-process row of the same
settings, and writes every number to --out as JSON.

    python benchmarks/bench_ros_overhead.py --trials 2 --out bench_ros.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from getagrip_ros.sim.robot_backend import SimRobotConfig
from getagrip_ros.task.config import GraspTaskConfig
from getagrip_ros.task.in_process import StackConfig

STAGES = ("reset", "capture", "perception", "grasp_planning", "motion_planning", "execution")
SMALL = dict(camera_width_px=320, camera_height_px=180, camera_fy_px=133.25)


def _spin() -> None:
    while True:
        pass


def _in_process(stack_config: StackConfig, task: GraspTaskConfig, obj: str, trials: int, out: Path) -> list[dict]:
    from getagrip_ros.task.grasp_task import GraspTask, TrialObject
    from getagrip_ros.task.in_process import InProcessStack

    stack = InProcessStack(stack_config)
    rows = []
    try:
        for k in range(trials + 1):
            start = time.perf_counter()
            result = GraspTask(stack, task).run(np.array([*stack_config.sim.object_xy_m, 0.0]), f"t{k}_{time.time_ns()}",
                                                obj=TrialObject(obj))
            rows.append({"total": time.perf_counter() - start, **result.timings_s, "success": result.success})
    finally:
        stack.close()
    return rows[1:]


def _ros(stack_config: StackConfig, task: GraspTaskConfig, obj: str, trials: int, out: Path, processes: str) -> list[dict]:
    from getagrip_ros.ros.benchmark_client import BenchmarkStack

    rows = []
    with BenchmarkStack(stack_config, task, out, log=lambda line: None, processes=processes) as stack:
        for k in range(trials + 1):
            start = time.perf_counter()
            result = stack.run_trial(np.array([*stack_config.sim.object_xy_m, 0.0]), f"t{k}_{time.time_ns()}", obj, task)
            rows.append({"total": time.perf_counter() - start, **{t.stage: t.duration_s for t in result.timings},
                         "success": bool(result.success)})
    return rows[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--object", default="tabletop20/cube")
    parser.add_argument("--trials", type=int, default=2, help="measured trials per configuration (after a warm-up)")
    parser.add_argument("--out", type=Path, default=Path("bench_ros_overhead.json"))
    parser.add_argument("--only", default="", help="comma-separated configuration names to run (default: all)")
    args = parser.parse_args()

    base = StackConfig(sim=SimRobotConfig(object_name=args.object))
    configs = {  # name -> (stack settings, load)
        "640x360, real time": (base, False),
        "320x180, real time": (replace(base, sim=replace(base.sim, **SMALL)), False),
        "640x360, as fast as possible": (replace(base, sim=replace(base.sim, real_time_factor=0.0)), False),
        "640x360, real time, one core busy": (base, True),
    }
    if args.only:
        configs = {k: v for k, v in configs.items() if k in args.only.split(",")}
    results: dict[str, dict[str, list[dict]]] = {}
    root = Path(tempfile.mkdtemp(prefix="bench_ros_"))
    for name, (stack_config, loaded) in configs.items():
        burner = multiprocessing.Process(target=_spin, daemon=True) if loaded else None
        if burner is not None:
            burner.start()
        try:
            for mode in ("in_process", "ros_per_node", "ros_one_process"):
                out = root / f"{len(results)}_{mode}"
                task = GraspTaskConfig(trials_dir=str(out / "trials"), work_dir=str(out / "work"))
                print(f"[bench] {name}: {mode} ...", flush=True)
                if mode == "in_process":
                    rows = _in_process(stack_config, task, args.object, args.trials, out)
                else:
                    rows = _ros(stack_config, task, args.object, args.trials, out,
                                "per-node" if mode == "ros_per_node" else "one")
                results.setdefault(name, {})[mode] = rows
        finally:
            if burner is not None:
                burner.terminate()
        args.out.write_text(json.dumps(results, indent=1))

    head = "| settings | stack | " + " | ".join(STAGES) + " | trial (wall) | vs in-process |"
    print(head + "\n|" + "---|" * (head.count("|") - 1))
    for name, modes in results.items():
        local = statistics.median(r["total"] for r in modes["in_process"])
        for mode, rows in modes.items():
            med = {s: statistics.median(r.get(s, float("nan")) for r in rows) for s in (*STAGES, "total")}
            ok = sum(r["success"] for r in rows)
            print(f"| {name} | {mode} ({ok}/{len(rows)} lifted) | " + " | ".join(f"{med[s]:.1f}" for s in STAGES)
                  + f" | {med['total']:.1f} | {med['total'] / local:.2f}x |")
    print(f"[bench] numbers: {args.out}")


if __name__ == "__main__":
    main()
