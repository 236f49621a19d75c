"""How the project reads files that users and clients name: nothing in them runs.

The policy (README "Reliability and security"): no pickle and no code-executing YAML from any file a user or a
client names. Torch files load with ``weights_only=True`` (`models.checkpoints`, nerfstudio checkpoints in
`perception.nerf.safe_config`); nerfstudio's YAML configs with a loader that builds only nerfstudio's config
classes (`perception.nerf.safe_config`); the public code's pickled ``.npy`` grasp dicts with `load_npy_arrays`,
an unpickler that can build numpy arrays and nothing else; our own data is ``.npz`` / JSON / HDF5. Paths that
come from goals are checked against configured roots (`check_under_roots`).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

_ARRAY_GLOBALS = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                  ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
                  ("numpy._core.multiarray", "scalar")}


class UnsafeFile(ValueError):
    """A file holds more than data, or lies outside the roots it may come from (the message says which)."""


class _ArraysOnly(pickle.Unpickler):
    """Builds dicts, lists, tuples, strings, numbers and numpy arrays; any other global is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ARRAY_GLOBALS:
            return super().find_class(module, name)
        if module.startswith("numpy") and name.endswith("DType"):  # numpy >= 1.25 dtype classes (np.dtypes.*)
            import numpy.dtypes

            found = getattr(numpy.dtypes, name, None)
            if isinstance(found, type) and issubclass(found, np.dtype):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed (only numpy arrays are read from pickled data)")


def load_npy_arrays(path: str | Path) -> Any:
    """The content of a ``.npy`` file - a plain array, or (object dtype) the pickled dict / list of numpy arrays
    that the public Get a Grip code writes with np.save - built without running anything; UnsafeFile otherwise."""
    path = Path(path)
    with open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in read_header:
                raise ValueError(f"format version {version} is not read here (1.0 and 2.0 are)")
            shape, _, dtype = read_header[version](f)
        except ValueError as err:
            raise UnsafeFile(f"{path} is not a .npy file: {err}") from None
        if not dtype.hasobject:
            f.seek(0)
            return np.load(f, allow_pickle=False)
        try:
            array = _ArraysOnly(f).load()
        except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError) as err:
            raise UnsafeFile(f"{path}: refused its pickled content: {err}") from None
    return array.item() if isinstance(array, np.ndarray) and array.shape == () else array


DEFAULT_DATA_ROOTS = ("~/getagrip_trials",)
"""Where goal paths may lead unless a node's data_roots says otherwise (the launch files set it to work_dir)."""


def check_goal_paths(roots: tuple[str, ...] | list[str], **paths: str) -> None:
    """UnsafeFile unless every non-empty path (named by its goal field) lies under one of `roots`."""
    for field, path in paths.items():
        if path:
            check_under_roots(path, roots, field)


def check_under_roots(path: str | Path, roots: tuple[str, ...] | list[str], what: str) -> Path:
    """path resolved (links followed) when it lies under one of `roots` (each expanded and resolved); UnsafeFile
    naming the roots otherwise, or when no root is configured."""
    resolved = Path(path).expanduser().resolve()
    allowed = [Path(r).expanduser().resolve() for r in roots if str(r).strip()]
    if not any(resolved == root or root in resolved.parents for root in allowed):
        raise UnsafeFile(f"{what} {str(path)!r} is outside the configured roots {[str(r) for r in allowed]}")
    return resolved
