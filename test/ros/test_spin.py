"""Every node's entry point (`ros.spin.spin_node`) ends cleanly on SIGINT, also when a second SIGINT arrives while it
shuts down (a terminal and ros2 launch each send one), and publishes nothing after its context is gone."""

import signal
import sys
import time

from getagrip_ros.ros.processes import NodeProcess

SLOW_TO_CLOSE = """
import time
from rclpy.node import Node
from std_msgs.msg import String
from getagrip_ros.ros.spin import spin_node

class SlowToClose(Node):
    def __init__(self):
        super().__init__("slow_to_close")
        self.pub = self.create_publisher(String, "chatter", 10)
        self.create_timer(0.01, lambda: self.pub.publish(String(data="tick")))
        print("slow_to_close ready", flush=True)

    def close(self):
        print("closing", flush=True)
        time.sleep(2.0)
        print("closed", flush=True)

spin_node(SlowToClose)
"""


def test_a_second_sigint_during_shutdown_does_not_cut_it_short(ros_env, tmp_path):
    with NodeProcess("slow", env=ros_env, command=[sys.executable, "-c", SLOW_TO_CLOSE], log_path=tmp_path / "out") as proc:
        assert proc.wait_for_output("slow_to_close ready", 30), proc.output()
        proc.process.send_signal(signal.SIGINT)
        assert proc.wait_for_output("closing", 10), proc.output()
        proc.process.send_signal(signal.SIGINT)  # the second one, mid-shutdown
        time.sleep(0.2)
        proc.process.send_signal(signal.SIGINT)
        code = proc.process.wait(20)
    out = proc.output()
    assert code == 0 and "closed" in out and "KeyboardInterrupt" not in out and "Traceback" not in out, out
