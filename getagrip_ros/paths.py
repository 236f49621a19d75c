"""Where the package's data files (URDFs, configs) live, in a source checkout or a colcon install."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

PACKAGE = "getagrip_ros"


@lru_cache(maxsize=None)
def share_dir() -> Path:
    """Folder holding `urdf/`, `config/` and `launch/`.

    A source checkout (pip editable install) uses the repository root; a colcon install uses the
    package's ament share directory.
    """
    source_root = Path(__file__).resolve().parents[1]
    if (source_root / "package.xml").is_file() and (source_root / "urdf").is_dir():
        return source_root
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError as exc:  # pragma: no cover - only without ROS and without a checkout
        raise FileNotFoundError("cannot locate getagrip_ros data files: no source tree, no ament index") from exc
    return Path(get_package_share_directory(PACKAGE))


def urdf_path(name: str) -> Path:
    """Path of `urdf/<name>` (e.g. "fr3_algr_zed2i.urdf"); raises FileNotFoundError if absent."""
    path = share_dir() / "urdf" / name
    if not path.is_file():
        raise FileNotFoundError(f"URDF not found: {path}")
    return path


def config_path(name: str) -> Path:
    """Path of `config/<name>`; raises FileNotFoundError if absent."""
    path = share_dir() / "config" / name
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    return path
