"""The cube grasps' motion plan and the simulated arm world it runs in (the cube fixtures are in test/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest

from getagrip_ros.robot.allegro import STOW_HAND_JOINT_ANGLES_RAD
from getagrip_ros.robot.description import FR3_Q_READY_RAD


Q_ARM_START = np.array(FR3_Q_READY_RAD)
Q_HAND_START = np.array(STOW_HAND_JOINT_ANGLES_RAD)


@pytest.fixture(scope="session")
def motion_planner():
    from getagrip_ros.motion.planner import MotionPlanner

    return MotionPlanner()


@pytest.fixture(scope="session")
def cube_plan(motion_planner, cube_world, cube_grasps):
    """The planned stages of the best cube grasp from the ready pose."""
    result = motion_planner.plan_grasp_motion(Q_ARM_START, Q_HAND_START, cube_world, cube_grasps, seed=0)
    assert result.success, result.reason
    return result


@pytest.fixture
def sim(cube):
    """A fresh simulated arm world with the cube placed as in the planning world, robot at the start joints."""
    from getagrip_ros.sim.scene import SceneConfig
    from getagrip_ros.sim.world import ObjectPlacement, SimWorld

    from ..conftest import CUBE

    with SimWorld(SceneConfig(robot="arm"), cube, ObjectPlacement(yaw_rad=CUBE["object_yaw_rad"])) as world:
        world.reset(arm_rad=FR3_Q_READY_RAD, hand_rad=STOW_HAND_JOINT_ANGLES_RAD)
        yield world
