"""The whole stack in this process: the grasp task's stage calls made directly, on one simulated robot.

`InProcessStack` implements `StageCalls` with the same stage code the nodes serve: `RobotStages` on a
`SimRobot` (reset, capture, plan_motion, execute), the NeRF trainer and the object extractor of
`perception`, and the `GraspPlanner`. `StackConfig` holds every setting of those stages, the same
dataclasses the nodes' parameters mirror, so a bring-up started with `StackConfig.node_parameters()`
runs exactly these stages behind actions (what the benchmark's ROS mode does).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from getagrip_ros.config_tree import flatten
from getagrip_ros.execution.executor import ExecutionResult
from getagrip_ros.perception.capture import CaptureRequest
from getagrip_ros.perception.extract import ObjectExtractorConfig, extract_and_save
from getagrip_ros.perception.nerf.config import NerfTrainerConfig
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.robot.backend import ResetReport, WorldReset
from getagrip_ros.sim.robot_backend import SimRobot, SimRobotConfig
from getagrip_ros.status import StageError, StatusCode
from getagrip_ros.task.robot_stages import ExecuteRequest, MotionRequest, RobotStages, RobotStagesConfig
from getagrip_ros.task.stages import (
    CaptureOutput, ExtractRequest, GraspPlanOutput, MotionOutput, NerfRequest, PerceptionOutput, StageBudget, TraceSink,
)


@dataclass(frozen=True)
class StackConfig:
    """Every setting of the stack's stages (units: metres, radians, seconds)."""

    sim: SimRobotConfig = field(default_factory=SimRobotConfig)
    robot: RobotStagesConfig = field(default_factory=RobotStagesConfig)
    planner: GraspPlannerConfig = field(default_factory=GraspPlannerConfig)
    extractor: ObjectExtractorConfig = field(default_factory=ObjectExtractorConfig)
    nerf: NerfTrainerConfig = field(default_factory=NerfTrainerConfig)

    def node_parameters(self) -> dict[str, dict[str, Any]]:
        """{node name: {dotted parameter: value}} that give a sim bring-up these settings."""
        return {"robot": {**flatten(self.robot), **flatten(self.sim, "sim.")},
                "plan_grasp": flatten(self.planner),
                "extract_object": flatten(self.extractor),
                "train_nerf": flatten(self.nerf)}


def _raise_unless(ok: bool, code: StatusCode, reason: str) -> None:
    if not ok:
        raise StageError(code, reason)


def _trace_samples(trace: TraceSink):
    """The robot stages' on_sample callback that writes each sample to the trial's trace."""
    def on_sample(sample) -> None:
        s = sample.joint_state
        trace.joint_state(s.joint_names, s.positions_rad, s.velocities_rad_s)
        if sample.object is not None:
            o = sample.object
            trace.object_state(o.T_world_object, o.touching, o.touches_table)

    return on_sample


class InProcessStack:
    """`StageCalls` in this process, on one `SimRobot` (close() releases it)."""

    def __init__(self, config: StackConfig = StackConfig(), log=lambda message: None) -> None:
        self.config = config
        self.robot = SimRobot(config.sim)
        try:
            self.robot_stages = RobotStages(self.robot, config.robot, log=log)
            self.grasp_planner = GraspPlanner(config.planner)
        except Exception:
            self.robot.close()
            raise

    def describe(self) -> dict[str, Any]:
        return {"backend": "in_process", "object": self.config.sim.object_name, **self.robot_stages.describe(),
                "planner": dataclasses.asdict(self.config.planner), "extractor": dataclasses.asdict(self.config.extractor)}

    def hand_link_names(self) -> tuple[str, ...]:
        return self.robot.run(self.robot.hand_link_names)

    def reset(self, request: WorldReset, budget: StageBudget) -> ResetReport:
        outcome = self.robot_stages.reset(request)
        _raise_unless(outcome.status == StatusCode.SUCCEEDED, outcome.status, outcome.reason)
        return outcome.report

    def capture(self, request: CaptureRequest, budget: StageBudget, trace: TraceSink) -> CaptureOutput:
        def on_image(index: int, total: int, image, T_world_camera: np.ndarray) -> None:
            budget.progress((index + 1) / max(total, 1), f"image {index + 1}/{total}")

        result = self.robot_stages.capture(request, True, on_image, budget.should_stop, _trace_samples(trace))
        _raise_unless(result.success, result.status, result.reason)
        return CaptureOutput(str(result.dataset_dir), int(result.num_captured), int(result.num_planned))

    def train_nerf(self, request: NerfRequest, budget: StageBudget) -> str:
        from getagrip_ros.perception.nerf.train import train_nerf

        try:
            settings = self.config.nerf.training_config(request.profile, request.num_iterations, request.seed)
        except ValueError as err:
            raise StageError(StatusCode.INVALID_GOAL, str(err)) from err
        trained = train_nerf(request.dataset_dir, request.output_dir, settings,
                             lambda p: budget.progress(p.iteration / max(p.num_iterations, 1), f"nerfacto {p.iteration}"),
                             should_stop=budget.should_stop)
        return str(trained.config_path)

    def extract(self, request: ExtractRequest, budget: StageBudget) -> PerceptionOutput:
        def progress(stage: str, fraction: float) -> None:
            if budget.should_stop():
                raise StageError(StatusCode.CANCELED, f"extraction stopped before {stage}")
            budget.progress(fraction, stage)

        rep = extract_and_save(request.backend, request.output_dir, request.nerf_config_path, request.dataset_dir,
                               self.config.extractor, progress)
        return PerceptionOutput(rep.points_world_m, rep.bps.distances_m, rep.bps.origin_world_m, rep.centroid_world_m,
                                str(rep.mesh_path or ""))

    def plan_grasp(self, request: PlanRequest, budget: StageBudget) -> GraspPlanOutput:
        result = self.grasp_planner.plan(request, lambda stage, fraction, best: budget.progress(fraction, stage),
                                         budget.should_stop)
        _raise_unless(result.success, result.status, result.reason)
        p = result.planned
        labels = np.stack([p.y_pgs.numpy(), p.y_coll.numpy(), p.y_pick.numpy()], axis=1)
        return GraspPlanOutput(p.grasps, labels, result.reason)

    def plan_motion(self, request: MotionRequest, budget: StageBudget) -> MotionOutput:
        planned = self.robot_stages.plan_motion(request)
        _raise_unless(planned.success, planned.status, planned.reason)
        rejected = [f"{a.grasp_index}: {a.status.name}: {a.reason}" for a in planned.rejected]
        return MotionOutput(int(planned.grasp_index), planned.stages, rejected)

    def execute(self, request: ExecuteRequest, budget: StageBudget, trace: TraceSink) -> ExecutionResult:
        def progress(stage: str, fraction: float) -> None:
            trace.phase(stage)
            budget.progress(fraction, stage)

        return self.robot_stages.execute(request, progress, budget.should_stop, _trace_samples(trace))

    def close(self) -> None:
        self.robot_stages.close()
