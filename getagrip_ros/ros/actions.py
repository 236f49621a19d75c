"""What every action server of the stack shares: how it is created and how a goal ends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import CallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node

from getagrip_ros.ros.conversions import status_msg
from getagrip_ros.status import StatusCode


def accepting_action_server(node: Node, action_type: Any, name: str, execute: Callable[[Any], Any],
                            callback_group: CallbackGroup | None = None) -> ActionServer:
    """An action server that accepts every goal and every cancel request (the execute callback decides what a
    goal gets and checks ``goal_handle.is_cancel_requested``); callbacks run in a reentrant group by default."""
    return ActionServer(node, action_type, name, execute_callback=execute,
                        goal_callback=lambda goal: GoalResponse.ACCEPT,
                        cancel_callback=lambda goal_handle: CancelResponse.ACCEPT,
                        callback_group=callback_group or ReentrantCallbackGroup())


def end_goal(node: Node, goal_handle, result: Any, code: StatusCode, reason: str) -> Any:
    """Finish a goal with a status code and a reason: set ``result.status``, move the goal to its final state
    and log one line; returns `result` (for the execute callback to return).

    SUCCEEDED -> succeeded; CANCELED -> canceled when a cancel was requested (else aborted: a goal can only be
    canceled after a cancel request); every other code -> aborted.
    """
    result.status = status_msg(code, reason)
    if code == StatusCode.SUCCEEDED:
        goal_handle.succeed()
    elif code == StatusCode.CANCELED and goal_handle.is_cancel_requested:
        goal_handle.canceled()
    else:
        goal_handle.abort()
    message = f"{node.get_name()}: {code.name}: {reason}"
    if code == StatusCode.SUCCEEDED:  # one call site per severity: rclpy refuses to change it between calls
        node.get_logger().info(message)
    else:
        node.get_logger().warning(message)
    return result
