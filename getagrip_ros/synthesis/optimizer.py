"""Grasp synthesis by gradient descent through the relaxed contact objective (Grasp'D), for any hand.

``synthesize_grasps(hand, sdf, config, options)`` optimises B grasps at once:

- Start: joints at the hand's open pose, desired forces zero; the palm point 10 cm from a sampled surface
  point along its normal, facing it, with a random roll about the normal. Of 8 such candidates per grasp the
  one reaching least below the table and into the initial level set is kept, and backed out until it clears
  that level set (see :func:`sample_starts`).
- Coarse-to-fine: contacts act on the level set at an offset falling linearly from ``offset_start_m``
  (~10 cm) to 0 over the first ``offset_fraction`` (5/7) of the steps, then 0.
- Objective: minimise physics + hand losses subject to the task and joint-limit losses, with MDMM
  (a Lagrange multiplier per grasp and constraint, raised by gradient ascent, plus a quadratic damping
  term); Adamax on the wrist pose (translation + rot6d), the joints and the desired forces.
- Control: ``should_stop()`` and the deadline are checked after every chunk of steps, ``progress(fraction)``
  is called there; a grasp whose loss or gradient becomes non-finite is frozen at its last finite state and
  reported, the others go on; a cancel or a deadline returns the current grasps marked partial.

The result holds the wrist poses, joints, fingertip contact normals and per-grasp metrics; for the Allegro
hand also the project's 37-D :class:`Grasp` (pre-grasp joints with each finger opened along its flexion joints until
it clears the object, closing directions back through its contact point; see :func:`allegro_grasp`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Literal, Optional

import numpy as np
import torch

from getagrip_ros.grasp.rotations import rot6d_from_matrix
from getagrip_ros.synthesis.contact import ContactConfig
from getagrip_ros.synthesis.hand_model import HandModel, pose_from_translation_rot6d
from getagrip_ros.synthesis.losses import (GraspMetrics, HandState, LossTerms, PhysicsLossConfig, axis_wrenches, evaluate_losses,
                                           grasp_metrics)
from getagrip_ros.synthesis.object_sdf import ObjectSDF


@dataclass(frozen=True)
class LossWeights:
    """Weights of the minimised terms, in units of the physics loss (N of force mismatch)."""

    physics: float = 1.0
    """Per N."""
    joint_midrange: float = 0.01
    """Per unit of sum ((q - mid) / range)^2."""
    self_intersection: float = 1e7
    """Per m of summed sphere overlap (10 k_n: a link pair's overlap outweighs the pull of many samples)."""
    table: float = 1e7
    """Per m of summed sample depth below the table (as self-intersection)."""


@dataclass(frozen=True)
class MDMMConfig:
    """Modified Differential Method of Multipliers on the constrained losses: task <= tolerance, joint limits = 0.

    Each grasp has one multiplier per constraint, raised by gradient ascent (rate * violation per step, never
    below 0); the Lagrangian also gets (damping / 2) * violation^2.
    """

    task_tolerance_n2: float = 1e-3
    """The task constraint is task_loss <= this (N^2)."""
    task_rate: float = 1.0
    """Multiplier step per N^2 of task violation."""
    task_damping: float = 10.0
    limit_rate: float = 1e5
    """Multiplier step per rad of summed joint-limit violation."""
    limit_damping: float = 1e7


@dataclass(frozen=True)
class SynthesisConfig:
    """Build options of the optimiser (per-call options are in :class:`SynthesisOptions`)."""

    num_steps: int = 500
    """Optimisation steps (paper: 7000 on a GPU). On tabletop-20 meshes 500 lift more than 300 (apple: mean y_PGS
    0.76 vs 0.59; conditioner 0.17 vs 0.05) at ~48 s for 32 grasps on 2 cores (300: ~30 s); see bench_graspd.py."""
    chunk_steps: int = 25
    """Steps between checks of should_stop / the deadline and progress reports."""
    offset_start_m: float = 0.10
    """Coarse-to-fine: initial level-set offset (paper: ~10 cm)."""
    offset_fraction: float = 5.0 / 7.0
    """Share of the steps over which the offset falls linearly to 0 (paper: 5000 of 7000)."""
    approach_distance_m: float = 0.10
    """Start: palm point this far from the sampled surface point along its normal (paper: 10 cm)."""
    lr_translation_m: float = 2e-3
    lr_rotation: float = 1e-2
    lr_joints_rad: float = 2e-2
    lr_force_n: float = 2e-3
    final_lr_fraction: float = 0.1
    """After the coarse-to-fine phase the learning rates fall linearly to this share of their value."""
    adamax_betas: tuple[float, float] = (0.9, 0.95)
    """Adamax moments; a short infinity-norm memory (0.95) lets steps recover after stiff contact spikes."""
    task_wrenches: Literal["axes6", "axes12"] = "axes12"
    """Object wrenches the desired forces must resist: "axes12" both signs of the 3 forces and 3 torques (a grasp
    must hold against gravity, which axes6's +z does not include); on 4 tabletop-20 meshes the share of grasps
    with y_PGS >= 0.9 rose from 6% to 8% and the goblet's mean y_PGS from 0.13 to 0.26."""
    task_moves_hand: bool = False
    """Whether the task loss's gradient reaches the hand pose through the contact points and normals. False: it
    shapes only the desired forces, and the physics loss pulls the hand to where they act (steadier: far from
    the object the torque arms would otherwise swing the hand)."""
    relaxation: bool = True
    """False: the ablation without relaxation (the task loss on the produced forces, see ``evaluate_losses``)."""
    torque_length_m: Optional[float] = None
    """Lever L that turns unit torques into forces (None: RMS distance of the object's surface to its centre)."""
    contact: ContactConfig = ContactConfig()
    physics: PhysicsLossConfig = PhysicsLossConfig()
    weights: LossWeights = LossWeights()
    mdmm: MDMMConfig = MDMMConfig()
    table_clearance_m: float = 0.008
    """Hand samples are kept this far above the table (the labels' wrist noise is up to 5 mm and 2.5 deg)."""
    free_clearance_m: float = 0.01
    """Samples that may carry no force (with distal contact: the palm and proximal links) are kept this far off
    the surface: Get a Grip's pre-grasp must stay clear of the object under the wrist noise."""
    joint_limit_slack_rad: float = 0.1
    """Safeguard: after each step the joints are projected into their limits widened by this (the MDMM constraint
    handles violations within it; a stiff contact could otherwise fling a joint far out, and Adamax would then
    remember that gradient for many steps)."""
    contact_threshold_m: float = 0.002
    """Metrics: samples within this distance of the surface count as contact."""
    pregrasp: Literal["flex", "normal"] = "flex"
    """Allegro output: how each finger leaves its contact for the pre-grasp. "flex": its flexion joints open by the
    first of ``pregrasp_flex_rad`` at which the finger clears, and it closes along the chord back through its contact
    point, the way the finger itself moves (on 17 validation objects, mean y_PGS 8.2% -> 19.9% and the best 5 of 32
    36.9% -> 54.4% against "normal"); a finger that clears at none backs off as with "normal". "normal": the
    fingertip backs off along its contact normal by the first of ``pregrasp_backoff_m`` at which the finger clears,
    and closes along the inward normal."""
    pregrasp_flex_rad: tuple[float, ...] = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6)
    """Opening angles tried, each applied to every flexion joint of the finger (index, middle, ring: MCP, PIP, DIP;
    thumb: joints 13-15)."""
    pregrasp_backoff_m: tuple[float, ...] = (0.015, 0.02, 0.025, 0.03, 0.035)
    """Back-offs along the contact normal tried (paper: the fingertips ~1.5 cm off; the closing moves 5 cm)."""
    pregrasp_clearance_m: float = 0.005
    """A finger clears when all its surface samples are this far from the object and above the table."""
    dtype: torch.dtype = torch.float32


