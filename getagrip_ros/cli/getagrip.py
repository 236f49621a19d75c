"""`getagrip`: bring the stack up, run the benchmark, summarise trial bags.

    getagrip bringup --profile sim [--arg object=tabletop20/cube] [--param plan_grasp:num_samples=1024] [--processes one]
    getagrip benchmark --objects tabletop-20 --methods fixed+bps,fixed+none --trials 1 --out bench/ [--mode ros]
    getagrip benchmark --objects tabletop-20 --methods human_demo+none --human-demos docs/human_demo/demos \
        --human-demo-kind tripod --out bench_demo/                 # each object grasped as its demonstration shows
    getagrip trials summarize DIR
    getagrip trials report BAG [--out report.png]
    getagrip trials compare A B [--out DIR]      (the same trials run two ways: do the outcomes agree?)
    getagrip trials recover BAG                  (a bag cut off by a crash -> a complete, indexed bag)
    getagrip trials video BAG [--out trial.mp4]  (a simulated trial re-rendered: capture, approach, close, lift)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from getagrip_ros.task.config import GraspTaskConfig


def _pairs(items: list[str], what: str) -> dict[str, object]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{what} {item!r}: expected name=value")
        out[key] = yaml.safe_load(value) if value else ""
    return out


def _bringup(args: argparse.Namespace) -> int:
    from getagrip_ros.bringup.description import as_bool

    extra: dict[str, dict[str, object]] = {}
    for path in args.params:
        for node, params in (yaml.safe_load(Path(path).read_text()) or {}).items():
            extra.setdefault(node, {}).update(params)
    for node_and_param, value in _pairs(args.param, "--param").items():
        node, sep, param = node_and_param.partition(":")
        if not sep:
            raise SystemExit(f"--param {node_and_param!r}: expected node:parameter=value")
        extra.setdefault(node, {})[param] = value
    arguments = {k: "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
                 for k, v in _pairs(args.arg, "--arg").items()}
    if as_bool(arguments.get("publish_robot", "false")):
        raise ValueError("publish_robot: robot_state_publisher is a C++ node of a ROS 2 install; start it with "
                         "`ros2 launch getagrip_ros <profile>.launch.py`, or leave it out here")
    if as_bool(arguments.get("rviz", "false")):
        raise ValueError("rviz: rviz2 is a C++ program of a ROS 2 install; start it with `ros2 launch getagrip_ros "
                         "<profile>.launch.py rviz:=true`, or run `rviz2 -d rviz/getagrip.rviz` (installed under "
                         "share/getagrip_ros/rviz/) beside this bring-up")
    if args.processes == "per-node":
        from getagrip_ros.bringup.multi_process import run_profile_processes

        return run_profile_processes(args.profile, arguments, extra)
    from getagrip_ros.bringup.single_process import run_profile

    run_profile(args.profile, arguments, extra)
    # Everything is stopped and closed; skip the interpreter's teardown of native threads and contexts (the MuJoCo
    # renderers' EGL, DDS), which can crash after a clean shutdown when several nodes shared the process.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _check_benchmark_options(args: argparse.Namespace) -> None:
    """The options' values, before any protocol is built (ValueError naming the option and what is valid)."""
    from getagrip_ros.task.config import PERCEPTION_BACKENDS

    for option, value in (("--trials", args.trials), ("--num-images", args.num_images), ("--num-grasps", args.num_grasps)):
        if value < 1:
            raise ValueError(f"{option} must be >= 1, got {value}")
    if args.perception not in PERCEPTION_BACKENDS:
        raise ValueError(f"unknown --perception {args.perception!r}; known: {', '.join(PERCEPTION_BACKENDS)}")
    if not [m for m in args.methods.split(",") if m.strip()]:
        raise ValueError("--methods is empty; give sampler+evaluator,... (e.g. fixed+geometry)")


