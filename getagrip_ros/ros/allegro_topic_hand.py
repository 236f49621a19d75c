"""The Allegro hand through its ROS 2 driver's topics: the `Hand` interface on top of rclpy.

Commands go out as position setpoints streamed at `rate_hz` along the trajectory, either as
`sensor_msgs/JointState` (Wonik's V4/V5 and the SimLab drivers' ``joint_cmd`` topics) or as a
`std_msgs/Float64MultiArray` (the ros2_control ``allegro_hand_position_controller/commands`` topic);
the driver's joint order and names (`command_joint_names`, default Wonik's ``ah_joint00..33``, thumb
first) are mapped from ours (Get a Grip order ``joint_0.0..15.0``, index, middle, ring, thumb). The
measured state is read from a `sensor_msgs/JointState` topic, matched by name (the same mapping).

The node that owns this hand must be spun by an executor in another thread (the state subscription);
`move` blocks its caller while it streams.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState as JointStateMsg
from std_msgs.msg import Float64MultiArray

from getagrip_ros.robot.allegro import GETAGRIP_TO_WONIK, WONIK_JOINT_NAMES
from getagrip_ros.robot.description import HAND_JOINT_NAMES
from getagrip_ros.robot.interfaces import Hand, JointState, JointTrajectory, MotionResult, StopFn

COMMAND_TYPES = ("joint_state", "float64_multi_array")


@dataclass(frozen=True)
class AllegroTopicConfig:
    """Topics and joint names of the hand driver."""

    command_topic: str = "/allegroHand_0/joint_cmd"
    """Position commands (Wonik V4 ros2_control: /allegro_hand_position_controller/commands as float64_multi_array)."""
    command_type: str = "joint_state"
    """"joint_state" (sensor_msgs/JointState with names) or "float64_multi_array" (16 values, driver order)."""
    state_topic: str = "/allegroHand_0/joint_states"
    """Measured joints (sensor_msgs/JointState, matched by name)."""
    command_joint_names: tuple[str, ...] = WONIK_JOINT_NAMES
    """The driver's joint names in its order; entry k names the joint of our joint GETAGRIP_TO_WONIK[k]."""
    rate_hz: float = 100.0
    """Setpoint rate while following a trajectory (the Wonik controller manager runs at 100 Hz)."""
    goal_tolerance_rad: float = 0.05
    """After the last setpoint, wait (up to settle_s) until every joint is this close to it. A finger that stays
    farther (blocked by the object it closes on) is reported in the reason, not as a failure: grasps are judged
    by the lift."""
    settle_s: float = 0.3
    state_timeout_s: float = 1.0
    """A state older than this counts as missing (driver down)."""

    def __post_init__(self) -> None:
        if self.command_type not in COMMAND_TYPES:
            raise ValueError(f"command_type must be one of {COMMAND_TYPES}, got {self.command_type!r}")
        if len(self.command_joint_names) != len(HAND_JOINT_NAMES) or len(set(self.command_joint_names)) != 16:
            raise ValueError(f"command_joint_names: expected 16 distinct names, got {list(self.command_joint_names)}")
        if not self.rate_hz > 0:
            raise ValueError(f"rate_hz must be > 0, got {self.rate_hz}")


def to_driver_order(q_getagrip_rad: np.ndarray) -> np.ndarray:
    """(16,) in our order -> the driver's order (wonik[k] = ours[GETAGRIP_TO_WONIK[k]])."""
    return np.asarray(q_getagrip_rad, dtype=float)[GETAGRIP_TO_WONIK]


