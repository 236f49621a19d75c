"""Calling one action server from inside another node's callback (no spinning: the node's executor spins).

`call_in_node` sends a goal, waits on futures with events, forwards feedback, asks again when an answer is lost,
and cancels the sub-goal when the caller's budget runs out or its own goal is cancelled - what an orchestrating
action server needs.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from unique_identifier_msgs.msg import UUID

from getagrip_ros.status import StageError, StatusCode

CANCEL_GRACE_S = 10.0
"""How long a cancelled sub-goal may take to end."""
GOAL_ANSWER_S = 30.0
"""How long a server may take to answer a goal request before the client asks for the goal's result anyway."""
GOAL_REQUESTS = 3
"""How many times a goal request is sent, always with the same goal ID, when the server says it never got it (a request
sent before the server has matched this client's writer is dropped: once under load a trial's extract_object goal was
lost so). A late first request and a resend cannot both run: the server refuses a goal ID it already has."""
RESULT_RETRY_S = 5.0
"""While a sub-goal runs, its result is requested again this often. An answer between processes can be lost (a server
that has not yet matched this client's reader drops it): one such loss once held a trial's perception stage for its
whole 30-minute budget after the server had finished in 8 s."""


def _wait(future, until: Callable[[], bool], poll_s: float = 0.05) -> bool:
    """Wait for a future until done (True) or until() turns true (False)."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    while not done.wait(poll_s):
        if until():
            return future.done()
    return True


class ResultRequests:
    """The result of one accepted goal, requested again every `retry_s` until one request is answered."""

    def __init__(self, handle: ClientGoalHandle, retry_s: float = RESULT_RETRY_S) -> None:
        self.handle, self.retry_s = handle, retry_s
        self.answered = threading.Event()
        self.futures: list = []
        self.next_request = 0.0

    def poll(self) -> Any | None:
        """The first answer (a GetResult response), or None after sending the request that is due, if any."""
        for future in self.futures:
            if future.done():
                return future.result()
        if time.monotonic() >= self.next_request:
            future = self.handle.get_result_async()
            future.add_done_callback(lambda _: self.answered.set())
            self.futures.append(future)
            self.next_request = time.monotonic() + self.retry_s
        return None

    def wait(self, until: Callable[[], bool], poll_s: float = 0.05) -> Any | None:
        """The answer, or None once until() turns true first."""
        while (response := self.poll()) is None:
            if until():
                return None
            self.answered.wait(poll_s)
        return response


def new_goal_id() -> UUID:
    """A random goal ID, chosen by the client so that it can name the goal before the server answers."""
    return UUID(uuid=list(uuid.uuid4().bytes))


def handle_by_id(client: ActionClient, goal_id: UUID) -> ClientGoalHandle:
    """A handle of a goal sent with `goal_id` whose answer did not arrive: its result and cancel requests name the goal
    by ID (a server that never got the goal answers the result request at once with STATUS_UNKNOWN)."""
    return ClientGoalHandle(client, goal_id, client._action_type.Impl.SendGoalService.Response(accepted=True))


def call_in_node(client: ActionClient, goal: Any, should_stop: Callable[[], bool], deadline: float,
                 feedback: Callable[[Any], None] | None = None, server_wait_s: float = 30.0,
                 any_outcome: bool = False, goal_answer_s: float = GOAL_ANSWER_S,
                 result_retry_s: float = RESULT_RETRY_S, goal_requests: int = GOAL_REQUESTS) -> Any:
    """Send `goal` and return the result message of a SUCCEEDED goal (any_outcome: of any goal that ended on the
    server, whatever its status; the result's own status says how).

    Lost answers do not hold the caller: the result is requested again every `result_retry_s`, and a goal request
    left unanswered for `goal_answer_s` is followed by a request for its result by goal ID (the server answers
    when the goal ends, or at once with UNKNOWN when it never got the goal). A goal the server never got is sent
    again with the same ID, `goal_requests` times in all.

    Raises:
        StageError: the server is missing (HARDWARE_ERROR), refused the goal (BUSY), never got it in `goal_requests`
            requests (INTERNAL_ERROR), or the goal ended without success (its own status code and reason); CANCELED /
            TIMEOUT when should_stop() or the deadline (time.monotonic()) ended it - the sub-goal is cancelled first.
    """
    name = client._action_name
    if not client.wait_for_server(timeout_sec=min(server_wait_s, max(deadline - time.monotonic(), 0.1))):
        raise StageError(StatusCode.HARDWARE_ERROR, f"action server {name!r} is not running")
    over = lambda: should_stop() or time.monotonic() > deadline  # noqa: E731
    goal_id = new_goal_id()
    for request in range(1, goal_requests + 1):
        sent = client.send_goal_async(goal, feedback_callback=(lambda m: feedback(m.feedback)) if feedback else None,
                                      goal_uuid=goal_id)
        answer_by = time.monotonic() + goal_answer_s
        if _wait(sent, lambda: over() or time.monotonic() > answer_by) and sent.result().accepted:
            handle = sent.result()
        elif sent.done() and request == 1:
            raise StageError(StatusCode.BUSY, f"{name} refused the goal")
        else:  # no answer (yet), or a resend refused as a goal the server has: the ID is enough to ask for its result
            handle = handle_by_id(client, goal_id)
        requests = ResultRequests(handle, result_retry_s)
        response = requests.wait(over)
        if response is None:
            handle.cancel_goal_async()
            grace = time.monotonic() + CANCEL_GRACE_S
            requests.wait(lambda: time.monotonic() > grace)
            raise _stopped(name, should_stop)
        if response.status != GoalStatus.STATUS_UNKNOWN:
            break
    else:
        handle.cancel_goal_async()  # in case a goal request arrives after all
        raise StageError(StatusCode.INTERNAL_ERROR, f"{name} did not answer {goal_requests} goal requests and does not "
                                                    "know the goal")
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


PARAMETER_RETRY_S = 1.0
"""A parameter read whose answer has not come this long after its request is sent again (reads change nothing). A
service's answer can be lost like an action's: once a fresh-clone test recorded a trial's object as "unknown" because
the robot node's answer to the first parameter read after its start never arrived."""


class RemoteParameters:
    """Another node's parameters under some prefixes, read through its list/get parameter services (e.g. the actuator
    settings recorded with a trial). The service clients are made once, so each read is two calls, no discovery."""

    def __init__(self, node, target: str) -> None:
        from rcl_interfaces.srv import GetParameters, ListParameters

        self.node = node
        self.lister = node.create_client(ListParameters, f"/{target}/list_parameters")
        self.getter = node.create_client(GetParameters, f"/{target}/get_parameters")

    def read(self, prefixes: list[str], timeout_s: float = 10.0) -> dict[str, Any]:
        """{name: value}; {} when the node does not answer within timeout_s (all in all). Each request is sent again
        every PARAMETER_RETRY_S until one of its copies is answered."""
        from rcl_interfaces.srv import GetParameters, ListParameters
        from rclpy.parameter import parameter_value_to_python

        deadline = time.monotonic() + timeout_s
        for client in (self.lister, self.getter):
            if not client.wait_for_service(timeout_sec=max(0.0, deadline - time.monotonic())):
                return {}
        listed = _first_answer(self.lister, ListParameters.Request(prefixes=prefixes, depth=0), deadline)
        if listed is None:
            return {}
        names = sorted(listed.result.names)
        values = _first_answer(self.getter, GetParameters.Request(names=names), deadline)
        if values is None:
            return {}
        return {n: parameter_value_to_python(v) for n, v in zip(names, values.values)}


def _first_answer(client, request, deadline: float):
    """The first answer to `request` from a service, sent again every PARAMETER_RETRY_S until one copy is answered or
    time.monotonic() passes `deadline` (then None). The copies left unanswered are forgotten."""
    answered, sent = threading.Event(), []
    try:
        while time.monotonic() < deadline:
            future = client.call_async(request)
            sent.append(future)
            future.add_done_callback(lambda _: answered.set())
            if answered.wait(max(0.0, min(PARAMETER_RETRY_S, deadline - time.monotonic()))):
                break
        for future in sent:
            if future.done() and future.result() is not None:
                return future.result()
        return None
    finally:
        for future in sent:
            if not future.done():
                client.remove_pending_request(future)
