"""The public NeRF evaluator's ``config.yaml`` (written by the public training code with tyro), read as plain data.

The public docs point the NeRF evaluator at ``nerf_evaluator_model/<run>/config.yaml``; its checkpoint (``*.pth``,
``{"nerf_evaluator_model": state_dict, ...}``) lies beside it, the newest one taken as the public code takes it.
The yaml carries the network (``model_config``: with or without the global grid, channels, MLP) and the finger grid
(``nerf_grasp_dataset_config.fingertip_config``: point spacing and extents in mm). tyro tags its nodes
(``!dataclass:Name``, ``!enum:Name``, ``!!python/tuple``, ``!!python/object/apply:pathlib.PosixPath``); they are read
here as mappings, names, lists and path strings by a safe loader, which constructs no Python object and refuses
every other tag. The global grid is fixed in the public code (30^3 over 0.3 m) and not in the yaml.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from getagrip_ros.models.nerf_evaluator import NerfEvaluatorConfig
from getagrip_ros.perception.density import FingerGridConfig

CONFIG_SUFFIXES = (".yaml", ".yml")
_PATH_TAGS = ("tag:yaml.org,2002:python/object/apply:pathlib.PosixPath",
              "tag:yaml.org,2002:python/object/apply:pathlib.Path")


class PublicConfigError(ValueError):
    """The public config.yaml is unreadable, uses a tag that is not plain data, or describes what cannot be run."""


class _TyroYamlLoader(yaml.SafeLoader):
    """yaml's SafeLoader plus tyro's tags, each read as plain data; any other tag stays an error."""


def _dataclass_node(loader: _TyroYamlLoader, suffix: str, node: yaml.Node) -> dict:
    return {"__dataclass__": suffix, **loader.construct_mapping(node, deep=True)}


def _enum_node(loader: _TyroYamlLoader, suffix: str, node: yaml.Node) -> str:
    return str(loader.construct_scalar(node))


_TyroYamlLoader.add_multi_constructor("!dataclass:", _dataclass_node)
_TyroYamlLoader.add_multi_constructor("!enum:", _enum_node)
_TyroYamlLoader.add_constructor("tag:yaml.org,2002:python/tuple",
                                lambda loader, node: loader.construct_sequence(node, deep=True))
for _tag in _PATH_TAGS:
    _TyroYamlLoader.add_constructor(_tag, lambda loader, node: "/".join(loader.construct_sequence(node)).replace("//", "/"))


def read_tyro_yaml(path: str | Path) -> dict[str, Any]:
    """The yaml as nested dicts (a dataclass node's class name under ``__dataclass__``); PublicConfigError otherwise."""
    try:
        data = yaml.load(Path(path).read_text(), Loader=_TyroYamlLoader)  # noqa: S506 - a SafeLoader subclass
    except (OSError, UnicodeDecodeError) as err:
        raise PublicConfigError(f"cannot read {path}: {err}") from err
    except yaml.YAMLError as err:
        raise PublicConfigError(f"{path}: not plain YAML data (only tyro's dataclass, enum, tuple and path tags are "
                                f"read): {' '.join(str(err).split())[:300]}") from err
    if not isinstance(data, dict):
        raise PublicConfigError(f"{path}: expected a mapping at the top, found {type(data).__name__}")
    return data


@dataclass(frozen=True)
class PublicNerfEvaluatorSettings:
    network: NerfEvaluatorConfig
    finger_grid: FingerGridConfig
    checkpoint: Path
    """The newest *.pth / *.pt beside the yaml."""


def _section(data: dict, key: str, path: Path) -> dict:
    value = data.get(key)
    if not isinstance(value, dict):
        raise PublicConfigError(f"{path}: no {key!r} section")
    return value


def _ints(value: Any, name: str, path: Path) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, int) and v > 0 for v in value):
        raise PublicConfigError(f"{path}: {name} must be a list of positive integers, got {value!r}")
    return tuple(value)


def finger_grid_from_fingertip_config(fingertip: dict, path: Path) -> FingerGridConfig:
    """The public fingertip config (mm) -> our finger grid: int(extent / spacing) + 1 points per axis, over the
    extent; an extent that is not a whole number of spacings cannot be gridded as the public code does: refused."""
    try:
        spacing = float(fingertip["distance_between_pts_mm"])
        extents = [float(fingertip[k]) for k in ("finger_width_mm", "finger_height_mm", "grasp_depth_mm")]
    except (KeyError, TypeError, ValueError) as err:
        raise PublicConfigError(f"{path}: fingertip_config needs distance_between_pts_mm, finger_width_mm, "
                                f"finger_height_mm and grasp_depth_mm numbers ({err})") from err
    if not spacing > 0 or not all(e > 0 for e in extents):
        raise PublicConfigError(f"{path}: the finger grid's spacing and extents must be positive, got {spacing}, {extents}")
    counts = [int(e / spacing) + 1 for e in extents]
    if any(abs((n - 1) * spacing - e) > 1e-6 for n, e in zip(counts, extents)):
        raise PublicConfigError(f"{path}: finger grid extents {extents} mm are not whole multiples of the "
                                f"{spacing} mm spacing")
    width, height, depth = (e / 1000.0 for e in extents)
    return FingerGridConfig(num_x=counts[0], num_y=counts[1], num_z=counts[2], width_m=width, height_m=height, depth_m=depth)


def read_public_nerf_evaluator_config(path: str | Path) -> PublicNerfEvaluatorSettings:
    """Network and finger grid of a public NeRF evaluator run, and its checkpoint (PublicConfigError: unreadable,
    not plain data, an unsupported model, a grid that cannot be built, or no checkpoint beside it)."""
    path = Path(path)
    data = read_tyro_yaml(path)
    model = _section(data, "model_config", path)
    kind = model.get("__dataclass__")
    if kind not in ("CnnXyzModelConfig", "CnnXyzGlobalCnnModelConfig"):
        raise PublicConfigError(f"{path}: model_config {kind!r} is not one of the public NeRF evaluators "
                                "(CnnXyzModelConfig, CnnXyzGlobalCnnModelConfig)")
    fingertip = _section(_section(data, "nerf_grasp_dataset_config", path), "fingertip_config", path)
    fingers = {model.get("n_fingers", 4), fingertip.get("n_fingers", 4)}
    if fingers != {4}:
        raise PublicConfigError(f"{path}: n_fingers {sorted(fingers)}; the Allegro grids have 4 fingers")
    use_global = kind == "CnnXyzGlobalCnnModelConfig"
    default = NerfEvaluatorConfig()
    network = NerfEvaluatorConfig(
        conv_channels=_ints(model.get("conv_channels"), "conv_channels", path),
        global_conv_channels=(_ints(model.get("global_conv_channels"), "global_conv_channels", path) if use_global
                              else default.global_conv_channels),
        mlp_hidden=_ints(model.get("mlp_hidden_layers"), "mlp_hidden_layers", path), use_global=use_global)
    candidates = [p for p in path.parent.iterdir() if p.suffix in (".pth", ".pt") and p.is_file()]
    if not candidates:
        raise PublicConfigError(f"{path}: no checkpoint (*.pth, *.pt) beside it")
    newest = max(candidates, key=lambda p: (p.stat().st_mtime, p.name))
    return PublicNerfEvaluatorSettings(network, finger_grid_from_fingertip_config(fingertip, path), newest)
