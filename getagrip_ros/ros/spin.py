"""The common entry point of every node: init, spin on a multi-threaded executor, shut down cleanly."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node


def ignore_interrupts() -> None:
    """From now on SIGINT is ignored (main thread only): a terminal and a launch each send one, and the second must
    not cut a clean shutdown short. SIGTERM still ends the process."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def spin_node(make_node: Callable[[], Node], args: list[str] | None = None, num_threads: int = 4) -> None:
    """Run one node until SIGINT or an external shutdown (actions run in parallel with cancel requests).

    `num_threads`: executor threads; a running goal holds one, so cancels and queued goals need more. The node's
    ``close()`` method, when it has one, runs before rclpy shuts down; further SIGINTs are ignored meanwhile.
    """
    if threading.current_thread() is threading.main_thread():  # SIGINT only shuts the context down (rclpy's handler):
        signal.signal(signal.SIGINT, lambda signum, frame: None)  # no KeyboardInterrupt at a random line meanwhile
    rclpy.init(args=args)
    node = None
    try:
        node = make_node()
        executor = MultiThreadedExecutor(num_threads=num_threads)
        executor.add_node(node)
        while node.context.ok():  # a bounded wait: a SIGINT that lands before the first wait still ends the loop
            try:
                executor.spin_once(timeout_sec=0.5)
            except Exception:  # noqa: BLE001 - the context went down between the check and the wait (SIGINT)
                if node.context.ok():
                    raise
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        ignore_interrupts()
        close = getattr(node, "close", None)
        if callable(close):
            close()
        rclpy.try_shutdown()
        ignore_interrupts()  # rclpy's shutdown puts Python's handler back
