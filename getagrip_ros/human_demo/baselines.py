"""Baselines of the transfer: what the seed compares its optimisation with.

- :func:`dexpilot_grasp`, a DexPilot-like fingertip correspondence: the Allegro palm at the human palm (step (a)), then
  fingertip IK of index to index, middle to middle, ring to the middle of the human ring and little fingertips, and
  thumb to thumb. Hand-made correspondences, for this hand only.
- :func:`fixed_set_grasp`, the seed's GraspIt! row: of a set of grasps placed on the object (e.g. the project's fixed
  set), each closed onto the surface along its fingertip directions, the one with the lowest L_C + L_O.

Both use the transfer's objective (:func:`getagrip_ros.human_demo.transfer.transfer_objective`) for the similarity
and the same pre-grasp, so their numbers compare with the transfer's. Object frame; metres, radians.
"""

from __future__ import annotations

import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.human_demo.transfer import TransferObjective, TransferResult, initial_palm_pose, robot_grasp_result
from getagrip_ros.robot.allegro import AllegroHand, move_fingertips, solve_fingertip_ik
from getagrip_ros.synthesis.optimizer import SynthesisConfig

#: Human fingertip keypoints each Allegro fingertip (index, middle, ring, thumb) is moved to (their mean).
DEXPILOT_TARGETS = ((8,), (12,), (16, 20), (4,))


def dexpilot_grasp(objective: TransferObjective, allegro: AllegroHand,
                   pregrasp: SynthesisConfig = SynthesisConfig()) -> TransferResult:
    """The DexPilot-like grasp of the objective's demonstration."""
    keypoints = objective.keypoints
    T = initial_palm_pose(keypoints)
    targets_object = torch.stack([keypoints[list(k)].mean(0) for k in DEXPILOT_TARGETS])
    targets_palm = (targets_object - T[:3, 3]) @ T[:3, :3]
    q_open = objective.hand.open_joint_angles_rad.to(torch.float64)[None]
    ik = solve_fingertip_ik(allegro, q_open, targets_palm[None].to(allegro.dtype))
    return robot_grasp_result(objective, T, ik.joint_angles_rad[0].to(torch.float64), pregrasp)


def close_onto_surface(objective: TransferObjective, allegro: AllegroHand, grasps: Grasp, max_closing_m: float = 0.05,
                       rounds: int = 6) -> torch.Tensor:
    """(B, 16) joints that move each fingertip of `grasps` (pre-grasps in the object's frame) along its closing
    direction until it reaches the object's surface (the SDF; at most `max_closing_m`; IK, in `rounds` steps)."""
    R, t = grasps.palm_rotation.to(torch.float64), grasps.palm_position_m.to(torch.float64)
    directions_palm = (grasps.fingertip_directions.to(torch.float64) @ R)  # R^T d, batched
    q = allegro.clamp_to_limits(grasps.joint_angles_rad.to(torch.float64))
    moved = torch.zeros(q.shape[0], directions_palm.shape[1], dtype=torch.float64)
    with torch.no_grad():
        for _ in range(rounds):
            tips = allegro.contact_positions(q) @ R.transpose(1, 2) + t[:, None]
            gap = objective.sdf.distance(tips, 0.0).clamp_min(0.0)
            step = torch.minimum(gap, max_closing_m - moved).clamp_min(0.0)
            if float(step.max()) < 1e-4:
                break
            q = move_fingertips(allegro, q, directions_palm, step).joint_angles_rad.to(torch.float64)
            moved = moved + step
    return q


def fixed_set_grasp(objective: TransferObjective, grasps: Grasp, allegro: AllegroHand, batch: int = 16,
                    pregrasp: SynthesisConfig = SynthesisConfig()) -> tuple[TransferResult, int]:
    """The grasp of `grasps` (object frame), closed onto the surface, with the lowest L_C + L_O; and its index."""
    q = close_onto_surface(objective, allegro, grasps)
    T = torch.eye(4, dtype=torch.float64).repeat(len(grasps), 1, 1)
    T[:, :3, :3], T[:, :3, 3] = grasps.palm_rotation.to(torch.float64), grasps.palm_position_m.to(torch.float64)
    contact, orientation = objective.similarity(T, q, batch)
    best = int((contact + orientation).argmin())
    return robot_grasp_result(objective, T[best], q[best], pregrasp), best
