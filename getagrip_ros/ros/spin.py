"""The common entry point of every node: init, spin on a multi-threaded executor, shut down cleanly."""

from __future__ import annotations

from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node


def spin_node(make_node: Callable[[], Node], args: list[str] | None = None) -> None:
    """Run one node until SIGINT or an external shutdown (actions run in parallel with cancel requests)."""
    rclpy.init(args=args)
    try:
        executor = MultiThreadedExecutor()
        executor.add_node(make_node())
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        rclpy.try_shutdown()
