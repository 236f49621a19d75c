"""The ROS arguments a bring-up gives its nodes: each node's config/<node>.yaml, then one file of overrides (the
profile's, the launch arguments', and per-node extras), keyed by node name as `--params-file` files are."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml

from getagrip_ros.bringup.description import NodeSpec, Profile, node_parameters
from getagrip_ros.paths import config_path


def nested(dotted: dict[str, object]) -> dict:
    """{"a.b": 1} -> {"a": {"b": 1}} (how parameter files nest dotted names)."""
    out: dict = {}
    for name, value in dotted.items():
        *parents, leaf = name.split(".")
        level = out
        for p in parents:
            level = level.setdefault(p, {})
        level[leaf] = value
    return out


def write_overrides(prof: Profile, arguments: dict[str, object], extra: dict[str, dict[str, object]] | None = None,
                    params_dir: str | Path | None = None) -> Path:
    """One parameter file with every node's overrides: the profile's, the given arguments', then `extra`."""
    overrides = node_parameters(prof, arguments)
    for node, params in (extra or {}).items():
        if node not in overrides:
            raise ValueError(f"no node {node!r} in profile {prof.name!r}; nodes: {sorted(overrides)}")
        overrides[node].update(params)
    folder = Path(params_dir or tempfile.mkdtemp(prefix="getagrip_bringup_"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "overrides.yaml"
    path.write_text(yaml.safe_dump({n: {"ros__parameters": nested(p)} for n, p in overrides.items() if p}))
    return path


def ros_arguments(nodes: tuple[NodeSpec, ...], overrides: Path) -> list[str]:
    """--ros-args with the nodes' parameter files, then the overrides."""
    args = ["--ros-args"]
    for node in nodes:
        args += ["--params-file", str(config_path(node.params_file))]
    return args + ["--params-file", str(overrides)]
