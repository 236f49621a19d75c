"""CPU backend: arm IK (`robot.arm_ik.ArmIK`), RRTConnect (OMPL) in the 7-D arm joint space, coal collisions.

Per goal: IK of the palm pose (several seeds, within joint limits) -> the collision-free IK solutions
(more are searched when the first collides) -> RRTConnect from the start to them, every motion checked
by `CollisionChecker.check_motion` (<= 1 mm of motion of any robot point between checked states) ->
OMPL's shortcutting -> the path checked once more, segment by segment.

OMPL's random generator is global to the process: each plan reseeds it from the request's seed, so
the same request gives the same path (as long as the time limit does not cut the search short).
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import torch
from ompl import base as ob
from ompl import geometric as og
from ompl import util as ou

from getagrip_ros.motion.backend import GoalPlan, MotionBackend, PalmGoals, PlanOptions, PlanStatus
from getagrip_ros.motion.collision import CollisionChecker, CollisionCheckerConfig, WorkspaceBox
from getagrip_ros.motion.robot_geometry import END_EFFECTOR_BODY, NUM_ARM_JOINTS, RobotCollisionModel
from getagrip_ros.motion.world import PlanningWorld
from getagrip_ros.robot.arm_ik import ArmIK, ArmIKConfig
from getagrip_ros.robot.description import ARM_JOINT_NAMES, PALM_LINK


@dataclass(frozen=True)
class OmplBackendConfig:
    """Build-time settings of the OMPL backend."""

    collision: CollisionCheckerConfig = field(default_factory=CollisionCheckerConfig)
    workspace: Optional[WorkspaceBox] = None
    """Palm, flange and fingertips stay inside this box along every planned motion (the safety layer's box; None:
    no box)."""
    ik: ArmIKConfig = field(default_factory=lambda: ArmIKConfig(
        frame=PALM_LINK, free_z_rotation=False, num_seeds=8, num_iterations=80,
        position_tolerance_m=0.001, rotation_tolerance_rad=0.01))
    """IK of the palm pose (its random seeds come from each request's seed)."""
    ik_extra_solutions: int = 8
    """When a goal's first IK solution collides, this many more IK solves (new random seeds) look for another."""
    max_goal_states: int = 4
    """RRTConnect grows its goal tree from at most this many distinct collision-free IK solutions."""
    distinct_goal_rad: float = 0.1
    """IK solutions closer than this (max over joints) count as one."""
    range_rad: float = 0.0
    """RRTConnect's step (joint-space distance); 0 lets OMPL choose (20% of the joint-space diagonal)."""
    shortcut: bool = True
    """Shortcut the found path (OMPL's PathSimplifier: vertex reduction and partial shortcuts)."""
    joint_limit_tolerance_rad: float = 1e-6
    """A start this far outside a joint limit is moved onto it; further outside is refused."""
    urdf: Optional[str] = None
    """Robot URDF (default: this package's fr3_algr_zed2i.urdf)."""


@contextmanager
def _ompl_log_level(level) -> Iterator[None]:
    previous = ou.getLogLevel()
    ou.setLogLevel(level)
    try:
        yield
    finally:
        ou.setLogLevel(previous)


class _MotionValidator(ob.MotionValidator):
    """OMPL motion check through CollisionChecker.check_motion."""

    def __init__(self, si: ob.SpaceInformation, checker: CollisionChecker) -> None:
        super().__init__(si)
        self.checker = checker

    def checkMotion(self, s1: ob.State, s2: ob.State) -> bool:  # noqa: N802 - OMPL's name
        return self.checker.check_motion(_to_numpy(s1), _to_numpy(s2))


def _to_numpy(state: ob.State) -> np.ndarray:
    return np.fromiter((state[i] for i in range(NUM_ARM_JOINTS)), dtype=float, count=NUM_ARM_JOINTS)


def _set_state(state: ob.State, q: np.ndarray) -> ob.State:
    for i in range(NUM_ARM_JOINTS):
        state[i] = float(q[i])
    return state


def _path_to_numpy(path: og.PathGeometric) -> np.ndarray:
    return np.array([_to_numpy(path.getState(i)) for i in range(path.getStateCount())])


class OmplBackend(MotionBackend):
    """RRTConnect (OMPL) + coal collision checking + ArmIK, on the CPU."""

    def __init__(self, config: OmplBackendConfig = OmplBackendConfig(), world: PlanningWorld | None = None) -> None:
        self.config = config
        self.robot = RobotCollisionModel(Path(config.urdf) if config.urdf else None)
        self.lower_rad, self.upper_rad = self.robot.lower_limits_rad, self.robot.upper_limits_rad
        self.ik = ArmIK(config.ik)
        self.world = world if world is not None else PlanningWorld()
        self.checker = CollisionChecker(self.robot, self.world, config.collision, config.workspace)

    # -- MotionBackend ---------------------------------------------------------------------------------
    def set_world(self, world: PlanningWorld) -> None:
        if world is self.world:  # worlds are immutable: keep the compiled collision geometry
            return
        self.world = world
        self.checker = CollisionChecker(self.robot, world, self.config.collision, self.config.workspace)

    def plan_to_joints(self, q_start_arm_rad: np.ndarray, q_goal_arm_rad: np.ndarray, hand_rad: np.ndarray,
                       options: PlanOptions) -> GoalPlan:
        start_time = time.perf_counter()
        self.checker.set_hand(hand_rad)
        q_start, reason = self._checked_start(q_start_arm_rad)
        if q_start is None:
            return GoalPlan(PlanStatus.START_INVALID, reason, planning_time_s=time.perf_counter() - start_time)
        if not self.checker.is_valid(q_start):
            return GoalPlan(PlanStatus.START_INVALID, "start " + self.checker.report(q_start).describe(),
                            planning_time_s=time.perf_counter() - start_time)
        q_goal = np.asarray(q_goal_arm_rad, dtype=float)
        outside = self._limit_violation(q_goal)
        if outside:
            return GoalPlan(PlanStatus.GOAL_INVALID, f"goal {outside}", q_goal,
                            planning_time_s=time.perf_counter() - start_time)
        if not self.checker.is_valid(q_goal):
            return GoalPlan(PlanStatus.GOAL_IN_COLLISION, "goal " + self.checker.report(q_goal).describe(), q_goal,
                            planning_time_s=time.perf_counter() - start_time)
        plan = self._search(q_start, [q_goal], options)
        plan.planning_time_s = time.perf_counter() - start_time
        return plan

    def plan_to_palm_poses(self, q_start_arm_rad: np.ndarray, goals: PalmGoals, options: PlanOptions) -> list[GoalPlan]:
        start_time = time.perf_counter()
        q_start, reason = self._checked_start(q_start_arm_rad)
        if q_start is None:
            return [GoalPlan(PlanStatus.START_INVALID, reason) for _ in range(len(goals))]
        T = torch.as_tensor(goals.T_world_palm, dtype=torch.float64)
        ik = self.ik.solve(T, seed=options.seed)
        plans: list[GoalPlan] = []
        done = False
        for i in range(len(goals)):
            elapsed = time.perf_counter() - start_time
            if done:
                plans.append(GoalPlan(PlanStatus.NOT_TRIED, "a better-ranked grasp succeeded first"))
                continue
            if options.total_time_limit_s is not None and elapsed > options.total_time_limit_s:
                plans.append(GoalPlan(PlanStatus.NOT_TRIED, f"total time limit of {options.total_time_limit_s:g} s reached"))
                continue
            t0 = time.perf_counter()
            goal_options = options
            if options.total_time_limit_s is not None:  # the search may not outlast the total limit
                goal_options = replace(options, time_limit_s=min(options.time_limit_s, options.total_time_limit_s - elapsed))
            plan = self._plan_goal(i, q_start, goals, ik, goal_options)
            plan.planning_time_s = time.perf_counter() - t0
            plans.append(plan)
            done = plan.success and options.stop_at_first_success
        return plans

    # -- steps -----------------------------------------------------------------------------------------
    def _limit_violation(self, q: np.ndarray) -> str:
        """"" when q is within the joint limits, else which joint is outside."""
        tol = self.config.joint_limit_tolerance_rad
        for name, v, lo, hi in zip(ARM_JOINT_NAMES, q, self.lower_rad, self.upper_rad):
            if not lo - tol <= v <= hi + tol:
                return f"joint {name} = {v:.4f} rad is outside its limits [{lo:.4f}, {hi:.4f}]"
        return ""

    def _checked_start(self, q_start_arm_rad: np.ndarray) -> tuple[Optional[np.ndarray], str]:
        q = np.asarray(q_start_arm_rad, dtype=float)
        outside = self._limit_violation(q)
        if outside:
            return None, f"start {outside}"
        return np.clip(q, self.lower_rad, self.upper_rad), ""

    def _plan_goal(self, i: int, q_start: np.ndarray, goals: PalmGoals, ik, options: PlanOptions) -> GoalPlan:
        details = {"ik_position_error_m": float(ik.position_error_m[i]),
                   "ik_rotation_error_rad": float(ik.rotation_error_rad[i])}
        if not bool(ik.success[i]):
            pe, re = details["ik_position_error_m"], details["ik_rotation_error_rad"]
            return GoalPlan(PlanStatus.IK_FAILED, f"no IK solution within joint limits (closest: {pe * 1000:.1f} mm, "
                            f"{math.degrees(re):.1f} deg from the palm pose)", details=details)
        self.checker.set_hand(goals.hand_rad[i])
        if not self.checker.is_valid(q_start):
            return GoalPlan(PlanStatus.START_INVALID, "start " + self.checker.report(q_start).describe()
                            + " (hand at this grasp's pre-grasp joints)", details=details)
        first = ik.joint_angles_rad[i].numpy()
        candidates = [first] if self.checker.is_valid(first) else []
        if not candidates:
            report = self.checker.report(first)
            details["end_effector_in_collision"] = any(
                not c.self_collision and self.robot.body_of(c.link) == END_EFFECTOR_BODY for c in report.contacts)
            if details["end_effector_in_collision"]:
                # the hand and the mount sit where the grasp puts them, whatever the arm's IK solution
                return GoalPlan(PlanStatus.GOAL_IN_COLLISION, "pre-grasp " + report.describe(), first, details=details)
            candidates = self._more_ik_solutions(goals.T_world_palm[i], options.seed)
            if not candidates:
                return GoalPlan(PlanStatus.GOAL_IN_COLLISION, "pre-grasp " + report.describe()
                                + f" (in all {1 + self.config.ik_extra_solutions} IK solutions tried)", first,
                                details=details)
        details["collision_free_ik_solutions"] = len(candidates)
        candidates.sort(key=lambda q: float(np.abs(q - q_start).max()))
        plan = self._search(q_start, candidates[: self.config.max_goal_states], options)
        plan.details.update(details)
        return plan

    def _more_ik_solutions(self, T_world_palm: np.ndarray, seed: int) -> list[np.ndarray]:
        """Collision-free, distinct IK solutions of one palm pose from new random seeds."""
        n = self.config.ik_extra_solutions
        if n <= 0:
            return []
        result = self.ik.solve(torch.as_tensor(T_world_palm, dtype=torch.float64)[None].repeat(n, 1, 1), seed=seed + 1)
        found: list[np.ndarray] = []
        for q, ok in zip(result.joint_angles_rad.numpy(), result.success.numpy()):
            if ok and all(np.abs(q - f).max() > self.config.distinct_goal_rad for f in found) and self.checker.is_valid(q):
                found.append(q)
        return found

    def _space(self) -> ob.RealVectorStateSpace:
        space = ob.RealVectorStateSpace(NUM_ARM_JOINTS)
        bounds = ob.RealVectorBounds(NUM_ARM_JOINTS)
        for j in range(NUM_ARM_JOINTS):
            bounds.setLow(j, float(self.lower_rad[j]))
            bounds.setHigh(j, float(self.upper_rad[j]))
        space.setBounds(bounds)
        return space

    def _search(self, q_start: np.ndarray, q_goals: list[np.ndarray], options: PlanOptions) -> GoalPlan:
        """RRTConnect from q_start to any of q_goals (all valid), then shortcutting and a final check."""
        checks_before = self.checker.num_checks
        # a direct motion needs no search
        for q_goal in q_goals:
            if self.checker.check_motion(q_start, q_goal):
                return GoalPlan(PlanStatus.SUCCESS, "", q_goal, np.stack([q_start, q_goal]),
                                details={"collision_checks": self.checker.num_checks - checks_before, "direct": True})
        with _ompl_log_level(ou.LOG_NONE):  # reseeding logs an error once sampling has started; intended here
            ou.RNG.setSeed(options.seed + 1)
        space = self._space()
        si = ob.SpaceInformation(space)
        checker = self.checker
        si.setStateValidityChecker(lambda state: checker.is_valid(_to_numpy(state)))
        validator = _MotionValidator(si, checker)  # kept referenced until the end of the search
        si.setMotionValidator(validator)
        si.setup()
        pdef = ob.ProblemDefinition(si)
        pdef.addStartState(_set_state(si.allocState(), q_start))
        goal = ob.GoalStates(si)
        for q_goal in q_goals:
            goal.addState(_set_state(si.allocState(), q_goal))
        pdef.setGoal(goal)
        planner = og.RRTConnect(si)
        if self.config.range_rad > 0:
            planner.setRange(self.config.range_rad)
        planner.setProblemDefinition(pdef)
        # the search's time is this thread's CPU time, not the wall clock: a loaded machine slows the search down
        # but does not cut it short, so a request and seed give the same plan whatever else runs beside it
        cpu_start = time.thread_time()
        out_of_time = ob.PlannerTerminationCondition(lambda: time.thread_time() - cpu_start >= options.time_limit_s)
        with _ompl_log_level(ou.LOG_WARN):  # OMPL's default level prints every planner setting
            planner.setup()
            status = planner.solve(out_of_time)
        details = {"collision_checks": self.checker.num_checks - checks_before, "direct": False,
                   "search_cpu_s": time.thread_time() - cpu_start}
        if status != ob.PlannerStatus.EXACT_SOLUTION:
            return GoalPlan(PlanStatus.NO_PATH, f"no collision-free path within {options.time_limit_s:.3g} s of search "
                            "(CPU time)", details=details)
        path = pdef.getSolutionPath()
        raw = _path_to_numpy(path)
        details["raw_waypoints"] = len(raw)
        if self.config.shortcut:
            simplifier = og.PathSimplifier(si)
            simplifier.reduceVertices(path)
            simplifier.partialShortcutPath(path)
            simplifier.reduceVertices(path)
        waypoints = _path_to_numpy(path)
        if not checker.check_path(waypoints):  # the final path is re-checked segment by segment
            waypoints = raw
            if not checker.check_path(raw):
                return GoalPlan(PlanStatus.NO_PATH, "the path found failed its final collision check", details=details)
        details["collision_checks"] = self.checker.num_checks - checks_before
        q_goal = min(q_goals, key=lambda q: float(np.abs(q - waypoints[-1]).max()))
        waypoints[-1] = q_goal
        waypoints[0] = q_start
        del validator
        return GoalPlan(PlanStatus.SUCCESS, "", q_goal, waypoints, details=details)
