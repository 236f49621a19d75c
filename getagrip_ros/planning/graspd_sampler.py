"""The graspd sampler: grasps synthesised by gradient descent through a differentiable contact model (Grasp'D).

Pure Python/torch (no rclpy). From the planning object's mesh when the goal gives one, else its point cloud (z up,
table top at z = 0 of its frame): outward normals (:func:`cloud_normals`), a grid SDF (:func:`object_sdf`), then
:func:`getagrip_ros.synthesis.optimizer.synthesize_grasps` on the Allegro hand model with the table at z = 0.
The grasps come back in the object's frame, best physics score first (lower is better), failed ones removed.

Unlike the other samplers it is slow (~48 s for 32 grasps and 500 steps on 2 cores) and anytime: the
deadline returns the grasps of the last finished chunk of steps, marked partial.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.planning.object_input import PlanningObject
from getagrip_ros.status import StageError, StatusCode
from getagrip_ros.synthesis.hand_model import AllegroModelConfig, HandModel, allegro_hand_model
from getagrip_ros.synthesis.object_sdf import ObjectSDF, SDFConfig
from getagrip_ros.synthesis.optimizer import SynthesisConfig, SynthesisOptions, sample_starts, synthesize_grasps

StepFn = Callable[[float], None]
"""Called with the fraction of synthesis steps done (after every chunk); raises to cancel."""


@dataclass(frozen=True)
class GraspdSamplerConfig:
    """Settings of the graspd sampler (units: metres, seconds; counts are counts)."""

    num_grasps: int = 32
    """Grasps synthesised per plan. The planner's num_samples does not apply to this sampler: a plan synthesises
    max(num_grasps, the request's num_grasps)."""
    synthesis: SynthesisConfig = SynthesisConfig()
    """The optimiser (steps, chunk of steps between progress reports and cancel/deadline checks, losses)."""
    sdf: SDFConfig = SDFConfig()
    """The object's signed distance grid built from the cloud (resolution in grid points along its longest side)."""
    hand: AllegroModelConfig = AllegroModelConfig(contact_links="distal")
    """The hand model (built once per process and config by :func:`graspd_hand_model`, ~1-3 s)."""
    normal_neighbours: int = 20
    """Cloud normals: nearest points (a count) of each point's plane fit and of the orientation graph."""
    orient_max_points: int = 2000
    """Cloud normals: the consistent tangent-plane orientation runs on at most this many points (a seeded random
    subset; its time grows much faster than the count: ~0.1 s for 2k points, 0.3-0.5 s for 5k, 1-2 s for 10k and
    5-12 s for 20k on 2 cores); every other point takes the side of its nearest subset point."""
    min_thickness_m: float = 0.002
    """Clouds thinner than this along their thinnest principal axis (flat or collinear: they enclose no volume)
    are refused."""
    start_draws: int = 3
    """With the planner's cable filter: up to this many rounds of 5 random starts per grasp are drawn to find
    starting wrist orientations that pass it (about 20% do on a box or a can; a start costs ~12 ms on 2 cores);
    where too few pass, the others are taken as drawn (the filter may then drop their grasps)."""
    start_cable_margin_deg: float = 15.0
    """With the planner's cable filter: starts must pass it with both its angles tightened by this much (degrees;
    the optimisation turns the wrist by up to ~10-15 deg, so grasps that start at the filter's edge end outside)."""
    sdf_from_mesh: bool = True
    """When the goal gives the object's mesh: build the SDF from it (repaired first when it is not watertight, as a
    fused-depth mesh open at the table is), not from the cloud; if the mesh cannot be made solid, from the cloud."""
    deadline_reserve_fraction: float = 0.2
    """Share (0-1) of the plan's time limit kept for ranking and closing targets after synthesis: synthesis
    stops at plan start + limit * (1 - this) and returns the grasps found so far (partial)."""


@dataclass
class GraspdSamples:
    """Synthesised grasps in the object's frame, best physics score first."""

    grasps: Grasp
    """(K,) grasps, failed and non-finite ones removed."""
    physics_score: torch.Tensor
    """(K,) float64 synthesis score of each grasp (``SynthesisResult.physics_score``, unitless), lower is better,
    ascending."""
    partial: bool
    """True when the deadline or should_stop ended the optimisation before its last step."""
    num_failed: int
    """Grasps removed: stopped by a non-finite loss or gradient, or with non-finite values."""
    note: str
    """Appended to the plan's reason ("" when there is nothing to say), e.g.
    " (partial: the deadline stopped synthesis at step 150 of 300)"."""
    steps_done: int = 0
    num_steps: int = 0
    elapsed_s: float = 0.0


def cloud_thickness_m(points_m: np.ndarray) -> float:
    """Extent (m) of a cloud along its thinnest principal axis (0 for a flat or collinear cloud)."""
    centred = np.asarray(points_m, dtype=np.float64) - np.mean(points_m, axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    along = centred @ vt[-1]
    return float(along.max() - along.min())


def cloud_normals(points_m: np.ndarray, neighbours: int = 20, orient_max_points: int = 2000,
                  seed: int = 0) -> tuple[np.ndarray, str]:
    """Unit outward normals (N, 3) of an object cloud (N, 3) and how they were oriented.

    open3d ``estimate_normals`` (KNN plane fit over `neighbours` points), then
    ``orient_normals_consistent_tangent_plane`` on at most `orient_max_points` of the points (a random subset
    drawn with `seed`: the orientation's time grows much faster than linearly, ~12 s for 20k points on 2 cores);
    the others take the side of their nearest subset point. Then every normal is flipped if most point toward
    the cloud's centroid. Returns ``"tangent_plane"`` as the method then.

    Fallback: where the tangent-plane orientation fails (qhull raises on degenerate input, e.g. a planar or
    collinear patch), each normal is oriented away from the centroid (right for convex objects, wrong in
    concavities), and the method is ``"centroid"``.
    """
    import open3d as o3d
    from scipy.spatial import cKDTree

    points = np.asarray(points_m, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3 or len(points) < 3:
        raise ValueError(f"normals need an (N, 3) cloud of at least 3 points, got shape {points.shape}")
    k = max(3, min(int(neighbours), len(points) - 1))
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    cloud.estimate_normals(o3d.geometry.KDTreeSearchParamKNN(k))
    normals = np.asarray(cloud.normals, dtype=np.float64).copy()
    outward = points - points.mean(axis=0)
    method = "tangent_plane"
    try:
        if len(points) > orient_max_points:
            subset = np.sort(np.random.default_rng(seed).choice(len(points), size=orient_max_points, replace=False))
        else:
            subset = np.arange(len(points))
        part = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points[subset]))
        part.normals = o3d.utility.Vector3dVector(normals[subset])
        part.orient_normals_consistent_tangent_plane(min(k, len(subset) - 1))
        oriented = np.asarray(part.normals, dtype=np.float64)
        _, nearest = cKDTree(points[subset]).query(points, k=1)
        side = np.sign(np.einsum("ij,ij->i", normals, oriented[nearest]))
        normals = normals * np.where(side == 0, 1.0, side)[:, None]
        if (np.einsum("ij,ij->i", normals, outward) < 0).sum() > len(points) / 2:
            normals = -normals
    except RuntimeError:  # qhull: "initial Delaunay input sites are cocircular or cospherical", ...
        side = np.sign(np.einsum("ij,ij->i", normals, outward))
        normals = normals * np.where(side == 0, 1.0, side)[:, None]
        method = "centroid"
    return normals, method


def object_sdf(points_m: np.ndarray, frame_id: str, config: "GraspdSamplerConfig") -> tuple[ObjectSDF, str]:
    """The SDF of an object cloud (N, 3) (m, z up, table top at z = 0 of `frame_id`) and the normals' method.

    Raises:
        ValueError: a cloud that encloses no volume (thinner than ``min_thickness_m``) or that the SDF build
            refuses (too few points, NaN, degenerate extents), with the reason.
    """
    points = np.asarray(points_m, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"the point cloud must have shape (N, 3), got {points.shape}")
    if len(points) < 16:
        raise ValueError(f"the point cloud has {len(points)} points, at least 16 needed")
    if not np.isfinite(points).all():
        raise ValueError("the point cloud has NaN or inf points")
    thickness = cloud_thickness_m(points)
    if thickness < config.min_thickness_m:
        raise ValueError(f"the point cloud is flat or collinear ({thickness * 1000:.2f} mm thick along its thinnest "
                         f"axis, at least {config.min_thickness_m * 1000:.1f} mm needed): it encloses no volume")
    normals, method = cloud_normals(points, config.normal_neighbours, config.orient_max_points, config.sdf.seed)
    return ObjectSDF.from_point_cloud(points, normals, config.sdf, frame_id=frame_id), method


def planning_object_sdf(obj: PlanningObject, config: "GraspdSamplerConfig") -> tuple[ObjectSDF, str, str]:
    """The SDF of a planning object (its frame): from its mesh when it has one and ``config.sdf_from_mesh``, else
    from its cloud (:func:`object_sdf`). Returns the SDF, its source ("mesh" or the cloud normals' method) and a
    note ("" or why the mesh was not used).

    Raises:
        StageError(INVALID_GOAL): no cloud (a BPS-only goal), or one the SDF cannot be built from.
    """
    if obj.points_m is None:
        raise StageError(StatusCode.INVALID_GOAL, "this sampler needs a point cloud, a mesh or a NeRF (it builds the "
                         "object's SDF from them); with a BPS only, use the diffusion or fixed sampler")
    note = ""
    if obj.mesh is not None and config.sdf_from_mesh:
        try:
            return ObjectSDF.from_mesh(obj.mesh, config.sdf, obj.frame_id, "object"), "mesh", note
        except ValueError as err:  # e.g. a fused mesh the repair cannot close
            note = f"; SDF from the cloud: the mesh's failed ({err})"
    try:
        sdf, method = object_sdf(obj.points_m, obj.frame_id, config)
    except ValueError as err:
        raise StageError(StatusCode.INVALID_GOAL, f"cannot build the object's SDF: {err}") from err
    return sdf, method, note


@functools.lru_cache(maxsize=4)
def graspd_hand_model(config: AllegroModelConfig) -> HandModel:
    """The Allegro hand model of `config`, built once per process (~1-2 s; read-only afterwards, shared)."""
    return allegro_hand_model(config)


class GraspdSampler:
    """Grasp'D synthesis on the object's cloud; build once (the hand model takes ~1-2 s), call per plan."""

    def __init__(self, config: GraspdSamplerConfig = GraspdSamplerConfig(),
                 rotation_ok: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 hand_model: HandModel | None = None, device: str | torch.device = "cpu") -> None:
        """rotation_ok: (B, 3, 3) palm orientations -> (B,) bool to start from (the planner's cable filter).
        device: where the optimisation steps run (the planner's ``device``).

        Raises:
            ValueError: settings out of range (named).
        """
        synthesis = config.synthesis
        if config.num_grasps < 1 or synthesis.num_steps < 1 or synthesis.chunk_steps < 1:
            raise ValueError(f"graspd: num_grasps, synthesis.num_steps and synthesis.chunk_steps must be >= 1, got "
                             f"{config.num_grasps}, {synthesis.num_steps}, {synthesis.chunk_steps}")
        if not 0.0 <= config.deadline_reserve_fraction < 1.0:
            raise ValueError(f"graspd: deadline_reserve_fraction must be in [0, 1), got {config.deadline_reserve_fraction}")
        self.config, self.rotation_ok, self.device = config, rotation_ok, device
        self.hand_model = hand_model or graspd_hand_model(config.hand)

    def _starts(self, sdf: ObjectSDF, num: int, generator: torch.Generator, step: StepFn) -> Optional[torch.Tensor]:
        """(num, 4, 4) wrist starts whose orientations pass `rotation_ok` where it can (None: no filter); `step(0)`
        after each round of draws (a cancel check)."""
        if self.rotation_ok is None:
            return None
        synthesis = self.config.synthesis
        T_table = torch.eye(4, dtype=torch.float64)
        passed, others = [], []
        for _ in range(max(1, self.config.start_draws)):
            T = sample_starts(self.hand_model, sdf, 5 * num, synthesis.approach_distance_m, synthesis.offset_start_m,
                              T_table, generator)
            ok = self.rotation_ok(T[:, :3, :3]).cpu()
            passed.append(T[ok])
            others.append(T[~ok])
            step(0.0)
            if sum(len(t) for t in passed) >= num:
                break
        return torch.cat(passed + others)[:num]

    def synthesize(self, obj: PlanningObject, num: int, generator: torch.Generator, step: StepFn,
                   should_stop: Callable[[], bool] | None = None,
                   deadline_monotonic_s: float | None = None) -> GraspdSamples:
        """Synthesise `num` grasps of `obj` (its frame, table top at z = 0); the seed derives from `generator`.

        `step(fraction)` is called before the SDF build and after each round of start draws (0), then after every
        chunk of steps, and may raise (a cancel); `should_stop()` True or the deadline end the optimisation with the
        current grasps (partial).

        Raises:
            StageError(INVALID_GOAL): no point cloud (a BPS-only goal), or one the SDF cannot be built from.
            StageError(NO_RESULT): every grasp failed.
        """
        if obj.points_m is None:
            raise StageError(StatusCode.INVALID_GOAL, "the graspd sampler needs a point cloud, a mesh or a NeRF (it "
                             "builds the object's SDF from them); with a BPS only, use the diffusion or fixed sampler")
        started = time.monotonic()
        step(0.0)
        sdf, sdf_source, source_note = planning_object_sdf(obj, self.config)
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        starts = self._starts(sdf, num, generator, step)
        options = SynthesisOptions(num_grasps=num, seed=seed, T_object_table=np.eye(4), should_stop=should_stop,
                                   progress=step, deadline_monotonic_s=deadline_monotonic_s,
                                   initial_T_object_root=starts, device=self.device)
        result = synthesize_grasps(self.hand_model, sdf, self.config.synthesis, options)
        if result.grasp is None:
            raise StageError(StatusCode.INTERNAL_ERROR, "the synthesis returned no Allegro grasps")
        grasps: Grasp = result.grasp.to(dtype=torch.float64)
        score = result.physics_score().to(torch.float64)
        finite = torch.isfinite(grasps.to_vector()).all(1) & torch.isfinite(score)
        keep = ~result.failed & finite
        if not bool(keep.any()):
            reasons = [result.failure_reasons[b] for b in sorted(result.failure_reasons)]
            first = reasons[0] if reasons else "non-finite grasp values or physics score"
            raise StageError(StatusCode.NO_RESULT, f"all {len(keep)} synthesised grasps failed (first: {first})")
        index = torch.nonzero(keep).flatten()
        index = index[score[index].argsort(stable=True)]
        note = source_note
        if result.partial:
            why = "a stop request" if result.cancelled else "the deadline"
            note += f" (partial: {why} stopped synthesis at step {result.steps_done} of {result.num_steps})"
        num_failed = int((~keep).sum())
        stopped = int(result.failed.sum())
        if stopped:
            note += f"; {stopped} grasp{'s' * (stopped > 1)} stopped by a non-finite loss"
        if num_failed > stopped:
            note += f"; {num_failed - stopped} grasp{'s' * (num_failed - stopped > 1)} with non-finite values removed"
        if sdf_source == "mesh":
            note += "; SDF from the object's mesh"
        elif sdf_source != "tangent_plane":
            note += "; cloud normals oriented away from the centroid (the tangent-plane orientation failed)"
        return GraspdSamples(grasps[index], score[index], result.partial, num_failed, note, result.steps_done,
                             result.num_steps, time.monotonic() - started)


def synthesis_deadline_s(plan_start_monotonic_s: float, limit_s: float, config: GraspdSamplerConfig) -> float | None:
    """time.monotonic() at which synthesis stops: the plan's start + limit * (1 - deadline_reserve_fraction)
    (None for no limit)."""
    if not math.isfinite(limit_s):
        return None
    reserve = min(max(config.deadline_reserve_fraction, 0.0), 1.0)
    return plan_start_monotonic_s + limit_s * (1.0 - reserve)
