"""ROS 2 nodes and adapters (the only part of the package that imports rclpy)."""

import os

# Node processes share the CPU with other nodes and drivers. OpenMP threads that spin while waiting
# (libgomp's default) then slow torch down 2-10x; sleeping waiters cost ~10% on an idle machine.
# Must be set before torch is first imported; the user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
