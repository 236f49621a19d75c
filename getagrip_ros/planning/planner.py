"""The grasp planner: object -> sample N -> cable filter -> evaluate -> top K -> refine -> sort -> closing targets.

Samplers: ``heuristic`` (geometric), ``fixed`` (a set of good grasps), ``diffusion`` (the BPS diffusion model) and
``graspd`` (gradient-descent synthesis through a differentiable contact model; slow, anytime: its deadline keeps a
share of the plan's time limit and returns the grasps found so far; without an evaluator its grasps keep their
physics-score order, with a learned one they are ranked by the sum of their ranks under both), ``human_demo`` (the request's human demonstration transferred to the hand: one grasp) and
``fixed_graspd`` (both sources pooled for a cascade evaluator: the fixed set ranked and refined by the cascade's
first evaluator, graspd's grasps in their physics-score order, and the simulation verifying both).

Pure Python/torch (no rclpy). The ROS node, the CLI, the demo and the benchmarks all call
:meth:`GraspPlanner.plan`, which never raises: bad input, missing models, cancellation and timeouts end
in a :class:`PlanResult` with a status and a reason.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from scipy.stats import rankdata

from getagrip_ros.grasp.closing import ClosingConfig, closing_targets
from getagrip_ros.grasp.filters import CableFilterConfig, cable_filter_mask, cable_filter_rotation_mask
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.perturb import PerturbationConfig
from getagrip_ros.human_demo.demonstration import HumanDemonstration
from getagrip_ros.human_demo.transfer import TransferResult
from getagrip_ros.models.bps_evaluator import Y_PGS
from getagrip_ros.models.checkpoints import CheckpointError, LoadedModel, load_checkpoint
from getagrip_ros.models.shipped import SHIPPED, resolve_model_file
from getagrip_ros.planning.evaluators import (BpsGraspEvaluator, GeometryGraspEvaluator, MeanGraspEvaluator, NerfGraspEvaluator,
                                              ScoreFn)
from getagrip_ros.planning.graspd_sampler import GraspdSampler, GraspdSamplerConfig, synthesis_deadline_s
from getagrip_ros.planning.heuristic_sampler import HeuristicSamplerConfig
from getagrip_ros.planning.human_demo_sampler import HumanDemoSamplerConfig, sample_human_demo
from getagrip_ros.planning.object_input import (PlanningObject, object_from_bps, object_from_mesh, object_from_nerf,
                                                object_from_points)
from getagrip_ros.planning.refinement import TrustRegionConfig, refine_grasps
from getagrip_ros.planning.samplers import (DiffusionSampler, DiffusionSamplerConfig, FixedSampler, HeuristicSampler,
                                            load_grasp_set, nerf_condition)
from getagrip_ros.planning.simulation_evaluator import SimulationEvaluatorConfig, SimulationGraspEvaluator
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.status import StageError, StageTimer, StatusCode

SAMPLERS = ("heuristic", "fixed", "diffusion", "graspd", "human_demo", "nerf_diffusion", "fixed_graspd")
"""Grasp samplers by name."""
POOLED_SAMPLERS = {"fixed_graspd": ("fixed", "graspd")}
"""Pooled samplers: the sampler whose grasps the cascade's first evaluator ranks and refines, and the synthesis whose
grasps keep their physics-score order (the geometry evaluator ranks graspd's grasps worse than that: README,
"The perceived object"); the cascade's simulation then verifies the first ``simulation.cascade_grasps`` of the one and
the first ``simulation.max_grasps`` of the other together. They need a cascade evaluator."""
POINT_SAMPLERS = ("heuristic", "graspd", "human_demo", "fixed_graspd")
"""Samplers that need the object's points (a BPS-only goal is refused)."""
DEMONSTRATION_SAMPLERS = ("human_demo",)
"""Samplers that need a human demonstration in the request."""
EVALUATORS = ("none", "bps", "nerf", "geometry", "bps+geometry", "sim", "geometry>sim")
"""Grasp evaluators by name; ``bps+geometry`` ranks by the mean of the two predictions; ``sim`` simulates each grasp
on the object (:mod:`getagrip_ros.planning.simulation_evaluator`); ``geometry>sim`` is a cascade (:data:`CASCADES`)."""
CASCADES = {"geometry>sim": "geometry"}
"""Cascade evaluators and the evaluator that ranks and refines first; the simulation evaluator then executes the best
``simulation.cascade_grasps`` of its grasps and puts them first, in the order of their simulated y_PGS (ties keep
the first evaluator's order). On the frozen ranking diagnostic (59 validation objects, candidates of every sampler)
the geometry evaluator's first grasp lifted 15.8% of the time, the cascade's first of the geometry's top 10 39.0%."""
POINT_EVALUATORS = ("geometry", "bps+geometry", "sim", "geometry>sim")
"""Evaluators that need the object's points (a BPS-only goal is refused)."""
BPS_SIZE = 4096
MAX_GRASPS = 10_000
MAX_BPS_DISTANCE_M = 2.0
"""Largest BPS value accepted: from the 0.3 m basis ball, nothing on the table is farther."""


