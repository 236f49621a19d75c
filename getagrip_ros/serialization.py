"""JSON for records that hold numpy values, paths and torch dtypes (config fields such as
``SynthesisConfig.dtype``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def json_default(value: Any) -> Any:
    """`json.dumps(..., default=json_default)`: arrays -> lists, numpy scalars -> Python numbers, paths -> str,
    torch dtypes -> their name ("torch.float32", read back by :func:`torch_dtype`)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if _is_torch_dtype(value):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _is_torch_dtype(value: Any) -> bool:
    return type(value).__module__ == "torch" and type(value).__name__ == "dtype"  # without importing torch


def torch_dtype(name: str):
    """The torch dtype `json_default` wrote as ``name`` ("torch.float32" or "float32"); ValueError otherwise."""
    import torch

    value = getattr(torch, str(name).removeprefix("torch."), None) if isinstance(name, str) else None
    if not isinstance(value, torch.dtype):
        raise ValueError(f"not a torch dtype: {name!r}")
    return value
