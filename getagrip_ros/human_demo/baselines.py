"""Baselines of the transfer: what the seed compares its optimisation with.

- :func:`dexpilot_grasp`, a DexPilot-like fingertip correspondence: the Allegro palm at the human palm (step (a)), then
  fingertip IK of index to index, middle to middle, ring to the middle of the human ring and little fingertips, and
  thumb to thumb. Hand-made correspondences, for this hand only.

Both use the transfer's objective (:func:`getagrip_ros.human_demo.transfer.transfer_objective`) for the similarity
and the same pre-grasp, so their numbers compare with the transfer's. Object frame; metres, radians.
"""

from __future__ import annotations

import torch

from getagrip_ros.human_demo.transfer import TransferObjective, TransferResult, initial_palm_pose, robot_grasp_result
from getagrip_ros.robot.allegro import AllegroHand, solve_fingertip_ik
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