@dataclass(frozen=True)
class SynthesisOptions:
    """Per-call options."""

    num_grasps: int = 32
    seed: int = 0
    device: str | torch.device = "cpu"
    """Where the optimisation steps run ("cpu", "cuda", "cuda:1"; the planner passes its own ``device``). The starts,
    the metrics and the pre-grasps are computed on the CPU, and every result is a CPU tensor either way."""
    T_object_table: Optional[np.ndarray] = field(default_factory=lambda: np.eye(4))
    """(4, 4) table frame in the object (SDF) frame; the hand stays above its z = 0. Default: the object frame of
    ``prepare_object`` (resting on z = 0); None: no table."""
    should_stop: Optional[Callable[[], bool]] = None
    """Checked after every chunk; True stops and returns the current grasps, i.e. the latest iterate of each
    (partial, cancelled)."""
    progress: Optional[Callable[[float], None]] = None
    """Called after every chunk with the fraction of steps done."""
    deadline_monotonic_s: Optional[float] = None
    """time.monotonic() after which the current grasps are returned (partial)."""
    time_budget_s: Optional[float] = None
    """Same as a deadline this many seconds after the call."""
    initial_T_object_root: Optional[torch.Tensor] = None
    """(B, 4, 4) wrist starts instead of the sampled ones (B replaces num_grasps)."""
    initial_joint_angles_rad: Optional[torch.Tensor] = None
    """(B, J) joint starts instead of the open hand."""
    extra_objective: Optional[Callable[[HandState], torch.Tensor]] = None
    """(B,) more terms of each grasp's minimised objective, computed from the current variables on ``device`` (for
    example how far each grasp has moved from a human demonstration:
    :meth:`getagrip_ros.human_demo.transfer.TransferObjective.trust_region_penalty`)."""
    on_chunk: Optional[Callable[[int, HandState, LossTerms], None]] = None
    """Called after every chunk with the step count, the (detached, CPU) variables and the loss terms of that chunk's
    last step (on ``device``): for traces and pictures of the coarse-to-fine trajectory."""


