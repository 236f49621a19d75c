"""The grasp stages around the planned approach: hand shaping, closing, and the straight 20 cm lift."""

from __future__ import annotations

import numpy as np
import pytest

from getagrip_ros.motion.backend import PlanStatus
from getagrip_ros.motion.planner import GraspStagesConfig, MotionPlanner, MotionPlannerConfig
from getagrip_ros.motion.robot_geometry import RobotCollisionModel
from getagrip_ros.robot.description import ARM_JOINT_NAMES, HAND_JOINT_NAMES, PALM_LINK
from getagrip_ros.status import StatusCode

from ..motion.test_time_parameterization import assert_within_limits
from .conftest import Q_ARM_START, Q_HAND_START


def test_stages_join_up_and_the_lift_goes_straight_up(cube_plan, motion_planner):
    stages = cube_plan.stages
    assert stages.hand_shape.joint_names == HAND_JOINT_NAMES and stages.close.joint_names == HAND_JOINT_NAMES
    assert stages.approach.joint_names == ARM_JOINT_NAMES and stages.lift.joint_names == ARM_JOINT_NAMES
    np.testing.assert_allclose(stages.hand_shape.positions_rad[0], Q_HAND_START)
    np.testing.assert_allclose(stages.hand_shape.positions_rad[-1], cube_plan.hand_pregrasp_rad)
    np.testing.assert_allclose(stages.approach.positions_rad[0], Q_ARM_START)
    np.testing.assert_allclose(stages.close.positions_rad[0], cube_plan.hand_pregrasp_rad)
    np.testing.assert_allclose(stages.close.positions_rad[-1], cube_plan.hand_closed_rad)
    np.testing.assert_allclose(stages.lift.positions_rad[0], stages.approach.positions_rad[-1])
    assert stages.close.duration_s == 0.5 and stages.lift.duration_s >= 1.0 and stages.approach.duration_s >= 3.0

    robot = RobotCollisionModel()
    T0 = robot.frame_pose(stages.lift.positions_rad[0], PALM_LINK)
    poses = np.stack([robot.frame_pose(q, PALM_LINK) for q in stages.lift.positions_rad])
    assert abs(poses[-1, 2, 3] - T0[2, 3] - 0.20) < 0.002
    assert np.abs(poses[:, :2, 3] - T0[:2, 3]).max() < 0.002  # straight up
    assert np.abs(poses[:, :3, :3] - T0[:3, :3]).max() < 0.02  # orientation kept
    assert (np.diff(poses[:, 2, 3]) >= -1e-4).all()
    assert_within_limits(stages.lift.times_s, stages.lift.positions_rad, motion_planner.config.time_parameterization)


def test_a_short_approach_is_slowed_to_the_public_timing(motion_planner, cube_world, cube_grasps):
    slow = MotionPlanner(MotionPlannerConfig(stages=GraspStagesConfig(approach_s=20.0)))
    result = slow.plan_grasp_motion(Q_ARM_START, Q_HAND_START, cube_world, cube_grasps, seed=0)
    fast = motion_planner.plan_grasp_motion(Q_ARM_START, Q_HAND_START, cube_world, cube_grasps, seed=0)
    assert result.stages.approach.duration_s == 20.0 and fast.stages.approach.duration_s < 20.0
    np.testing.assert_allclose(result.stages.approach.positions_rad, fast.stages.approach.positions_rad)


def test_grasps_whose_lift_is_out_of_reach_are_refused_with_reasons(cube_world, cube_grasps):
    """A 0.9 m lift leaves the FR3's reach: every grasp with an approach is refused for its lift, in rank order, and the
    request fails saying so."""
    planner = MotionPlanner(MotionPlannerConfig(stages=GraspStagesConfig(lift_m=0.9)))
    result = planner.plan_grasp_motion(Q_ARM_START, Q_HAND_START, cube_world, cube_grasps, seed=0)
    assert not result.success and result.stages is None
    assert "none of 4 grasps has an approach and a lift that pass every check" in result.reason
    assert [a.grasp_index for a in result.attempts] == sorted(a.grasp_index for a in result.attempts)
    lifts = [a for a in result.attempts if a.status == PlanStatus.LIFT_INFEASIBLE]
    assert lifts and lifts[0].grasp_index == 0
    assert all(a.reason.startswith(("no IK for the lift at", "the lift IK jumps")) for a in lifts)