class AllegroTopicHand(Hand):
    """The hand behind a driver's topics, on an existing node.

    Args:
        node: publishes the commands and subscribes to the state (spin it in another thread).
        config: topics, names and rates.
    """

    joint_names = HAND_JOINT_NAMES

    def __init__(self, node: Node, config: AllegroTopicConfig = AllegroTopicConfig()) -> None:
        self.node, self.config = node, config
        msg_type = JointStateMsg if config.command_type == "joint_state" else Float64MultiArray
        self._pub = node.create_publisher(msg_type, config.command_topic, 10)
        self._lock = threading.Lock()
        self._state: JointState | None = None
        self._stamp = -np.inf
        # our joint k is the driver's joint named _driver_name[k]
        self._driver_name = [""] * 16
        for k, ours in enumerate(GETAGRIP_TO_WONIK):
            self._driver_name[ours] = config.command_joint_names[k]
        node.create_subscription(JointStateMsg, config.state_topic, self._on_state, 10)

    def _on_state(self, msg: JointStateMsg) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        if not all(n in index for n in self._driver_name) or len(msg.position) != len(msg.name):
            return  # another robot's joints on a shared joint_states topic, or a malformed message
        rows = [index[n] for n in self._driver_name]
        q = np.asarray(msg.position, dtype=float)[rows]
        v = np.asarray(msg.velocity, dtype=float)[rows] if len(msg.velocity) == len(msg.name) else np.zeros(16)
        if not np.isfinite(q).all():
            return
        with self._lock:
            self._state, self._stamp = JointState(HAND_JOINT_NAMES, q, v), time.monotonic()

    def state(self) -> JointState:
        """The latest measured state (our order); RuntimeError when none arrived within state_timeout_s."""
        with self._lock:
            state, age = self._state, time.monotonic() - self._stamp
        if state is None or age > self.config.state_timeout_s:
            raise RuntimeError(f"no hand joint state on {self.config.state_topic} in the last "
                               f"{self.config.state_timeout_s} s: is the Allegro driver running?")
        return state

    def command(self, q_rad: np.ndarray) -> None:
        """Publish one position setpoint (16 values in our order)."""
        q = np.asarray(q_rad, dtype=float)
        if q.shape != (16,) or not np.isfinite(q).all():
            raise ValueError(f"hand command: expected 16 finite joint positions, got {q}")
        if self.config.command_type == "joint_state":
            msg = JointStateMsg(name=list(self.config.command_joint_names), position=to_driver_order(q).tolist())
            msg.header.stamp = self.node.get_clock().now().to_msg()
        else:
            msg = Float64MultiArray(data=to_driver_order(q).tolist())
        self._pub.publish(msg)

    def move(self, trajectory: JointTrajectory, should_stop: StopFn | None = None) -> MotionResult:
        names = trajectory.joint_names
        if set(names) != set(HAND_JOINT_NAMES):
            raise ValueError(f"AllegroTopicHand moves all 16 hand joints {list(HAND_JOINT_NAMES)}, got {list(names)}")
        columns = [names.index(n) for n in HAND_JOINT_NAMES]
        self.state()  # fail before streaming when the driver is silent
        period, start = 1.0 / self.config.rate_hz, time.monotonic()
        max_err = np.zeros(16)
        target = trajectory.positions_rad[0, columns]
        while True:
            t = time.monotonic() - start
            if should_stop is not None and should_stop():
                self.stop()
                err = np.abs(target - self.state().positions_rad)
                return MotionResult(False, "stopped on request", t, err, np.maximum(max_err, err))
            target = trajectory.sample(min(t, trajectory.duration_s))[columns]
            self.command(target)
            max_err = np.maximum(max_err, np.abs(target - self.state().positions_rad))
            if t >= trajectory.duration_s:
                break
            time.sleep(period)
        deadline = time.monotonic() + self.config.settle_s
        while True:
            err = np.abs(target - self.state().positions_rad)
            if err.max() <= self.config.goal_tolerance_rad or time.monotonic() > deadline:
                break
            time.sleep(period)
        duration = time.monotonic() - start
        if err.max() > self.config.goal_tolerance_rad:
            worst = int(np.argmax(err))
            reason = f"streamed to the end; {HAND_JOINT_NAMES[worst]} stopped {err[worst]:.3f} rad short (blocked)"
        else:
            reason = "reached the end of the trajectory"
        return MotionResult(True, reason, duration, err, np.maximum(max_err, err))

    def stop(self) -> None:
        """Command the measured position (the fingers hold where they are)."""
        try:
            self.command(self.state().positions_rad)
        except RuntimeError:
            pass  # no state: nothing sensible to hold; the driver keeps its last command