@dataclass
class SynthesisResult:
    """B synthesised grasps in the SDF's frame (``frame_id``)."""

    T_object_root: torch.Tensor
    """(B, 4, 4) wrist poses."""
    joint_angles_rad: torch.Tensor
    """(B, J) joints in contact (clamped to the limits)."""
    fingertip_points_m: torch.Tensor
    """(B, F, 3) fingertip contact points."""
    fingertip_normals: torch.Tensor
    """(B, F, 3) outward object normals at the fingertip contact points (toward the object centre where the grid
    gradient vanishes)."""
    metrics: GraspMetrics
    failed: torch.Tensor
    """(B,) True for grasps stopped by a non-finite loss or gradient (frozen at their last finite state)."""
    failure_reasons: dict[int, str]
    partial: bool
    """True when a cancel or the deadline ended the optimisation early."""
    cancelled: bool
    steps_done: int
    num_steps: int
    elapsed_s: float
    frame_id: str
    grasp: Optional[object] = None
    """The 37-D :class:`getagrip_ros.grasp.grasp.Grasp` batch (Allegro hands only)."""
    pregrasp_clearance_m: Optional[torch.Tensor] = None
    """(B,) smallest gap (m) of the hand's surface to the object (the SDF) and the table at the pre-grasp of
    ``grasp``, negative inside (Allegro hands only)."""
    pregrasp_opened: Optional[torch.Tensor] = None
    """(B, 4) True where the finger's pre-grasp opens its flexion joints, False where it backs off along the contact
    normal (Allegro hands only; all False with ``pregrasp="normal"``)."""

    def __len__(self) -> int:
        return len(self.T_object_root)

    def physics_score(self) -> torch.Tensor:
        """(B,) the synthesis's own ranking of its grasps, lower is better (see :func:`physics_score`)."""
        return physics_score(self.metrics, self.failed, self.fingertip_normals, self.pregrasp_clearance_m,
                             self.pregrasp_opened)


def physics_score(metrics: GraspMetrics, failed: Optional[torch.Tensor] = None,
                  fingertip_normals: Optional[torch.Tensor] = None, pregrasp_clearance_m: Optional[torch.Tensor] = None,
                  pregrasp_opened: Optional[torch.Tensor] = None, opposition_weight: float = 4.0,
                  clearance_target_m: float = 0.003, clearance_weight_per_m: float = 500.0,
                  backoff_weight: float = 1.0) -> torch.Tensor:
    """(B,) rank score of finished grasps from their physics alone, lower is better:
    ``log10(task residual in N^2 + 1e-6) + opposition_weight * (n_thumb . mean n_finger)
    + clearance_weight_per_m * max(0, clearance_target_m - pre-grasp clearance) + backoff_weight * (fingers backed
    off)``, the second term with the outward contact normals (F, 3) of the fingertips, the last one the thumb (-1:
    thumb opposes the fingers), the third with the pre-grasp's smallest gap to the object and the table (m, negative
    inside), the fourth with the (B, F) ``pregrasp_opened`` (the fingers that could not open clear and close along
    the normal instead).

    Measured (labels by the floating-hand protocol), the top 5 by:
    - on 6 tabletop-20 meshes x 32 grasps, without the clearance term: this score 49% (the best 5: 62%, all: 22%);
      the task residual alone 33%; the opposition alone 49%;
    - on 17 validation objects x 32 grasps (``benchmarks/rank_graspd.py``), normal pre-grasps: 23.5% without the
      clearance term, 27.3% with it (0.5 per mm below 3 mm; 0.25-2 per mm below 1-3 mm give 25.6-27.3%), the best 5:
      36.9%. The clearance predicts y_coll (within-object Spearman 0.66), the rest y_pick (-0.48);
    - the same objects with flex pre-grasps: 33.2% without the back-off term, 36.7% with 1 per finger (0.5-4: 34.4-
      36.7%), the best 5: 54.4%; the number of backed-off fingers has a within-object Spearman of -0.37 with y_PGS.
    Failed grasps score inf.
    """
    score = torch.log10(metrics.task_loss.clamp_min(0) + 1e-6)
    if fingertip_normals is not None and fingertip_normals.shape[1] >= 2:
        n = fingertip_normals / fingertip_normals.norm(dim=-1, keepdim=True).clamp_min(1e-9)
        score = score + opposition_weight * (n[:, -1] * n[:, :-1].mean(1)).sum(-1)
    if pregrasp_clearance_m is not None:
        score = score + clearance_weight_per_m * (clearance_target_m - pregrasp_clearance_m.to(score)).clamp_min(0)
    if pregrasp_opened is not None:
        score = score + backoff_weight * (~pregrasp_opened.bool()).sum(-1).to(score)
    if failed is not None:
        score = torch.where(failed, torch.full_like(score, math.inf), score)
    return torch.nan_to_num(score, nan=math.inf, posinf=math.inf)


