"""The relaxed grasp objective of Grasp'D, hand-agnostic: task, physics and hand losses, and grasp metrics.

Relaxation: the desired contact forces are free variables. Each contact sample i carries one desired
normal force ``lambda_i >= 0`` (the grasp's squeeze, shared by all disturbances) and, for each object
wrench k to resist, a tangential force ``t_ik`` (static friction adapts to the disturbance). Forces on the
object: ``f_ik = -lambda_i n_i + P_i t_ik`` (``P_i`` projects onto the tangent plane).

- Task loss: mean over k of ``|W(f_k) + w_k|^2``, the residual of the desired forces resisting wrench w_k.
  W = [sum f; sum (p - c) x f / L]: torques about the object centre c are divided by a length L (the
  object's size), so a "unit torque" is 1 N at that lever and both parts are in newtons.
- Physics loss: the desired forces against those the hand pose produces, ``sum |lambda_i - f_n,i|`` on
  contact samples, ``sum f_n`` on samples that may not carry force, and the friction-cone excess
  ``sum relu(|t_ik| - mu lambda_i)``. N (an L1 sum, see :func:`physics_loss`).
- Hand losses: joints toward mid-range, joint-limit violation (summed, rad), self-intersection of collision
  spheres on non-adjacent links (sum of overlaps, m) and hand-table penetration (sum of depths of samples
  below z = clearance of the table frame, m).

All losses are per grasp, shape (B,).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

import torch

from getagrip_ros.grasp.quality import epsilon_quality
from getagrip_ros.grasp.rotations import skew
from getagrip_ros.synthesis.contact import ContactConfig, friction_cone_excess, normal_force, tangential_part
from getagrip_ros.synthesis.hand_model import HandModel
from getagrip_ros.synthesis.object_sdf import ObjectSDF


def axis_wrenches(kind: Literal["axes6", "axes12"] = "axes6", dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(K, 6) unit object wrenches [force | torque / L]: "axes6" the +x, +y, +z forces and torques (paper: 6),
    "axes12" both signs of each."""
    eye = torch.eye(6, dtype=dtype)
    if kind == "axes6":
        return eye
    if kind == "axes12":
        return torch.cat([eye, -eye])
    raise ValueError(f"unknown task wrenches {kind!r} (axes6 or axes12)")


def object_wrenches(points_m: torch.Tensor, forces_n: torch.Tensor, centre_m: torch.Tensor,
                    torque_length_m: float) -> torch.Tensor:
    """Net wrench (B, K, 6) of forces (B, K, C, 3) at points (B, C, 3): [sum f | sum (p - c) x f / L]."""
    arm = skew(points_m - centre_m)  # (B, C, 3, 3)
    torque = torch.einsum("bcij,bkcj->bki", arm, forces_n) / torque_length_m
    return torch.cat([forces_n.sum(-2), torque], -1)


def task_loss(points_m: torch.Tensor, normals: torch.Tensor, normal_force_n: torch.Tensor,
              tangential_force_n: torch.Tensor, wrenches: torch.Tensor, centre_m: torch.Tensor,
              torque_length_m: float) -> torch.Tensor:
    """(B,) mean squared residual (N^2) of the desired contact forces resisting each wrench (K, 6).

    Forces on the object: ``-normal_force_n (B, C) * normals`` plus the tangential forces (B, K, C, 3), which must
    already lie in the tangent planes (:func:`tangential_part`).
    """
    arm = skew(points_m - centre_m)  # (B, C, 3, 3)
    push = -normal_force_n[..., None] * normals  # (B, C, 3), shared by all wrenches
    force = push.sum(1)[:, None] + tangential_force_n.sum(2)
    torque = (torch.einsum("bcij,bcj->bi", arm, push)[:, None] + torch.einsum("bcij,bkcj->bki", arm, tangential_force_n))
    residual = torch.cat([force, torque / torque_length_m], -1) + wrenches.to(force)
    return residual.square().sum(-1).mean(-1)


@dataclass(frozen=True)
class PhysicsLossConfig:
    """Shape of the physics loss (see :func:`physics_loss`)."""

    smoothing_n: float = 1e-3
    """Width of the smooth minimum of the L1 mismatch."""
    quadratic_scale_n: float = 100.0
    """Produced force beyond the desired one is also charged excess^2 / (2 * this): a push out that grows with the
    depth (k_n / this per metre per metre), so a penetrating sample is not held in by the pull of many others."""


