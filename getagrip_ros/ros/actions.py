"""What every action server of the stack shares: how it is created, how a running goal learns that it must stop
(a cancel request, the node shutting down, its client gone), and how a goal ends."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import CallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node

from getagrip_ros.ros.conversions import status_msg
from getagrip_ros.status import StatusCode

CLIENT_GRACE_S = 2.0
"""A goal's client counts as gone once none of the action clients that listened to the action's feedback when the
goal started has listened for this long (a client killed with SIGKILL leaves the ROS graph when its DDS lease runs
out: about 20 s with Fast DDS). ROS 2 does not say which client sent a goal, so a goal stays while any client that
could have sent it is alive."""
CLIENT_CHECK_PERIOD_S = 0.5
"""How often a running goal asks the ROS graph about its clients."""
CLOSE_WAIT_S = 10.0
"""How long a closing node waits for its running goals to stop."""


def accepting_action_server(node: Node, action_type: Any, name: str, execute: Callable[[Any], Any],
                            callback_group: CallbackGroup | None = None) -> ActionServer:
    """An action server that accepts every goal and every cancel request (the execute callback decides what a
    goal gets and checks ``goal_handle.is_cancel_requested``); callbacks run in a reentrant group by default."""
    return ActionServer(node, action_type, name, execute_callback=execute,
                        goal_callback=lambda goal: GoalResponse.ACCEPT,
                        cancel_callback=lambda goal_handle: CancelResponse.ACCEPT,
                        callback_group=callback_group or ReentrantCallbackGroup())


class StackNode(Node):
    """A node of the stack that serves actions. Its goals run inside :meth:`running`, which tells them when to stop
    and publishes their feedback only while the node is up; :meth:`close` (called by ``spin_node`` before rclpy shuts
    down) stops them and waits for them, so a SIGINT with goals running ends cleanly."""

    def __init__(self, name: str, **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.closing = threading.Event()
        self._running = 0
        self._running_changed = threading.Condition()
        self.context.on_shutdown(self.closing.set)

    def running(self, goal_handle, action_name: str, drop_orphans: bool = True) -> RunningGoal:
        """The context in which a goal runs (``with node.running(goal_handle, "plan_grasp") as goal:``)."""
        return RunningGoal(self, goal_handle, action_name, drop_orphans)

    def close(self) -> None:
        """Stop the running goals and wait for them (at most CLOSE_WAIT_S)."""
        self.closing.set()
        deadline = time.monotonic() + CLOSE_WAIT_S
        with self._running_changed:
            while self._running and time.monotonic() < deadline:
                self._running_changed.wait(0.1)

    def _goal_started(self, change: int) -> None:
        with self._running_changed:
            self._running += change
            self._running_changed.notify_all()


class RunningGoal:
    """One running goal: why it must stop, and its feedback (dropped once the node shuts down)."""

    def __init__(self, node: StackNode, goal_handle, action_name: str, drop_orphans: bool) -> None:
        self.node, self.goal_handle, self.drop_orphans = node, goal_handle, drop_orphans
        self._feedback_topic = node.resolve_topic_name(action_name) + "/_action/feedback"
        self._client_seen = self._checked = time.monotonic()
        self._candidates: set[bytes] | None = None  # feedback subscribers when first seen: the sender is one of them

    def __enter__(self) -> RunningGoal:
        self.node._goal_started(+1)
        return self

    def __exit__(self, *exc) -> None:
        self.node._goal_started(-1)

    def client_gone(self) -> bool:
        """None of the action clients that could have sent this goal (the action's feedback subscribers when the goal
        was first checked) has been in the ROS graph for CLIENT_GRACE_S (checked every CLIENT_CHECK_PERIOD_S)."""
        now = time.monotonic()
        if now - self._checked >= CLIENT_CHECK_PERIOD_S and not self.node.closing.is_set():
            self._checked = now
            try:
                present = {bytes(i.endpoint_gid) for i in self.node.get_subscriptions_info_by_topic(self._feedback_topic)}
            except Exception:  # noqa: BLE001 - the graph is gone with the context: closing says why
                return False
            if self._candidates is None:  # the sender may not be discovered yet: wait until someone listens
                self._candidates = present or None
                self._client_seen = now
            elif present & self._candidates:
                self._client_seen = now
        return self._candidates is not None and now - self._client_seen > CLIENT_GRACE_S

    def stop_reason(self) -> str | None:
        """Why the goal must stop now, or None."""
        if self.goal_handle.is_cancel_requested:
            return "cancelled by the client"
        if self.node.closing.is_set():
            return "the node is shutting down"
        if self.drop_orphans and self.client_gone():
            return f"its client is gone (no client that could have sent it has been seen for {CLIENT_GRACE_S:.0f} s)"
        return None

    def stopped(self) -> bool:
        return self.stop_reason() is not None

    def feedback(self, msg: Any) -> None:
        if self.node.closing.is_set():
            return
        try:
            self.goal_handle.publish_feedback(msg)
        except Exception:  # noqa: BLE001 - the context went down between the check and the call
            self.node.closing.set()


def end_goal(node: Node, goal_handle, result: Any, code: StatusCode, reason: str) -> Any:
    """Finish a goal with a status code and a reason: set ``result.status``, move the goal to its final state
    and log one line; returns `result` (for the execute callback to return).

    SUCCEEDED -> succeeded; CANCELED -> canceled when a cancel was requested (else aborted: a goal can only be
    canceled after a cancel request); every other code -> aborted. On a node that is shutting down, a goal whose
    state can no longer change is only logged.
    """
    result.status = status_msg(code, reason)
    try:
        if code == StatusCode.SUCCEEDED:
            goal_handle.succeed()
        elif code == StatusCode.CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
    except Exception as err:  # noqa: BLE001 - the context is gone (shutdown): nobody can receive the result
        reason = f"{reason} (not delivered: {type(err).__name__})"
    message = f"{node.get_name()}: {code.name}: {reason}"
    if not node.context.ok():  # rclpy's logger would fail to publish on /rosout
        print(f"[{'INFO' if code == StatusCode.SUCCEEDED else 'WARN'}] [{node.get_fully_qualified_name()}]: {message}",
              file=sys.stderr, flush=True)
    elif code == StatusCode.SUCCEEDED:  # one call site per severity: rclpy refuses to change it between calls
        node.get_logger().info(message)
    else:
        node.get_logger().warning(message)
    return result