@dataclass(frozen=True)
class ModelFiles:
    """Checkpoints and grasp sets: "shipped" = the package's own (getagrip_ros/models/weights), "" = not
    configured (that sampler/evaluator then answers NOT_IMPLEMENTED), otherwise a path."""

    bps_evaluator: str = SHIPPED
    """BPS evaluator checkpoint (ours or the public layout)."""
    nerf_evaluator: str = ""
    """NeRF evaluator checkpoint (none ships), or a public run's config.yaml (its checkpoint beside it, its finger grid)."""
    bps_sampler: str = SHIPPED
    """Diffusion sampler checkpoint."""
    fixed_grasps: str = SHIPPED
    """Fixed grasp set: our .npz or the public .npy grasp-config dict."""
    geometry_evaluator: str = SHIPPED
    """Hand-object geometry evaluator checkpoint."""
    nerf_sampler: str = ""
    """NeRF-conditioned diffusion sampler checkpoint (the public nerf_sampler_model; none ships)."""


@dataclass(frozen=True)
class GraspPlannerConfig:
    """Build-time settings of the planner (per-request options live in :class:`PlanRequest`)."""

    num_samples: int = 3200
    """Grasps sampled before filtering and ranking (raised to num_grasps when smaller)."""
    chunk_size: int = 256
    """Heuristic sampling: grasps per batch between progress reports and cancel checks."""
    evaluation_batch_size: int = 1024
    """Grasps scored per evaluator call while ranking the samples."""
    nerf_evaluator_batch_size: int = 16
    """Grasps gridded and scored at a time by the NeRF evaluator (memory: ~2.5 MB per grasp)."""
    min_points: int = 50
    """Fewest object points accepted."""
    mesh_surface_points: int = 5000
    """Points drawn on a mesh-only object's surface (as many as perception's cleaned cloud keeps)."""
    bps_max_points: int = 0
    """The BPS of a cloud is measured from at most this many of its points, a fixed random subset (0: all). The
    public code measures it from the first 3000 points of its cleaned NeRF cloud, which comes in random order: set
    3000 with the public checkpoints (see README "Public checkpoints")."""
    apply_cable_filter: bool = True
    cable_filter: CableFilterConfig = field(default_factory=CableFilterConfig)
    heuristic_sampler: HeuristicSamplerConfig = field(default_factory=HeuristicSamplerConfig)
    diffusion: DiffusionSamplerConfig = field(default_factory=DiffusionSamplerConfig)
    graspd: GraspdSamplerConfig = field(default_factory=GraspdSamplerConfig)
    """Grasp'D synthesis: it synthesises max(graspd.num_grasps, the request's num_grasps) grasps (num_samples does
    not apply) and stops at plan start + time limit * (1 - graspd.deadline_reserve_fraction)."""
    graspd_score_rank_weight: float = 1.0
    """graspd's grasps scored by a learned evaluator are ranked by their rank under its predicted y_PGS plus this
    times their rank under the graspd physics score, ties in physics-score order (0: the evaluator alone). On the
    true meshes the shipped geometry evaluator alone puts 24% in the top 5, the sum 48% (README "Ranking graspd's
    grasps with an evaluator")."""
    human_demo: HumanDemoSamplerConfig = field(default_factory=HumanDemoSamplerConfig)
    """The transfer of a human demonstration (its object SDF is built with the graspd settings)."""
    simulation: SimulationEvaluatorConfig = field(default_factory=SimulationEvaluatorConfig)
    """The ``sim`` evaluator: grasps executed in MuJoCo on a model of the object (it scores the sampler's first
    simulation.max_grasps grasps and does not refine)."""
    refinement: PerturbationConfig = field(default_factory=PerturbationConfig)
    """One refinement move (paper: wrist 5 mm, rotation 0.05 in so(3), joints 0.01 rad, std)."""
    trust_region: TrustRegionConfig = field(default_factory=TrustRegionConfig)
    """How far refinement may move a grasp from its sample."""
    models: ModelFiles = field(default_factory=ModelFiles)
    closing: ClosingConfig = field(default_factory=ClosingConfig)
    device: str = "cpu"
    """Where the learned models and graspd's optimisation steps run (cpu or cuda:N)."""
    max_plan_time_s: float = 600.0
    """Ceiling on one plan, whatever its timeout_s (0 there means this)."""
    max_refinement_iterations: int = 5000
    """Ceiling on a request's refinement_iterations (more is refused)."""
    object_region_min_m: tuple[float, float, float] = (-2.0, -2.0, -0.05)
    """Lowest x, y, z a point of the object may have (the table top is z = 0; a cloud under it is refused)."""
    object_region_max_m: tuple[float, float, float] = (2.0, 2.0, 1.5)
    """Highest x, y, z a point of the object may have."""
    object_extent_range_m: tuple[float, float] = (0.005, 1.0)
    """Smallest and largest extent (the longest side of its bounding box) a graspable object may have."""


