"""The grasp task's stages on a simulated robot in this process (the core modules called directly).

The MuJoCo arm world (FR3 + Allegro + wrist camera, one catalog object on the table) is driven exactly
as the nodes' sim backends drive it: the arm follows the capture spirals with physics and grabs posed
RGB-D images (`perception.capture`), perception fuses the depth (or trains nerfacto), the grasp planner
samples and ranks, OMPL plans the approach and lift, and the executor runs the safety-checked stages
while the physics judges the lift. Used by the benchmark and from Python; the ROS node runs the same
stages through their actions.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from getagrip_ros.execution.executor import ExecutionConfig, ExecutionResult, GraspExecutor
from getagrip_ros.execution.safety import SafetyConfig, SafetyMonitor
from getagrip_ros.motion.planner import GraspStagesConfig, MotionPlanner, MotionPlannerConfig
from getagrip_ros.motion.world import PlanningWorld, load_object_mesh, table_box
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.status import StageError
from getagrip_ros.task.config import GraspTaskConfig
from getagrip_ros.task.stages import (
    CaptureOutput, GraspPlanOutput, MotionOutput, PerceptionOutput, StageBudget, TraceSink,
)


@dataclass(frozen=True)
class LocalSimConfig:
    """The simulated world and the in-process stage settings (units: metres, radians, seconds)."""

    object_name: str = "tabletop20/green_tea"
    """Catalog object (getagrip_ros.objects.catalog) or a mesh file (obj/stl/ply/glb, metres) standing on the table."""
    object_xy_m: tuple[float, float] = (0.65, 0.0)
    object_yaw_rad: float = 0.0
    camera_width_px: int = 320
    """CPU profile: ZED 2i HD720 / 4 (the ROS sim backend renders HD720 / 2)."""
    camera_height_px: int = 180
    camera_fy_px: float = 133.25
    object_cache_dir: str = ""
    real_time_factor: float = 0.0
    """Motions at this multiple of real time (0 = as fast as the CPU allows; the result does not depend on it)."""
    work_dir: str = ""
    """Capture datasets, NeRFs and meshes of each trial go here ("" = a temporary folder)."""
    nerf_profile: str = "cpu"
    nerf_iterations: int = 0
    """0 = the profile's count."""
    device: str = "cpu"
    trace_every_ms: int = 50
    """Joint and object states are recorded every this many milliseconds of simulated time during execution."""
    planner: GraspPlannerConfig = field(default_factory=GraspPlannerConfig)
    motion: MotionPlannerConfig = field(default_factory=MotionPlannerConfig)
    stages: GraspStagesConfig = field(default_factory=GraspStagesConfig)
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)


