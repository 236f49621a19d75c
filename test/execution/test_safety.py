"""The safety layer refuses every plan that breaks a limit, with the reason; a valid plan passes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from getagrip_ros.execution.safety import SafetyConfig, SafetyMonitor
from getagrip_ros.motion.robot_geometry import RobotCollisionModel
from getagrip_ros.motion.world import WorldBox, translation
from getagrip_ros.robot.description import PALM_LINK
from getagrip_ros.robot.interfaces import JointTrajectory

from .conftest import Q_ARM_START, Q_HAND_START


@pytest.fixture(scope="module")
def monitor():
    return SafetyMonitor()


def _with(trajectory: JointTrajectory, times=None, positions=None) -> JointTrajectory:
    return JointTrajectory(trajectory.joint_names, trajectory.times_s if times is None else times,
                           trajectory.positions_rad if positions is None else positions)


def _check(monitor, stages, world, q_arm=Q_ARM_START, q_hand=Q_HAND_START):
    return monitor.check_stages(stages, q_arm, q_hand, world)


def test_the_planned_grasp_passes(monitor, cube_plan, cube_world):
    assert _check(monitor, cube_plan.stages, cube_world) == []


def test_position_limit(monitor, cube_plan, cube_world):
    q = cube_plan.stages.approach.positions_rad.copy()
    q[len(q) // 2:, 3] = -0.3  # fr3_joint4's upper limit is -0.4461
    stages = dataclasses.replace(cube_plan.stages, approach=_with(cube_plan.stages.approach, positions=q))
    problems = _check(monitor, stages, cube_world)
    assert any("approach: fr3_joint4 = -0.3000 rad" in p and "outside its limits" in p for p in problems), problems


def test_velocity_limit(monitor, cube_plan, cube_world):
    approach = cube_plan.stages.approach
    stages = dataclasses.replace(cube_plan.stages, approach=_with(approach, times=approach.times_s / 10))
    problems = _check(monitor, stages, cube_world)
    assert any(p.startswith("approach: fr3_joint") and "rad/s at t =" in p for p in problems), problems


def test_acceleration_limit(monitor):
    """Within the velocity limits but from rest to 0.9 rad/s in 10 ms: 90 rad/s^2 > 10."""
    names = ("fr3_joint1",) + tuple(f"fr3_joint{i}" for i in range(2, 8))
    q = np.tile(Q_ARM_START, (3, 1))
    q[2, 0] += 0.009
    problems = monitor.check_limits(JointTrajectory(names, [0.0, 0.01, 0.02], q), "approach")
    assert problems == ["approach: fr3_joint1 accelerates at 90.0 rad/s^2 at t = 0.010 s, above its limit 10.0 rad/s^2"]


def test_hand_limits(monitor, cube_plan, cube_world):
    close = cube_plan.stages.close
    q = close.positions_rad.copy()
    q[-1, 1] = 2.5  # joint_1.0 ends beyond its upper limit
    problems = _check(monitor, dataclasses.replace(cube_plan.stages, close=_with(close, positions=q)), cube_world)
    assert any(p.startswith("close: joint_1.0 = 2.5000 rad") for p in problems), problems
    fast = _with(close, times=close.times_s / 100)  # 0.5 s -> 5 ms
    problems = _check(monitor, dataclasses.replace(cube_plan.stages, close=fast), cube_world)
    assert any(p.startswith("close: joint_") and "above its limit 7.000 rad/s" in p for p in problems), problems


def test_workspace_box(cube_plan, cube_world):
    low_ceiling = SafetyMonitor(SafetyConfig(workspace_max_m=(1.1, 0.7, 0.3)))
    problems = _check(low_ceiling, cube_plan.stages, cube_world)
    assert [p.split(":")[0] for p in problems] == ["approach", "lift"]
    assert problems[0].startswith("approach: palm_link at [0.441, -0.0, 0.564] m (waypoint 0) is outside the workspace box "
                                  "[0.1, -0.7, -0.01] - [1.1, 0.7, 0.3]")


def test_table_clearance(monitor, cube_plan):
    """The same plan over a table 5 cm higher: the hand at the pre-grasp would be in it."""
    from getagrip_ros.motion.world import PlanningWorld, table_box

    table = table_box()
    raised = WorldBox("table", table.size_m, table.T_world_box @ translation((0.0, 0.0, 0.05)))
    problems = _check(monitor, cube_plan.stages, PlanningWorld((raised,)))
    assert [p.split(": closer than 2 mm to the table at waypoint")[0] for p in problems] == ["approach", "lift"], problems


def test_plan_must_start_at_the_robot_and_stages_must_join(monitor, cube_plan, cube_world):
    problems = _check(monitor, cube_plan.stages, cube_world, q_hand=Q_HAND_START + 0.2)
    assert problems == ["hand_shape: starts 0.200 rad away from the measured hand joints (tolerance 0.05 rad)"]
    lift = cube_plan.stages.lift
    shifted = _with(lift, positions=lift.positions_rad + 0.1)
    problems = _check(monitor, dataclasses.replace(cube_plan.stages, lift=shifted), cube_world)
    assert "lift: starts 0.100 rad away from the end of the approach (tolerance 0.05 rad)" in problems
    swapped = dataclasses.replace(cube_plan.stages, approach=cube_plan.stages.close)
    assert _check(monitor, swapped, cube_world)[0].startswith("approach: expected the joints ['fr3_joint1'")


def test_the_approach_is_checked_against_the_current_world(monitor, cube_plan, cube_world):
    """Something was put where the palm is going since the plan was made."""
    palm = RobotCollisionModel().frame_pose(cube_plan.stages.approach.positions_rad[-1], PALM_LINK)[:3, 3]
    world = cube_world.with_boxes(WorldBox("new_box", (0.05, 0.05, 0.05), translation(tuple(palm))))
    problems = _check(monitor, cube_plan.stages, world)
    assert [p.split(": collides in the current world at waypoint")[0] for p in problems] == ["approach", "lift"]
    assert all("new_box" in p for p in problems)
