"""`getagrip bringup --processes one`: every node of a profile in one process, on one multi-threaded executor.

Parameters come from the same files and launch arguments as the launch files (`bringup.description`,
`bringup.parameters`).
"""

from __future__ import annotations

import importlib
import signal
import threading

from getagrip_ros.bringup.description import profile
from getagrip_ros.bringup.parameters import ros_arguments, write_overrides


def run_profile(name: str, arguments: dict[str, object] | None = None, extra: dict[str, dict[str, object]] | None = None,
                ready: threading.Event | None = None, stop: threading.Event | None = None, num_threads: int = 12) -> None:
    """Create every node of profile `name` and spin them until SIGINT/SIGTERM or `stop` is set."""
    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

    prof = profile(name)
    rclpy.init(args=ros_arguments(prof.nodes, write_overrides(prof, arguments or {}, extra)))
    nodes, executor, spinner = [], None, None
    stop = stop or threading.Event()
    main_thread = threading.current_thread() is threading.main_thread()
    try:
        for spec in prof.nodes:
            cls = getattr(importlib.import_module(spec.module), spec.node_class)
            nodes.append(cls())
        executor = MultiThreadedExecutor(num_threads=num_threads)
        for node in nodes:
            executor.add_node(node)
        print(f"[bringup] profile {name}: {', '.join(s.name for s in prof.nodes)} running in one process", flush=True)
        if ready is not None:
            ready.set()
        if main_thread:
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
        spinner = threading.Thread(target=executor.spin, name="bringup-executor")
        spinner.start()
        while spinner.is_alive() and not stop.wait(0.2):
            pass
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:  # stop the robots first, then the executor (and wait for its thread), then the nodes and rclpy
        if main_thread:  # a second SIGINT (a terminal and a supervisor each send one) must not cut this short
            signal.signal(signal.SIGINT, signal.SIG_IGN)
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
