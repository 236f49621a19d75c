"""BPS-conditioned diffusion grasp sampler (the paper's / public code's noise network).

(noisy grasp, timestep) -> residual block -> ``num_tokens`` tokens of ``d_model`` -> self-attention
-> cross-attention to tokens projected from the object's BPS -> predicted noise (37-D). Parameter
names and shapes equal the public checkpoints' with the public sizes. Grasps are in the object frame
Oy (see :mod:`getagrip_ros.models.bps_evaluator`); the timestep enters as its integer value (float).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from getagrip_ros.models.layers import FCResBlock


@dataclass(frozen=True)
class BpsSamplerConfig:
    num_basis_points: int = 4096
    grasp_dim: int = 37
    d_model: int = 128
    num_tokens: int = 4
    num_heads: int = 8
    block_neurons: int = 256


class BpsSampler(nn.Module):
    def __init__(self, config: BpsSamplerConfig = BpsSamplerConfig()) -> None:
        super().__init__()
        self.config = config
        d, s = config.d_model, config.num_tokens
        self.resblock = FCResBlock(config.grasp_dim + 1, d * s, config.block_neurons)
        self.sa_fc_query = nn.Linear(d, d)
        self.sa_fc_key = nn.Linear(d, d)
        self.sa_fc_value = nn.Linear(d, d)
        self.self_attention = nn.MultiheadAttention(d, config.num_heads)
        self.ca_fc_key = nn.Linear(config.num_basis_points, d * s)
        self.ca_fc_value = nn.Linear(config.num_basis_points, d * s)
        self.cross_attention = nn.MultiheadAttention(d, config.num_heads)
        self.fc_out = nn.Linear(d * s, config.grasp_dim)

    def _tokens(self, x: torch.Tensor) -> torch.Tensor:
        """(B, S * d) -> (S, B, d) sequence-first tokens."""
        return x.reshape(x.shape[0], self.config.num_tokens, self.config.d_model).permute(1, 0, 2)

    def _denoise(self, grasps_t: torch.Tensor, t: torch.Tensor, ca_key: torch.Tensor,
                 ca_value: torch.Tensor) -> torch.Tensor:
        x = self._tokens(self.resblock(torch.cat([grasps_t, t[:, None].to(grasps_t)], dim=1)))
        query, _ = self.self_attention(self.sa_fc_query(x), self.sa_fc_key(x), self.sa_fc_value(x), need_weights=False)
        out, _ = self.cross_attention(query, ca_key, ca_value, need_weights=False)
        return self.fc_out(out.permute(1, 0, 2).reshape(grasps_t.shape[0], -1))

    def forward(self, grasps_t: torch.Tensor, t: torch.Tensor, bps: torch.Tensor) -> torch.Tensor:
        """(B, 37) noisy grasps, (B,) timesteps, (B, num_basis_points) BPS -> (B, 37) predicted noise."""
        return self._denoise(grasps_t, t, self._tokens(self.ca_fc_key(bps)), self._tokens(self.ca_fc_value(bps)))

    @torch.no_grad()
    def conditioned(self, bps: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """Noise predictor for many grasps of ONE object: the BPS projections are computed once."""
        bps = bps.reshape(1, -1).to(self.fc_out.weight)
        if bps.shape[1] != self.config.num_basis_points:
            raise ValueError(f"BPS must have {self.config.num_basis_points} values, got {bps.shape[1]}")
        key, value = self._tokens(self.ca_fc_key(bps)), self._tokens(self.ca_fc_value(bps))

        @torch.no_grad()
        def eps(grasps_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            b = grasps_t.shape[0]
            return self._denoise(grasps_t, t, key.expand(-1, b, -1), value.expand(-1, b, -1))

        return eps
