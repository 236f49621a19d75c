"""BPS grasp evaluator: (object BPS, grasp) -> predicted [y_pick, y_coll, y_PGS].

Architecture of the paper / public code: BN(BPS ++ grasp) -> 3 fully connected residual blocks (the
2nd and 3rd see [previous output, normalised input]) with dropout -> Linear -> sigmoid. Parameter
names and shapes equal the public checkpoints' with the public sizes (4096 + 37 in, width 2048, 256).

Frames: the grasp is the 37-D vector in the object frame Oy (y up, origin at the object centroid);
the BPS is measured from the fixed basis in By (Oy moved down to the table), in metres.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from getagrip_ros.models.layers import LEAKY_SLOPE, FCResBlock

LABEL_NAMES = ("y_pick", "y_coll", "y_PGS")
"""Output columns of every evaluator."""
Y_PGS = LABEL_NAMES.index("y_PGS")


@dataclass(frozen=True)
class BpsEvaluatorConfig:
    num_basis_points: int = 4096
    grasp_dim: int = 37
    hidden_width: int = 2048
    """Width of the residual blocks (public: 2048)."""
    block_neurons: int = 256
    """Inner width of each residual block (public: 256)."""
    dropout: float = 0.2


class BpsEvaluator(nn.Module):
    def __init__(self, config: BpsEvaluatorConfig = BpsEvaluatorConfig()) -> None:
        super().__init__()
        self.config = config
        n_in = config.num_basis_points + config.grasp_dim
        w, k = config.hidden_width, config.block_neurons
        self.bn1 = nn.BatchNorm1d(n_in)
        self.rb1 = FCResBlock(n_in, w, k)
        self.rb2 = FCResBlock(w + n_in, w, k)
        self.rb3 = FCResBlock(w + n_in, w, k, final_nl=False)
        self.dropout = nn.Dropout(config.dropout)
        self.out_success = nn.Linear(w, len(LABEL_NAMES))

    def forward(self, bps: torch.Tensor, grasps: torch.Tensor) -> torch.Tensor:
        """(B, num_basis_points) distances, (B, 37) grasps -> (B, 3) probabilities [y_pick, y_coll, y_PGS]."""
        x0 = self.bn1(torch.cat([bps, grasps], dim=1))
        h = self.dropout(self.rb1(x0))
        h = self.dropout(self.rb2(torch.cat([h, x0], dim=1)))
        h = self.dropout(self.rb3(torch.cat([h, x0], dim=1)))
        return torch.sigmoid(self.out_success(h))

    @torch.no_grad()
    def conditioned(self, bps: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        """Scorer for many grasps of ONE object, equal to ``forward`` in eval mode but ~3.5x cheaper.

        The BPS part of every layer that sees the normalised input is the same for all grasps, so it is
        folded into the biases once, and each BatchNorm is folded into the Linear before it.
        Returns a function (B, 37) grasps -> (B, 3) probabilities.
        """
        if self.training:
            raise RuntimeError("conditioned() needs the evaluator in eval mode (BatchNorm running statistics)")
        n_bps = self.config.num_basis_points
        bps = bps.reshape(-1).to(self.bn1.weight)
        if bps.numel() != n_bps:
            raise ValueError(f"BPS must have {n_bps} values, got {bps.numel()}")
        scale, shift = _bn_affine(self.bn1)
        x0_bps = bps * scale[:n_bps] + shift[:n_bps]
        g_scale, g_shift = scale[n_bps:], shift[n_bps:]

        def fold(linear: nn.Linear, bn: nn.BatchNorm1d | None, const_start: int) -> tuple[torch.Tensor, torch.Tensor]:
            """(W, b) acting on [inputs before const_start, grasp part] with the BPS columns folded in."""
            W, b = linear.weight, linear.bias
            const = slice(const_start, const_start + n_bps)
            b = b + W[:, const] @ x0_bps
            W = torch.cat([W[:, :const_start], W[:, const.stop:]], dim=1)
            if bn is not None:
                s, t = _bn_affine(bn)
                W, b = W * s[:, None], b * s + t
            return W.T.contiguous(), b

        blocks = []
        for i, rb in enumerate((self.rb1, self.rb2, self.rb3)):
            start = 0 if i == 0 else self.config.hidden_width
            fc1 = fold(rb.fc1, rb.bn1, start)
            s2, t2 = _bn_affine(rb.bn2)
            fc2 = ((rb.fc2.weight * s2[:, None]).T.contiguous(), rb.fc2.bias * s2 + t2)
            fc3 = fold(rb.fc3, None, start)
            blocks.append((fc1, fc2, fc3, rb.final_nl))
        w_out, b_out = self.out_success.weight.T.contiguous(), self.out_success.bias
        act = nn.functional.leaky_relu

        @torch.no_grad()
        def score(grasps: torch.Tensor) -> torch.Tensor:
            g = grasps.to(w_out) * g_scale + g_shift
            x = g
            for (w1, b1), (w2, b2), (w3, b3), final_nl in blocks:
                skip = act(torch.addmm(b3, x, w3), LEAKY_SLOPE)
                h = act(torch.addmm(b1, x, w1), LEAKY_SLOPE)
                out = torch.addmm(b2, h, w2).add_(skip)
                out = act(out, LEAKY_SLOPE) if final_nl else out
                x = torch.cat([out, g], dim=1)
            return torch.sigmoid(torch.addmm(b_out, out, w_out))

        return score


def _bn_affine(bn: nn.BatchNorm1d) -> tuple[torch.Tensor, torch.Tensor]:
    """Eval-mode BatchNorm as y = x * scale + shift."""
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return scale, bn.bias - bn.running_mean * scale
