"""Shared pieces of the motion-planning tests: one planner per session, scenes and grasps built from known poses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.robot.allegro import OPEN_HAND_JOINT_ANGLES_RAD
from getagrip_ros.robot.description import FR3_Q_READY_RAD

Q_READY = np.array(FR3_Q_READY_RAD)
OPEN_HAND = np.array(OPEN_HAND_JOINT_ANGLES_RAD)
#: Arm configurations checked by hand: the palm low in front of the robot (x ~ 0.8 m, z ~ 0.21 m) and a second one.
Q_REACH_FORWARD = np.array([0.0, 0.6, 0.0, -1.6, 0.0, 2.0, 0.785])
Q_REACH_LEFT = np.array([0.3, 0.5, 0.0, -1.7, 0.0, 2.1, 0.785])


@pytest.fixture(scope="session")
def planner():
    import ompl  # noqa: F401 - a dependency of the set-up: missing fails
    from getagrip_ros.motion.planner import MotionPlanner

    return MotionPlanner()


@pytest.fixture(scope="session")
def robot_model():
    from getagrip_ros.motion.robot_geometry import RobotCollisionModel

    return RobotCollisionModel(hand_rad=OPEN_HAND)


def grasps_at(T_world_palm: np.ndarray, hand_rad: np.ndarray = OPEN_HAND) -> Grasp:
    """Grasps with these palm poses (B, 4, 4), the given hand joints and every finger closing along the palm normal."""
    T = np.asarray(T_world_palm, dtype=float)
    directions = np.repeat(T[:, None, :3, 0], 4, axis=1)
    return Grasp(torch.tensor(T[:, :3, 3]), torch.tensor(T[:, :3, :3]), torch.tensor(np.tile(hand_rad, (len(T), 1))),
                 torch.tensor(directions), frame_id="world")