def test_a_check_that_refuses_a_plan_makes_the_planner_try_the_next_grasp(motion_planner, cube_world, cube_grasps):
    """What plan_motion does with the safety layer: a refused plan is never returned, the next-ranked grasp is tried."""
    first = motion_planner.plan_grasp_motion(Q_ARM_START, Q_HAND_START, cube_world, cube_grasps, seed=0)
    seen = []

    def refuse_the_first(stages) -> list[str]:
        seen.append(stages)
        return ["outside the workspace box"] if len(seen) == 1 else []

    result = motion_planner.plan_grasp_motion(Q_ARM_START, Q_HAND_START, cube_world, cube_grasps, seed=0, check=refuse_the_first)
    assert result.success and result.grasp_index > first.grasp_index and len(seen) == 2
    refused = [a for a in result.rejected if a.status == PlanStatus.REFUSED]
    assert [a.grasp_index for a in refused] == [first.grasp_index] and refused[0].reason == "outside the workspace box"
    never = motion_planner.plan_grasp_motion(Q_ARM_START, Q_HAND_START, cube_world, cube_grasps, seed=0,
                                             check=lambda stages: ["no"])
    assert not never.success and never.stages is None and "pass every check" in never.reason
    assert any(a.status == PlanStatus.REFUSED and a.reason == "no" for a in never.attempts)


def test_a_measured_hand_slightly_beyond_a_limit_is_moved_onto_it(motion_planner, cube_world, cube_grasps):
    """Measured joints overshoot limits by a little (the thumb at 1.3975 > 1.396 rad was seen in the simulator)."""
    hand = Q_HAND_START.copy()
    hand[12] = motion_planner.hand.upper_limits_rad[12].item() + 0.002
    result = motion_planner.plan_grasp_motion(Q_ARM_START, hand, cube_world, cube_grasps, seed=0)
    assert result.success and result.stages.hand_shape.positions_rad[0, 12] == motion_planner.hand.upper_limits_rad[12].item()
    hand[12] += 0.1
    with pytest.raises(ValueError, match=r"joint_12.0 = 1.4980 rad is outside its limits \[0.2630, 1.3960\]"):
        motion_planner.plan_grasp_motion(Q_ARM_START, hand, cube_world, cube_grasps, seed=0)


def test_one_deadline_holds_across_refused_plans(motion_planner, cube_world, cube_grasps):
    """timeout_s bounds the whole request: once a refusal has used it up, no lower-ranked grasp is tried (the deadline
    is not restarted per refusal) and the result says TIMEOUT."""
    import time

    def slow_refusal(stages) -> list[str]:
        time.sleep(2.1)
        return ["refused slowly"]

    result = motion_planner.plan_grasp_motion(Q_ARM_START, Q_HAND_START, cube_world, cube_grasps, seed=0, timeout_s=2.0,
                                              check=slow_refusal)
    assert not result.success and result.status == StatusCode.TIMEOUT, result.reason
    assert "ran out of its 2 s after trying" in result.reason and "refused slowly" in result.reason
    assert [a.status for a in result.attempts][-1] == PlanStatus.REFUSED and len(result.rejected) == 1
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        motion_planner.plan_grasp_motion(Q_ARM_START, Q_HAND_START, cube_world, cube_grasps, timeout_s=0.0)


def test_the_ik_seed_is_a_per_call_option(motion_planner):
    """Solving with a seed leaves the solver's configuration as it was (nothing shared is mutated per call)."""
    import torch

    ik = motion_planner.backend.ik
    before = ik.config
    T = torch.from_numpy(motion_planner._lift_robot.frame_pose(Q_ARM_START, "palm_link"))[None]
    a, b = ik.solve(T, seed=3), ik.solve(T, seed=3)
    assert ik.config is before and torch.equal(a.joint_angles_rad, b.joint_angles_rad)
