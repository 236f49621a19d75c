"""Penalty contact between hand surface samples and an object SDF, with Grasp'D's leaky gradient.

Sign conventions: ``distance_m`` is the sample's signed distance to the (offset) object surface, negative
when it penetrates; ``normals`` are the object's outward unit normals there. Forces are those the hand
applies ON THE OBJECT, in newtons: the normal force pushes inward, ``-f_n * n``.

- Normal force: ``f_n = k_n * max(0, -distance)``. Its gradient leaks: where a sample does not touch
  (distance > 0), d f_n / d distance is ``-alpha * k_n`` instead of 0, so desired forces on samples that
  are not yet in contact still pull them toward the surface (the paper's leak, alpha = 0.1).
- Friction: Coulomb, ``|f_t| <= mu * f_n``. In the velocity form of the penalty model the tangential force
  is ``-min(k_f * |v_t|, mu * f_n) * v_t / |v_t|`` (``k_f``: friction stiffness, N s/m). The quasi-static
  relaxed problem of the optimiser uses its static limit, any tangential force inside the cone, so k_f
  enters only :func:`friction_force`.

Constants of the paper's Allegro model (supplement A.5): k_n = 1e6, k_f = 1e8, mu = 0.8, alpha = 0.1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ContactConfig:
    """Penalty-contact constants (paper's Allegro values)."""

    normal_stiffness_n_per_m: float = 1e6
    """k_n: normal force per metre of penetration."""
    friction_stiffness_n_s_per_m: float = 1e8
    """k_f: tangential force per m/s of sliding below the cone (velocity form only)."""
    friction_coefficient: float = 0.8
    """mu: Coulomb friction coefficient."""
    leak: float = 0.1
    """alpha: share of the penetration gradient that inactive (non-touching) samples keep."""


class _LeakyPenetration(torch.autograd.Function):
    """max(0, -d) forward; backward slope -1 where d < 0 and -alpha where d >= 0 (the leak)."""

    @staticmethod
    def forward(ctx, distance_m: torch.Tensor, alpha: float) -> torch.Tensor:
        ctx.save_for_backward(distance_m)
        ctx.alpha = alpha
        return (-distance_m).clamp_min(0.0)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (distance_m,) = ctx.saved_tensors
        slope = torch.where(distance_m < 0, -torch.ones_like(distance_m), torch.full_like(distance_m, -ctx.alpha))
        return grad_output * slope, None


def leaky_penetration(distance_m: torch.Tensor, alpha: float) -> torch.Tensor:
    """Penetration depth max(0, -distance) (m) whose gradient leaks with share `alpha` where it is zero."""
    if alpha < 0:
        raise ValueError(f"leak alpha must be >= 0, got {alpha}")
    return _LeakyPenetration.apply(distance_m, float(alpha))


def normal_force(distance_m: torch.Tensor, config: ContactConfig = ContactConfig()) -> torch.Tensor:
    """Penalty normal-force magnitude (N) of samples at signed distances (...), with the leaky gradient."""
    return config.normal_stiffness_n_per_m * leaky_penetration(distance_m, config.leak)


def tangential_part(vectors: torch.Tensor, normals: torch.Tensor) -> torch.Tensor:
    """Component of (..., 3) vectors orthogonal to unit (..., 3) normals."""
    return vectors - (vectors * normals).sum(-1, keepdim=True) * normals


def friction_cone_excess(tangential_force_n: torch.Tensor, normal_force_n: torch.Tensor,
                         config: ContactConfig = ContactConfig()) -> torch.Tensor:
    """How far (N) tangential forces (..., 3) exceed the Coulomb cone mu * f_n (...); 0 inside it."""
    magnitude = (tangential_force_n.square().sum(-1) + 1e-18).sqrt()
    return (magnitude - config.friction_coefficient * normal_force_n).clamp_min(0.0)


def friction_force(tangential_velocity_m_s: torch.Tensor, normal_force_n: torch.Tensor,
                   config: ContactConfig = ContactConfig()) -> torch.Tensor:
    """Regularised Coulomb friction on the object (..., 3) for its sliding velocity relative to the hand (..., 3):
    ``-min(k_f |v_t|, mu f_n) v_t / |v_t|``."""
    speed = (tangential_velocity_m_s.square().sum(-1, keepdim=True) + 1e-18).sqrt()
    magnitude = torch.minimum(config.friction_stiffness_n_s_per_m * speed,
                              config.friction_coefficient * normal_force_n[..., None])
    return -magnitude * tangential_velocity_m_s / speed


def contact_forces(distance_m: torch.Tensor, normals: torch.Tensor, relative_velocity_m_s: torch.Tensor,
                   config: ContactConfig = ContactConfig()) -> torch.Tensor:
    """Full penalty contact force on the object (..., 3): normal push plus friction against sliding."""
    fn = normal_force(distance_m, config)
    return -fn[..., None] * normals + friction_force(tangential_part(relative_velocity_m_s, normals), fn, config)
