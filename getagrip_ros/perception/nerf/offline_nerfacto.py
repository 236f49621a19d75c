"""nerfacto that builds without the internet: its LPIPS eval metric is replaced (see compat.offline_lpips).

Importing this module imports nerfstudio (through compat, so torchvision works beside CPU torch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Type

from getagrip_ros.perception.nerf.compat import import_nerfstudio, offline_lpips

import_nerfstudio()

from nerfstudio.models.nerfacto import NerfactoModel, NerfactoModelConfig  # noqa: E402


class OfflineNerfactoModel(NerfactoModel):
    """nerfacto, unchanged except that LPIPS is not built (it would download AlexNet weights)."""

    def populate_modules(self) -> None:
        with offline_lpips():
            super().populate_modules()


@dataclass
class OfflineNerfactoModelConfig(NerfactoModelConfig):
    _target: Type = field(default_factory=lambda: OfflineNerfactoModel)
