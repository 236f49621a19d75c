"""A labelled cube grasp, its motion plan and the simulated arm world it runs in."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.motion.world import world_with_mesh
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.robot.allegro import STOW_HAND_JOINT_ANGLES_RAD
from getagrip_ros.robot.description import FR3_Q_READY_RAD

pytest.importorskip("ompl")

CUBE = json.loads((Path(__file__).parent / "cube_grasps.json").read_text())
Q_ARM_START = np.array(FR3_Q_READY_RAD)
Q_HAND_START = np.array(STOW_HAND_JOINT_ANGLES_RAD)


@pytest.fixture(scope="session")
def cube():
    return prepare_object(object_by_name(CUBE["object"]))


@pytest.fixture(scope="session")
def cube_grasps() -> Grasp:
    """Grasps of the cube that lift it in the floating-hand world (world frame)."""
    return Grasp.from_vector(torch.tensor(CUBE["grasps_world"], dtype=torch.float64), "world")


@pytest.fixture(scope="session")
def cube_world(cube):
    """The planning world: table and the cube mesh where the simulated world puts it."""
    return world_with_mesh("cube", np.asarray(cube.mesh.vertices), np.asarray(cube.mesh.faces),
                           np.array(CUBE["T_world_object"]))


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

    with SimWorld(SceneConfig(robot="arm"), cube, ObjectPlacement(yaw_rad=CUBE["object_yaw_rad"])) as world:
        world.reset(arm_rad=FR3_Q_READY_RAD, hand_rad=STOW_HAND_JOINT_ANGLES_RAD)
        yield world
