"""Reading a nerfstudio run (config.yml and checkpoint) without running anything the files name.

nerfstudio writes its config as YAML with Python tags (dataclass instances, classes by name, paths, enums and a
pickled tensor); `yaml.load(..., Loader=yaml.Loader)` would import and call whatever a crafted file names. This
loader constructs only what a nerfstudio run holds:
  - instances (`!!python/object:`) and names (`!!python/name:`) of classes from nerfstudio and this package's NeRF
    modules (names also from `torch.optim`), made without calling them;
  - calls (`!!python/object/apply:`) of pathlib paths, `collections.OrderedDict`, enums of those modules and the
    two torch functions that rebuild a tensor, whose pickled storage is read with `torch.load(weights_only=True)`;
  - tuples.
Anything else is refused with the tag that was not allowed. Checkpoints are read with `weights_only=True`, with
the numpy scalar types nerfstudio stores in them declared safe.
"""

from __future__ import annotations

import enum
import io
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError, UnsafeConstructor

ALLOWED_MODULES = ("nerfstudio.", "getagrip_ros.perception.nerf.")
"""Modules whose classes a config may hold."""
ALLOWED_NAME_MODULES = ALLOWED_MODULES + ("torch.optim.",)
"""Modules whose classes a config may name (`!!python/name:`)."""
ALLOWED_CALLS = frozenset({"pathlib.PosixPath", "pathlib.Path", "pathlib.PurePosixPath", "collections.OrderedDict",
                           "torch._utils._rebuild_tensor_v2", "torch.storage._load_from_bytes"})
"""Callables a config may call (`!!python/object/apply:`), besides enums of ALLOWED_MODULES."""
ALLOWED_FUNCTION_NAMES = frozenset({"nerfstudio.data.utils.nerfstudio_collate.nerfstudio_collate"})
"""Functions a config may name (its datamanager's collate_fn); every other name must be a class."""


class UnsafeNerfConfig(ValueError):
    """The file is not a nerfstudio config this loader accepts (names what was refused)."""


def _allowed(name: str, prefixes: tuple[str, ...]) -> bool:
    return name.startswith(prefixes) and ".." not in name


class _NerfConfigConstructor(UnsafeConstructor):
    """PyYAML's Python-object constructor, restricted to what a nerfstudio config holds."""

    def find_python_module(self, name, mark):
        raise ConstructorError(None, None, f"modules ({name!r}) are not allowed in a NeRF config", mark)

    def find_python_name(self, name, mark):
        if not (_allowed(name, ALLOWED_NAME_MODULES) or name in ALLOWED_CALLS):
            raise ConstructorError(None, None, f"{name!r} is not allowed in a NeRF config", mark)
        return super().find_python_name(name, mark)

    def construct_python_object(self, suffix, node):
        if not _allowed(suffix, ALLOWED_MODULES):
            raise ConstructorError(None, None, f"objects of {suffix!r} are not allowed in a NeRF config", node.start_mark)
        cls = self.find_python_name(suffix, node.start_mark)
        if not isinstance(cls, type):
            raise ConstructorError(None, None, f"{suffix!r} is not a class", node.start_mark)
        return super().construct_python_object(suffix, node)

    def construct_python_object_apply(self, suffix, node, newobj=False):
        if suffix == "torch.storage._load_from_bytes":  # a pickled tensor storage: read it without arbitrary globals
            import torch

            data = self.construct_sequence(node)[0]
            if not isinstance(data, bytes):
                raise ConstructorError(None, None, "torch.storage._load_from_bytes needs bytes", node.start_mark)
            return torch.load(io.BytesIO(data), weights_only=True)
        target = self.find_python_name(suffix, node.start_mark)
        is_enum = isinstance(target, type) and issubclass(target, enum.Enum) and _allowed(suffix, ALLOWED_MODULES)
        if not (suffix in ALLOWED_CALLS or is_enum):
            raise ConstructorError(None, None, f"calling {suffix!r} is not allowed in a NeRF config", node.start_mark)
        return super().construct_python_object_apply(suffix, node, newobj)

    def construct_python_name(self, suffix, node):
        target = super().construct_python_name(suffix, node)
        if not (isinstance(target, type) or suffix in ALLOWED_FUNCTION_NAMES):  # a named function could do anything
            raise ConstructorError(None, None, f"{suffix!r} is not a class", node.start_mark)
        return target

    def construct_python_module(self, suffix, node):
        raise ConstructorError(None, None, f"modules ({suffix!r}) are not allowed in a NeRF config", node.start_mark)

    def construct_python_object_new(self, suffix, node):
        raise ConstructorError(None, None, f"object/new of {suffix!r} is not allowed in a NeRF config", node.start_mark)


