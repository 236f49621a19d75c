"""Random grasp perturbations: refinement moves (Gaussian) and label noise (uniform)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.rotations import euler_xyz_to_matrix, so3_exp


@dataclass(frozen=True)
class PerturbationConfig:
    """Sizes of one random perturbation of a grasp.

    With ``distribution="normal"`` each size is a standard deviation; with ``"uniform"`` it is the
    half-width of U[-size, size] per axis (for rotation: per roll/pitch/yaw angle).
    The defaults are the paper's refinement step; :data:`LABEL_NOISE` is its label perturbation.
    """

    translation_m: float = 0.005
    rotation_rad: float = 0.05
    """Wrist rotation, applied in the grasp frame as R' = exp(w) R."""
    joint_rad: float = 0.01
    direction_rad: float = 0.0
    """Rotation of each fingertip direction about a random axis (0 = directions unchanged)."""
    distribution: Literal["normal", "uniform"] = "normal"


#: The paper's label perturbation: wrist translation U[-5, 5] mm, roll/pitch/yaw U[-2.5, 2.5] deg.
LABEL_NOISE = PerturbationConfig(translation_m=0.005, rotation_rad=math.radians(2.5), joint_rad=0.0,
                                 direction_rad=0.0, distribution="uniform")


def perturb_grasps(grasp: Grasp, config: PerturbationConfig = PerturbationConfig(),
                   generator: torch.Generator | None = None,
                   joint_limits_rad: tuple[torch.Tensor, torch.Tensor] | None = None) -> Grasp:
    """One random perturbation of every grasp in the batch.

    Args:
        grasp: (B) grasps.
        config: perturbation sizes.
        generator: torch RNG for reproducibility (CPU generator).
        joint_limits_rad: (lower, upper) (16,) tensors; perturbed joints are clamped into them.
    """
    B, dtype = len(grasp), grasp.palm_position_m.dtype
    device = grasp.palm_position_m.device

    def noise(*shape: int) -> torch.Tensor:
        if config.distribution == "normal":
            x = torch.randn(*shape, generator=generator, dtype=dtype)
        elif config.distribution == "uniform":
            x = torch.rand(*shape, generator=generator, dtype=dtype) * 2.0 - 1.0
        else:
            raise ValueError(f"unknown distribution {config.distribution!r}")
        return x.to(device)

    position = grasp.palm_position_m + noise(B, 3) * config.translation_m
    if config.distribution == "uniform":
        delta_R = euler_xyz_to_matrix(noise(B, 3) * config.rotation_rad)
    else:
        delta_R = so3_exp(noise(B, 3) * config.rotation_rad)
    rotation = delta_R @ grasp.palm_rotation
    joints = grasp.joint_angles_rad + noise(B, grasp.joint_angles_rad.shape[1]) * config.joint_rad
    if joint_limits_rad is not None:
        lower, upper = (t.to(device, dtype) for t in joint_limits_rad)
        joints = torch.maximum(torch.minimum(joints, upper), lower)
    directions = grasp.fingertip_directions
    if config.direction_rad > 0:
        R_dir = so3_exp(noise(B, directions.shape[1], 3) * config.direction_rad)
        directions = (R_dir @ directions.unsqueeze(-1)).squeeze(-1)
    return Grasp(position, rotation, joints, directions, frame_id=grasp.frame_id)