@dataclass
class PlanRequest:
    """One planning request: exactly one of points_m / bps / nerf_config_path / mesh_path is set, or points_m
    and mesh_path together."""

    frame_id: str = "world"
    """Frame of the object data and of the returned grasps (z up, table top at z = 0)."""
    points_m: np.ndarray | None = None
    """(N, 3) object points."""
    bps: np.ndarray | None = None
    """(4096,) basis-point distances, metres, measured from the table below the object centroid."""
    bps_centroid_height_m: float = float("nan")
    """With a BPS: height of the object centroid above the table (origin of the models' object frame)."""
    nerf_config_path: str | None = None
    mesh_path: str | None = None
    """A triangle mesh file of the object's surface (.obj, .ply, .stl; metres, in frame_id). Alone: the object's
    points are sampled on it. With points_m: the points stay the object's (the evaluators and the other samplers
    use them) and the graspd sampler builds its SDF from the mesh."""
    human_demo: HumanDemonstration | None = None
    """A human grasp demonstration in frame_id: the human_demo sampler's input (required by it, refused by the others)."""
    num_grasps: int = 40
    sampler: str = "heuristic"
    evaluator: str = "none"
    refinement_iterations: int = 50
    seed: int = 0
    timeout_s: float = 0.0
    """0 = no limit but the planner's max_plan_time_s."""


@dataclass
class PlannedGrasps:
    """Ranked grasps (best first) with their predicted labels and hand joint targets."""

    grasps: Grasp
    y_pgs: torch.Tensor
    """(K,) predicted labels; NaN where no evaluator ran."""
    y_coll: torch.Tensor
    y_pick: torch.Tensor
    pregrasp_joints_rad: torch.Tensor
    """(K, 16) fingertips backed off along d_i (approach posture)."""
    closed_joints_rad: torch.Tensor
    """(K, 16) fingertips pushed along d_i (closing command)."""
    object_centroid_m: np.ndarray
    """(3,) the object centroid the plan used (origin of the models' frame Oy), in the grasps' frame."""
    transfer: TransferResult | None = None
    """The human_demo sampler's transfer (the grasp in contact and both contact heatmaps), before any refinement."""


@dataclass
class PlanResult:
    status: StatusCode
    reason: str
    planned: PlannedGrasps | None
    timings_s: dict[str, float]

    @property
    def success(self) -> bool:
        return self.status == StatusCode.SUCCEEDED


ProgressFn = Callable[[str, float, float], None]
"""progress(stage, overall fraction in [0, 1], best predicted y_PGS so far or NaN)."""

#: Overall progress at the start of each stage.
STAGE_PROGRESS = {"object": 0.0, "sampling": 0.05, "filtering": 0.35, "evaluation": 0.35, "refinement": 0.5,
                  "verification": 0.85, "closing_targets": 0.95}
"""Where each stage starts in a plan's progress; refinement runs up to verification when a cascade verifies, else
up to closing_targets."""


def check_object_points(points_m: np.ndarray, frame_id: str, config: GraspPlannerConfig, what: str,
                        min_points: int | None = None) -> None:
    """Raise StageError(INVALID_GOAL) unless `points_m` (N, 3) could be an object on the table of `frame_id`: at least
    `min_points` (default: the config's) finite points inside the object region, spanning a graspable extent.
    `what` names them ("point cloud", "mesh")."""
    pts = np.asarray(points_m)
    fewest = config.min_points if min_points is None else min_points
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise StageError(StatusCode.INVALID_GOAL, f"{what} must have shape (N, 3), got {pts.shape}")
    if len(pts) < fewest:
        raise StageError(StatusCode.INVALID_GOAL, f"{what} has {len(pts)} points, need at least {fewest}")
    bad = ~np.isfinite(pts).all(axis=1)
    if bad.any():
        raise StageError(StatusCode.INVALID_GOAL, f"{what} has {int(bad.sum())} points with NaN or inf")
    low, high = np.asarray(config.object_region_min_m), np.asarray(config.object_region_max_m)
    outside = ~((pts >= low) & (pts <= high)).all(axis=1)
    if outside.any():
        raise StageError(StatusCode.INVALID_GOAL, f"{int(outside.sum())} of {len(pts)} {what} points lie outside the "
                         f"region an object on the table can occupy ({low.tolist()} to {high.tolist()} m in "
                         f"{frame_id!r}; the table top is z = 0), e.g. {pts[outside][0].round(3).tolist()}")
    extent = float((pts.max(axis=0) - pts.min(axis=0)).max())
    smallest, largest = config.object_extent_range_m
    if not smallest <= extent <= largest:
        raise StageError(StatusCode.INVALID_GOAL, f"the {'points' if what == 'point cloud' else what} span "
                         f"{extent * 1000:.1f} mm; a graspable "
                         f"object spans {smallest * 1000:.0f}-{largest * 1000:.0f} mm (object_extent_range_m)")