class LocalSimStages:
    """`TaskStages` on a MuJoCo arm world built here; one object per instance (close() releases it)."""

    def __init__(self, config: LocalSimConfig = LocalSimConfig()) -> None:
        from getagrip_ros.objects.catalog import object_by_name, user_object
        from getagrip_ros.objects.mesh_object import PrepareConfig, prepare_object
        from getagrip_ros.sim.robots import SimArm, SimHand
        from getagrip_ros.sim.scene import CameraConfig, SceneConfig
        from getagrip_ros.sim.world import ObjectPlacement, SimWorld

        self.config = config
        spec = user_object(config.object_name) if Path(config.object_name).is_file() else object_by_name(config.object_name)
        self.object = prepare_object(spec, PrepareConfig(cache_dir=config.object_cache_dir or None))
        camera = CameraConfig(config.camera_width_px, config.camera_height_px, config.camera_fy_px)
        self.world = SimWorld(SceneConfig(robot="arm", camera=camera), self.object,
                              ObjectPlacement(xy_m=tuple(config.object_xy_m), yaw_rad=config.object_yaw_rad))
        self.arm, self.hand = SimArm(self.world), SimHand(self.world)
        self.work_dir = Path(config.work_dir or tempfile.mkdtemp(prefix="getagrip_task_"))
        self.grasp_planner = GraspPlanner(replace(config.planner, device=config.device))
        self._trial = 0

    def describe(self) -> dict[str, Any]:
        return {"object": self.object.name, "backend": "local_sim",
                "world": self.world.physics_settings(),
                "actuators": {"arm": "MuJoCo FR3, PD position control", "hand": "MuJoCo Allegro, PD position control",
                              "real_time_factor": self.config.real_time_factor},
                "local_sim": asdict(self.config)}

    def hand_link_names(self) -> tuple[str, ...]:
        return tuple(self.world.hand_link_names())

    def _paced(self, budget: StageBudget):
        """should_stop for motions: honours the budget and keeps real_time_factor (see ros.sim_backend)."""
        import time

        rtf, sim0, wall0 = self.config.real_time_factor, self.world.time_s, time.monotonic()

        def poll() -> bool:
            if rtf > 0:
                ahead = (self.world.time_s - sim0) / rtf - (time.monotonic() - wall0)
                if ahead > 0:
                    time.sleep(ahead)
            return budget.should_stop()

        return poll

    # -- stages -----------------------------------------------------------------------------------
    def capture(self, object_position_m: np.ndarray, config: GraspTaskConfig, budget: StageBudget) -> CaptureOutput:
        from getagrip_ros.perception.cameras import SimCamera
        from getagrip_ros.perception.capture import CaptureRequest, run_capture

        self._trial += 1
        while (self.work_dir / f"trial_{self._trial:03d}").exists():  # a resumed run keeps the earlier folders
            self._trial += 1
        self.world.reset()
        out = CaptureOutput(rgb=[], K=np.eye(3), T_world_camera=np.zeros((0, 4, 4)), depth_m=[])
        folder = self.work_dir / f"trial_{self._trial:03d}" / "capture"

        def on_image(index: int, total: int, image, T_world_camera) -> None:
            out.rgb.append(image.rgb)
            out.depth_m.append(image.depth_m)
            out.K = image.K
            budget.progress((index + 1) / max(total, 1), f"image {index + 1}/{total}")

        result = run_capture(self.arm, SimCamera(self.world, with_depth=True),
                             CaptureRequest(look_at_m=np.asarray(object_position_m, float), output_dir=str(folder),
                                            num_images=config.num_images),
                             on_image=on_image, should_stop=self._paced(budget), hand=self.hand)
        if not result.success:
            raise StageError(result.status, result.reason)
        out.T_world_camera, out.dataset_dir, out.num_planned = result.T_world_camera, str(result.dataset_dir), result.num_planned
        return out

    def perceive(self, capture: CaptureOutput, object_position_m: np.ndarray, config: GraspTaskConfig,
                 budget: StageBudget) -> PerceptionOutput:
        from getagrip_ros.perception.extract import extract_object

        folder = Path(capture.dataset_dir).parent / "object"
        nerf_config = ""
        if config.perception == "nerf":
            from getagrip_ros.perception.nerf.config import nerf_profile
            from getagrip_ros.perception.nerf.train import train_nerf

            overrides = {"device": self.config.device, "seed": config.seed}
            if self.config.nerf_iterations:
                overrides["num_iterations"] = self.config.nerf_iterations
            trained = train_nerf(capture.dataset_dir, folder.parent / "nerf", nerf_profile(self.config.nerf_profile, **overrides),
                                 lambda p: budget.progress(0.9 * p.iteration / p.num_iterations, f"nerfacto {p.iteration}"),
                                 should_stop=budget.should_stop)
            nerf_config = str(trained.config_path)
        rep = extract_object(config.perception, folder, nerf_config, capture.dataset_dir, device=self.config.device,
                             progress=lambda stage, f: budget.progress(0.9 + 0.1 * f if nerf_config else f, stage))
        return PerceptionOutput(rep.points_world_m, rep.bps.distances_m, rep.bps.origin_world_m, rep.centroid_world_m,
                                str(rep.mesh_path or ""))

    def plan_grasps(self, obj: PerceptionOutput, config: GraspTaskConfig, budget: StageBudget) -> GraspPlanOutput:
        request = PlanRequest(points_m=obj.points_world_m, num_grasps=config.num_grasps, sampler=config.sampler,
                              evaluator=config.evaluator, seed=config.seed, timeout_s=max(budget.remaining_s(), 1e-3))
        result = self.grasp_planner.plan(
            request, lambda stage, fraction, best: budget.progress(fraction, stage), budget.cancelled)
        if not result.success:
            raise StageError(result.status, result.reason)
        p = result.planned
        labels = np.stack([p.y_pgs.numpy(), p.y_coll.numpy(), p.y_pick.numpy()], axis=1)
        return GraspPlanOutput(p.grasps, labels, result.reason)

    def plan_motion(self, obj: PerceptionOutput, plan: GraspPlanOutput, config: GraspTaskConfig,
                    budget: StageBudget) -> MotionOutput:
        objects = (load_object_mesh(obj.mesh_path),) if obj.mesh_path else ()
        self._planning_world = PlanningWorld((table_box(),), objects)
        planner = MotionPlanner(replace(self.config.motion, stages=self.config.stages))
        arm, hand = self.arm.state().positions_rad, self.hand.state().positions_rad
        safety = SafetyMonitor(self.config.safety)  # only plans the executor will accept
        planned = planner.plan_grasp_motion(arm, hand, self._planning_world, plan.grasps, seed=config.seed,
                                            timeout_s=max(budget.remaining_s(), 1e-3),
                                            check=lambda stages: safety.check_stages(stages, arm, hand, self._planning_world))
        rejected = [f"{a.grasp_index}: {a.status.name}: {a.reason}" for a in planned.rejected]
        if not planned.success:
            raise StageError(planned.status, planned.reason)
        return MotionOutput(int(planned.grasp_index), planned.stages, rejected)

    def execute(self, motion: MotionOutput, config: GraspTaskConfig, budget: StageBudget, trace: TraceSink) -> ExecutionResult:
        from getagrip_ros.sim.grasp_trial import object_lift_check

        world = self.world
        links = set(self.hand_link_names())
        every = max(1, round(self.config.trace_every_ms / 10))  # the executor polls every 10 ms of simulated time
        ticks = [0]
        paced = self._paced(budget)

        def record() -> None:
            state = world.joint_state()
            trace.joint_state(state.joint_names, state.positions_rad, state.velocities_rad_s)
            touching = world.object_contacts()
            trace.object_state(world.object_pose(), {k: v for k, v in touching.items() if k in links}, "world" in touching)

        def should_stop() -> bool:
            ticks[0] += 1
            if ticks[0] % every == 0:
                record()
            return paced()

        phase = [""]

        def progress(stage: str, fraction: float) -> None:  # fraction: of the whole execution
            if stage != phase[0]:
                phase[0] = stage
                trace.phase(stage)
            budget.progress(fraction, stage)

        record()
        lift_check = object_lift_check(world, min_rise_m=0.9 * self.config.stages.lift_m)
        executor = GraspExecutor(self.arm, self.hand, SafetyMonitor(self.config.safety), self.config.execution)
        result = executor.execute(motion.stages, self._planning_world, should_stop, progress, lift_check)
        record()
        return result

    def close(self) -> None:
        self.world.close()
