"""Grasp-planning methods judged in simulation with the paper's protocol.

For each object: observe it (a point cloud in the world frame, as the robot would), plan with each method
(sampler x evaluator), keep the top ``grasps_per_object`` grasps and execute each ``num_perturbations``
times with the label noise in the floating-hand world (:mod:`getagrip_ros.data.labels`). A grasp's success
is its mean y_PGS over those executions; a plan that returns fewer grasps counts the missing ones as
failures (the paper: no grasp returned = a failed trial). This is how the data engine shows whether an
evaluator helps.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from getagrip_ros.data.generate import object_seed
from getagrip_ros.data.labels import LabelConfig, label_grasps
from getagrip_ros.objects.mesh_object import PreparedObject
from getagrip_ros.planning.planner import GraspPlanner, PlanRequest
from getagrip_ros.sim.scene import SceneConfig
from getagrip_ros.sim.world import ObjectPlacement, SimWorld

@dataclass(frozen=True)
class Observation:
    """What a method plans from: the observed object points and, optionally, a mesh of them (world frame)."""

    points_m: np.ndarray
    """(N, 3) observed object points."""
    mesh_path: str | None = None
    """A surface mesh file of the observed object (e.g. the depth backend's fused mesh), for methods that use one."""


CloudFn = Callable[[SimWorld], "np.ndarray | Observation"]
"""The floating-hand world holding the object -> (N, 3) observed object points, world frame (e.g.
:func:`getagrip_ros.data.generate.observe_object`), or an Observation with a mesh as well."""


@dataclass(frozen=True)
class Method:
    sampler: str
    evaluator: str
    with_mesh: bool = False
    """Plan with the observation's mesh besides its points (the graspd sampler's SDF comes from it)."""

    @property
    def name(self) -> str:
        return f"{self.sampler}{'@mesh' * self.with_mesh} + {self.evaluator}"


@dataclass(frozen=True)
class EvaluationConfig:
    grasps_per_object: int = 5
    label: LabelConfig = field(default_factory=LabelConfig)
    """Executions per grasp (num_perturbations: 5) and the pick criterion."""
    refinement_iterations: int = 50
    placement: ObjectPlacement = field(default_factory=ObjectPlacement)
    seed: int = 0
    """Run seed; each object plans and executes with its own seed from it (``object_seed``), so an unranked
    method's grasps are independent draws per object rather than the same draw everywhere."""


@dataclass(frozen=True)
class ObjectResult:
    object_name: str
    method: str
    grasp_success: tuple[float, ...]
    """Mean y_PGS over the executions of each returned grasp (best first)."""
    success_rate: float
    """Mean over grasps_per_object grasps, missing grasps counted as 0."""
    plan_status: str
    plan_reason: str
    predicted_y_pgs: tuple[float, ...]


def observe_by_depth_fusion(world: SimWorld, work_dir: Path, seed: int = 0) -> Observation:
    """The object as the stack's depth backend sees it: the data engine's noisy views along the capture spirals
    (:func:`~getagrip_ros.data.generate.observe_views`), fused, cleaned and meshed
    (:func:`~getagrip_ros.perception.extract.extract_from_depth`); the mesh is written under work_dir."""
    from getagrip_ros.data.generate import CloudConfig, observe_views
    from getagrip_ros.perception.extract import extract_from_depth

    rng = np.random.default_rng(object_seed(world.object.name, seed))
    frames, centre = observe_views(world, CloudConfig(), rng)
    rep = extract_from_depth([f.depth_m for f in frames], [f.K for f in frames], [f.T_world_camera for f in frames],
                             centre, Path(work_dir) / world.object.name.replace("/", "_"))
    return Observation(rep.points_world_m, str(rep.mesh_path))


def evaluate_methods(objects: Sequence[PreparedObject], planner: GraspPlanner, methods: Sequence[Method],
                     cloud_fn: CloudFn, config: EvaluationConfig = EvaluationConfig(),
                     progress: Callable[[str, str], None] | None = None) -> list[ObjectResult]:
    """Every method on every object; progress(object name, method name) before each plan."""
    results = []
    for obj in objects:
        with SimWorld(SceneConfig(robot="floating_hand"), obj, config.placement) as world:
            seen = cloud_fn(world)
            seen = seen if isinstance(seen, Observation) else Observation(seen)
            for method in methods:
                if progress is not None:
                    progress(obj.name, method.name)
                results.append(_evaluate(world, obj.name, seen, planner, method, config))
    return results


def _evaluate(world: SimWorld, name: str, seen: Observation, planner: GraspPlanner, method: Method,
              config: EvaluationConfig) -> ObjectResult:
    seed = object_seed(name, config.seed)
    if method.with_mesh and seen.mesh_path is None:
        raise ValueError(f"{method.name} plans with a mesh; the observation of {name} has none")
    request = PlanRequest(points_m=seen.points_m, mesh_path=seen.mesh_path if method.with_mesh else None,
                          frame_id="world", num_grasps=config.grasps_per_object,
                          sampler=method.sampler, evaluator=method.evaluator,
                          refinement_iterations=config.refinement_iterations, seed=seed)
    plan = planner.plan(request)
    if not plan.success:
        return ObjectResult(name, method.name, (), 0.0, plan.status.name, plan.reason, ())
    grasps = plan.planned.grasps
    labels = label_grasps(world, grasps, planner.hand, config.label, torch.Generator().manual_seed(seed))
    success = tuple(label.y_pgs for label in labels)
    rate = float(sum(success)) / config.grasps_per_object
    return ObjectResult(name, method.name, success, rate, plan.status.name, plan.reason,
                        tuple(float(v) for v in plan.planned.y_pgs))


def summarize(results: Sequence[ObjectResult]) -> dict[str, dict[str, float]]:
    """{method: {"success_rate": mean over objects, "objects": count, "plans_failed": count}}."""
    summary: dict[str, dict[str, float]] = {}
    for method in dict.fromkeys(r.method for r in results):
        mine = [r for r in results if r.method == method]
        summary[method] = {"success_rate": float(np.mean([r.success_rate for r in mine])), "objects": len(mine),
                           "plans_failed": sum(r.plan_status != "SUCCEEDED" for r in mine)}
    return summary


def paired_gains(results: Sequence[ObjectResult]) -> dict[str, dict[str, float]]:
    """{"sampler + evaluator": {"gain", "standard_error", "objects"}}: success with the evaluator minus success
    without it (``sampler + none``), per object, on the objects both methods were judged on (gain in [-1, 1])."""
    rate = {(r.object_name, r.method): r.success_rate for r in results}
    gains = {}
    for method in dict.fromkeys(r.method for r in results):
        sampler, evaluator = method.split(" + ")
        if evaluator == "none":
            continue
        diffs = [value - rate[(name, f"{sampler} + none")] for (name, m), value in rate.items()
                 if m == method and (name, f"{sampler} + none") in rate]
        if diffs:
            se = float(np.std(diffs, ddof=1) / math.sqrt(len(diffs))) if len(diffs) > 1 else math.nan
            gains[method] = {"gain": float(np.mean(diffs)), "standard_error": se, "objects": len(diffs)}
    return gains


def result_rows(results: Sequence[ObjectResult]) -> list[dict]:
    """JSON-friendly rows (NaN predictions become None)."""
    rows = []
    for r in results:
        row = dataclasses.asdict(r)
        row["predicted_y_pgs"] = [None if math.isnan(v) else v for v in r.predicted_y_pgs]
        rows.append(row)
    return rows