for _tag, _construct in (("module:", _NerfConfigConstructor.construct_python_module),
                        ("name:", _NerfConfigConstructor.construct_python_name),
                        ("object:", _NerfConfigConstructor.construct_python_object),
                        ("object/new:", _NerfConfigConstructor.construct_python_object_new),
                        ("object/apply:", _NerfConfigConstructor.construct_python_object_apply)):
    # PyYAML registers its base class's functions, so the overrides above take effect only once registered here
    _NerfConfigConstructor.add_multi_constructor(f"tag:yaml.org,2002:python/{_tag}", _construct)


class NerfConfigLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer,
                       _NerfConfigConstructor, yaml.resolver.Resolver):
    def __init__(self, stream) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _NerfConfigConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


def load_nerf_config(path: str | Path) -> Any:
    """The nerfstudio TrainerConfig of a config.yml, constructed without running anything it names.

    Raises:
        UnsafeNerfConfig: the YAML names something not allowed, does not parse, or is not a nerfstudio trainer
            config (e.g. /etc/passwd) - the message names the file.
    """
    from getagrip_ros.perception.nerf.offline_nerfacto import OfflineNerfactoModel  # noqa: F401 - nerfstudio, offline

    path = Path(path)
    try:
        config = yaml.load(path.read_text(errors="replace"), Loader=NerfConfigLoader)  # noqa: S506 - restricted loader
    except (yaml.YAMLError, ValueError, TypeError, AttributeError, ImportError) as err:
        raise UnsafeNerfConfig(f"{path} is not a NeRF config this stack reads: {type(err).__name__}: {err}") from None
    from nerfstudio.cameras.camera_optimizers import CameraOptimizer
    from nerfstudio.data.datamanagers.base_datamanager import DataManager
    from nerfstudio.data.dataparsers.base_dataparser import DataParser
    from nerfstudio.data.pixel_samplers import PixelSampler
    from nerfstudio.engine.trainer import TrainerConfig
    from nerfstudio.models.base_model import Model
    from nerfstudio.pipelines.base_pipeline import Pipeline

    if not isinstance(config, TrainerConfig):
        raise UnsafeNerfConfig(f"{path} is not a nerfstudio trainer config (it holds a {type(config).__name__})")
    try:  # what loading the run instantiates must be what it claims to be
        targets = {"pipeline": (config.pipeline, Pipeline), "datamanager": (config.pipeline.datamanager, DataManager),
                   "dataparser": (config.pipeline.datamanager.dataparser, DataParser),
                   "model": (config.pipeline.model, Model),
                   "camera optimizer": (getattr(config.pipeline.model, "camera_optimizer", None), CameraOptimizer),
                   "pixel sampler": (getattr(config.pipeline.datamanager, "pixel_sampler", None), PixelSampler)}
        for what, (part, base) in targets.items():
            if part is None and what in ("camera optimizer", "pixel sampler"):
                continue
            if not (isinstance(part._target, type) and issubclass(part._target, base)):
                raise UnsafeNerfConfig(f"{path}: the {what} is {part._target!r}, not a nerfstudio {base.__name__}")
    except AttributeError as err:
        raise UnsafeNerfConfig(f"{path} is not a complete nerfstudio trainer config: {err}") from None
    return config


def load_nerf_checkpoint(path: str | Path) -> dict:
    """A nerfstudio checkpoint (step-*.ckpt), read with weights_only=True (numpy scalars allowed)."""
    import numpy as np
    import numpy._core.multiarray as multiarray
    import torch

    allowed = [multiarray.scalar, np.dtype, *(type(np.dtype(t)) for t in ("f4", "f8", "i4", "i8", "u1", "b1"))]
    with torch.serialization.safe_globals(allowed):
        return torch.load(path, map_location="cpu", weights_only=True)