def validate_request(request: PlanRequest, config: GraspPlannerConfig) -> None:
    """Raise StageError(INVALID_GOAL) naming what is wrong with the request (or what describes no real object)."""
    sources = [n for n, v in (("point cloud", request.points_m), ("BPS", request.bps),
                              ("NeRF", request.nerf_config_path), ("mesh", request.mesh_path)) if v is not None]
    if len(sources) != 1 and sources != ["point cloud", "mesh"]:
        raise StageError(StatusCode.INVALID_GOAL, "give exactly one object source (or a point cloud and a mesh), got "
                         f"{sources or 'none'}")
    if not 1 <= request.num_grasps <= MAX_GRASPS:
        raise StageError(StatusCode.INVALID_GOAL, f"num_grasps must be in [1, {MAX_GRASPS}], got {request.num_grasps}")
    if not 0 <= request.refinement_iterations <= config.max_refinement_iterations:
        raise StageError(StatusCode.INVALID_GOAL, f"refinement_iterations must be in [0, {config.max_refinement_iterations}]"
                         f" (max_refinement_iterations), got {request.refinement_iterations}")
    if not (request.timeout_s >= 0 and math.isfinite(request.timeout_s)):
        raise StageError(StatusCode.INVALID_GOAL, f"timeout_s must be finite and >= 0, got {request.timeout_s}")
    for kind, name, known in (("sampler", request.sampler, SAMPLERS), ("evaluator", request.evaluator, EVALUATORS)):
        if name not in known:
            raise StageError(StatusCode.INVALID_GOAL, f"unknown {kind} {name!r}; known: {list(known)}")
    if request.points_m is not None:
        check_object_points(request.points_m, request.frame_id, config, "point cloud")
    if request.bps is not None:
        bps = np.asarray(request.bps)
        if bps.shape != (BPS_SIZE,):
            raise StageError(StatusCode.INVALID_GOAL, f"BPS must have {BPS_SIZE} values, got shape {bps.shape}")
        if not np.isfinite(bps).all() or (bps < 0).any() or (bps > MAX_BPS_DISTANCE_M).any():
            worst = bps[np.argmax(np.where(np.isfinite(bps), np.abs(bps - MAX_BPS_DISTANCE_M / 2), np.inf))]
            raise StageError(StatusCode.INVALID_GOAL, f"BPS values must be finite distances >= 0 and <= "
                             f"{MAX_BPS_DISTANCE_M} m (the basis is a 0.3 m ball above the table), e.g. got {worst:.3g}")
        height = request.bps_centroid_height_m
        if not (0 < height <= config.object_region_max_m[2] and math.isfinite(height)):
            raise StageError(StatusCode.INVALID_GOAL, "a BPS goal needs the object centroid's height above the table "
                             f"(0 < bps_centroid_height_m <= {config.object_region_max_m[2]} m), got {height}")
    if request.nerf_config_path is not None and not Path(request.nerf_config_path).is_file():
        raise StageError(StatusCode.INVALID_GOAL, f"NeRF config not found: {request.nerf_config_path}")
    if request.mesh_path is not None and not Path(request.mesh_path).is_file():
        raise StageError(StatusCode.INVALID_GOAL, f"object mesh not found: {request.mesh_path}")
    if request.sampler in POINT_SAMPLERS and request.bps is not None:
        raise StageError(StatusCode.INVALID_GOAL, f"the {request.sampler} sampler needs a point cloud or a NeRF; "
                         "with a BPS only, use the diffusion or fixed sampler")
    if (request.sampler in DEMONSTRATION_SAMPLERS) != (request.human_demo is not None):
        raise StageError(StatusCode.INVALID_GOAL, "the human_demo sampler needs a human demonstration" if
                         request.human_demo is None else f"a human demonstration is used by the human_demo sampler "
                         f"only, not by {request.sampler!r}")
    if request.human_demo is not None and request.human_demo.frame_id != request.frame_id:
        raise StageError(StatusCode.INVALID_GOAL, f"the human demonstration is in frame {request.human_demo.frame_id!r}, "
                         f"the object in {request.frame_id!r}: transform it first")
    if request.sampler in POOLED_SAMPLERS and request.evaluator not in CASCADES:
        raise StageError(StatusCode.INVALID_GOAL, f"the {request.sampler} sampler pools grasps for a cascade evaluator "
                         f"to verify; use one of {list(CASCADES)}, not {request.evaluator!r}")
    if request.sampler == "nerf_diffusion" and request.nerf_config_path is None:
        raise StageError(StatusCode.INVALID_GOAL, "the nerf_diffusion sampler needs a NeRF object source (nerf_config_path)")
    if request.evaluator == "nerf" and request.nerf_config_path is None:
        raise StageError(StatusCode.INVALID_GOAL, "the NeRF evaluator needs a NeRF object source (nerf_config_path)")
    if request.evaluator in POINT_EVALUATORS and request.bps is not None:
        raise StageError(StatusCode.INVALID_GOAL, f"the {request.evaluator} evaluator needs the object's points or mesh: "
                         "give a point cloud, a mesh or a NeRF, not a BPS alone")


def rank_sum_order(y_pgs: torch.Tensor, physics_rank: torch.Tensor, weight: float) -> torch.Tensor:
    """Indices of grasps, best first, by rank(predicted y_PGS, highest first) + weight x rank(`physics_rank`, lowest
    first: graspd's physics score or each grasp's place in its order); ties go in physics order. A NaN prediction
    counts as the lowest."""
    physics = physics_rank.cpu().numpy()
    key = rankdata(-np.nan_to_num(y_pgs.double().cpu().numpy(), nan=-np.inf)) + weight * rankdata(physics)
    return torch.from_numpy(np.lexsort((physics, key)))