def soft_abs(x: torch.Tensor, eps: float) -> torch.Tensor:
    """sqrt(x^2 + eps^2) - eps: |x| with a smooth minimum of width eps."""
    return (x.square() + eps * eps).sqrt() - eps


def physics_loss(normal_force_n: torch.Tensor, tangential_force_n: torch.Tensor, produced_contact_n: torch.Tensor,
                 produced_free_n: torch.Tensor, contact: ContactConfig = ContactConfig(),
                 config: PhysicsLossConfig = PhysicsLossConfig()) -> torch.Tensor:
    """(B,) mismatch (N) of desired and produced forces: normal forces on the contact samples (B, C), any produced
    force on the samples that may carry none (B, N - C), and tangential forces (B, K, C, 3), in the tangent
    planes, beyond the friction cone of the desired normal forces.

    An L1 sum (smoothed over `smoothing_n`): the pull of a desired force on a sample not yet touching is then
    alpha * k_n whatever its size, and the push out of a penetrating one k_n, so spreading the desired forces
    thinly over far samples earns nothing and the gradients stay within a factor 1 / alpha of each other. Excess
    produced force is also charged quadratically (``quadratic_scale_n``).
    """
    mismatch = normal_force_n - produced_contact_n
    q = 2.0 * config.quadratic_scale_n
    normal = (soft_abs(mismatch, config.smoothing_n) + (-mismatch).clamp_min(0).square() / q).sum(-1)
    stray = (soft_abs(produced_free_n, config.smoothing_n) + produced_free_n.square() / q).sum(-1)
    cone = friction_cone_excess(tangential_force_n, normal_force_n[:, None], contact).sum((-1, -2))
    return normal + stray + cone


def joint_midrange_loss(q_rad: torch.Tensor, lower_rad: torch.Tensor, upper_rad: torch.Tensor) -> torch.Tensor:
    """(B,) sum of ((q - mid) / range)^2: joints toward the middle of their range."""
    mid, span = (lower_rad + upper_rad) / 2, (upper_rad - lower_rad).clamp_min(1e-6)
    return ((q_rad - mid) / span).square().sum(-1)


def joint_limit_loss(q_rad: torch.Tensor, lower_rad: torch.Tensor, upper_rad: torch.Tensor) -> torch.Tensor:
    """(B,) sum of the violations (rad) of the joint limits."""
    return ((q_rad - upper_rad).clamp_min(0) + (lower_rad - q_rad).clamp_min(0)).sum(-1)


