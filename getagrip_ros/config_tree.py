"""Config dataclasses as flat dotted names and back: how nodes declare them as parameters and how a bring-up
is given a config (nested dataclass fields become ``closing.pregrasp_distance_m``; tuples become lists).

Only fields a ROS parameter can hold are listed: bool, int, float, str and non-empty tuples of one of them.
Others (None, e.g. an optional override such as ``graspd.synthesis.torque_length_m``, or a ``torch.dtype``
such as ``graspd.synthesis.dtype``) are not parameters: they keep their default when a config is rebuilt.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

C = TypeVar("C")

_SCALARS = (bool, int, float, str)


def is_parameter_value(value: Any) -> bool:
    """Whether a (non-dataclass) field value can be a ROS parameter: a bool, int, float or str, or a non-empty
    tuple/list of one of those types."""
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, _SCALARS) for v in value):
        kinds = {bool if isinstance(v, bool) else (float if isinstance(v, (int, float)) else str) for v in value}
        return len(kinds) == 1
    return False


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted field name: value} of a config dataclass (nested dataclasses flattened, tuples as lists; fields
    that cannot be parameters, see :func:`is_parameter_value`, are left out)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out.update(flatten(value, f"{prefix}{f.name}."))
        elif is_parameter_value(value):
            out[f"{prefix}{f.name}"] = list(value) if isinstance(value, tuple) else value
    return out


def rebuild(default: C, values: dict[str, Any], prefix: str = "") -> C:
    """`default` with every field read from `values` (dotted names, as `flatten` writes them; fields `flatten`
    leaves out keep their default)."""
    changes = {}
    for f in dataclasses.fields(default):
        value = getattr(default, f.name)
        if dataclasses.is_dataclass(value):
            changes[f.name] = rebuild(value, values, f"{prefix}{f.name}.")
        elif is_parameter_value(value):
            new = values[f"{prefix}{f.name}"]
            changes[f.name] = tuple(new) if isinstance(value, tuple) else type(value)(new)
    return dataclasses.replace(default, **changes)