class GraspPlanner:
    """Plans ranked grasps for one object at a time; construct once, call :meth:`plan` per object.

    Models are loaded on first use and kept (``preload`` loads the configured ones now).
    """

    def __init__(self, config: GraspPlannerConfig = GraspPlannerConfig(), hand: AllegroHand | None = None) -> None:
        self.config = config
        self.hand = hand or AllegroHand(device=config.device)
        self._models: dict[str, LoadedModel] = {}
        self._grasp_set: Grasp | None = None
        self._graspd: GraspdSampler | None = None

    # -- models ---------------------------------------------------------------------------------
    def _model_path(self, setting: str, what: str, owner: str = "") -> str:
        """The file of a ModelFiles setting; StageError NOT_IMPLEMENTED when none is configured or shipped."""
        value = getattr(self.config.models, setting)
        if not value:
            raise StageError(StatusCode.NOT_IMPLEMENTED, f"no {what} configured{owner} (parameter models.{setting})")
        try:
            path = resolve_model_file(setting, value)
        except ValueError as err:
            raise StageError(StatusCode.NOT_IMPLEMENTED, str(err)) from err
        if value == SHIPPED and not Path(path).is_file():
            raise StageError(StatusCode.NOT_IMPLEMENTED, f"no {what}{owner} ships with this install ({path} is missing); "
                             f"train one (getagrip-train) and set models.{setting}")
        return path

    def _model(self, kind: str, what: str) -> LoadedModel:
        if kind not in self._models:
            path = self._model_path(kind, "checkpoint", f" for the {what}")
            try:
                self._models[kind] = load_checkpoint(path, kind, self.config.device)
            except CheckpointError as err:
                raise StageError(StatusCode.INTERNAL_ERROR, f"{what}: {err}") from err
        return self._models[kind]

    def preload(self) -> tuple[list[str], dict[str, str]]:
        """Load every configured model and grasp set now (a shipped one only when this install has it).

        Returns what was loaded and, for each model that could not be, the reason (each is tried on its own: one
        bad file leaves the others loaded, and goals that need it end with its reason)."""
        loaded, failed, m = [], {}, self.config.models

        def wanted(setting: str, value: str) -> bool:  # configured, and not a shipped file this install lacks
            try:
                return bool(value) and (value != SHIPPED or Path(resolve_model_file(setting, value)).is_file())
            except ValueError:  # "shipped" for a model that never ships: loading it raises the reason
                return True

        models = [(f"sampler {name}", setting, self._sampler, name)
                  for name, setting in (("diffusion", "bps_sampler"), ("fixed", "fixed_grasps"),
                                        ("nerf_diffusion", "nerf_sampler"))]
        models += [(f"evaluator {name}", setting, self._evaluator, name)
                   for name, setting in (("bps", "bps_evaluator"), ("nerf", "nerf_evaluator"),
                                         ("geometry", "geometry_evaluator"))]
        for label, setting, load, name in models:
            if wanted(setting, getattr(m, setting)):
                try:
                    load(name)
                    loaded.append(label)
                except StageError as err:
                    failed[label] = err.reason
        return loaded, failed

    def _sampler(self, name: str):
        cfg = self.config
        if name == "heuristic":
            keep = (lambda R: cable_filter_rotation_mask(R, cfg.cable_filter)) if cfg.apply_cable_filter else None
            return HeuristicSampler(self.hand, cfg.heuristic_sampler, cfg.chunk_size, keep)
        if name == "fixed":
            if self._grasp_set is None:
                self._grasp_set = load_grasp_set(self._model_path("fixed_grasps", "fixed grasp set"),
                                                 (self.hand.lower_limits_rad.cpu(), self.hand.upper_limits_rad.cpu()))
            return FixedSampler(self._grasp_set)
        if name == "graspd":
            if self._graspd is None:  # builds the hand model (~1-2 s) once
                margin, cable = cfg.graspd.start_cable_margin_deg, cfg.cable_filter
                starts = dataclasses.replace(  # starts well inside the filter: the wrist turns while it optimises
                    cable, min_palm_normal_angle_from_up_deg=min(180.0, cable.min_palm_normal_angle_from_up_deg + margin),
                    max_finger_angle_from_forward_deg=max(0.0, cable.max_finger_angle_from_forward_deg - margin))
                keep = (lambda R: cable_filter_rotation_mask(R, starts)) if cfg.apply_cable_filter else None
                self._graspd = GraspdSampler(cfg.graspd, keep, device=cfg.device)
            return self._graspd
        if name == "nerf_diffusion":
            return DiffusionSampler(self._model("nerf_sampler", "NeRF diffusion sampler"), cfg.diffusion, self.hand,
                                    nerf_condition)
        return DiffusionSampler(self._model("bps_sampler", "diffusion sampler"), cfg.diffusion, self.hand)

    def _evaluator(self, name: str):
        if name in CASCADES:
            return self._evaluator(CASCADES[name])
        if name == "sim":
            return SimulationGraspEvaluator(self.config.simulation)
        if name == "bps":
            return BpsGraspEvaluator(self._model("bps_evaluator", "BPS evaluator"))
        if name == "bps+geometry":
            return MeanGraspEvaluator([self._evaluator("bps"), self._evaluator("geometry")])
        if name == "geometry":
            return GeometryGraspEvaluator(self._model("geometry_evaluator", "geometry evaluator"), self.hand)
        return NerfGraspEvaluator(self._model("nerf_evaluator", "NeRF evaluator"),
                                  self.hand, self.config.nerf_evaluator_batch_size)

    # -- planning -------------------------------------------------------------------------------
    def plan(self, request: PlanRequest, progress: ProgressFn | None = None,
             should_cancel: Callable[[], bool] | None = None) -> PlanResult:
        """Run the whole pipeline; never raises for bad input or cancellation (see the result's status)."""
        timer = StageTimer()
        start = time.monotonic()
        report = progress or (lambda stage, fraction, best: None)

        limit_s = min(request.timeout_s or math.inf, self.config.max_plan_time_s)

        def cancel_point() -> None:
            if should_cancel is not None and should_cancel():
                raise StageError(StatusCode.CANCELED, "cancelled by the client")

        def checkpoint() -> None:
            cancel_point()
            if time.monotonic() - start > limit_s:
                which = "" if limit_s == request.timeout_s else " (the planner's max_plan_time_s)"
                raise StageError(StatusCode.TIMEOUT, f"timed out after {limit_s:.1f} s{which}")

        try:
            with timer.stage("validation"):
                validate_request(request, self.config)
            planned, note = self._run(request, timer, report, checkpoint, cancel_point,
                                      synthesis_deadline_s(start, limit_s, self.config.graspd))
        except StageError as err:
            return PlanResult(err.code, err.reason, None, timer.durations_s)
        except Exception as err:  # noqa: BLE001 - a planner bug must not take the caller down
            return PlanResult(StatusCode.INTERNAL_ERROR, f"{type(err).__name__}: {err}", None, timer.durations_s)
        return PlanResult(StatusCode.SUCCEEDED, f"{len(planned.grasps)} grasps{note}", planned, timer.durations_s)

    def _object(self, request: PlanRequest, report: ProgressFn, checkpoint: Callable[[], None]) -> PlanningObject:
        if request.mesh_path is not None:
            obj = object_from_mesh(request.mesh_path, request.frame_id, request.points_m,
                                   self.config.mesh_surface_points, request.seed)
            check_object_points(np.asarray(obj.mesh.vertices), request.frame_id, self.config, "mesh", min_points=3)
            return obj
        if request.points_m is not None:
            return object_from_points(request.points_m, request.frame_id, self.config.bps_max_points)
        if request.bps is not None:
            return object_from_bps(request.bps, request.frame_id, request.bps_centroid_height_m)

        def extraction_progress(stage: str, fraction: float) -> None:  # cancel/timeout between extraction steps
            checkpoint()
            report("object", STAGE_PROGRESS["sampling"] * fraction, math.nan)

        return object_from_nerf(request.nerf_config_path, self.config.device, extraction_progress)

    def _run(self, request: PlanRequest, timer: StageTimer, report: ProgressFn, checkpoint: Callable[[], None],
             cancel_point: Callable[[], None], graspd_deadline_monotonic_s: float | None) -> tuple[PlannedGrasps, str]:
        """checkpoint: raises on a cancel or the time limit; cancel_point: on a cancel only (graspd's synthesis ends
        at `graspd_deadline_monotonic_s` with the grasps found so far instead of timing out)."""
        cfg = self.config
        generator = torch.Generator().manual_seed(int(request.seed))
        ranked_name, synthesis_name = POOLED_SAMPLERS.get(request.sampler, (request.sampler, None))
        nan = math.nan
        limits = (self.hand.lower_limits_rad.cpu().double(), self.hand.upper_limits_rad.cpu().double())

        with timer.stage("models"):  # fail fast on a missing model, before any heavy work
            names = [n for n in (ranked_name, synthesis_name) if n is not None and n != "human_demo"]
            samplers = {name: self._sampler(name) for name in names}
            evaluator = None if request.evaluator == "none" else self._evaluator(request.evaluator)
        with timer.stage("object"):
            report("object", 0.0, nan)
            obj = self._object(request, report, checkpoint)
            checkpoint()
        with timer.stage("sampling"):
            share = 1.0 if synthesis_name is None else 0.1  # a pooled sampler's synthesis takes most of the time
            samples, sampler_note, transfer = self._sample(request, ranked_name, samplers.get(ranked_name), obj,
                                                           generator, report, checkpoint, cancel_point,
                                                           graspd_deadline_monotonic_s, (0.0, share))
            synthesised = None
            if synthesis_name is not None:  # its own generator: each part is the plan its sampler alone would make
                own = torch.Generator().manual_seed(int(request.seed))
                synthesised, synthesis_note, _ = self._sample(request, synthesis_name, samplers[synthesis_name], obj,
                                                              own, report, checkpoint, cancel_point,
                                                              graspd_deadline_monotonic_s, (share, 1.0))
                sampler_note += synthesis_note
        with timer.stage("filtering"):
            parts = {ranked_name: samples} if synthesised is None else {ranked_name: samples, synthesis_name: synthesised}
            sampled = {name: len(part) if name in DEMONSTRATION_SAMPLERS else self._sample_count(name, request)
                       for name, part in parts.items()}
            for name, part in parts.items():
                part.joint_angles_rad = torch.maximum(torch.minimum(part.joint_angles_rad, limits[1]), limits[0])
                if cfg.apply_cable_filter:
                    parts[name] = part[cable_filter_mask(part, cfg.cable_filter)]
            if all(len(part) == 0 for part in parts.values()):
                raise StageError(StatusCode.NO_RESULT, f"none of the {sum(sampled.values())} sampled grasps passed the "
                                 f"filters{' (the cable filter)' if cfg.apply_cable_filter else ''}")
            samples = parts[ranked_name]
            synthesised = parts.get(synthesis_name)

        if evaluator is None:
            chosen = samples[: request.num_grasps]  # graspd: best physics score first
            order = {"graspd": "ranked by the graspd physics score", "human_demo": "the demonstrated grasp"}.get(
                request.sampler, "unranked")
            labels, note = torch.full((len(chosen), 3), nan), f" ({order}: no evaluator, no refinement)"
        else:
            if len(samples) > 0:
                chosen, labels, note = self._rank_and_refine(request, obj, evaluator, samples, generator, limits, timer,
                                                             report, checkpoint)
            else:  # a pooled sampler's ranked part may be empty: its synthesised part is still verified
                chosen, labels, note = samples, torch.empty(0, 3), f" (none of the {ranked_name} grasps passed the filters)"
            if request.evaluator in CASCADES:
                chosen, labels, verified = self._verify(obj, chosen, labels, timer, report, checkpoint, synthesised)
                pooled = "" if synthesised is None else f" and the {synthesis_name} sampler's first {verified[1]}"
                note += (f"; the first {verified[0]}{pooled} verified by the sim evaluator "
                         f"({cfg.simulation.num_trials} simulated executions each) and put first in its order")
                chosen, labels = chosen[: request.num_grasps], labels[: request.num_grasps]
        with timer.stage("closing_targets"):
            report("closing_targets", STAGE_PROGRESS["closing_targets"], float(labels[0, Y_PGS]))
            pre, closed = [], []
            for done in range(0, len(chosen), cfg.chunk_size):
                checkpoint()
                targets = closing_targets(self.hand, chosen[done: done + cfg.chunk_size], cfg.closing)
                pre.append(targets.pregrasp.joint_angles_rad)
                closed.append(targets.closed.joint_angles_rad)
        report("done", 1.0, float(labels[0, Y_PGS]))
        planned = PlannedGrasps(chosen, labels[:, 2].clone(), labels[:, 1].clone(), labels[:, 0].clone(),
                                torch.cat(pre), torch.cat(closed), obj.centroid_m.copy(), transfer)
        return planned, note + sampler_note

    def _sample_count(self, name: str, request: PlanRequest) -> int:
        """How many grasps sampler `name` draws for `request` (graspd: its own num_grasps, or more when asked)."""
        if name == "graspd":
            return max(self.config.graspd.num_grasps, request.num_grasps if request.sampler == "graspd" else 0)
        return max(self.config.num_samples, request.num_grasps)

    def _sample(self, request: PlanRequest, name: str, sampler, obj: PlanningObject, generator: torch.Generator,
                report: ProgressFn, checkpoint: Callable[[], None], cancel_point: Callable[[], None],
                graspd_deadline_monotonic_s: float | None,
                share: tuple[float, float] = (0.0, 1.0)) -> tuple[Grasp, str, TransferResult | None]:
        """The grasps of sampler `name` (graspd's synthesis ends at its deadline with what it found); a note for the
        result's reason and the human_demo sampler's transfer. Its progress covers `share` of the sampling stage."""
        span = STAGE_PROGRESS["filtering"] - STAGE_PROGRESS["sampling"]
        start, span = STAGE_PROGRESS["sampling"] + span * share[0], span * (share[1] - share[0])

        def sampling_step(fraction: float) -> None:
            checkpoint()
            report("sampling", start + span * fraction, math.nan)

        if name == "graspd":
            def synthesis_step(fraction: float) -> None:  # the deadline ends synthesis early, not the plan
                cancel_point()
                report("sampling", start + span * fraction, math.nan)

            synthesised = sampler.synthesize(obj, self._sample_count(name, request), generator, synthesis_step,
                                             deadline_monotonic_s=graspd_deadline_monotonic_s)
            return synthesised.grasps, synthesised.note, None
        if name == "human_demo":
            seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
            transferred = sample_human_demo(obj, request.human_demo, self.config.human_demo, self.config.graspd, seed,
                                            sampling_step)
            return transferred.grasps, transferred.note, transferred.transfer
        return sampler.sample(obj, self._sample_count(name, request), generator, sampling_step), "", None

    def _rank_and_refine(self, request: PlanRequest, obj: PlanningObject, evaluator, samples: Grasp,
                         generator: torch.Generator, limits, timer: StageTimer, report: ProgressFn,
                         checkpoint: Callable[[], None]) -> tuple[Grasp, torch.Tensor, str]:
        cfg = self.config
        batch = cfg.nerf_evaluator_batch_size if request.evaluator == "nerf" else cfg.evaluation_batch_size
        batch = getattr(evaluator, "batch_size", batch)
        samples = samples[: getattr(evaluator, "max_grasps", len(samples))]
        with timer.stage("evaluation"):
            score: ScoreFn = evaluator.prepare(obj)
            span = STAGE_PROGRESS["refinement"] - STAGE_PROGRESS["evaluation"]
            parts, best = [], math.nan
            for done in range(0, len(samples), batch):
                checkpoint()
                parts.append(score(samples[done: done + batch]))
                best = float(torch.cat(parts)[:, Y_PGS].max())
                report("evaluation", STAGE_PROGRESS["evaluation"] + span * min(done + batch, len(samples)) / len(samples), best)
            labels = torch.cat(parts)
            top = self._order(request, evaluator, labels[:, Y_PGS], torch.arange(len(labels)))[: request.num_grasps]
            chosen, labels = samples[top], labels[top]
        if not getattr(evaluator, "refines", True):  # ties keep the sampler's order (graspd: its physics score)
            return chosen, labels, f" ranked by the {request.evaluator} evaluator ({len(samples)} grasps scored; no refinement)"
        ranked_by = f"the {request.evaluator} evaluator"
        if self._with_physics_score(request, evaluator):
            ranked_by += f" + {self.config.graspd_score_rank_weight:g} x the graspd physics score (ranks)"
        with timer.stage("refinement"):
            iterations = request.refinement_iterations
            end = STAGE_PROGRESS["verification" if request.evaluator in CASCADES else "closing_targets"]
            span = end - STAGE_PROGRESS["refinement"]
            before = float(labels[:, Y_PGS].mean())

            def on_iteration(it: int, current: torch.Tensor) -> None:
                checkpoint()
                report("refinement", STAGE_PROGRESS["refinement"] + span * (it + 1) / iterations, float(current[:, Y_PGS].max()))

            start = chosen

            def allowed(g: Grasp) -> torch.Tensor:
                ok = cfg.trust_region.within(start, g).cpu()
                return ok & cable_filter_mask(g, cfg.cable_filter).cpu() if cfg.apply_cable_filter else ok

            chosen, labels, accepted = refine_grasps(chosen, labels, score, iterations, cfg.refinement, generator,
                                                     limits, allowed, on_iteration)
            order = self._order(request, evaluator, labels[:, Y_PGS], top)
            chosen, labels = chosen[order], labels[order]
        note = (f" ranked by {ranked_by}; {iterations} refinement iterations raised the mean "
                f"predicted y_PGS {before:.3f} -> {float(labels[:, Y_PGS].mean()):.3f} ({int(accepted.sum())} moves accepted)")
        return chosen, labels, note

    def _with_physics_score(self, request: PlanRequest, evaluator) -> bool:
        """Whether graspd's physics score joins the evaluator's ranking (graspd's grasps, a learned evaluator)."""
        return request.sampler == "graspd" and self.config.graspd_score_rank_weight > 0 and getattr(evaluator, "refines", True)

    def _order(self, request: PlanRequest, evaluator, y_pgs: torch.Tensor, physics_rank: torch.Tensor) -> torch.Tensor:
        """Indices of grasps, best first (`physics_rank`: each grasp's place in graspd's physics-score order)."""
        if not self._with_physics_score(request, evaluator):
            return y_pgs.argsort(descending=True, stable=True)
        return rank_sum_order(y_pgs, physics_rank, self.config.graspd_score_rank_weight)

    def _verify(self, obj: PlanningObject, chosen: Grasp, labels: torch.Tensor, timer: StageTimer,
                report: ProgressFn, checkpoint: Callable[[], None],
                pooled: Grasp | None = None) -> tuple[Grasp, torch.Tensor, tuple[int, int]]:
        """A cascade's last stage: the first ``simulation.cascade_grasps`` grasps, and a pooled sampler's first
        ``simulation.max_grasps`` synthesised grasps (`pooled`), executed in simulation and put first in the order of
        their simulated y_PGS with the simulated labels (ties keep `chosen` first, each in its own order); the rest of
        `chosen` follows unchanged. Returns the grasps, their labels and how many of `chosen` and of `pooled` were
        verified."""
        cfg = self.config.simulation
        with timer.stage("verification"):
            report("verification", STAGE_PROGRESS["verification"], float(labels[0, Y_PGS]) if len(labels) else math.nan)
            score = self._evaluator("sim").prepare(obj)
            head = min(cfg.cascade_grasps, len(chosen))
            extra = pooled[: cfg.max_grasps] if pooled is not None else chosen[:0]
            candidates = Grasp.cat([chosen[:head], extra]) if len(extra) else chosen[:head]
            span = STAGE_PROGRESS["closing_targets"] - STAGE_PROGRESS["verification"]
            parts = []
            for done in range(0, len(candidates), cfg.batch_size):
                checkpoint()
                parts.append(score(candidates[done: done + cfg.batch_size]))
                simulated = torch.cat(parts)
                report("verification", STAGE_PROGRESS["verification"] + span * len(simulated) / len(candidates),
                       float(simulated[:, Y_PGS].max()))
            order = simulated[:, Y_PGS].argsort(descending=True, stable=True)
            grasps = Grasp.cat([candidates[order], chosen[head:]]) if head < len(chosen) else candidates[order]
            return grasps, torch.cat([simulated[order].to(labels.dtype), labels[head:]]), (head, len(extra))
