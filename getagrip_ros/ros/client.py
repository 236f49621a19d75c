"""Blocking helpers for calling an action from scripts, tests and the demo."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.node import Node

from getagrip_ros.ros.action_calls import (GOAL_ANSWER_S, GOAL_REQUESTS, RESULT_RETRY_S, ResultRequests, handle_by_id,
                                          new_goal_id)


DISCOVERY_SETTLE_S = 1.0
"""Spin this long after discovering a server before the first goal (both sides must match their endpoints)."""


class ActionCallError(RuntimeError):
    """The server was not reachable, refused the goal, or did not answer in time."""


class GoalUnknown(ActionCallError):
    """The server does not know a goal it was sent: its goal request was lost (or the goal's result expired)."""


def send_goal(node: Node, client: ActionClient, goal: Any, timeout_s: float = 60.0,
              feedback: Callable[[Any], None] | None = None, server_timeout_s: float = 20.0, goal_id=None):
    """Send a goal and wait; returns the accepted goal handle. Spins `node` while waiting.

    With no answer within ``GOAL_ANSWER_S`` it returns a handle by the goal's ID (the answer can be lost while the goal
    runs): `wait_for_result` then gets the goal's result, or raises `GoalUnknown` when the server never got the goal.
    `goal_id` (a unique_identifier_msgs UUID) sends the goal again under the ID of an earlier request: a refusal then
    means the server has that goal after all (it refuses an ID it has), and the handle by ID is returned.

    A server that was only just discovered may not have discovered this client yet, and its answer to a goal
    sent at once can be lost; so after a fresh discovery the node spins for ``DISCOVERY_SETTLE_S`` first.
    """
    if not client.server_is_ready():
        if not client.wait_for_server(timeout_sec=server_timeout_s):
            raise ActionCallError(f"action server {client._action_name!r} not available after {server_timeout_s} s")
        settle_until = time.monotonic() + DISCOVERY_SETTLE_S
        while time.monotonic() < settle_until:
            rclpy.spin_once(node, timeout_sec=0.05)
    resend = goal_id is not None
    goal_id = goal_id if resend else new_goal_id()
    future = client.send_goal_async(goal, feedback_callback=(lambda msg: feedback(msg.feedback)) if feedback else None,
                                    goal_uuid=goal_id)
    rclpy.spin_until_future_complete(node, future, timeout_sec=min(timeout_s, GOAL_ANSWER_S))
    if not future.done() or (resend and not future.result().accepted):  # the goal may run: its result is asked by ID
        return handle_by_id(client, goal_id)
    handle = future.result()
    if not handle.accepted:
        raise ActionCallError("goal rejected")
    return handle


def wait_for_result(node: Node, handle, timeout_s: float = 60.0, retry_s: float = RESULT_RETRY_S):
    """Wait for an accepted goal's result, asking again every `retry_s` (an answer can be lost); returns
    (action_msgs GoalStatus code, result message)."""
    requests = ResultRequests(handle, retry_s)
    deadline = time.monotonic() + timeout_s
    while (response := requests.poll()) is None:
        if time.monotonic() > deadline:
            raise ActionCallError(f"no result within {timeout_s} s")
        rclpy.spin_once(node, timeout_sec=0.05)
    if response.status == GoalStatus.STATUS_UNKNOWN:
        raise GoalUnknown("the server does not know the goal (its answer to the goal request was lost, or the "
                          "goal's result expired)")
    return response.status, response.result


def call_action(node: Node, client: ActionClient, goal: Any, timeout_s: float = 60.0,
                feedback: Callable[[Any], None] | None = None):
    """Send a goal and wait for its result; returns (GoalStatus code, result message). A goal the server never got is
    sent again with the same ID, ``GOAL_REQUESTS`` times in all (see :mod:`getagrip_ros.ros.action_calls`)."""
    deadline = time.monotonic() + timeout_s
    goal_id = None
    for request in range(1, GOAL_REQUESTS + 1):
        handle = send_goal(node, client, goal, max(deadline - time.monotonic(), 0.1), feedback, goal_id=goal_id)
        goal_id = handle.goal_id
        try:
            return wait_for_result(node, handle, max(deadline - time.monotonic(), 0.1))
        except GoalUnknown:
            if request == GOAL_REQUESTS:
                raise


def cancel_after_feedback(node: Node, handle, feedback_seen: list, feedback_timeout_s: float = 60.0,
                          result_timeout_s: float = 60.0):
    """Wait until `feedback_seen` (filled by the goal's feedback callback) is non-empty, cancel the goal and
    wait for its result; returns (GoalStatus code, result message).

    Raises:
        ActionCallError: no feedback arrived in time (the goal is left running).
    """
    deadline = time.monotonic() + feedback_timeout_s
    while not feedback_seen and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.02)
    if not feedback_seen:
        raise ActionCallError(f"no feedback within {feedback_timeout_s} s, nothing cancelled")
    rclpy.spin_until_future_complete(node, handle.cancel_goal_async(), timeout_sec=10)
    return wait_for_result(node, handle, result_timeout_s)


def wait_for_message(node: Node, msg_type: Any, topic: str, timeout_s: float = 20.0, latched: bool = False):
    """The first message on `topic` within timeout_s (spinning `node`), or None; latched: subscribe with transient local
    durability, so the last message a latched publisher sent before arrives too."""
    from rclpy.qos import DurabilityPolicy, QoSProfile

    qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL) if latched else 10
    received: list = []
    sub = node.create_subscription(msg_type, topic, received.append, qos)
    try:
        deadline = time.monotonic() + timeout_s
        while not received and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
    finally:
        node.destroy_subscription(sub)
    return received[-1] if received else None
