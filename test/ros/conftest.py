"""rclpy in the test process, for clients and subscribers talking to node processes."""

import pytest


@pytest.fixture(scope="module")
def rclpy_node(ros_env):
    """An initialised rclpy context and a plain node for clients/subscribers in the test process."""
    import rclpy
    from rclpy.node import Node

    rclpy.init()
    node = Node("test_client")
    yield node
    node.destroy_node()
    rclpy.try_shutdown()
