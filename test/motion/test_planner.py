"""The motion planner with the OMPL backend: paths, reasons, ranked grasps, determinism, bad input."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
import trimesh

from getagrip_ros.grasp.closing import closing_targets
from getagrip_ros.motion.backend import PlanStatus
from getagrip_ros.motion.collision import CollisionChecker, CollisionCheckerConfig
from getagrip_ros.motion.world import ObjectMesh, PlanningWorld, WorldBox, table_box, translation
from getagrip_ros.status import StatusCode

from .conftest import OPEN_HAND, Q_READY, Q_REACH_FORWARD, Q_REACH_LEFT, grasps_at
from .test_time_parameterization import assert_within_limits


WALL = WorldBox("wall", (0.1, 0.1, 0.65), translation((0.45, 0.0, 0.325)))  # in the sweep of joint 1 at the ready pose


def _swing() -> tuple[np.ndarray, np.ndarray]:
    """Ready pose turned 0.9 rad to either side: the straight joint-1 sweep between them passes x = 0.45, y = 0."""
    start, goal = Q_READY.copy(), Q_READY.copy()
    start[0], goal[0] = -0.9, 0.9
    return start, goal


def _assert_valid_motion(planner, result, world, q_start, q_goal):
    """Waypoints within limits and collision-free, trajectory from start to goal within the limits, and the timed
    trajectory (sampled densely) clear of the true geometry."""
    assert result.success and result.status == StatusCode.SUCCEEDED and result.reason == ""
    backend = planner.backend
    path = result.path_rad
    np.testing.assert_allclose(path[0], q_start)
    np.testing.assert_allclose(path[-1], q_goal, atol=1e-9)
    assert (path >= backend.lower_rad - 1e-9).all() and (path <= backend.upper_rad + 1e-9).all()
    assert all(backend.checker.is_valid(q) for q in path)
    assert backend.checker.check_path(path)
    trajectory = result.trajectory
    np.testing.assert_allclose(trajectory.positions_rad[0], q_start)
    np.testing.assert_allclose(trajectory.positions_rad[-1], q_goal, atol=1e-9)
    assert_within_limits(trajectory.times_s, trajectory.positions_rad, planner.config.time_parameterization)
    exact = CollisionChecker(backend.robot, world, CollisionCheckerConfig(world_buffer_m=0.0))
    dense = [trajectory.sample(t) for t in np.arange(0.0, trajectory.duration_s, 0.02)]
    assert all(exact.is_valid(q) for q in dense)


def test_free_path(planner):
    world = PlanningWorld()
    result = planner.plan_to_joints(Q_READY, Q_REACH_LEFT, world, OPEN_HAND, seed=0)
    _assert_valid_motion(planner, result, world, Q_READY, Q_REACH_LEFT)
    assert len(result.path_rad) == 2  # nothing in the way: one straight motion
    assert set(result.timings_s) == {"planning", "time_parameterization"}


def test_path_around_an_obstacle(planner):
    world = PlanningWorld().with_boxes(WALL)
    start, goal = _swing()
    planner.backend.set_world(world)
    planner.backend.checker.set_hand(OPEN_HAND)
    assert not planner.backend.checker.check_motion(start, goal)  # the direct motion hits the wall
    result = planner.plan_to_joints(start, goal, world, OPEN_HAND, seed=0)
    _assert_valid_motion(planner, result, world, start, goal)
    assert len(result.path_rad) >= 3


def test_same_seed_same_path(planner):
    world = PlanningWorld().with_boxes(WALL)
    start, goal = _swing()
    first = planner.plan_to_joints(start, goal, world, OPEN_HAND, seed=7)
    second = planner.plan_to_joints(start, goal, world, OPEN_HAND, seed=7)
    assert first.success and second.success
    np.testing.assert_array_equal(first.path_rad, second.path_rad)
    np.testing.assert_array_equal(first.trajectory.positions_rad, second.trajectory.positions_rad)


def test_a_busy_machine_slows_the_search_but_does_not_change_the_plan(monkeypatch):
    """The path search's time limit counts the planning thread's CPU time, not the wall clock. On a loaded machine the
    thread waits while others run; here it waits in every collision check (a sleep: wall time passes, CPU time does
    not), so the search takes several times its limit in wall time and still finds the path it finds alone. With a
    wall-clock limit (OMPL's own or Python's) it would be cut short."""
    from getagrip_ros.motion.collision import CollisionChecker
    from getagrip_ros.motion.planner import MotionPlanner, MotionPlannerConfig

    world = PlanningWorld().with_boxes(WALL)
    start, goal = _swing()
    place, calls = CollisionChecker._place, []

    def counted_place(self, q_arm_rad):
        calls.append(1)
        return place(self, q_arm_rad)

    monkeypatch.setattr(CollisionChecker, "_place", counted_place)
    planner_alone = MotionPlanner()
    cpu_start = time.thread_time()
    alone = planner_alone.plan_to_joints(start, goal, world, OPEN_HAND, seed=3)  # a search of ~0.5 s, ~900 checks
    limit_s = 3 * (time.thread_time() - cpu_start)  # well above the search's own CPU time, whatever this machine's speed
    assert alone.success and len(alone.path_rad) >= 3
    planner = MotionPlanner(MotionPlannerConfig(planning_time_limit_s=limit_s))
    wait_s = 3 * limit_s / len(calls)  # the same search makes the same checks: 3x its limit of waiting in all

    def waiting_place(self, q_arm_rad):
        time.sleep(wait_s)  # the other jobs' turn
        return place(self, q_arm_rad)

    monkeypatch.setattr(CollisionChecker, "_place", waiting_place)
    t0 = time.monotonic()
    loaded = planner.plan_to_joints(start, goal, world, OPEN_HAND, seed=3)
    wall_s = time.monotonic() - t0
    assert loaded.success, loaded.reason
    np.testing.assert_array_equal(loaded.path_rad, alone.path_rad)
    assert wall_s > 2 * limit_s, f"the waits did not slow the plan past its limit ({wall_s:.2f} s): the test shows nothing"


def test_goal_in_collision_is_refused_with_the_reason(planner):
    q_in_table = np.array([0.0, 1.2, 0.0, -0.8, 0.0, 1.6, 0.785])
    result = planner.plan_to_joints(Q_READY, q_in_table, PlanningWorld(), OPEN_HAND)
    assert not result.success and result.status == StatusCode.NO_RESULT
    assert result.reason.startswith("goal in collision with the table (link ")
    assert result.trajectory is None


def test_start_in_collision_is_refused_with_the_reason(planner):
    q_in_table = np.array([0.0, 1.2, 0.0, -0.8, 0.0, 1.6, 0.785])
    result = planner.plan_to_joints(q_in_table, Q_READY, PlanningWorld(), OPEN_HAND)
    assert not result.success and result.status == StatusCode.INVALID_GOAL
    assert result.reason.startswith("start in collision with the table")
    outside = Q_READY.copy()
    outside[3] = -0.2  # fr3_joint4 upper limit is -0.4461 rad
    result = planner.plan_to_joints(outside, Q_READY, PlanningWorld(), OPEN_HAND)
    assert not result.success and "fr3_joint4" in result.reason and "outside its limits" in result.reason


def _grasp_scene(planner):
    """Palm poses: far away, in the table, reachable, reachable; a cube 10 cm in front of the reachable palm."""
    palm = planner.backend.robot.frame_pose
    T_ok, T_ok2 = palm(Q_REACH_FORWARD, "palm_link"), palm(Q_REACH_LEFT, "palm_link")
    T_far = T_ok.copy()
    T_far[0, 3] = 2.0
    T_low = T_ok.copy()
    T_low[2, 3] -= 0.25  # palm 4 cm under the table top
    cube = trimesh.creation.box((0.05, 0.05, 0.05))
    centre = T_ok[:3, 3] + 0.10 * T_ok[:3, 0]  # in front of the palm (palm x = palm normal)
    world = PlanningWorld((table_box(),), (ObjectMesh("cube", cube.vertices, cube.faces, translation(tuple(centre))),))
    return world, grasps_at(np.stack([T_far, T_low, T_ok, T_ok2]))


def test_ranked_grasps_first_feasible_and_reasons(planner):
    world, grasps = _grasp_scene(planner)
    result = planner.plan_grasps(Q_READY, world, grasps, seed=0)
    assert result.success and result.grasp_index == 2
    assert [a.grasp_index for a in result.attempts] == [0, 1, 2]
    far, low = result.rejected
    assert far.status == PlanStatus.IK_FAILED and far.reason.startswith("no IK solution within joint limits")
    assert low.status == PlanStatus.GOAL_IN_COLLISION
    assert low.reason.startswith("pre-grasp in collision with the table (link ")
    assert result.attempts[2].status == PlanStatus.SUCCESS
    # the arm ends with the palm on the chosen grasp's pose, hand at its pre-grasp joints
    T_goal = planner.backend.robot.frame_pose(result.q_goal_arm_rad, "palm_link")
    T_want = grasps.T_frame_palm[2].numpy()
    assert np.linalg.norm(T_goal[:3, 3] - T_want[:3, 3]) < 1e-3
    assert np.allclose(T_goal[:3, :3], T_want[:3, :3], atol=0.01)
    expected = closing_targets(planner.hand, grasps[2].to(dtype=torch.float64), planner.config.closing)
    np.testing.assert_allclose(result.hand_pregrasp_rad, expected.pregrasp.joint_angles_rad[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(result.hand_closed_rad, expected.closed.joint_angles_rad[0].numpy(), atol=1e-6)
    assert not np.allclose(result.hand_pregrasp_rad, OPEN_HAND)  # the fingertips did back off
    planner.backend.checker.set_hand(result.hand_pregrasp_rad)
    _assert_valid_motion(planner, result, world, Q_READY, result.q_goal_arm_rad)


def test_no_feasible_grasp_reports_every_reason(planner):
    world, grasps = _grasp_scene(planner)
    result = planner.plan_grasps(Q_READY, world, grasps[[0, 1]])
    assert not result.success and result.status == StatusCode.NO_RESULT and result.grasp_index is None
    assert [a.status for a in result.attempts] == [PlanStatus.IK_FAILED, PlanStatus.GOAL_IN_COLLISION]
    assert "none of 2 grasps" in result.reason and "no IK solution" in result.reason


def test_bad_input_raises(planner):
    world, grasps = _grasp_scene(planner)
    with pytest.raises(ValueError, match="7 arm joints"):
        planner.plan_grasps(Q_READY[:6], world, grasps)
    with pytest.raises(ValueError, match="NaN"):
        planner.plan_grasps(np.full(7, np.nan), world, grasps)
    bad = grasps_at(grasps.T_frame_palm.numpy())
    bad.palm_position_m[1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"grasps \[1\] contain NaN"):
        planner.plan_grasps(Q_READY, world, bad)
    other_frame = grasps.transformed(np.eye(4), "table")
    with pytest.raises(ValueError, match="frame"):
        planner.plan_grasps(Q_READY, world, other_frame)
    with pytest.raises(ValueError, match="PlanningWorld"):
        planner.plan_grasps(Q_READY, "table", grasps)
    with pytest.raises(ValueError, match="hand_rad"):
        planner.plan_to_joints(Q_READY, Q_REACH_LEFT, world, OPEN_HAND[:4])


def test_no_path_within_the_time_limit_is_reported():
    from getagrip_ros.motion.planner import MotionPlanner, MotionPlannerConfig

    hurried = MotionPlanner(MotionPlannerConfig(planning_time_limit_s=1e-4))
    start, goal = _swing()
    result = hurried.plan_to_joints(start, goal, PlanningWorld().with_boxes(WALL), OPEN_HAND, seed=0)
    assert not result.success and result.status == StatusCode.NO_RESULT
    assert result.reason == "no collision-free path within 0.0001 s of search (CPU time)"
    outside = Q_READY.copy()
    outside[5] = 0.5  # fr3_joint6 lower limit is 0.8521 rad
    result = hurried.plan_to_joints(Q_READY, outside, PlanningWorld(), OPEN_HAND)
    assert not result.success and result.reason.startswith("goal joint fr3_joint6 = 0.5000 rad is outside its limits")
