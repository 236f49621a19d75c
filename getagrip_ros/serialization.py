"""JSON for records that hold numpy values and paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def json_default(value: Any) -> Any:
    """`json.dumps(..., default=json_default)`: arrays -> lists, numpy scalars -> Python numbers, paths -> str."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
