"""Building blocks shared by the learned models."""

from __future__ import annotations

import torch
from torch import nn

LEAKY_SLOPE = 0.2


class FCResBlock(nn.Module):
    """Fully connected residual block: in -> Linear -> BN -> LeakyReLU -> Linear -> BN, plus a skip path
    (identity when the widths match, else Linear -> LeakyReLU), then LeakyReLU unless ``final_nl`` is off.

    Parameter names (fc1, bn1, fc2, bn2, fc3) follow the public Get a Grip checkpoints.
    """

    def __init__(self, in_features: int, out_features: int, hidden: int = 256, final_nl: bool = True) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.bn1 = nn.BatchNorm1d(hidden)
        self.fc2 = nn.Linear(hidden, out_features)
        self.bn2 = nn.BatchNorm1d(out_features)
        if in_features != out_features:
            self.fc3 = nn.Linear(in_features, out_features)
        self.final_nl = final_nl

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = x if not hasattr(self, "fc3") else nn.functional.leaky_relu(self.fc3(x), LEAKY_SLOPE)
        h = nn.functional.leaky_relu(self.bn1(self.fc1(x)), LEAKY_SLOPE)
        out = skip + self.bn2(self.fc2(h))
        return nn.functional.leaky_relu(out, LEAKY_SLOPE) if self.final_nl else out
