"""NeRF-conditioned diffusion grasp sampler (the public code's ``nerf_sampler_model``).

The BPS sampler's network (:mod:`getagrip_ros.models.bps_sampler`) whose cross-attention keys and values come from a
3-D CNN encoding of the object's global NeRF grid instead of its BPS: 4 channels (opacity and the grid points' Oy
coordinates) on 30^3 points over 0.3 m around the centroid, as the NeRF evaluator's global grid; per block Conv3d
3x3x3 -> ReLU -> MaxPool 2 -> Dropout3d, then a max over the remaining cells (the public encoder's "avg pool
spatial" builds an adaptive max pool). Parameter names and shapes are the public ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from getagrip_ros.models.bps_sampler import BpsSampler, BpsSamplerConfig
from getagrip_ros.models.nerf_evaluator import GRID_CHANNELS, cnn_encoder


@dataclass(frozen=True)
class NerfSamplerConfig:
    conv_channels: tuple[int, ...] = (32, 64, 128)
    grasp_dim: int = 37
    d_model: int = 128
    num_tokens: int = 4
    num_heads: int = 8
    block_neurons: int = 256
    dropout: float = 0.1
    query_residual: bool = False
    """As in :class:`BpsSamplerConfig` (False: the public network)."""
    timestep_scale: float = 1.0
    """As in :class:`BpsSamplerConfig` (1.0: the public network's integer step)."""

    def attention(self) -> BpsSamplerConfig:
        """The attention network's settings: its conditioning vector is the CNN's output."""
        return BpsSamplerConfig(num_basis_points=self.conv_channels[-1], grasp_dim=self.grasp_dim, d_model=self.d_model,
                                num_tokens=self.num_tokens, num_heads=self.num_heads, block_neurons=self.block_neurons,
                                query_residual=self.query_residual, timestep_scale=self.timestep_scale)


class NerfSampler(BpsSampler):
    def __init__(self, config: NerfSamplerConfig = NerfSamplerConfig()) -> None:
        super().__init__(config.attention())
        self.nerf_config = config
        self.conv = cnn_encoder(config.conv_channels, config.dropout)

    def encode(self, grids: torch.Tensor) -> torch.Tensor:
        """(B, 4, R, R, R) global grids -> (B, conv_channels[-1]) conditioning vectors."""
        if grids.ndim != 5 or grids.shape[1] != GRID_CHANNELS:
            raise ValueError(f"global grids must be (B, {GRID_CHANNELS}, R, R, R), got {tuple(grids.shape)}")
        return nn.functional.adaptive_max_pool3d(self.conv(grids), 1).flatten(1)

    def forward(self, grasps_t: torch.Tensor, t: torch.Tensor, grids: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """(B, 37) noisy grasps, (B,) timesteps, (B, 4, R, R, R) global grids -> (B, 37) predicted noise."""
        return super().forward(grasps_t, t, self.encode(grids))

    @torch.no_grad()
    def conditioned(self, grid: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:  # type: ignore[override]
        """Noise predictor for many grasps of ONE object's (4, R, R, R) grid: the grid is encoded once."""
        return super().conditioned(self.encode(grid.reshape(1, *grid.shape[-4:]).to(self.fc_out.weight)))
