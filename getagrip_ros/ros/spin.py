"""The common entry point of every node: init, spin on a multi-threaded executor, shut down cleanly."""

from __future__ import annotations

from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node


def spin_node(make_node: Callable[[], Node], args: list[str] | None = None, num_threads: int = 4) -> None:
    """Run one node until SIGINT or an external shutdown (actions run in parallel with cancel requests).

    `num_threads`: executor threads; a running goal holds one, so cancels and queued goals need more. The node's ``close()`` method, when
    it has one, runs before rclpy shuts down.
    """
    rclpy.init(args=args)
    node = None
    try:
        node = make_node()
        executor = MultiThreadedExecutor(num_threads=num_threads)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        close = getattr(node, "close", None)
        if callable(close):
            close()
        rclpy.try_shutdown()
