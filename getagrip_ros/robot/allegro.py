"""Allegro right hand (v4): joint names and orders, batched kinematics and fingertip IK (torch).

Frames: everything here is in the hand's ``palm_link`` frame unless a name says otherwise
(x = palm normal, y = toward the index finger, z = along the fingers). Metres and radians.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from getagrip_ros.grasp.grasp import NUM_FINGERS, NUM_HAND_JOINTS
from getagrip_ros.paths import urdf_path
from getagrip_ros.robot.description import FINGERTIP_LINK_NAMES as FINGERTIP_LINKS
from getagrip_ros.robot.description import HAND_JOINT_NAMES as JOINT_NAMES
from getagrip_ros.robot.description import HAND_LINK_NAMES, HAND_URDF_NAME, PALM_LINK
from getagrip_ros.robot.urdf_chain import KinematicTree

#: Joint names of Wonik's ROS 2 v4 driver, in its own order (thumb first, then index, middle, ring).
WONIK_JOINT_NAMES: tuple[str, ...] = tuple(f"ah_joint{f}{j}" for f in range(4) for j in range(4))
#: wonik_vector = getagrip_vector[GETAGRIP_TO_WONIK]
GETAGRIP_TO_WONIK = np.array([12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
#: getagrip_vector = wonik_vector[WONIK_TO_GETAGRIP]
WONIK_TO_GETAGRIP = np.argsort(GETAGRIP_TO_WONIK)

#: Mean of the public code's 128 fingertip contact candidates, in each fingertip link frame (m).
MEAN_CONTACT_POINT_IN_TIP_M = (0.0101373, 0.0005761, -0.0000243)

#: Open hand used to initialise grasps (Get a Grip ALLEGRO_HAND_DEFAULT_JOINT_ANGLES).
OPEN_HAND_JOINT_ANGLES_RAD = (0.0, 0.5, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 1.4, 0.0, 0.0, 0.0)
#: Curled hand carried during arm motions (Get a Grip DEFAULT_Q_ALGR).
STOW_HAND_JOINT_ANGLES_RAD = (0.0, 1.5, 1.0, 1.0, 0.0, 1.5, 1.0, 1.0, 0.0, 1.5, 1.0, 1.0, 0.5, 0.5, 1.5, 1.0)


def reorder_by_name(values: Sequence[float] | np.ndarray, names: Sequence[str],
                    wanted: Sequence[str]) -> np.ndarray:
    """Reorder values (..., N) given with `names` into the order `wanted`; KeyError names what is missing."""
    values = np.asarray(values)
    index = {n: i for i, n in enumerate(names)}
    missing = [n for n in wanted if n not in index]
    if missing:
        raise KeyError(f"joints missing: {missing}")
    return values[..., [index[n] for n in wanted]]


class AllegroHand:
    """Batched forward kinematics of the Allegro right hand.

    Args:
        urdf: hand URDF (default: this package's ``urdf/allegro_right.urdf``); any URDF with the
            same link/joint names works (e.g. the full fr3_algr_zed2i model, rooted at palm_link).
        device, dtype: where and in which precision to compute.
    """

    def __init__(self, urdf: str | Path | None = None, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32) -> None:
        self.device, self.dtype = torch.device(device), dtype
        self._tips = KinematicTree(urdf or urdf_path(HAND_URDF_NAME), PALM_LINK, list(FINGERTIP_LINKS),
                                   list(JOINT_NAMES)).to(self.device)
        skeleton = [name for f in range(NUM_FINGERS) for name in (*HAND_LINK_NAMES[4 * f: 4 * f + 4], FINGERTIP_LINKS[f])]
        self._skeleton = KinematicTree(urdf or urdf_path(HAND_URDF_NAME), PALM_LINK, skeleton,
                                       list(JOINT_NAMES)).to(self.device)
        self.joint_names = JOINT_NAMES
        self.lower_limits_rad = self._tips.lower_limits.to(self.device, dtype)
        self.upper_limits_rad = self._tips.upper_limits.to(self.device, dtype)
        contact = torch.tensor([*MEAN_CONTACT_POINT_IN_TIP_M, 1.0], dtype=dtype, device=self.device)
        self._contact_h = contact

    def tensor(self, x: Sequence[float] | np.ndarray | torch.Tensor) -> torch.Tensor:
        """Convert to a tensor on this hand's device and dtype."""
        return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x,
                               device=self.device).to(self.dtype)

    def fingertip_poses(self, q_rad: torch.Tensor) -> torch.Tensor:
        """(B, 16) joints -> (B, 4, 4, 4) T_palm_tip of index, middle, ring, thumb tip links."""
        return self._tips(q_rad)

    def skeleton_positions(self, q_rad: torch.Tensor) -> torch.Tensor:
        """(B, 16) -> (B, 4, 5, 3) each finger's four link origins and its tip, palm frame (for drawing)."""
        return self._skeleton(q_rad)[..., :3, 3].reshape(q_rad.shape[0], NUM_FINGERS, 5, 3)

    def fingertip_positions(self, q_rad: torch.Tensor) -> torch.Tensor:
        """(B, 16) -> (B, 4, 3) fingertip sphere centres (tip link origins) in the palm frame."""
        return self._tips(q_rad)[..., :3, 3]

    def contact_positions(self, q_rad: torch.Tensor) -> torch.Tensor:
        """(B, 16) -> (B, 4, 3) mean fingertip contact points in the palm frame (IK targets)."""
        return (self._tips(q_rad) @ self._contact_h)[..., :3]

    def contact_jacobian(self, q_rad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, 16) -> contact points (B, 4, 3) and their Jacobians (B, 4, 3, 16), palm frame."""
        return self._tips.point_jacobian(q_rad, self._contact_h[:3].expand(NUM_FINGERS, 3))

    def clamp_to_limits(self, q_rad: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(q_rad, self.upper_limits_rad), self.lower_limits_rad)

    def within_limits(self, q_rad: torch.Tensor, tolerance_rad: float = 1e-6) -> torch.Tensor:
        """(B, 16) -> (B,) True where every joint is within its limits (+- tolerance)."""
        return ((q_rad >= self.lower_limits_rad - tolerance_rad) & (q_rad <= self.upper_limits_rad + tolerance_rad)).all(-1)


@dataclass(frozen=True)
class FingertipIKConfig:
    """Damped-least-squares fingertip IK, each finger solved independently within joint limits."""

    num_iterations: int = 60
    """Gauss-Newton iterations."""
    damping_m: float = 0.01
    """DLS damping (lambda), metres: larger = smaller, safer steps."""
    tolerance_m: float = 1e-3
    """A finger has converged when its contact point is this close to its target."""
    early_stop_m: float = 1e-5
    """Stop iterating once every finger of every grasp is this close to its target."""
    min_step_rad: float = 1e-5
    """Stop iterating once no joint moves more than this (converged, or pressed against its limits)."""


@dataclass
class FingertipIKResult:
    """Joints reaching (or closest to) the fingertip targets."""

    joint_angles_rad: torch.Tensor
    """(B, 16) solution, always within joint limits."""
    residual_m: torch.Tensor
    """(B, 4) distance from each finger's contact point to its target."""
    converged: torch.Tensor
    """(B, 4) residual_m <= tolerance_m."""


