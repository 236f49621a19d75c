"""Refinement by random sampling: perturb each grasp, keep the move only if predicted y_PGS improves.

Unlike the public BPS refinement (which scores the old grasps, so it never accepts a move), the
perturbed grasps are the ones scored.
"""

from __future__ import annotations

from typing import Callable

import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.perturb import PerturbationConfig, perturb_grasps
from getagrip_ros.models.bps_evaluator import Y_PGS

ScoreFn = Callable[[Grasp], torch.Tensor]


def refine_grasps(grasps: Grasp, labels: torch.Tensor, score: ScoreFn, iterations: int,
                  perturbation: PerturbationConfig, generator: torch.Generator,
                  joint_limits_rad: tuple[torch.Tensor, torch.Tensor],
                  allowed: Callable[[Grasp], torch.Tensor] | None = None,
                  on_iteration: Callable[[int, torch.Tensor], None] | None = None) -> tuple[Grasp, torch.Tensor, torch.Tensor]:
    """Refine a batch of grasps.

    Args:
        labels: (B, 3) current predictions of ``grasps``.
        allowed: (B) grasps -> (B,) bool; a move into a disallowed grasp (e.g. failing the cable filter) is refused.
        on_iteration: called as (iteration index, current labels) after every iteration (progress, cancel).
    Returns:
        refined grasps, their (B, 3) predictions, and (B,) the number of accepted moves per grasp.
    """
    accepted = torch.zeros(len(grasps), dtype=torch.long)
    for it in range(iterations):
        candidate = perturb_grasps(grasps, perturbation, generator, joint_limits_rad)
        new = score(candidate)
        better = new[:, Y_PGS] > labels[:, Y_PGS]
        if allowed is not None:
            better &= allowed(candidate).cpu()
        if bool(better.any()):
            grasps = _replace(grasps, candidate, better)
            labels = torch.where(better[:, None], new, labels)
            accepted += better.long()
        if on_iteration is not None:
            on_iteration(it, labels)
    return grasps, labels, accepted


def _replace(old: Grasp, new: Grasp, mask: torch.Tensor) -> Grasp:
    m = mask.to(old.palm_position_m.device)
    return Grasp(torch.where(m[:, None], new.palm_position_m, old.palm_position_m),
                 torch.where(m[:, None, None], new.palm_rotation, old.palm_rotation),
                 torch.where(m[:, None], new.joint_angles_rad, old.joint_angles_rad),
                 torch.where(m[:, None, None], new.fingertip_directions, old.fingertip_directions), frame_id=old.frame_id)
