"""What each stage of the grasp task takes and returns, and the interface the task drives.

Two implementations: `task.local_stages.LocalSimStages` (the simulated world in this process, the core
modules called directly) and the ROS node's stages (`ros.grasp_task_node`: the stage actions).
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
from getagrip_ros.task.config import GraspTaskConfig


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


@dataclass
class CaptureOutput:
    rgb: list[np.ndarray]
    """(H, W, 3) uint8 images."""
    K: np.ndarray
    """(3, 3) pinhole intrinsics, pixels."""
    T_world_camera: np.ndarray
    """(N, 4, 4) optical-frame camera poses."""
    depth_m: list[np.ndarray] | None = None
    """(H, W) metres per image (0 = no return), when the camera has depth."""
    dataset_dir: str = ""
    """Where the images were written (nerfstudio layout), if anywhere."""
    num_planned: int = 0


@dataclass
class PerceptionOutput:
    points_world_m: np.ndarray
    """(N, 3) cleaned object points."""
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


class TaskStages(Protocol):
    """The five stages; each raises StageError (or returns) and honours `budget.should_stop`."""

    def describe(self) -> dict[str, Any]:
        """Object, robot / world and actuator settings, recorded with the trial."""

    def hand_link_names(self) -> tuple[str, ...]:
        """Robot links the scorer counts as hand contacts."""

    def capture(self, object_position_m: np.ndarray, config: GraspTaskConfig, budget: StageBudget) -> CaptureOutput: ...

    def perceive(self, capture: CaptureOutput, object_position_m: np.ndarray, config: GraspTaskConfig,
                 budget: StageBudget) -> PerceptionOutput: ...

    def plan_grasps(self, obj: PerceptionOutput, config: GraspTaskConfig, budget: StageBudget) -> GraspPlanOutput: ...

    def plan_motion(self, obj: PerceptionOutput, plan: GraspPlanOutput, config: GraspTaskConfig,
                    budget: StageBudget) -> MotionOutput: ...

    def execute(self, motion: MotionOutput, config: GraspTaskConfig, budget: StageBudget,
                trace: TraceSink) -> ExecutionResult: ...