def _benchmark(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from getagrip_ros.status import StatusCode
    from getagrip_ros.task.benchmark import (BenchmarkProtocol, check_protocol, load_protocol, resolve_objects,
                                             run_benchmark)

    if args.protocol:
        protocol = load_protocol(args.protocol)
    else:
        if not args.objects:
            raise ValueError("give --objects (a named set, a folder of meshes or names) or --protocol")
        _check_benchmark_options(args)
        task = GraspTaskConfig(perception=args.perception, num_images=args.num_images, num_grasps=args.num_grasps,
                               plan_with_mesh=args.plan_with_mesh)
        methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
        protocol = BenchmarkProtocol(objects=resolve_objects(args.objects), methods=methods,
                                     trials_per_object=args.trials, task=task,
                                     human_demos="" if args.human_demos is None else str(args.human_demos.resolve()),
                                     human_demo_kind=args.human_demo_kind)
    check_protocol(protocol)  # everything is checked before anything is prepared, captured or started
    per_object = len(protocol.methods) * protocol.trials_per_object
    print(f"[benchmark] protocol {protocol.hash()}: {len(protocol.objects)} objects x {len(protocol.methods)} methods x "
          f"{protocol.trials_per_object} trials -> {args.out}")
    with tqdm(total=len(protocol.objects) * per_object, unit="trial", desc="benchmark", disable=None) as bar:
        def on_trial(name: str, result) -> None:  # a TaskResult (in_process) or a GraspObject result (ros)
            status = result.status if isinstance(result.status, StatusCode) else StatusCode(result.status.code)
            reason = getattr(result, "reason", None) or result.status.reason
            bar.update(1)
            bar.write(f"  {name}: {'LIFTED' if result.success else 'failed'} ({status.name}: {reason[:90]})")

        def on_skip(obj: str, reason: str) -> None:  # an object that cannot be prepared: its trials are not run
            bar.total -= per_object
            bar.refresh()

        results = run_benchmark(protocol, args.out, on_trial, mode=args.mode, log=bar.write, on_skip=on_skip)
    bar.close()
    for method, m in sorted(results["summary"]["methods"].items()):
        print(f"  {method:<18} {m['successes']:3d}/{m['trials']:<3d} = {100 * m['success_rate']:5.1f}%")
    for s in results["skipped"]:
        print(f"  {'skipped':<18} {s['object']}: {s['reason']}")
    print(f"[benchmark] results: {Path(args.out) / 'results.json'}, {results['plot']}")
    return 0


def _trials(args: argparse.Namespace) -> int:
    """The trials subcommands; a path that holds no trial bag is refused with exit code 2 and one line naming it."""
    try:
        return _trials_command(args)
    except (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as err:
        reason = " ".join(str(err).split())  # one line
        print(f"getagrip trials {args.trials_command}: {reason}", file=sys.stderr)
        return 2


def _folder_of_bags(folder: Path) -> Path:
    from getagrip_ros.trials.summary import find_bags

    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder of trial bags" if folder.exists() else
                                f"{folder}: no such folder")
    if not find_bags(folder):
        raise FileNotFoundError(f"no trial bags (*.mcap) under {folder}")
    return folder


def _trials_command(args: argparse.Namespace) -> int:
    if args.trials_command == "summarize":
        from getagrip_ros.trials.summary import format_table, summarize_folder

        rows, summary, plot = summarize_folder(_folder_of_bags(args.folder), args.out)
        print(format_table(rows))
        for method, m in sorted(summary["methods"].items()):
            print(f"{method:<18} {m['successes']}/{m['trials']} = {100 * m['success_rate']:.1f}%")
        if summary["scorer_disagreements"]:
            print(f"scorer disagrees with the executor on: {', '.join(summary['scorer_disagreements'])}")
        if summary["incomplete_bags"]:
            print(f"incomplete (crashed) trials: {', '.join(summary['incomplete_bags'])}")
        print(f"wrote {Path(args.out or args.folder) / 'summary.json'} and {plot}")
        return 0
    if args.trials_command == "compare":
        from getagrip_ros.trials.compare import format_markdown, write_comparison

        _folder_of_bags(args.a), _folder_of_bags(args.b)
        out = args.out or Path(args.b) / "agreement"
        report = write_comparison(args.a, args.b, out, args.a_name, args.b_name)
        print(format_markdown(report, args.a_name, args.b_name))
        print(f"{report['agree']} of {report['compared']} trials agree; wrote {out / 'agreement.json'}, {out / 'agreement.md'}")
        return 0
    if args.trials_command == "recover":
        from getagrip_ros.trials.bag import recover_bag

        done = recover_bag(args.bag)
        if not done.rewritten:
            print(f"{done.path}: complete already (closed by its writer, or recovered before; {done.messages} "
                  "messages); nothing to do")
        else:
            how = f"it was cut short ({done.cut_short})" if done.cut_short else "it had not been closed"
            print(f"recovered {done.path}: {done.messages} messages on {len(done.topics)} topics, "
                  f"{done.record_span_s:.1f} s of record time; {how}; now a complete indexed bag with its metadata.yaml")
        return 0
    if args.trials_command == "video":
        from tqdm import tqdm

        from getagrip_ros.trials.video import write_trial_video

        with tqdm(desc="frames", unit="frame", disable=None) as bar:  # a bar on a terminal only
            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            video = write_trial_video(args.bag, args.out, progress=progress)
        print(f"wrote {video.path} ({video.num_frames} frames, {video.duration_s:.1f} s: "
              f"{', '.join(f'{k} {v}' for k, v in video.segments.items())} frames) and {video.sheet_path}")
        return 0
    from getagrip_ros.trials.report import write_report

    bag = Path(args.bag)
    print(f"wrote {write_report(bag, args.out or (bag if bag.is_dir() else bag.parent) / 'report.png')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="getagrip", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("bringup", help="every node of a profile, one process per node (as ros2 launch) or all in one")
    up.add_argument("--profile", default="sim", help="sim | hardware | planner | robot | perception")
    up.add_argument("--processes", choices=("per-node", "one"), default="per-node",
                    help="per-node: each node in its own process, as ros2 launch starts them; one: every node in this "
                         "process on one executor")
    up.add_argument("--arg", action="append", default=[], help="launch argument name=value (as in the launch files)")
    up.add_argument("--param", action="append", default=[], help="node:dotted.parameter=value")
    up.add_argument("--params", action="append", default=[], type=Path,
                    help="a YAML file {node: {dotted.parameter: value}} of overrides (before --param)")
    up.set_defaults(run=_bringup)

    bench = sub.add_parser("benchmark", help="the full simulated task over objects and methods (frozen protocol)")
    bench.add_argument("--objects", help="tabletop-20, a folder of meshes, or comma-separated catalog names")
    bench.add_argument("--methods", "--method", dest="methods", default="fixed+none,fixed+bps,diffusion+none,diffusion+bps",
                       help="sampler+evaluator,...")
    bench.add_argument("--trials", type=int, default=1, help="trials per object and method")
    bench.add_argument("--perception", default="depth", help="depth | nerf")
    bench.add_argument("--num-images", type=int, default=100)
    bench.add_argument("--num-grasps", type=int, default=40)
    bench.add_argument("--plan-with-mesh", action=argparse.BooleanOptionalAction, default=GraspTaskConfig.plan_with_mesh,
                       help="send perception's mesh with the cloud to grasp planning (graspd and fixed_graspd: their SDF "
                            "and the sim evaluator's model from the mesh; the other samplers plan on the cloud either way)")
    bench.add_argument("--human-demos", type=Path,
                       help="human_demo+... methods: a folder with a demonstration per object (<object>[__<kind>].json, "
                            "world frame; e.g. docs/human_demo/demos)")
    bench.add_argument("--human-demo-kind", default="", help="the demonstrations <object>__<kind>.json (e.g. tripod)")
    bench.add_argument("--protocol", help="a protocol.yaml to run or resume (overrides the options above)")
    bench.add_argument("--mode", choices=("in_process", "ros"), default="in_process",
                       help="in_process: the stages in this process; ros: a bring-up with a process per node started "
                            "here, every trial a grasp_object goal")
    bench.add_argument("--out", type=Path, default=Path("benchmark"))
    bench.set_defaults(run=_benchmark)

    trials = sub.add_parser("trials", help="read trial bags")
    tsub = trials.add_subparsers(dest="trials_command", required=True)
    summ = tsub.add_parser("summarize", help="a table and plots over every trial bag under a folder")
    summ.add_argument("folder", type=Path)
    summ.add_argument("--out", type=Path, help="where summary.json / summary.png go (default: the folder)")
    rep = tsub.add_parser("report", help="a PNG report of one trial bag")
    rep.add_argument("bag", type=Path)
    rep.add_argument("--out", type=Path)
    comp = tsub.add_parser("compare", help="the same trials in two folders: per-trial agreement and first difference")
    comp.add_argument("a", type=Path)
    comp.add_argument("b", type=Path)
    comp.add_argument("--a-name", default="A")
    comp.add_argument("--b-name", default="B")
    comp.add_argument("--out", type=Path, help="where agreement.json / agreement.md go (default: B/agreement)")
    rec = tsub.add_parser("recover", help="rewrite a bag cut off by a crash into a complete, indexed one (with a "
                                          "correct metadata.yaml); a bag its writer closed is left as it is")
    rec.add_argument("bag", type=Path)
    vid = tsub.add_parser("video", help="an MP4 of a simulated trial re-rendered from its recorded states, and a "
                                        "contact sheet PNG beside it")
    vid.add_argument("bag", type=Path)
    vid.add_argument("--out", type=Path, help="the .mp4 (default: <bag folder>/<trial>.mp4)")
    trials.set_defaults(run=_trials)

    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        print(f"getagrip {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
