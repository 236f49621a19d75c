"""ROS parameters that mirror a config dataclass: one declaration, one conversion, no drift.

Nested dataclass fields become dotted parameter names (``closing.pregrasp_distance_m``), which is
also how they are written in the node's YAML file under ``ros__parameters``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node

C = TypeVar("C")


def _flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out.update(_flatten(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = list(value) if isinstance(value, tuple) else value
    return out


def _rebuild(default: C, values: dict[str, Any], prefix: str = "") -> C:
    changes = {}
    for f in dataclasses.fields(default):
        value = getattr(default, f.name)
        if dataclasses.is_dataclass(value):
            changes[f.name] = _rebuild(value, values, f"{prefix}{f.name}.")
        else:
            new = values[f"{prefix}{f.name}"]
            changes[f.name] = tuple(new) if isinstance(value, tuple) else type(value)(new)
    return dataclasses.replace(default, **changes)


def declare_config(node: Node, default: C) -> C:
    """Declare one parameter per config field (defaults from `default`) and return the config they give.

    The parameters are read once at start-up; later changes are refused with a reason.
    """
    values = {name: node.declare_parameter(name, value).value for name, value in _flatten(default).items()}

    def refuse(params: list) -> SetParametersResult:
        names = [p.name for p in params if p.name in values]
        if names:
            return SetParametersResult(successful=False, reason=f"{names} are read at start-up; restart the node to change them")
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(refuse)
    return _rebuild(default, values)
