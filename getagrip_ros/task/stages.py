"""What the grasp task asks of each stage and gets back, and the transport-neutral interface it drives.

`StageCalls` has one method per stage action (reset_world, capture_images, train_nerf, extract_object,
plan_grasp, plan_motion, execute_grasp), taking the stage's core request and returning its result. Two
transports implement it over the same stage code: `task.in_process.InProcessStack` calls the stages in this
process, and `ros.grasp_task_node.RosStageCalls` sends the same requests as goals to the stack's action servers.
Frames: world = robot base fr3_link0, z up, table top at z = 0; metres, radians.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from getagrip_ros.execution.executor import ExecutionResult
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.motion.planner import GraspStages
from getagrip_ros.perception.capture import CaptureRequest
from getagrip_ros.planning.planner import PlanRequest
from getagrip_ros.robot.backend import ResetReport, WorldReset
from getagrip_ros.task.robot_stages import ExecuteRequest, MotionRequest


@dataclass
class StageBudget:
    """Given to each stage: its deadline and the cancel flag; `should_stop` is what long loops poll."""

    deadline: float
    """time.monotonic() at which the stage is over budget."""
    cancelled: Callable[[], bool]
    progress: Callable[[float, str], None]
    """progress(fraction of this stage in [0, 1], detail)."""

    def remaining_s(self) -> float:
        return max(self.deadline - time.monotonic(), 0.0)

    def should_stop(self) -> bool:
        return self.cancelled() or time.monotonic() > self.deadline


@dataclass(frozen=True)
class NerfRequest:
    """Train a NeRF on a capture (the train_nerf action's goal)."""

    dataset_dir: str
    output_dir: str
    profile: str = ""
    """"" = the trainer's default profile."""
    num_iterations: int = 0
    """0 = the profile's."""
    seed: int = 0


@dataclass(frozen=True)
class ExtractRequest:
    """The object from a capture (depth) or a NeRF (the extract_object action's goal)."""

    backend: str
    dataset_dir: str
    output_dir: str
    nerf_config_path: str = ""


@dataclass
class CaptureOutput:
    dataset_dir: str
    """Where the images were written (nerfstudio layout)."""
    num_captured: int
    num_planned: int = 0


@dataclass
class PerceptionOutput:
    points_world_m: np.ndarray
    """(N, 3) float32 cleaned object points."""
    bps: np.ndarray
    """(4096,) basis-point distances, metres."""
    bps_origin_m: np.ndarray
    """(3,) origin of the BPS frame (on the table below the object)."""
    centroid_m: np.ndarray
    mesh_path: str = ""
    """Collision mesh of the object (world frame), "" when none was made."""


@dataclass
class GraspPlanOutput:
    grasps: Grasp
    """Ranked, best first (world frame)."""
    labels: np.ndarray
    """(B, 3) predicted [y_pgs, y_coll, y_pick] (NaN without an evaluator)."""
    detail: str = ""


@dataclass
class MotionOutput:
    grasp_index: int
    """Index of the planned grasp in the ranked list."""
    stages: GraspStages
    rejected: list[str] = field(default_factory=list)
    """Why each better-ranked grasp was refused."""


class TraceSink(Protocol):
    """Where execution reports what happens while the robot moves (recorded in the trial bag). `stamp_ns`: when it
    happened (wall clock, ns since the epoch; None = now) - states that arrive over topics carry their own."""

    def joint_state(self, names: tuple[str, ...], positions_rad: np.ndarray, velocities_rad_s: np.ndarray,
                    stamp_ns: int | None = None) -> None: ...

    def object_state(self, T_world_object: np.ndarray, touching: dict[str, float], touches_table: bool,
                     stamp_ns: int | None = None) -> None: ...

    def phase(self, name: str, stamp_ns: int | None = None) -> None: ...


class StageCalls(Protocol):
    """One call per stage action; each raises StageError (code and reason) when its stage does not succeed, and
    honours `budget` (deadline, cancel, progress)."""

    def describe(self) -> dict[str, Any]:
        """Object label, robot / world and actuator settings, recorded with the trial."""

    def hand_link_names(self) -> tuple[str, ...]:
        """Robot links the scorer counts as hand contacts."""

    def reset(self, request: WorldReset, budget: StageBudget) -> ResetReport: ...

    def capture(self, request: CaptureRequest, budget: StageBudget, trace: TraceSink) -> CaptureOutput:
        """Carries the camera along the spirals; `trace` receives the robot's (and the simulated object's) states while
        the arm moves."""

    def train_nerf(self, request: NerfRequest, budget: StageBudget) -> str:
        """The trained NeRF's config.yml."""

    def extract(self, request: ExtractRequest, budget: StageBudget) -> PerceptionOutput: ...

    def plan_grasp(self, request: PlanRequest, budget: StageBudget) -> GraspPlanOutput: ...

    def plan_motion(self, request: MotionRequest, budget: StageBudget) -> MotionOutput: ...

    def execute(self, request: ExecuteRequest, budget: StageBudget, trace: TraceSink) -> ExecutionResult:
        """Runs the plan; `trace` receives the robot's states and the phases while it moves. Returns how the
        execution ended (also when it was refused or stopped: its stage and status say so); raises StageError
        only when the stage could not be called."""
