"""Run a planned grasp on an arm and a hand: hand shaping -> approach -> close -> lift (the paper's three stages).

The plan (`motion.planner.GraspStages`) is checked by the safety layer against the measured joints and
the current world before anything moves; a refused plan moves nothing. Each stage is one blocking
motion of the arm or the hand followed by a short hold; cancel or the e-stop stops the moving group
within one poll period and the result names the stage reached. Works with any `Arm` / `Hand` (the
simulated ones, franky, the Allegro topic driver).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from getagrip_ros.execution.safety import EStop, SafetyMonitor
from getagrip_ros.motion.planner import GraspStages
from getagrip_ros.motion.world import PlanningWorld
from getagrip_ros.robot.interfaces import Arm, Hand, JointGroup, JointTrajectory
from getagrip_ros.status import StatusCode

#: Stages in execution order ("validation" comes first, "done" after the last).
STAGES = ("validation", "hand_shape", "approach", "close", "lift", "done")

ProgressFn = Callable[[str, float], None]
"""progress(stage, overall fraction in [0, 1])."""
LiftCheck = Callable[[], tuple[bool, str]]
"""After the lift: (object in the hand?, why) - from the simulator, or a sensor on hardware."""


@dataclass(frozen=True)
class ExecutionConfig:
    """Holds after each stage (the public code's hardware timings) and when a stage counts as done."""

    hold_after_hand_shape_s: float = 0.2
    hold_after_approach_s: float = 0.2
    hold_after_close_s: float = 0.2
    hold_after_lift_s: float = 0.5
    max_arm_final_error_rad: float = 0.05
    """An arm stage fails when a joint ends farther than this from its goal."""

    def __post_init__(self) -> None:
        for name in ("hold_after_hand_shape_s", "hold_after_approach_s", "hold_after_close_s", "hold_after_lift_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"ExecutionConfig.{name} must be >= 0, got {getattr(self, name)}")


@dataclass
class ExecutionResult:
    """How an execution ended."""

    success: bool
    """Every stage ran to its end (and the lift check, when given, found the object in the hand)."""
    status: StatusCode
    stage: str
    """The stage reached (one of STAGES): where it stopped, or "done"."""
    reason: str
    lifted: Optional[bool] = None
    """The lift check's verdict (None: no check given, or the lift was not reached)."""
    timings_s: dict[str, float] = field(default_factory=dict)


class GraspExecutor:
    """Executes `GraspStages` on an arm and a hand, safely.

    Args:
        arm, hand: the robot (simulated or real).
        safety: checks the plan before it runs.
        config: holds and tolerances.
        estop: a shared e-stop; triggering it stops the running motion (and refuses new ones until reset).
    """

    def __init__(self, arm: Arm, hand: Hand, safety: SafetyMonitor | None = None,
                 config: ExecutionConfig = ExecutionConfig(), estop: EStop | None = None) -> None:
        self.arm, self.hand = arm, hand
        self.safety = safety or SafetyMonitor()
        self.config = config
        self.estop = estop or EStop()

    def execute(self, stages: GraspStages, world: PlanningWorld, should_cancel: Callable[[], bool] | None = None,
                progress: ProgressFn | None = None, lift_check: LiftCheck | None = None) -> ExecutionResult:
        """Validate against the measured joints and `world`, then run every stage; never raises for bad plans."""
        cancel = should_cancel or (lambda: False)
        report = progress or (lambda stage, fraction: None)
        timings: dict[str, float] = {}

        def end(ok: bool, status: StatusCode, stage: str, reason: str, lifted: Optional[bool] = None) -> ExecutionResult:
            return ExecutionResult(ok, status, stage, reason, lifted, timings)

        report("validation", 0.0)
        if self.estop.triggered:
            return end(False, StatusCode.HARDWARE_ERROR, "validation", f"e-stop is active ({self.estop.reason}); reset it first")
        start = time.perf_counter()
        try:
            problems = self.safety.check_stages(stages, self.arm.state().positions_rad, self.hand.state().positions_rad,
                                                world)
        except (ValueError, KeyError) as err:
            problems = [f"{type(err).__name__}: {err}"]
        timings["validation"] = time.perf_counter() - start
        if problems:
            return end(False, StatusCode.INVALID_GOAL, "validation", "plan refused by the safety checks: " + "; ".join(problems))

        def should_stop() -> bool:
            return cancel() or self.estop.triggered

        total = sum(t.duration_s for _, t in stages.as_list())
        done_s = 0.0
        holds = {"hand_shape": self.config.hold_after_hand_shape_s, "approach": self.config.hold_after_approach_s,
                 "close": self.config.hold_after_close_s, "lift": self.config.hold_after_lift_s}
        for name, trajectory in stages.as_list():
            report(name, done_s / total)
            group: JointGroup = self.hand if name in ("hand_shape", "close") else self.arm
            start = time.perf_counter()
            moved = group.move(trajectory, should_stop)
            error = float(np.max(moved.final_error_rad)) if group is self.arm and len(moved.final_error_rad) else 0.0
            if moved.success and error <= self.config.max_arm_final_error_rad and holds[name] > 0:
                goal = trajectory.positions_rad[-1]
                moved = group.move(JointTrajectory(trajectory.joint_names, [0.0, holds[name]], [goal, goal]), should_stop)
            timings[name] = time.perf_counter() - start
            done_s += trajectory.duration_s
            if not moved.success:
                self.arm.stop()
                self.hand.stop()
                if self.estop.triggered:
                    return end(False, StatusCode.HARDWARE_ERROR, name, f"stopped by the e-stop ({self.estop.reason})")
                if cancel():
                    return end(False, StatusCode.CANCELED, name, "stopped: cancel requested")
                return end(False, StatusCode.HARDWARE_ERROR, name, f"{name} failed: {moved.reason}")
            if error > self.config.max_arm_final_error_rad:
                self.arm.stop()
                return end(False, StatusCode.HARDWARE_ERROR, name, f"{name}: the arm ended {error:.3f} rad from its goal "
                                                                  f"(tolerance {self.config.max_arm_final_error_rad} rad)")
        report("done", 1.0)
        if lift_check is None:
            return end(True, StatusCode.SUCCEEDED, "done", "all stages executed (no lift check)")
        lifted, why = lift_check()
        if lifted:
            return end(True, StatusCode.SUCCEEDED, "done", f"object lifted: {why}", True)
        return end(False, StatusCode.NO_RESULT, "done", f"all stages executed but the object is not in the hand: {why}", False)
