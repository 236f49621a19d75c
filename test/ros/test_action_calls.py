"""`call_in_node` (how grasp_task calls the stage actions) and `call_action` (the demo's and the benchmark's) when an
answer between the processes is lost: the goal's result, the answer to the goal request, or the goal request itself
(sent again with the same ID); and a lost answer to a parameter read (asked again).
A real action server and client in one process; the loss is made at the client's futures, the thinnest seam. Once in
a fresh clone a lost result held a trial's perception stage for its whole 30-minute budget after extract_object had
finished in 8 s."""

import threading
import time

import pytest
import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.client import Client
from rclpy.executors import MultiThreadedExecutor
from rclpy.task import Future

from getagrip_interfaces.action import ResetWorld
from getagrip_ros.ros.action_calls import PARAMETER_RETRY_S, RemoteParameters, call_in_node
from getagrip_ros.ros.actions import accepting_action_server
from getagrip_ros.status import StageError, StatusCode

GOAL_S = 0.5
"""How long the server's goal runs."""


@pytest.fixture(scope="module")
def ros(ros_env):
    """A reset_world server and a client node on one executor in a background thread, in a context of their own."""
    context = rclpy.Context()
    rclpy.init(context=context)
    server_node = rclpy.create_node("lossy_server", context=context)
    client_node = rclpy.create_node("lossy_client", context=context)
    goals: list[str] = []

    def execute(goal_handle):
        goals.append(goal_handle.request.object_name)
        time.sleep(GOAL_S)
        goal_handle.succeed()
        return ResetWorld.Result(object_name=goal_handle.request.object_name)

    accepting_action_server(server_node, ResetWorld, "reset_world", execute)
    client = ActionClient(client_node, ResetWorld, "reset_world")
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    executor.add_node(server_node)
    executor.add_node(client_node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    yield client, goals
    executor.shutdown(timeout_sec=5.0)
    rclpy.try_shutdown(context=context)
    thread.join(timeout=5.0)


def _call(client, name: str, deadline_s: float = 60.0, **kwargs):
    start = time.monotonic()
    result = call_in_node(client, ResetWorld.Goal(object_name=name), lambda: False, start + deadline_s, **kwargs)
    return result, time.monotonic() - start


def test_a_goal_with_no_loss_returns_its_result(ros):
    client, goals = ros
    result, took_s = _call(client, "plain")
    assert result.object_name == "plain" and goals[-1] == "plain"
    assert took_s < 30.0


def test_a_lost_result_is_requested_again(ros, monkeypatch):
    client, goals = ros
    requests: list[Future] = []
    real = ClientGoalHandle.get_result_async

    def first_lost(handle):
        future = real(handle) if requests else Future()  # the first request's answer never arrives
        requests.append(future)
        return future

    monkeypatch.setattr(ClientGoalHandle, "get_result_async", first_lost)
    result, took_s = _call(client, "lost_result", result_retry_s=0.5)
    assert result.object_name == "lost_result"
    assert len(requests) >= 2 and not requests[0].done()
    assert took_s < 30.0  # seconds, not the 60 s deadline


def test_without_asking_again_a_lost_result_holds_the_caller_to_its_deadline(ros, monkeypatch):
    """The failure the retries prevent (so the test above can fail)."""
    client, _ = ros
    monkeypatch.setattr(ClientGoalHandle, "get_result_async", lambda handle: Future())
    with pytest.raises(StageError) as err:
        _call(client, "never", deadline_s=3.0, result_retry_s=float("inf"))
    assert err.value.code == StatusCode.TIMEOUT


def test_a_lost_answer_to_the_goal_request_still_gets_the_goals_result(ros, monkeypatch):
    client, goals = ros
    real = ActionClient.send_goal_async
    monkeypatch.setattr(ActionClient, "send_goal_async", lambda self, *a, **kw: (real(self, *a, **kw), Future())[1])
    result, took_s = _call(client, "lost_answer", goal_answer_s=1.0)
    assert result.object_name == "lost_answer" and goals[-1] == "lost_answer"
    assert took_s < 30.0


def test_goal_requests_that_never_arrive_fail_with_the_reason_in_seconds(ros, monkeypatch):
    client, goals = ros
    before, sent = len(goals), []
    monkeypatch.setattr(ActionClient, "send_goal_async", lambda self, *a, **kw: (sent.append(kw["goal_uuid"]), Future())[1])
    with pytest.raises(StageError) as err:
        _call(client, "lost_goal", goal_answer_s=1.0)
    assert err.value.code == StatusCode.INTERNAL_ERROR
    assert "did not answer 3 goal requests and does not know the goal" in err.value.reason
    assert len(goals) == before and len(sent) == 3 and all(uuid == sent[0] for uuid in sent)  # one ID


def test_a_lost_goal_request_is_sent_again_and_the_goal_runs(ros, monkeypatch):
    client, goals = ros
    real, sent = ActionClient.send_goal_async, []

    def first_lost(self, *args, **kwargs):
        sent.append(kwargs["goal_uuid"])
        return real(self, *args, **kwargs) if len(sent) > 1 else Future()

    monkeypatch.setattr(ActionClient, "send_goal_async", first_lost)
    result, took_s = _call(client, "resent", goal_answer_s=1.0)
    assert result.object_name == "resent" and goals.count("resent") == 1
    assert len(sent) == 2 and sent[0] == sent[1] and took_s < 30.0


def test_a_late_goal_request_and_its_resend_run_the_goal_once(ros, monkeypatch):
    """The first request is held back until the server has said it does not know the goal, then goes out right after
    the resend (same ID): the server runs the resend and refuses the late one as a goal it has."""
    client, goals = ros
    real, held, answers = ActionClient.send_goal_async, [], []

    def first_late(self, *args, **kwargs):
        if not held:
            held.append((args, kwargs))
            return Future()
        resent = real(self, *args, **kwargs)
        answers.extend([resent, real(self, *held[0][0], **held[0][1])])
        return resent

    monkeypatch.setattr(ActionClient, "send_goal_async", first_late)
    result, _ = _call(client, "late", goal_answer_s=0.5)
    assert result.object_name == "late" and len(answers) == 2
    deadline = time.monotonic() + 30.0
    while not answers[1].done() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answers[0].result().accepted and answers[1].done() and not answers[1].result().accepted
    assert goals.count("late") == 1


def test_the_scripts_client_asks_for_a_result_again_and_by_goal_id(ros, rclpy_node, monkeypatch):
    """`call_action` (the demo's and the benchmark's way to call grasp_object): a lost result, then a lost answer to
    the goal request, still give the goal's result."""
    from getagrip_ros.ros import client as scripts

    client = ActionClient(rclpy_node, ResetWorld, "reset_world")
    requests: list[Future] = []
    real_result = ClientGoalHandle.get_result_async

    def first_lost(handle):
        future = real_result(handle) if requests else Future()
        requests.append(future)
        return future

    with monkeypatch.context() as patch:
        patch.setattr(ClientGoalHandle, "get_result_async", first_lost)
        status, result = scripts.call_action(rclpy_node, client, ResetWorld.Goal(object_name="script_result"))
    assert status == GoalStatus.STATUS_SUCCEEDED and result.object_name == "script_result" and len(requests) >= 2
    real_send = ActionClient.send_goal_async
    monkeypatch.setattr(scripts, "GOAL_ANSWER_S", 1.0)
    monkeypatch.setattr(ActionClient, "send_goal_async", lambda self, *a, **kw: (real_send(self, *a, **kw), Future())[1])
    status, result = scripts.call_action(rclpy_node, client, ResetWorld.Goal(object_name="script_answer"))
    assert status == GoalStatus.STATUS_SUCCEEDED and result.object_name == "script_answer"


def test_the_scripts_client_sends_a_lost_goal_again_then_says_the_server_never_got_it(ros, rclpy_node, monkeypatch):
    from getagrip_ros.ros import client as scripts

    client = ActionClient(rclpy_node, ResetWorld, "reset_world")
    monkeypatch.setattr(scripts, "GOAL_ANSWER_S", 1.0)
    real, sent = ActionClient.send_goal_async, []

    def first_lost(self, *args, **kwargs):
        sent.append(kwargs["goal_uuid"])
        return real(self, *args, **kwargs) if len(sent) > 1 else Future()

    with monkeypatch.context() as patch:
        patch.setattr(ActionClient, "send_goal_async", first_lost)
        status, result = scripts.call_action(rclpy_node, client, ResetWorld.Goal(object_name="script_resent"))
    assert status == GoalStatus.STATUS_SUCCEEDED and result.object_name == "script_resent"
    assert len(sent) == 2 and sent[0] == sent[1]
    monkeypatch.setattr(ActionClient, "send_goal_async", lambda self, *a, **kw: Future())
    start = time.monotonic()
    with pytest.raises(scripts.ActionCallError, match="does not know the goal"):
        scripts.call_action(rclpy_node, client, ResetWorld.Goal(object_name="never_sent"), timeout_s=60.0)
    assert time.monotonic() - start < 30.0


@pytest.fixture(scope="module")
def parameters(ros_env):
    """A node with parameters (as the robot node has) and a RemoteParameters reader of them, spun in the background."""
    context = rclpy.Context()
    rclpy.init(context=context)
    owner = rclpy.create_node("parameter_owner", context=context)
    owner.declare_parameter("backend", "sim")
    owner.declare_parameter("sim.object_name", "tabletop20/cube")
    reader_node = rclpy.create_node("parameter_reader", context=context)
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    executor.add_node(owner)
    executor.add_node(reader_node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    yield RemoteParameters(reader_node, "parameter_owner")
    executor.shutdown(timeout_sec=5.0)
    rclpy.try_shutdown(context=context)
    thread.join(timeout=5.0)


def test_a_lost_answer_to_a_parameter_read_is_asked_again(parameters, monkeypatch):
    """The first answer of each service never arrives (the request reaches the node): each request is sent again after
    PARAMETER_RETRY_S and the read returns the values, not {} (a trial's object would be recorded as "unknown")."""
    expected = {"backend": "sim", "sim.object_name": "tabletop20/cube"}
    assert parameters.read(["backend", "sim"]) == expected
    real, calls = Client.call_async, []

    def first_lost(self, request):
        calls.append(type(request).__name__)
        answer = real(self, request)
        return Future() if calls.count(type(request).__name__) == 1 else answer

    monkeypatch.setattr(Client, "call_async", first_lost)
    start = time.monotonic()
    assert parameters.read(["backend", "sim"], timeout_s=5.0 * PARAMETER_RETRY_S) == expected
    assert 2 * PARAMETER_RETRY_S <= time.monotonic() - start < 5.0 * PARAMETER_RETRY_S
    assert calls == ["ListParameters_Request"] * 2 + ["GetParameters_Request"] * 2


def test_a_parameter_read_that_is_never_answered_gives_nothing_by_its_deadline(parameters, monkeypatch):
    sent = []
    monkeypatch.setattr(Client, "call_async", lambda self, request: (sent.append(request), Future())[1])
    start = time.monotonic()
    assert parameters.read(["backend"], timeout_s=3.0) == {}
    assert 3.0 <= time.monotonic() - start < 10.0 and len(sent) >= 3  # sent again every PARAMETER_RETRY_S
    start = time.monotonic()  # a node that is not there: the same deadline covers waiting for its services
    assert RemoteParameters(parameters.node, "no_such_node").read(["backend"], timeout_s=1.0) == {}
    assert time.monotonic() - start < 1.9
