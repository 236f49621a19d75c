"""ROS parameters that mirror a config dataclass: one declaration, one conversion, no drift.

Nested dataclass fields become dotted parameter names (``closing.pregrasp_distance_m``), which is
also how they are written in the node's YAML file under ``ros__parameters``.
"""

from __future__ import annotations

from typing import TypeVar

from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node

from getagrip_ros.config_tree import flatten, rebuild

C = TypeVar("C")


def declare_config(node: Node, default: C) -> C:
    """Declare one parameter per config field (defaults from `default`) and return the config they give.

    The parameters are read once at start-up; later changes are refused with a reason.
    """
    values = {name: node.declare_parameter(name, value).value for name, value in flatten(default).items()}

    def refuse(params: list) -> SetParametersResult:
        names = [p.name for p in params if p.name in values]
        if names:
            return SetParametersResult(successful=False, reason=f"{names} are read at start-up; restart the node to change them")
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(refuse)
    return rebuild(default, values)
