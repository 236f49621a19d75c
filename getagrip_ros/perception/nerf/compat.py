"""Make nerfstudio 1.1.5 import and run offline beside the CPU build of torch.

Two fixes, each at the thinnest seam (reading runs back without running what they name is
`safe_config.py`'s job):
1. PyPI's torchvision is a CUDA build; beside CPU torch its compiled ops fail to load and importing it
   raises "operator torchvision::nms does not exist". nerfstudio only needs torchvision's pure-Python
   parts, so the two op schemas torchvision registers fake kernels for are declared (not implemented).
2. nerfacto builds the LPIPS eval metric at construction, which downloads AlexNet weights:
   :class:`OfflineLpips` replaces it (LPIPS is reported as NaN; training is unaffected).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Iterator

import torch

_TORCHVISION_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_torchvision_library: torch.library.Library | None = None


class NerfstudioUnavailable(ImportError):
    """nerfstudio (or a dependency) is not installed or fails to import."""


def _declare_torchvision_ops() -> None:
    """Load torchvision's compiled ops when they match this torch; otherwise declare the two schemas it needs."""
    global _torchvision_library
    if _torchvision_library is not None or "torchvision" in sys.modules:
        return
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return  # not installed: the import below says so
    for library in Path(spec.origin).parent.glob("_C*.so"):
        try:
            torch.ops.load_library(str(library))
            return  # a torchvision built for this torch: its own ops are registered
        except (OSError, RuntimeError):
            pass
    _torchvision_library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in _TORCHVISION_SCHEMAS.values():
        _torchvision_library.define(schema)


def import_nerfstudio() -> None:
    """Import torchvision and nerfstudio's training modules, or raise NerfstudioUnavailable saying why."""
    try:
        _declare_torchvision_ops()
        importlib.import_module("torchvision")
        importlib.import_module("nerfstudio.pipelines.base_pipeline")
        importlib.import_module("nerfstudio.models.nerfacto")
    except Exception as exc:  # any import-time failure means the backend cannot run
        raise NerfstudioUnavailable(f"nerfstudio cannot be imported ({type(exc).__name__}: {exc}); "
                                    "run scripts/setup.sh to install the NeRF backend") from exc


class OfflineLpips(torch.nn.Module):
    """Stands in for torchmetrics' LPIPS (which needs AlexNet weights from the internet): returns NaN."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, *args, **kwargs) -> torch.Tensor:
        return torch.tensor(float("nan"))


@contextlib.contextmanager
def offline_lpips() -> Iterator[None]:
    """While active, torchmetrics' LPIPS class is :class:`OfflineLpips` (nerfacto imports it at construction)."""
    import torchmetrics.image.lpip as lpip

    original = lpip.LearnedPerceptualImagePatchSimilarity
    lpip.LearnedPerceptualImagePatchSimilarity = OfflineLpips
    try:
        yield
    finally:
        lpip.LearnedPerceptualImagePatchSimilarity = original
