"""Config dataclasses as flat dotted names and back: how nodes declare them as parameters and how a bring-up
is given a config (nested dataclass fields become ``closing.pregrasp_distance_m``; tuples become lists)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

C = TypeVar("C")


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted field name: value} of a config dataclass (nested dataclasses flattened, tuples as lists)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out.update(flatten(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = list(value) if isinstance(value, tuple) else value
    return out


def rebuild(default: C, values: dict[str, Any], prefix: str = "") -> C:
    """`default` with every field read from `values` (dotted names, as `flatten` writes them)."""
    changes = {}
    for f in dataclasses.fields(default):
        value = getattr(default, f.name)
        if dataclasses.is_dataclass(value):
            changes[f.name] = rebuild(value, values, f"{prefix}{f.name}.")
        else:
            new = values[f"{prefix}{f.name}"]
            changes[f.name] = tuple(new) if isinstance(value, tuple) else type(value)(new)
    return dataclasses.replace(default, **changes)
