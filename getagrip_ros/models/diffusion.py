"""Denoising diffusion for grasps: the linear beta schedule, the epsilon loss and DDIM sampling.

Settings of the paper / public code: 1000 steps, betas linear from 1e-4 to 0.02 (computed in float64,
used in float32), epsilon prediction, deterministic DDIM (eta = 0) over a "quad" subsequence of steps
that ends at t = 0.8 T. The public code uses all 1000 entries of that subsequence; here the number of
sampling steps is a parameter (CPU-friendly values are 20-100).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np
import torch

EpsFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""eps_fn(x_t (B, D), t (B,) float timesteps) -> predicted noise (B, D)."""


@dataclass(frozen=True)
class DiffusionConfig:
    num_timesteps: int = 1000
    beta_start: float = 1e-4
    beta_end: float = 0.02


def ddim_timesteps(num_steps: int, num_timesteps: int = 1000, skip_type: Literal["quad", "uniform"] = "quad",
                   max_fraction: float = 0.8) -> list[int]:
    """Increasing timesteps visited by DDIM (sampling walks them backwards).

    "quad" (public code): int((linspace(0, sqrt(max_fraction T), num_steps))^2), which may repeat small
    values; "uniform": every (T // num_steps)-th step from 0.
    """
    if num_steps < 1:
        raise ValueError(f"DDIM needs at least one step, got {num_steps}")
    if skip_type == "quad":
        return [int(s) for s in np.linspace(0, np.sqrt(num_timesteps * max_fraction), num_steps) ** 2]
    if skip_type == "uniform":
        return list(range(0, num_timesteps, max(num_timesteps // num_steps, 1)))[:num_steps]
    raise ValueError(f"unknown DDIM skip type {skip_type!r} (quad or uniform)")


class DiffusionSchedule:
    """The noise schedule with the forward process, the training loss and DDIM sampling."""

    def __init__(self, config: DiffusionConfig = DiffusionConfig(), device: torch.device | str | None = None) -> None:
        self.config = config
        betas = np.linspace(config.beta_start, config.beta_end, config.num_timesteps, dtype=np.float64)
        self.betas = torch.from_numpy(betas).float().to(device)
        # alphas_cumprod_ext[t + 1] = prod_{s <= t} (1 - beta_s); alphas_cumprod_ext[0] = 1 (the step "t = -1")
        self.alphas_cumprod_ext = (1 - torch.cat([torch.zeros(1, device=device), self.betas])).cumprod(0)

    def alpha_bar(self, t: torch.Tensor) -> torch.Tensor:
        """Cumulative alpha at integer timesteps t (t = -1 gives 1)."""
        return self.alphas_cumprod_ext[t.long() + 1]

    def q_sample(self, x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """x_t = sqrt(a_t) x0 + sqrt(1 - a_t) noise."""
        a = self.alpha_bar(t)[:, None]
        return a.sqrt() * x0 + (1 - a).sqrt() * noise

    def training_loss(self, eps_fn: EpsFn, x0: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Epsilon-prediction loss: squared error summed over dimensions, mean over the batch.

        Timesteps are drawn antithetically (t and T - 1 - t), as the public code does.
        """
        n, T = x0.shape[0], self.config.num_timesteps
        t = torch.randint(0, T, (n // 2 + 1,), generator=generator).to(x0.device)
        t = torch.cat([t, T - 1 - t])[:n]
        noise = torch.randn(x0.shape, generator=generator).to(x0)
        x_t = self.q_sample(x0, t, noise)
        return (noise - eps_fn(x_t, t.to(x0.dtype))).square().sum(dim=1).mean()

    @torch.no_grad()
    def ddim_sample(self, eps_fn: EpsFn, x_T: torch.Tensor, timesteps: list[int], eta: float = 0.0,
                    generator: torch.Generator | None = None,
                    on_step: Callable[[int, int], None] | None = None) -> torch.Tensor:
        """Run DDIM from x_T (B, D) backwards over ``timesteps`` (see :func:`ddim_timesteps`) -> x_0.

        on_step(step_index, num_steps) is called after each step (progress, cancellation).
        """
        x = x_T
        previous = [-1] + list(timesteps[:-1])
        steps = list(zip(reversed(timesteps), reversed(previous)))
        for i, (t, t_next) in enumerate(steps):
            tt = torch.full((x.shape[0],), float(t), dtype=x.dtype, device=x.device)
            a_t = self.alphas_cumprod_ext[t + 1]
            a_next = self.alphas_cumprod_ext[t_next + 1]
            eps = eps_fn(x, tt)
            x0_hat = (x - eps * (1 - a_t).sqrt()) / a_t.sqrt()
            c1 = eta * ((1 - a_t / a_next) * (1 - a_next) / (1 - a_t)).sqrt()
            c2 = (1 - a_next - c1**2).sqrt()
            x = a_next.sqrt() * x0_hat + c2 * eps
            if eta > 0:
                x = x + c1 * torch.randn(x.shape, generator=generator).to(x)
            if on_step is not None:
                on_step(i, len(steps))
        return x
