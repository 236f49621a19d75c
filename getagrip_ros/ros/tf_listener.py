"""Fills a :class:`TransformTree` from ``/tf`` and ``/tf_static`` and looks transforms up for a node's goals.

The ROS side of :mod:`getagrip_ros.grasp.transform_tree` (tf2_ros has no PyPI wheels; this listener needs only
tf2_msgs' TFMessage). A malformed transform in a message is skipped with a throttled warning; the others are kept.
"""

from __future__ import annotations

import time

import numpy as np
from geometry_msgs.msg import Point, Pose, Transform
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from tf2_msgs.msg import TFMessage

from getagrip_ros.grasp.transform_tree import TransformLookupError, TransformTree, TransformTreeConfig
from getagrip_ros.human_demo.demonstration import HumanDemonstration
from getagrip_ros.ros.conversions import matrix_from_pose

POLL_S = 0.05
"""How often a waiting lookup looks again."""


def stamp_s(stamp) -> float:
    """builtin_interfaces/Time -> seconds."""
    return int(stamp.sec) + int(stamp.nanosec) * 1e-9


class TfListener:
    """Subscribes `node` to /tf and /tf_static (in a callback group of its own, so a goal that waits on a lookup does
    not block the messages it waits for, given a free executor thread)."""

    def __init__(self, node: Node, config: TransformTreeConfig = TransformTreeConfig()) -> None:
        self.node = node
        self.config = config
        self.tree = TransformTree(config)
        group = MutuallyExclusiveCallbackGroup()
        static_qos = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(TFMessage, "/tf", lambda m: self._on_tf(m, False), 100, callback_group=group)
        node.create_subscription(TFMessage, "/tf_static", lambda m: self._on_tf(m, True), static_qos,
                                 callback_group=group)

    def _on_tf(self, msg: TFMessage, static: bool) -> None:
        for t in msg.transforms:
            try:
                T = matrix_from_pose(_as_pose(t.transform))
                self.tree.set_transform(t.header.frame_id, t.child_frame_id, T, stamp_s(t.header.stamp), static)
            except ValueError as err:
                self.node.get_logger().warning(f"skipped the transform {t.header.frame_id!r} -> {t.child_frame_id!r}: "
                                               f"{err}", throttle_duration_sec=5.0)

    def lookup(self, target: str, source: str, stamp=None, stop=lambda: False) -> np.ndarray:
        """``T_target_source`` at `stamp` (builtin_interfaces/Time; None or zero: the newest), waiting up to the
        config's ``wait_s`` for it to become known (TransformLookupError with the last reason after that, or at
        once when `stop()` turns true)."""
        time_s = None if stamp is None or (stamp.sec == 0 and stamp.nanosec == 0) else stamp_s(stamp)
        deadline = time.monotonic() + self.config.wait_s
        while True:
            try:
                return self.tree.lookup(target, source, time_s)
            except TransformLookupError as err:
                if time.monotonic() >= deadline or stop():
                    raise TransformLookupError(f"no transform from {source!r} to {target!r} on /tf or /tf_static "
                                               f"after {self.config.wait_s:g} s: {err}") from None
            time.sleep(POLL_S)

    def demonstration_in(self, demo: HumanDemonstration, target: str, stamp, same_frames: tuple[str, ...] = (),
                         stop=lambda: False) -> HumanDemonstration:
        """`demo` moved into `target` by the transforms at `stamp` (frames of `same_frames` are one frame: the
        robot base under two names). ValueError naming the demonstration's frame when no transform joins them."""
        if demo.frame_id == target or (demo.frame_id in same_frames and target in same_frames):
            return demo.transformed(np.eye(4), target)
        try:
            return demo.transformed(self.lookup(target, demo.frame_id, stamp, stop), target)
        except TransformLookupError as err:
            raise ValueError(f"the human demonstration is in frame {demo.frame_id!r}: {err}") from None


def _as_pose(transform: Transform) -> Pose:
    """geometry_msgs/Transform -> Pose (for matrix_from_pose, which checks it)."""
    t = transform.translation
    return Pose(position=Point(x=t.x, y=t.y, z=t.z), orientation=transform.rotation)
