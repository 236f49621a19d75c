"""NeRF grasp evaluator: per-finger and global NeRF opacity grids -> [y_pick, y_coll, y_PGS].

Each input grid has 4 channels: opacity alpha = 1 - exp(-delta sigma) and the x, y, z coordinates of
the grid point in the object frame Oy (CoordConv). One 3D CNN (shared by the four fingers) encodes
each finger grid, a second one the global grid around the object; an MLP maps the concatenated
features (fingers in index, middle, ring, thumb order, then the global one) to 2 logits per label.
Module names follow the public checkpoints (``model.conv``, ``model.global_conv``, ``model.mlp``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from getagrip_ros.models.bps_evaluator import LABEL_NAMES

GRID_CHANNELS = 4
"""alpha, x, y, z."""


@dataclass(frozen=True)
class NerfEvaluatorConfig:
    conv_channels: tuple[int, ...] = (32, 64, 128)
    global_conv_channels: tuple[int, ...] = (32, 64, 128)
    mlp_hidden: tuple[int, ...] = (256, 256)
    num_fingers: int = 4
    use_global: bool = True
    dropout: float = 0.1


def cnn_encoder(channels: tuple[int, ...], dropout: float) -> nn.Sequential:
    """[Conv3d 3x3x3 'same' -> ReLU -> MaxPool 2 -> Dropout3d] per entry of channels."""
    layers: list[nn.Module] = []
    c_in = GRID_CHANNELS
    for c_out in channels:
        layers += [nn.Conv3d(c_in, c_out, 3, padding="same"), nn.ReLU(), nn.MaxPool3d(2, 2), nn.Dropout3d(dropout)]
        c_in = c_out
    return nn.Sequential(*layers)


class _Network(nn.Module):
    def __init__(self, config: NerfEvaluatorConfig) -> None:
        super().__init__()
        self.conv = cnn_encoder(config.conv_channels, config.dropout)
        width = config.num_fingers * config.conv_channels[-1]
        if config.use_global:
            self.global_conv = cnn_encoder(config.global_conv_channels, config.dropout)
            width += config.global_conv_channels[-1]
        layers: list[nn.Module] = []
        for hidden in config.mlp_hidden:
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, 2 * len(LABEL_NAMES)))
        self.mlp = nn.Sequential(*layers)


class NerfEvaluator(nn.Module):
    def __init__(self, config: NerfEvaluatorConfig = NerfEvaluatorConfig()) -> None:
        super().__init__()
        self.config = config
        self.model = _Network(config)

    @staticmethod
    def _encode(cnn: nn.Sequential, grids: torch.Tensor) -> torch.Tensor:
        return nn.functional.adaptive_max_pool3d(cnn(grids), 1).flatten(1)

    def logits(self, finger_grids: torch.Tensor, global_grid: torch.Tensor | None) -> torch.Tensor:
        """(B, F, 4, nx, ny, nz) finger grids, (B, 4, R, R, R) global grid -> (B, 3 labels, 2 classes) logits."""
        b, f = finger_grids.shape[:2]
        if f != self.config.num_fingers or finger_grids.ndim != 6 or finger_grids.shape[2] != GRID_CHANNELS:
            raise ValueError(f"finger grids must be (B, {self.config.num_fingers}, {GRID_CHANNELS}, nx, ny, nz), "
                             f"got {tuple(finger_grids.shape)}")
        features = [self._encode(self.model.conv, finger_grids.flatten(0, 1)).reshape(b, -1)]
        if self.config.use_global:
            if global_grid is None or global_grid.ndim != 5 or global_grid.shape[:2] != (b, GRID_CHANNELS):
                shape = None if global_grid is None else tuple(global_grid.shape)
                raise ValueError(f"global grid must be (B={b}, {GRID_CHANNELS}, R, R, R), got {shape}")
            features.append(self._encode(self.model.global_conv, global_grid))
        return self.model.mlp(torch.cat(features, dim=1)).reshape(b, len(LABEL_NAMES), 2)

    def forward(self, finger_grids: torch.Tensor, global_grid: torch.Tensor | None = None) -> torch.Tensor:
        """Success probabilities (B, 3) [y_pick, y_coll, y_PGS] (softmax class 1 of each label)."""
        return self.logits(finger_grids, global_grid).softmax(dim=-1)[..., 1]