def offset_at(step: int, config: SynthesisConfig) -> float:
    """Coarse-to-fine level-set offset (m) at a step."""
    ramp = max(1.0, config.offset_fraction * config.num_steps)
    return config.offset_start_m * max(0.0, 1.0 - step / ramp)


def lr_factor_at(step: int, config: SynthesisConfig) -> float:
    """Learning-rate multiplier: 1 while the offset falls, then linear down to final_lr_fraction."""
    start = config.offset_fraction * config.num_steps
    if step <= start or config.num_steps <= start:
        return 1.0
    t = (step - start) / (config.num_steps - start)
    return 1.0 - (1.0 - config.final_lr_fraction) * t


def _frame(a: torch.Tensor) -> torch.Tensor:
    """(B, 3) unit vectors -> (B, 3, 3) rotations whose first column is a."""
    helper = torch.where(a[:, 2:].abs() > 0.9, a.new_tensor([1.0, 0.0, 0.0]).expand_as(a), a.new_tensor([0.0, 0.0, 1.0]).expand_as(a))
    b = torch.linalg.cross(a, helper, dim=-1)
    b = b / b.norm(dim=-1, keepdim=True)
    return torch.stack([a, b, torch.linalg.cross(a, b, dim=-1)], -1)


def sample_starts(hand: HandModel, sdf: ObjectSDF, num_grasps: int, approach_distance_m: float, offset_m: float,
                  T_object_table: Optional[torch.Tensor], generator: torch.Generator,
                  q_rad: Optional[torch.Tensor] = None, candidates_per_grasp: int = 8) -> torch.Tensor:
    """(B, 4, 4) wrist starts: palm point `approach_distance_m` out along the normal of a random surface point,
    palm normal toward it, random roll.

    Each grasp draws `candidates_per_grasp` candidates and keeps the one whose hand (at its start joints `q_rad`
    (B, J), default open) reaches least below the table, then least into the level set at `offset_m` (where the
    optimisation starts; the smoothed surface of a non-convex object is not tangent to the palm); the start is
    then backed out along its normal until the hand clears that level set (stiff contacts at the first step would
    throw the hand off).
    """
    q = hand.open_joint_angles_rad.expand(num_grasps, -1) if q_rad is None else q_rad.to(torch.float64)
    T, n = _starts(hand, sdf, num_grasps * candidates_per_grasp, approach_distance_m, generator)

    def depths(T: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        points = hand.surface_points(hand.link_poses(T, q))
        into_object = (-sdf.distance(points, offset_m)).clamp_min(0).amax(-1)
        if T_object_table is None:
            return into_object, torch.zeros_like(into_object)
        height = points @ T_object_table[:3, 2] - float(T_object_table[:3, 2] @ T_object_table[:3, 3])
        return into_object, (-height).clamp_min(0).amax(-1)

    with torch.no_grad():
        into_object, below_table = depths(T, q.repeat(candidates_per_grasp, 1))  # candidate k is for grasp k % B
        score = (into_object + 10.0 * below_table).reshape(candidates_per_grasp, num_grasps)
        best = score.argmin(0) * num_grasps + torch.arange(num_grasps)
        T, n = T[best].clone(), n[best]
        for _ in range(3):
            into_object, _ = depths(T, q)
            T[:, :3, 3] += n * into_object[:, None]
    return T


def _starts(hand: HandModel, sdf: ObjectSDF, num_grasps: int, approach_distance_m: float,
            generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random starts (B, 4, 4) and their approach normals (B, 3)."""
    points, normals = sdf.surface_points_m, sdf.surface_normals
    pick = torch.randint(len(points), (num_grasps,), generator=generator)
    p, n = points[pick], normals[pick]
    roll = 2 * math.pi * torch.rand(num_grasps, generator=generator, dtype=torch.float64)
    R_object_a = _frame(-n)  # a-frame: x = palm normal wanted (into the object)
    c, s = roll.cos(), roll.sin()
    R_roll = torch.zeros(num_grasps, 3, 3, dtype=torch.float64)
    R_roll[:, 0, 0] = 1.0
    R_roll[:, 1, 1], R_roll[:, 1, 2], R_roll[:, 2, 1], R_roll[:, 2, 2] = c, -s, s, c
    R_root_h = _frame(hand.palm_normal_in_root[None])[0]  # h-frame: x = the hand's palm normal
    R = R_object_a @ R_roll @ R_root_h.T
    palm_point = p + approach_distance_m * n
    T = torch.zeros(num_grasps, 4, 4, dtype=torch.float64)
    T[:, :3, :3] = R
    T[:, :3, 3] = palm_point - (R @ hand.palm_point_in_root_m)
    T[:, 3, 3] = 1.0
    return T, n


def _torque_length(sdf: ObjectSDF, config: SynthesisConfig) -> float:
    if config.torque_length_m is not None:
        return float(config.torque_length_m)
    rms = float((sdf.surface_points_m - sdf.centre_m).square().sum(-1).mean().sqrt())
    return max(rms, 1e-3)


def synthesize_grasps(hand: HandModel, sdf: ObjectSDF, config: SynthesisConfig = SynthesisConfig(),
                      options: SynthesisOptions = SynthesisOptions()) -> SynthesisResult:
    """Synthesise grasps of the object `sdf` with `hand` (see the module docstring)."""
    started = time.monotonic()
    deadlines = [d for d in (options.deadline_monotonic_s,
                             None if options.time_budget_s is None else started + options.time_budget_s) if d is not None]
    deadline = min(deadlines) if deadlines else None
    if config.num_steps < 1 or config.chunk_steps < 1:
        raise ValueError(f"num_steps and chunk_steps must be >= 1, got {config.num_steps}, {config.chunk_steps}")
    if config.pregrasp not in ("flex", "normal"):
        raise ValueError(f"unknown pregrasp {config.pregrasp!r} (flex or normal)")
    dtype = config.dtype
    generator = torch.Generator().manual_seed(options.seed)
    T_table = None if options.T_object_table is None else torch.as_tensor(np.asarray(options.T_object_table), dtype=torch.float64)
    if T_table is not None and tuple(T_table.shape) != (4, 4):
        raise ValueError(f"T_object_table must be (4, 4), got {tuple(T_table.shape)}")
    T_table_object = None if T_table is None else torch.linalg.inv(T_table)

    if options.initial_T_object_root is not None:
        T0 = torch.as_tensor(options.initial_T_object_root, dtype=torch.float64)
        if T0.ndim != 3 or T0.shape[1:] != (4, 4):
            raise ValueError(f"initial_T_object_root must be (B, 4, 4), got {tuple(T0.shape)}")
    else:
        if options.num_grasps < 1:
            raise ValueError(f"num_grasps must be >= 1, got {options.num_grasps}")
    B = len(T0) if options.initial_T_object_root is not None else options.num_grasps
    if options.initial_joint_angles_rad is not None:
        q0 = torch.as_tensor(options.initial_joint_angles_rad, dtype=torch.float64)
        if tuple(q0.shape) != (B, hand.num_joints):
            raise ValueError(f"initial_joint_angles_rad must be ({B}, {hand.num_joints}), got {tuple(q0.shape)}")
    else:
        q0 = hand.open_joint_angles_rad.expand(B, -1)
    if not bool(torch.isfinite(q0).all()):
        raise ValueError("initial joints have NaN or inf values")
    if options.initial_T_object_root is None:
        T0 = sample_starts(hand, sdf, B, config.approach_distance_m, config.offset_start_m, T_table, generator, q0)
    if not bool(torch.isfinite(T0).all()):
        raise ValueError("initial wrist poses have NaN or inf values")

    wrenches = axis_wrenches(config.task_wrenches, dtype)
    torque_length = _torque_length(sdf, config)
    num_contact = int(hand.contact_mask.sum())
    # the steps run on `device` with copies of the hand, the wrenches and the table there (suffix _on); the SDF
    # caches its grid per device itself
    device = torch.device(options.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"synthesis device {options.device!r}: this machine has no CUDA device for torch")
    hand_on = hand if device.type == "cpu" else hand.to(device)
    wrenches_on = wrenches.to(device)
    T_table_on = None if T_table_object is None else T_table_object.to(device)
    on = dict(dtype=dtype, device=device)
    translation = T0[:, :3, 3].to(**on).clone().requires_grad_(True)
    rot6d = rot6d_from_matrix(T0[:, :3, :3]).to(**on).clone().requires_grad_(True)
    q = q0.to(**on).clone().requires_grad_(True)
    normal_force_n = torch.zeros(B, num_contact, **on, requires_grad=True)
    # stored (B, K, 3, C) and used as its (B, K, C, 3) view: with the xyz axis outermost the elementwise work on
    # it and the sums over xyz run along contiguous memory (~10x faster on the CPU than xyz innermost)
    tangential_store = torch.zeros(B, len(wrenches), 3, num_contact, **on, requires_grad=True)
    groups = [(translation, config.lr_translation_m), (rot6d, config.lr_rotation), (q, config.lr_joints_rad),
              (normal_force_n, config.lr_force_n), (tangential_store, config.lr_force_n)]
    optimizer = torch.optim.Adamax([{"params": [p], "lr": lr} for p, lr in groups], betas=config.adamax_betas)
    base_lrs = [lr for _, lr in groups]
    multipliers = torch.zeros(B, 2, **on)  # task, joint limits
    rates = torch.tensor([config.mdmm.task_rate, config.mdmm.limit_rate], **on)
    damping = torch.tensor([config.mdmm.task_damping, config.mdmm.limit_damping], **on)
    failed = torch.zeros(B, dtype=torch.bool, device=device)
    reasons: dict[int, str] = {}
    frozen = [p.detach().clone() for p, _ in groups]
    w, mdmm = config.weights, config.mdmm
    lower_slack = (hand_on.lower_limits_rad - config.joint_limit_slack_rad).to(dtype)
    upper_slack = (hand_on.upper_limits_rad + config.joint_limit_slack_rad).to(dtype)

    def state() -> HandState:
        return HandState(pose_from_translation_rot6d(translation, rot6d), q, normal_force_n, tangential_store.transpose(-1, -2))

    step, partial, cancelled = 0, False, False
    while step < config.num_steps:
        offset = offset_at(step, config)
        factor = lr_factor_at(step, config)
        for group, lr in zip(optimizer.param_groups, base_lrs):
            group["lr"] = lr * factor
        current = state()
        terms: LossTerms = evaluate_losses(hand_on, sdf, current, wrenches_on, torque_length, offset, config.contact,
                                           T_table_on, config.table_clearance_m, config.physics, config.task_moves_hand,
                                           config.free_clearance_m, config.relaxation)
        constraints = torch.stack([terms.task - mdmm.task_tolerance_n2, terms.joint_limits], -1)
        objective = (w.physics * terms.physics + w.joint_midrange * terms.joint_midrange
                     + w.self_intersection * terms.self_intersection + w.table * terms.table
                     + (multipliers * constraints + 0.5 * damping * constraints.square()).sum(-1))
        if options.extra_objective is not None:
            objective = objective + options.extra_objective(current)
        finite = torch.isfinite(objective) & ~failed
        optimizer.zero_grad(set_to_none=False)
        torch.where(finite, objective, torch.zeros_like(objective)).sum().backward()
        with torch.no_grad():
            for p, _ in groups:
                if p.grad is None:  # a variable the objective does not use (the desired forces, unrelaxed)
                    p.grad = torch.zeros_like(p)
                finite &= torch.isfinite(p.grad.reshape(B, -1)).all(-1)
            newly = ~finite & ~failed
            for b in torch.nonzero(newly).flatten().tolist():
                reasons[b] = f"non-finite loss or gradient at step {step}"
            failed |= newly
            for (p, _), keep in zip(groups, frozen):
                p.grad[failed] = 0.0
                keep[newly] = p[newly]  # the last finite state
            optimizer.step()
            for (p, _), keep in zip(groups, frozen):
                p[failed] = keep[failed]
            normal_force_n.clamp_(min=0.0)
            q.copy_(torch.maximum(torch.minimum(q, upper_slack), lower_slack))
            active = (~failed).to(dtype)[:, None]
            multipliers.add_(rates * constraints.detach().nan_to_num(0.0) * active).clamp_(min=0.0)
        step += 1
        if step % config.chunk_steps == 0 or step == config.num_steps:
            if options.progress is not None:
                options.progress(step / config.num_steps)
            if options.on_chunk is not None:
                with torch.no_grad():
                    options.on_chunk(step, HandState(*(t.detach().cpu().clone() for t in (
                        pose_from_translation_rot6d(translation, rot6d), q, normal_force_n, tangential_store.transpose(-1, -2)))), terms)
            if step < config.num_steps:
                if options.should_stop is not None and options.should_stop():
                    partial = cancelled = True
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    partial = True
                    break

    failed = failed.cpu()
    with torch.no_grad():
        cpu64 = dict(device="cpu", dtype=torch.float64)
        T_final = pose_from_translation_rot6d(translation, rot6d).to(**cpu64)
        q_final = q.detach().to(**cpu64)
        final_state = HandState(T_final, q_final, normal_force_n.detach().to(**cpu64),
                                tangential_store.detach().transpose(-1, -2).to(**cpu64))
        metrics = grasp_metrics(hand, sdf, final_state, wrenches.to(torch.float64), torque_length, config.contact,
                                T_table_object, config.contact_threshold_m)
        q_clamped, tips, tip_normals = fingertip_contacts(hand, sdf, T_final, q_final)
    result = SynthesisResult(
        T_object_root=T_final, joint_angles_rad=q_clamped, fingertip_points_m=tips, fingertip_normals=tip_normals,
        metrics=metrics,
        failed=failed, failure_reasons=reasons, partial=partial, cancelled=cancelled, steps_done=step,
        num_steps=config.num_steps, elapsed_s=time.monotonic() - started, frame_id=sdf.frame_id)
    if _is_allegro(hand):
        result.grasp, result.pregrasp_clearance_m, result.pregrasp_opened = allegro_grasp(
            T_final, q_clamped, tip_normals, hand, sdf, T_table_object, config)
    return result


def fingertip_contacts(hand: HandModel, sdf: ObjectSDF, T_object_root: torch.Tensor,
                       q_rad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The joints clamped into the limits, the (B, F, 3) fingertip points there and the object's outward normals at
    them (away from the object's centre where the grid gradient vanishes), in the SDF's frame."""
    with torch.no_grad():
        q_clamped = torch.maximum(torch.minimum(q_rad, hand.upper_limits_rad), hand.lower_limits_rad)
        tips = hand.fingertip_points(hand.link_poses(T_object_root, q_clamped))
        _, tip_normals = sdf.query(tips, 0.0)
        outward = tips - sdf.centre_m
        outward = outward / outward.norm(dim=-1, keepdim=True).clamp_min(1e-9)
        flat = ~(tip_normals.norm(dim=-1, keepdim=True) >= 0.5)  # the gradient cancels (medial axis), or NaN
    return q_clamped, tips, torch.where(flat, outward, tip_normals)


def _is_allegro(hand: HandModel) -> bool:
    from getagrip_ros.robot.description import HAND_JOINT_NAMES

    return list(hand.joint_names) == list(HAND_JOINT_NAMES) and len(hand.fingertip_links) == 4


#: Flexion joints of each Allegro finger (Get a Grip order): index, middle, ring MCP/PIP/DIP; thumb 13-15.
ALLEGRO_FLEXION_JOINTS = ((1, 2, 3), (5, 6, 7), (9, 10, 11), (13, 14, 15))


def allegro_grasp(T_object_root: torch.Tensor, q_contact_rad: torch.Tensor, fingertip_normals: torch.Tensor,
                  hand: HandModel, sdf: ObjectSDF, T_table_object: Optional[torch.Tensor] = None,
                  config: SynthesisConfig = SynthesisConfig()):
    """The project's 37-D Grasp of Allegro grasps in contact (wrist poses (B, 4, 4), joints (B, 16) within the limits,
    outward object normals (B, 4, 3) at the fingertips, as :func:`fingertip_contacts` gives them): the wrist pose,
    the pre-grasp joints and the closing directions, in the SDF's frame.

    Each finger leaves its synthesised contact by the first move at which every sample of the finger lies
    ``config.pregrasp_clearance_m`` off the object (the SDF) and above the table:
    - ``config.pregrasp == "flex"``: its flexion joints (:data:`ALLEGRO_FLEXION_JOINTS`) open by each of
      ``pregrasp_flex_rad`` in turn (within the limits); its closing direction is the unit chord from the pre-grasp
      contact point back to the synthesised one, so the protocol's closing (the fingertip moved along it by IK)
      retraces the finger's own motion past the contact and squeezes;
    - otherwise, and for a finger that clears at no opening: the fingertip backs off along its contact normal by
      each of ``pregrasp_backoff_m`` (fingertip IK); its closing direction is the inward normal. A finger that
      clears at none takes the last back-off.

    Returns the grasps, the (B,) smallest gap (m) of the whole hand to the object and the table at them, and (B, 4)
    whether each finger opened (False: backed off along the normal).
    """
    from getagrip_ros.grasp.grasp import Grasp
    from getagrip_ros.robot.allegro import NUM_FINGERS, AllegroHand, move_fingertips

    allegro = AllegroHand(dtype=torch.float64)
    R = T_object_root[:, :3, :3]
    inward_palm = -fingertip_normals @ R  # R^T (-n), batched
    finger_of_link = torch.tensor([_allegro_finger(name) for name in hand.link_names])
    finger_of_sample = finger_of_link[hand.sample_link]  # (N,) 0-3, -1 for the palm
    B, per_finger = len(T_object_root), hand.num_joints // NUM_FINGERS
    q_contact = q_contact_rad.to(torch.float64)

    def gaps(q: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            points = hand.surface_points(hand.link_poses(T_object_root, q))
            gap = sdf.distance(points, 0.0)
            if T_table_object is not None:
                T = T_table_object.to(points)
                gap = torch.minimum(gap, points @ T[2, :3] + T[2, 3])
        return gap

    def clear(q: torch.Tensor) -> torch.Tensor:
        """(B, 4) whether each finger clears at joints q."""
        gap = gaps(q) >= config.pregrasp_clearance_m
        return torch.stack([gap[:, finger_of_sample == f].all(-1) for f in range(NUM_FINGERS)], -1)

    chosen = q_contact.reshape(B, NUM_FINGERS, per_finger).clone()
    directions_palm = inward_palm.clone()
    settled = torch.zeros(B, NUM_FINGERS, dtype=torch.bool)
    with torch.no_grad():
        if config.pregrasp == "flex":
            contact_points = allegro.contact_positions(q_contact)
            flexion = torch.zeros(hand.num_joints, dtype=torch.float64)
            flexion[[j for joints in ALLEGRO_FLEXION_JOINTS for j in joints]] = 1.0
            for angle in config.pregrasp_flex_rad:
                q = allegro.clamp_to_limits(q_contact - angle * flexion)
                chord = contact_points - allegro.contact_positions(q)
                length = chord.norm(dim=-1, keepdim=True)
                take = ~settled & clear(q) & (length[..., 0] > 1e-3)
                chosen[take] = q.reshape(B, NUM_FINGERS, per_finger)[take]
                directions_palm[take] = (chord / length.clamp_min(1e-9))[take]
                settled |= take
            opened = settled.clone()
        elif config.pregrasp == "normal":
            opened = settled.clone()
        else:
            raise ValueError(f"unknown pregrasp {config.pregrasp!r} (flex or normal)")
        for k, backoff in enumerate(config.pregrasp_backoff_m):
            q = move_fingertips(allegro, q_contact, inward_palm, -backoff).joint_angles_rad.double().cpu()
            take = ~settled & (clear(q) | (k == len(config.pregrasp_backoff_m) - 1))
            chosen[take] = q.reshape(B, NUM_FINGERS, per_finger)[take]
            directions_palm[take] = inward_palm[take]
            settled |= take
    q_pregrasp = chosen.reshape(B, -1)
    directions_object = directions_palm @ R.transpose(1, 2)  # R d, batched
    grasp = Grasp(T_object_root[:, :3, 3], R, q_pregrasp, directions_object, frame_id=sdf.frame_id)
    return grasp, gaps(q_pregrasp).amin(-1), opened


def _allegro_finger(link_name: str) -> int:
    """Finger 0-3 (index, middle, ring, thumb) of an Allegro link ``link_<i>.0[_tip]``; -1 for the palm."""
    if not link_name.startswith("link_"):
        return -1
    return int(float(link_name[5:].removesuffix("_tip"))) // 4