def solve_fingertip_ik(hand: AllegroHand, q_init_rad: torch.Tensor, targets_palm_m: torch.Tensor,
                       config: FingertipIKConfig = FingertipIKConfig()) -> FingertipIKResult:
    """Move each finger's mean contact point to its target (B, 4, 3) in the palm frame."""
    q = hand.clamp_to_limits(q_init_rad.detach().to(hand.device, hand.dtype))
    targets = targets_palm_m.detach().to(hand.device, hand.dtype)
    B = q.shape[0]
    lam2 = torch.eye(3, dtype=hand.dtype, device=hand.device) * config.damping_m**2
    finger = torch.arange(NUM_FINGERS, device=hand.device)
    for _ in range(config.num_iterations):
        p, J_full = hand.contact_jacobian(q)
        # each finger's point moves only with its own 4 joints: keep that (3 x 4) block per finger
        J = J_full.reshape(B, NUM_FINGERS, 3, NUM_FINGERS, 4)[:, finger, :, finger].permute(1, 0, 2, 3)
        err = (targets - p).unsqueeze(-1)
        if float(err.norm(dim=-2).max()) < config.early_stop_m:
            break
        dq = J.transpose(-1, -2) @ torch.linalg.solve(J @ J.transpose(-1, -2) + lam2, err)
        q_next = hand.clamp_to_limits(q + dq.squeeze(-1).reshape(B, NUM_HAND_JOINTS))
        stalled = float((q_next - q).abs().max()) < config.min_step_rad
        q = q_next
        if stalled:
            break
    with torch.no_grad():
        residual = (hand.contact_positions(q) - targets).norm(dim=-1)
    return FingertipIKResult(q, residual, residual <= config.tolerance_m)


def move_fingertips(hand: AllegroHand, q_rad: torch.Tensor, directions_palm: torch.Tensor,
                    distance_m: float | Sequence[float] | torch.Tensor,
                    config: FingertipIKConfig = FingertipIKConfig()) -> FingertipIKResult:
    """Joints that move each fingertip contact point `distance_m` along its unit direction (palm frame).

    `distance_m` broadcasts to (B, 4) (one value, one per finger, or one per grasp and finger).
    Negative distances back the fingertips off (pre-grasp); positive ones close them.
    """
    q = q_rad.detach().to(hand.device, hand.dtype)
    d = directions_palm.detach().to(hand.device, hand.dtype)
    dist = torch.broadcast_to(hand.tensor(distance_m), (q.shape[0], NUM_FINGERS))
    with torch.no_grad():
        targets = hand.contact_positions(q) + d * dist[..., None]
    return solve_fingertip_ik(hand, q, targets, config)
