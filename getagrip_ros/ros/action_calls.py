"""Calling one action server from inside another node's callback (no spinning: the node's executor spins).

`call_in_node` sends a goal, waits on futures with events, forwards feedback, and cancels the sub-goal when
the caller's budget runs out or its own goal is cancelled - what an orchestrating action server needs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient

from getagrip_ros.status import StageError, StatusCode

CANCEL_GRACE_S = 10.0
"""How long a cancelled sub-goal may take to end."""


def _wait(future, until: Callable[[], bool], poll_s: float = 0.05) -> bool:
    """Wait for a future until done (True) or until() turns true (False)."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    while not done.wait(poll_s):
        if until():
            return future.done()
    return True


def call_in_node(client: ActionClient, goal: Any, should_stop: Callable[[], bool], deadline: float,
                 feedback: Callable[[Any], None] | None = None, server_wait_s: float = 30.0,
                 any_outcome: bool = False) -> Any:
    """Send `goal` and return the result message of a SUCCEEDED goal (any_outcome: of any goal that ended on the
    server, whatever its status; the result's own status says how).

    Raises:
        StageError: the server is missing (HARDWARE_ERROR), refused the goal, or the goal ended without success
            (its own status code and reason); CANCELED / TIMEOUT when should_stop() or the deadline (time.monotonic())
            ended it - the sub-goal is cancelled first.
    """
    name = client._action_name
    if not client.wait_for_server(timeout_sec=min(server_wait_s, max(deadline - time.monotonic(), 0.1))):
        raise StageError(StatusCode.HARDWARE_ERROR, f"action server {name!r} is not running")
    over = lambda: should_stop() or time.monotonic() > deadline  # noqa: E731
    sent = client.send_goal_async(goal, feedback_callback=(lambda m: feedback(m.feedback)) if feedback else None)
    if not _wait(sent, over):
        raise _stopped(name, should_stop)
    handle = sent.result()
    if not handle.accepted:
        raise StageError(StatusCode.BUSY, f"{name} refused the goal")
    result_future = handle.get_result_async()
    if not _wait(result_future, over):
        handle.cancel_goal_async()
        grace = time.monotonic() + CANCEL_GRACE_S
        _wait(result_future, lambda: time.monotonic() > grace)
        raise _stopped(name, should_stop)
    response = result_future.result()
    result = response.result
    status = getattr(result, "status", None)
    if any_outcome and status is not None:
        return result
    if response.status != GoalStatus.STATUS_SUCCEEDED:
        code = StatusCode(status.code) if status is not None else StatusCode.INTERNAL_ERROR
        raise StageError(code, f"{name}: {status.reason if status is not None else 'failed'}")
    return result


def _stopped(name: str, should_stop: Callable[[], bool]) -> StageError:
    if should_stop():
        return StageError(StatusCode.CANCELED, f"cancelled during {name}")
    return StageError(StatusCode.TIMEOUT, f"{name} ran out of its time budget")


class RemoteParameters:
    """Another node's parameters under some prefixes, read through its list/get parameter services (e.g. the actuator
    settings recorded with a trial). The service clients are made once, so each read is two calls, no discovery."""

    def __init__(self, node, target: str) -> None:
        from rcl_interfaces.srv import GetParameters, ListParameters

        self.node = node
        self.lister = node.create_client(ListParameters, f"/{target}/list_parameters")
        self.getter = node.create_client(GetParameters, f"/{target}/get_parameters")

    def read(self, prefixes: list[str], timeout_s: float = 5.0) -> dict[str, Any]:
        """{name: value}; {} when the node does not answer in time."""
        from rcl_interfaces.srv import GetParameters, ListParameters
        from rclpy.parameter import parameter_value_to_python

        deadline = time.monotonic() + timeout_s
        if not (self.lister.wait_for_service(timeout_sec=timeout_s) and self.getter.wait_for_service(timeout_sec=timeout_s)):
            return {}
        listed = self.lister.call_async(ListParameters.Request(prefixes=prefixes, depth=0))
        if not _wait(listed, lambda: time.monotonic() > deadline) or listed.result() is None:
            return {}
        names = sorted(listed.result().result.names)
        values = self.getter.call_async(GetParameters.Request(names=names))
        if not _wait(values, lambda: time.monotonic() > deadline) or values.result() is None:
            return {}
        return {n: parameter_value_to_python(v) for n, v in zip(names, values.result().values)}
