"""The simulation evaluator: every grasp tried in MuJoCo on a model of the object the planner was given.

Instead of predicting the labels with a network, it measures them the way the data engine labels its grasps
(:func:`getagrip_ros.data.labels.label_grasps`: the floating hand placed at the perturbed pre-grasp, each
fingertip closed 5 cm along d_i, a 20 cm lift, the paper's pick criterion, and by default also the executor's: the
object rises 18 of the 20 cm), on a rigid body built from what the planner knows of the object:

- its surface mesh when the goal gives one (perception's fused mesh), else a mesh of the cloud's signed distance
  field (the graspd sampler's, by marching cubes);
- made watertight, with approximate convex parts (:func:`~getagrip_ros.objects.mesh_object.approximate_convex_parts`,
  about a second) for collisions;
- an assumed uniform density and friction (the simulated world's 500 kg/m^3 and 0.9: a real object's are unknown).

Its [y_pick, y_coll, y_PGS] are the means over ``num_trials`` executions with the label noise. On 17 validation
objects (perceived by the stack's depth fusion, 32 graspd grasps each), the top 5 by 5 simulated executions lifted
46% of the time against 33% by the graspd physics score (the best 5: 52%; ``docs/graspd/sim_ranking_validation.json``). A trial takes ~0.1 s on
one core, so it scores at most ``max_grasps`` grasps, in the sampler's order, and the planner does not refine
with it. The trials run on ``threads`` replicas of the world at once (on 2 cores 1.3-1.9x faster for 24 graspd
grasps of the red mug and the dragon, with the same scores).

Pure Python (no rclpy). Frames: the planner's object frame (z up, table top at z = 0), metres, radians.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import trimesh

from getagrip_ros.data.labels import GraspLabel, LabelConfig, label_grasps
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import PreparedObject, approximate_convex_parts, make_watertight
from getagrip_ros.planning.evaluators import ScoreFn
from getagrip_ros.planning.object_input import PlanningObject
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.sim.scene import SceneConfig
from getagrip_ros.sim.world import ObjectPlacement, SimWorld
from getagrip_ros.status import StageError, StatusCode

@dataclass(frozen=True)
class SimulationEvaluatorConfig:
    """Settings of the simulation evaluator (units: metres, kg/m^3; counts are counts)."""

    num_trials: int = 5
    """Perturbed executions per grasp (the labels' 5). On the validation objects the top 5 lifted 41% with 2, 46%
    with 5; 32 grasps x 5 trials take ~18 s on one core."""
    max_grasps: int = 32
    """Grasps scored per plan, the sampler's first (graspd: all 32, best physics score first); the others are
    dropped."""
    batch_size: int = 4
    """Grasps simulated between the planner's cancel and deadline checks."""
    cascade_grasps: int = 10
    """In a cascade evaluator (``geometry>sim``): the first evaluator's best grasps, after its refinement, that are
    executed in simulation and re-ranked (the diagnostic's cascade: the geometry evaluator's top 10)."""
    density_kg_m3: float = 500.0
    """Assumed uniform density of the object (the simulated world's, after the paper)."""
    friction: float = 0.9
    """Assumed sliding friction of the object and the hand (the simulated world's)."""
    voxel_m: float = 0.003
    """Voxel size of the convex-part approximation."""
    max_parts: int = 48
    """Most convex parts of the object model."""
    sdf_resolution: int = 96
    """Cloud-only objects: grid points along the longest side of the SDF whose zero level becomes the mesh."""
    seed: int = 0
    """Seed of the label noise (the same grasps get the same scores)."""
    threads: int = 0
    """Trials simulated at once, each on its own replica of the world (the scores do not depend on it); 0: one per
    CPU core."""
    min_rise_fraction: float = 0.9
    """A simulated pick counts only when the object rose at least this fraction of the 20 cm lift: the whole-task
    executor's check (``lift_check_fraction``), stricter than the labels' (up to 10 cm slip in the hand). On 17
    validation objects the top grasp lifted under the executor's check 50.6% of the time with 0.9, 44.7% with 0
    (the labels' criterion; top 5: 41.6% both; ``docs/graspd/sim_evaluator_tolerance.json``)."""


def object_mesh(obj: PlanningObject, sdf_resolution: int = 96) -> trimesh.Trimesh:
    """The object's surface in its frame: the goal's mesh, or the zero level of the cloud's SDF (marching cubes).

    Raises:
        StageError(INVALID_GOAL): neither a mesh nor points (a BPS-only goal), or no surface in the cloud's SDF.
    """
    if obj.mesh is not None:
        return obj.mesh.copy()
    if obj.points_m is None:
        raise StageError(StatusCode.INVALID_GOAL, "the simulation evaluator needs the object's points or mesh "
                         "(a point cloud, a mesh or a NeRF goal, not a BPS alone)")
    from skimage.measure import marching_cubes

    from getagrip_ros.planning.graspd_sampler import GraspdSamplerConfig, object_sdf
    from getagrip_ros.synthesis.object_sdf import SDFConfig

    try:
        sdf, _ = object_sdf(obj.points_m, obj.frame_id, GraspdSamplerConfig(sdf=SDFConfig(resolution=sdf_resolution)))
        values = sdf.values_m.numpy()
        vertices, faces, _, _ = marching_cubes(values, level=0.0, spacing=(sdf.spacing_m,) * 3)
    except (ValueError, RuntimeError) as err:
        raise StageError(StatusCode.INVALID_GOAL, f"cannot make a surface of the point cloud: {err}") from err
    return trimesh.Trimesh(vertices + sdf.origin_m.numpy(), faces[:, ::-1])  # outward normals


def simulation_object(mesh: trimesh.Trimesh, config: SimulationEvaluatorConfig,
                      name: str = "planned_object") -> tuple[PreparedObject, np.ndarray]:
    """A simulation body of the object's surface (its frame, resting on z = 0) and T_object_frame, the pose of the
    surface's frame in the body's object frame (lowest point at z = 0, bounding-box centre at x = y = 0).

    Raises:
        ObjectRejected: a surface that cannot be made watertight, or with no volume.
    """
    solid = make_watertight(mesh.copy(), name)
    lo, hi = solid.bounds
    T_object_frame = np.eye(4)
    T_object_frame[:3, 3] = [-(lo[0] + hi[0]) / 2, -(lo[1] + hi[1]) / 2, -lo[2]]
    solid.apply_transform(T_object_frame)
    parts = approximate_convex_parts(solid, name, config.voxel_m, config.max_parts, seed=config.seed)
    return PreparedObject(name, solid, parts, ("planned",), T_object_frame), T_object_frame


class SimulationGraspEvaluator:
    """Scores grasps by simulating them on the object (see the module docstring)."""

    refines = False
    """The planner does not refine with it (a move would cost a simulation)."""

    def __init__(self, config: SimulationEvaluatorConfig = SimulationEvaluatorConfig()) -> None:
        if min(config.num_trials, config.max_grasps, config.batch_size, config.cascade_grasps) < 1 or config.threads < 0:
            raise ValueError(f"simulation evaluator: num_trials, max_grasps, batch_size and cascade_grasps must be >= 1 "
                             f"and threads >= 0, got {config.num_trials}, {config.max_grasps}, {config.batch_size}, "
                             f"{config.cascade_grasps}, {config.threads}")
        if not (config.density_kg_m3 > 0 and config.friction > 0 and config.voxel_m > 0 and config.max_parts >= 1):
            raise ValueError("simulation evaluator: density_kg_m3, friction and voxel_m must be > 0 and max_parts >= 1")
        self.hand, self.config = AllegroHand(), config  # on the CPU, where MuJoCo runs
        self.max_grasps, self.batch_size = config.max_grasps, config.batch_size

    def prepare(self, obj: PlanningObject) -> ScoreFn:
        """The ScoreFn of this object: grasps (its frame) -> (B, 3) float32 [y_pick, y_coll, y_PGS].

        Raises:
            StageError(INVALID_GOAL): no surface can be made of the object (see :func:`object_mesh`).
        """
        label = self.labeller(obj)

        def evaluate(grasps: Grasp) -> torch.Tensor:
            return torch.tensor([[done.y_pick, done.y_coll, done.y_pgs] for done in label(grasps)], dtype=torch.float32)

        return evaluate

    def labeller(self, obj: PlanningObject) -> Callable[[Grasp], list[GraspLabel]]:
        """grasps (the object's frame) -> their simulated labels, every trial included, on the model of `obj`.

        Raises:
            StageError(INVALID_GOAL): no surface can be made of the object (see :func:`object_mesh`).
        """
        cfg = self.config
        try:
            body, T_object_frame = simulation_object(object_mesh(obj, cfg.sdf_resolution), cfg)
        except ObjectRejected as err:
            raise StageError(StatusCode.INVALID_GOAL, f"the simulation evaluator cannot model the object: {err}") from err
        placement = ObjectPlacement(density_kg_m3=cfg.density_kg_m3)
        T_world_object = np.eye(4)
        T_world_object[:2, 3] = placement.xy_m
        T_world_frame = torch.as_tensor(T_world_object @ T_object_frame)
        world = SimWorld(SceneConfig(robot="floating_hand", jacobian="sparse", friction=cfg.friction, table_texture=False),
                         body, placement)
        threads = cfg.threads or os.cpu_count() or 1
        labels = LabelConfig(num_perturbations=cfg.num_trials, min_rise_fraction=cfg.min_rise_fraction)
        generator = torch.Generator().manual_seed(cfg.seed)

        def label(grasps: Grasp) -> list[GraspLabel]:
            in_world = grasps.to("cpu", torch.float64).transformed(T_world_frame, "world")
            return label_grasps(world, in_world, self.hand, labels, generator, threads=threads)

        return label