def self_intersection_loss(centres_m: torch.Tensor, radii_m: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """(B,) sum of overlaps (m) of collision-sphere pairs (P, 2) (those on non-adjacent links)."""
    if len(pairs) == 0:
        return centres_m.new_zeros(centres_m.shape[0])
    i, j = pairs[:, 0], pairs[:, 1]
    gap = ((centres_m[:, i] - centres_m[:, j]).square().sum(-1) + 1e-18).sqrt() - (radii_m[i] + radii_m[j]).to(centres_m)
    return (-gap).clamp_min(0).sum(-1)


def table_penetration_loss(points_m: torch.Tensor, T_table_object: Optional[torch.Tensor],
                           clearance_m: float = 0.0) -> torch.Tensor:
    """(B,) sum of depths (m) of points (B, N, 3) below z = clearance of the table frame (None: no table)."""
    if T_table_object is None:
        return points_m.new_zeros(points_m.shape[0])
    T = T_table_object.to(points_m)
    z = points_m @ T[2, :3] + T[2, 3]
    return (clearance_m - z).clamp_min(0).sum(-1)


@dataclass
class HandState:
    """The optimised variables of B grasps (object frame, metres, radians, newtons)."""

    T_object_root: torch.Tensor
    """(B, 4, 4) wrist (hand root) poses."""
    q_rad: torch.Tensor
    """(B, J) joints."""
    normal_force_n: torch.Tensor
    """(B, C) desired normal forces on the contact samples (>= 0)."""
    tangential_force_n: torch.Tensor
    """(B, K, C, 3) desired tangential forces per task wrench (projected onto the tangent planes)."""


@dataclass
class LossTerms:
    """Per-grasp (B,) losses and the geometry they were computed from."""

    task: torch.Tensor
    physics: torch.Tensor
    joint_midrange: torch.Tensor
    joint_limits: torch.Tensor
    self_intersection: torch.Tensor
    table: torch.Tensor
    distance_m: torch.Tensor
    """(B, N) signed distance of every sample to the offset surface."""
    contact_normals: torch.Tensor
    """(B, C, 3) object normals at the contact samples (the first C samples)."""
    points_m: torch.Tensor
    """(B, N, 3) samples in the object frame."""
    T_object_link: torch.Tensor
    """(B, L, 4, 4)."""


def evaluate_losses(hand: HandModel, sdf: ObjectSDF, state: HandState, wrenches: torch.Tensor, torque_length_m: float,
                    offset_m: float, contact: ContactConfig = ContactConfig(),
                    T_table_object: Optional[torch.Tensor] = None, table_clearance_m: float = 0.0,
                    physics: PhysicsLossConfig = PhysicsLossConfig(), task_moves_hand: bool = False,
                    free_clearance_m: float = 0.0, relaxed: bool = True) -> LossTerms:
    """All loss terms of the relaxed objective for B grasps, with contacts on the level set at `offset_m`.

    free_clearance_m: samples that may carry no force feel the level set this much further out (they are kept
    that far off the surface, e.g. the palm and proximal links of a fingertip grasp).
    relaxed: False is the ablation without relaxation: the task uses the normal forces the hand pose produces
    (the desired normal forces are unused), so only the contact model's (leaky) gradient moves the hand.

    task_moves_hand: whether the task loss's gradient reaches the hand through the contact points and normals
    (False: the task shapes only the desired forces, and the physics loss moves the hand toward them).
    """
    T_object_link = hand.link_poses(state.T_object_root, state.q_rad)
    points = hand.surface_points(T_object_link)
    C = hand.num_contact_samples  # contact samples come first; only they need the object's normals
    p_c = points[:, :C]
    distance_c, n_c = sdf.query(p_c, offset_m)
    n_c = n_c.transpose(-1, -2).contiguous().transpose(-1, -2)  # xyz outermost in memory, like the optimiser's forces
    distance_free = sdf.distance(points[:, C:], offset_m)
    distance = torch.cat([distance_c, distance_free], 1)
    produced = normal_force(torch.cat([distance_c, distance_free - free_clearance_m], 1), contact)
    tangential = tangential_part(state.tangential_force_n, n_c[:, None])
    if task_moves_hand:
        p_task, n_task, t_task = p_c, n_c, tangential
    else:
        p_task, n_task = p_c.detach(), n_c.detach()
        t_task = tangential_part(state.tangential_force_n, n_task[:, None])
    lower, upper = hand.lower_limits_rad.to(state.q_rad), hand.upper_limits_rad.to(state.q_rad)
    desired_n = state.normal_force_n if relaxed else produced[:, :C]
    return LossTerms(
        task=task_loss(p_c if not relaxed else p_task, n_c if not relaxed else n_task, desired_n, t_task, wrenches,
                       sdf.centre_m.to(points), torque_length_m),
        physics=physics_loss(desired_n, tangential, produced[:, :C], produced[:, C:], contact, physics),
        joint_midrange=joint_midrange_loss(state.q_rad, lower, upper),
        joint_limits=joint_limit_loss(state.q_rad, lower, upper),
        self_intersection=self_intersection_loss(hand.sphere_centres(T_object_link), hand.sphere_radii_m, hand.self_collision_pairs),
        table=table_penetration_loss(points, T_table_object, table_clearance_m),
        distance_m=distance, contact_normals=n_c, points_m=points, T_object_link=T_object_link,
    )


# ---------------------------------------------------------------------------------------------------
# Metrics of finished grasps (true surface, offset 0)
@dataclass
class GraspMetrics:
    """Per-grasp (B,) quality measures on the true surface (the SDF grid at offset 0)."""

    task_loss: torch.Tensor
    """Residual (N^2) of the desired forces resisting the task wrenches."""
    contact_samples: torch.Tensor
    """Samples within `contact_threshold_m` of the surface (either side)."""
    contact_area_cm2: torch.Tensor
    """Their area (each sample's share of its link's surface): a proxy of the paper's contact area."""
    penetration_depth_m: torch.Tensor
    """Deepest sample inside the object (0 if none)."""
    penetration_volume_cm3: torch.Tensor
    """Sum over samples of area x depth inside the object: a proxy of the interpenetration volume."""
    fingertip_distance_m: torch.Tensor
    """(B, F) signed distance of the closest sample of each fingertip link (negative: inside)."""
    self_intersection_m: torch.Tensor
    """Largest overlap of collision spheres on non-adjacent links."""
    table_penetration_m: torch.Tensor
    """Deepest sample below the table (0 if none or no table)."""
    joint_limit_violation_rad: torch.Tensor
    """Largest violation of a joint limit before the output is clamped to them."""

    def as_dict(self) -> dict[str, torch.Tensor]:
        return dict(self.__dict__)


def grasp_metrics(hand: HandModel, sdf: ObjectSDF, state: HandState, wrenches: torch.Tensor, torque_length_m: float,
                  contact: ContactConfig = ContactConfig(), T_table_object: Optional[torch.Tensor] = None,
                  contact_threshold_m: float = 0.002) -> GraspMetrics:
    """Metrics of B grasps on the true surface."""
    with torch.no_grad():
        terms = evaluate_losses(hand, sdf, state, wrenches, torque_length_m, 0.0, contact, T_table_object, 0.0)
        d = terms.distance_m
        area = hand.sample_area_m2.to(d)
        near = d.abs() <= contact_threshold_m
        depth = (-d).clamp_min(0)
        tip_d = torch.stack([d[:, hand.sample_link == link].min(-1).values for link in hand.fingertip_links], -1) \
            if hand.fingertip_links else d.new_zeros(d.shape[0], 0)
        if len(hand.self_collision_pairs):
            c = hand.sphere_centres(terms.T_object_link)
            i, j = hand.self_collision_pairs[:, 0], hand.self_collision_pairs[:, 1]
            overlap = ((hand.sphere_radii_m[i] + hand.sphere_radii_m[j]).to(d) - (c[:, i] - c[:, j]).norm(dim=-1)).clamp_min(0).amax(-1)
        else:
            overlap = d.new_zeros(d.shape[0])
        if T_table_object is None:
            below = d.new_zeros(d.shape[0])
        else:
            T = T_table_object.to(d)
            below = (-(terms.points_m @ T[2, :3] + T[2, 3])).clamp_min(0).amax(-1)
        lower, upper = hand.lower_limits_rad.to(d), hand.upper_limits_rad.to(d)
        violation = ((state.q_rad - upper).clamp_min(0) + (lower - state.q_rad).clamp_min(0)).amax(-1)
        return GraspMetrics(
            task_loss=terms.task, contact_samples=near.sum(-1), contact_area_cm2=(near * area).sum(-1) * 1e4,
            penetration_depth_m=depth.amax(-1), penetration_volume_cm3=(depth * area).sum(-1) * 1e6,
            fingertip_distance_m=tip_d, self_intersection_m=overlap, table_penetration_m=below,
            joint_limit_violation_rad=violation)


def hand_contacts(hand: HandModel, sdf: ObjectSDF, T_object_root: torch.Tensor, q_rad: torch.Tensor,
                  threshold_m: float = 0.005) -> tuple[torch.Tensor, torch.Tensor]:
    """Point contacts of one hand pose ((4, 4) root pose, (J,) joints) on the object: per link, its sample nearest
    the surface (or deepest inside) if within `threshold_m`, projected onto the surface. Returns points (K, 3) and
    inward unit normals (K, 3), object frame."""
    with torch.no_grad():
        samples = hand.surface_points(hand.link_poses(T_object_root[None].double(), q_rad[None].double()))[0]
        d, grad = sdf.query(samples, 0.0)
        normal = grad / grad.norm(dim=-1, keepdim=True).clamp_min(1e-9)
        best = torch.full((len(hand.link_names),), float("inf"), dtype=d.dtype).scatter_reduce(0, hand.sample_link, d, "amin")
        points, normals = [], []
        for link in torch.nonzero(best <= threshold_m).flatten().tolist():
            i = torch.nonzero((hand.sample_link == link) & (d == best[link])).flatten()[0]
            points.append(samples[i] - d[i] * normal[i])
            normals.append(-normal[i])
    if not points:
        return samples.new_zeros(0, 3), samples.new_zeros(0, 3)
    return torch.stack(points), torch.stack(normals)


def hand_epsilon_quality(hand: HandModel, sdf: ObjectSDF, T_object_root: torch.Tensor, q_rad: torch.Tensor,
                         threshold_m: float = 0.005, friction: float = 0.5, edges: int = 8) -> float:
    """Epsilon-quality (:func:`getagrip_ros.grasp.quality.epsilon_quality`) of the hand's contacts
    (:func:`hand_contacts`), torques about the object's centre over its largest radius."""
    points, normals = hand_contacts(hand, sdf, T_object_root, q_rad, threshold_m)
    centre = sdf.centre_m
    radius = float((sdf.surface_points_m - centre).norm(dim=-1).max())
    return epsilon_quality(points.numpy(), normals.numpy(), centre.numpy(), radius, friction, edges)
