"""`getagrip bringup`: every node of a profile in one process, on one multi-threaded executor.

Parameters come from the same files and launch arguments as the launch files (`bringup.description`):
each node's config/<node>.yaml, then the profile's overrides and the given arguments, passed to rclpy
as --params-file arguments (keyed by node name).
"""

from __future__ import annotations

import importlib
import signal
import tempfile
import threading
from pathlib import Path

import yaml

from getagrip_ros.bringup.description import NodeSpec, node_parameters, profile
from getagrip_ros.paths import config_path


def _nested(dotted: dict[str, object]) -> dict:
    out: dict = {}
    for name, value in dotted.items():
        *parents, leaf = name.split(".")
        level = out
        for p in parents:
            level = level.setdefault(p, {})
        level[leaf] = value
    return out


def ros_arguments(nodes: tuple[NodeSpec, ...], arguments: dict[str, object], extra: dict[str, dict[str, object]] | None = None,
                  params_dir: str | Path | None = None) -> list[str]:
    """--ros-args with every node's parameter file, then one file of overrides (profile, arguments, `extra`)."""
    overrides = node_parameters(nodes, arguments)
    for node, params in (extra or {}).items():
        if node not in overrides:
            raise ValueError(f"no node {node!r} in this profile; nodes: {sorted(overrides)}")
        overrides[node].update(params)
    folder = Path(params_dir or tempfile.mkdtemp(prefix="getagrip_bringup_"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "overrides.yaml"
    path.write_text(yaml.safe_dump({n: {"ros__parameters": _nested(p)} for n, p in overrides.items() if p}))
    args = ["--ros-args"]
    for node in nodes:
        args += ["--params-file", str(config_path(node.params_file))]
    return args + ["--params-file", str(path)]


def run_profile(name: str, arguments: dict[str, object] | None = None, extra: dict[str, dict[str, object]] | None = None,
                ready: threading.Event | None = None, stop: threading.Event | None = None, num_threads: int = 12) -> None:
    """Create every node of profile `name` and spin them until SIGINT/SIGTERM or `stop` is set."""
    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

    nodes_spec = profile(name)
    rclpy.init(args=ros_arguments(nodes_spec, arguments or {}, extra))
    nodes, executor, spinner = [], None, None
    stop = stop or threading.Event()
    try:
        for spec in nodes_spec:
            cls = getattr(importlib.import_module(spec.module), spec.node_class)
            nodes.append(cls())
        executor = MultiThreadedExecutor(num_threads=num_threads)
        for node in nodes:
            executor.add_node(node)
        print(f"[bringup] profile {name}: {', '.join(s.name for s in nodes_spec)} running in one process", flush=True)
        if ready is not None:
            ready.set()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
        spinner = threading.Thread(target=executor.spin, name="bringup-executor")
        spinner.start()
        while spinner.is_alive() and not stop.wait(0.2):
            pass
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:  # stop the robots first, then the executor (and wait for its thread), then the nodes and rclpy
        for node in reversed(nodes):
            close = getattr(node, "close", None)
            if callable(close):
                close()
        if executor is not None:
            executor.shutdown(timeout_sec=10.0)
        if spinner is not None:
            spinner.join(timeout=10.0)
        for node in reversed(nodes):
            node.destroy_node()
        rclpy.try_shutdown()
