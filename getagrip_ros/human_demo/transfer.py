"""Transfer a human grasp demonstration to the Allegro hand by optimisation (after "Multi-Finger Grasping Like
Humans", ``../shared/seeds/002_*``).

The robot grasp should touch the object where the human hand does and approach it the same way. No hand-made
finger correspondences: the objective is

    L = w_C L_C + w_O L_O + w_I L_I + w_S L_S (+ the hand above the table, this project's addition)

- L_C, contact heatmaps: on points sampled on the object, H(o) = exp(-d(o, hand) / tau), tau = 1 cm; the mean L1
  difference of the human and the robot heatmaps (d: to the keypoint hand's capsules, to a MANO mesh's
  vertices, to the Allegro's surface samples);
- L_O, orientation: |n_robot - n_human|_1 + |f_robot - f_human|_1 of the palm normal n and forward vector f;
- L_I, interpenetration: alpha1 L_push + beta1 L_pull + gamma1 L_normal. L_push: sum of tanh(depth / alpha2) of
  the robot samples inside the object (the SDF) and of the object points inside the robot (its collision spheres);
  L_pull: sum of tanh(min(d, delta) / beta2) over the robot samples; L_normal: 1 + <n_robot, n_object> over the
  samples within delta;
- L_S: sum of tanh(overlap / alpha2) of the Allegro's collision spheres on non-adjacent links.

Three steps: (a) the open hand at the human palm (its palm frame on the human's); (b) the fingers only, their
tips pulled to the nearest human contact region with L_I + L_S (the seed's), or closed joint by joint until they
would go deeper (the seed's discrete ablation); (c) everything, AdamW (1e-3 translation, 1e-2 rotation and joints),
100 iterations, the rates divided by 10 at 50. By default (ours) (c) runs from both (b)s and the lower final L wins.
Joints stay within their limits (projected).
The result is the project's 37-D grasp: pre-grasp joints and closing directions from the synthesis's
:func:`allegro_grasp`. Object frame throughout; metres, radians.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Literal, Optional

import numpy as np
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.rotations import rot6d_from_matrix, so3_exp
from getagrip_ros.human_demo.demonstration import HumanDemonstration
from getagrip_ros.human_demo.human_hand import (FINGERTIP_KEYPOINTS, capsule_distance, contact_heatmap,
                                                demonstration_keypoints, palm_vectors)
from getagrip_ros.synthesis.hand_model import HandModel, pose_from_translation_rot6d
from getagrip_ros.synthesis.losses import hand_epsilon_quality
from getagrip_ros.synthesis.object_sdf import ObjectSDF
from getagrip_ros.synthesis.optimizer import (ALLEGRO_FLEXION_JOINTS, SynthesisConfig, SynthesisOptions, allegro_grasp,
                                              fingertip_contacts, synthesize_grasps)

#: The weighted terms of step (c), as :meth:`TransferObjective.total` names them.
TERMS = ("contact", "orientation", "interpenetration", "self_penetration", "table", "fingertips")
#: Step (b)'s choices (:attr:`TransferConfig.finger_init`).
FINGER_INITS = ("both", "contact", "discrete")


@dataclass(frozen=True)
class TransferWeights:
    """The seed's weights (lambda_C = 10, lambda_I = 0.5, lambda_S = 1) but lambda_O = 100 (ours; at the seed's 10 the
    hand turned by up to 0.2 to escape penetration, mean orientation difference 0.057 on 60 demonstrations); the
    table as L_push."""

    contact: float = 10.0
    orientation: float = 100.0
    interpenetration: float = 0.5
    self_penetration: float = 1.0
    table: float = 2.4
    fingertips: float = 0.0
    """L_F, ours (not the seed's): per metre that a human fingertip contact lies from the nearest Allegro fingertip."""


@dataclass(frozen=True)
class InterpenetrationConfig:
    """L_I's constants (the seed's): alpha1 = 2.4, beta1 = 7, gamma1 = 0.001, alpha2 = 4 cm, beta2 = 6 cm, delta = 2 mm."""

    alpha1: float = 2.4
    beta1: float = 7.0
    gamma1: float = 0.001
    alpha2_m: float = 0.04
    beta2_m: float = 0.06
    delta_m: float = 0.002


@dataclass(frozen=True)
class TransferConfig:
    """Build options of the transfer."""

    tau_m: float = 0.01
    """Heatmap softness (the seed's 1 cm)."""
    num_object_points: int = 2000
    """Object points the heatmaps are computed on (drawn from the SDF's surface samples)."""
    weights: TransferWeights = TransferWeights()
    interpenetration: InterpenetrationConfig = InterpenetrationConfig()
    finger_init: Literal["both", "contact", "discrete"] = "both"
    """Step (b): "contact", the fingertips optimised toward the human contact regions (the seed's); "discrete", the
    seed's ablation: each flexion joint, base to tip, closed to the most closed of ``discrete_bins`` values that does
    not push the hand deeper into the object; "both" (ours): step (c) from each, keeping the grasp with the lower
    final objective."""
    finger_iterations: int = 50
    """Step (b) "contact": iterations."""
    discrete_bins: int = 10
    finger_lr: float = 1e-2
    iterations: int = 100
    """Step (c): the full optimisation (the seed's 100; 0 leaves it out)."""
    terms: tuple[str, ...] = TERMS
    """Step (c)'s terms (the ablation leaves some out)."""
    lr_translation: float = 1e-3
    lr_rotation: float = 1e-2
    lr_joints: float = 1e-2
    lr_drop_at: int = 50
    lr_drop_factor: float = 0.1
    contact_region_heat: float = 0.5
    """Object points whose human heatmap is at least this are the human contact region (d <= tau ln 2 = 7 mm)."""
    fingertip_contact_m: float = 0.015
    """A human fingertip keypoint this close to an object point touches the object there: a fingertip contact of L_F
    (the keypoint lies inside the finger, about its radius, 8-9 mm, from the skin)."""
    max_demo_distance_m: float = 0.02
    """A demonstration whose hand comes no closer than this to the object is refused."""

    def __post_init__(self) -> None:
        if self.finger_init not in FINGER_INITS:
            raise ValueError(f"finger_init must be one of {', '.join(FINGER_INITS)}, got {self.finger_init!r}")
        if unknown := set(self.terms) - set(TERMS):
            raise ValueError(f"unknown transfer terms {sorted(unknown)}; known: {', '.join(TERMS)}")


@dataclass(frozen=True)
class SimilarityRegion:
    """Where variants of a transferred grasp may go (:func:`similar_grasps`): random moves of its contact state, kept
    only while they stay like the demonstration."""

    translation_std_m: float = 0.01
    rotation_std_rad: float = 0.03
    """Palm rotation (axis-angle, each component)."""
    joint_std_rad: float = 0.1
    max_contact_increase: float = 0.02
    """A variant's contact heatmap difference may exceed the transfer's by at most this."""
    max_orientation_difference: float = 0.1
    """A variant's orientation difference stays below this (the seed's L_O: about 0.04 per degree the palm turns)."""


@dataclass(frozen=True)
class PhysicsRefinement:
    """Refinement of a transferred grasp by the contact-rich synthesis core (Grasp'D, :mod:`getagrip_ros.synthesis`):
    from the transfer and random moves of it (the similarity region's spreads), ``num_steps`` steps of the synthesis's
    objective (desired forces that resist every object wrench, produced by the hand at the surface), with the
    demonstration kept by a soft trust region: ``weight x excess^2`` of the contact heatmap difference beyond the
    transfer's + ``max_contact_increase`` and of the orientation difference beyond ``max_orientation_difference``
    (:meth:`TransferObjective.trust_region_penalty`). The region is soft: the refined grasps mostly end outside it, and
    what they cost in similarity is measured (README "Grasp like a human")."""

    num_steps: int = 0
    """Synthesis steps (0: no refinement)."""
    num_starts: int = 8
    """The transfer and this many minus one random moves of it, refined together."""
    offset_start_m: float = 0.02
    """Coarse-to-fine: the level-set offset at the first step (falls to 0 as in the synthesis)."""
    contact_weight: float = 1e6
    """Per unit^2 of excess contact heatmap difference (the synthesis's objective is in N; its physics term is
    ~1e3-1e4 N while the hand moves)."""
    orientation_weight: float = 1e5
    """Per unit^2 of excess orientation difference."""
    penalty_points: int = 500
    """Object points the penalty's contact heatmaps are compared on (a random subset of the transfer's; the reported
    differences use all)."""

    def __post_init__(self) -> None:
        if self.num_steps < 0 or self.num_starts < 1:
            raise ValueError(f"physics refinement: num_steps must be >= 0 and num_starts >= 1, got {self.num_steps}, "
                             f"{self.num_starts}")


class TransferError(ValueError):
    """A demonstration that cannot be transferred to this object; the message says why."""


@dataclass
class TransferResult:
    """One transferred grasp in the object frame."""

    grasp: object
    """The 37-D :class:`getagrip_ros.grasp.grasp.Grasp` (one grasp)."""
    T_object_palm: torch.Tensor
    """(4, 4) the Allegro palm in contact."""
    joint_angles_rad: torch.Tensor
    """(16,) the joints in contact."""
    object_points_m: torch.Tensor
    """(N, 3) the points the heatmaps are on."""
    heatmap_human: torch.Tensor
    heatmap_robot: torch.Tensor
    contact_heatmap_difference: float
    """Mean |H_human - H_robot| over the object points (the seed's L_C as a metric)."""
    orientation_difference: float
    """|n_r - n_h|_1 + |f_r - f_h|_1 (the seed's L_O)."""
    penetration_depth_m: float
    """Deepest robot sample inside the object."""
    penetration_volume_cm3: float
    """Sum over the robot's surface samples inside the object of area x depth: an estimate of the volume."""
    epsilon_quality: float
    """Epsilon-quality of the robot's contacts (:func:`getagrip_ros.synthesis.losses.hand_epsilon_quality`)."""
    fingertip_gap_m: float
    """Mean over the human fingertip contacts of the distance to the nearest Allegro fingertip (NaN: none)."""
    losses: dict[str, float]
    """The final loss terms (unweighted)."""
    timings_s: dict[str, float]


def _human_distances(demonstration: HumanDemonstration, keypoints: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    if demonstration.format == "mano_mesh":
        vertices = torch.as_tensor(demonstration.vertices_m, dtype=torch.float64)
        return torch.cdist(points, vertices).amin(-1)
    return capsule_distance(points, keypoints)


def initial_palm_pose(keypoints_m: torch.Tensor) -> torch.Tensor:
    """Step (a): the Allegro palm frame (x out of the palm, z to the fingers) on the human's palm vectors, its
    finger bases on the human knuckles."""
    n, f = palm_vectors(keypoints_m)
    T = torch.eye(4, dtype=torch.float64)
    T[:3, :3] = torch.stack([n, torch.linalg.cross(f, n), f], dim=-1)
    T[:3, 3] = keypoints_m[[5, 9, 13, 17]].mean(0)  # the palm frame's origin lies on its finger bases, mid-palm
    return T


def human_fingertip_contacts(keypoints_m: torch.Tensor, points_m: torch.Tensor, within_m: float) -> torch.Tensor:
    """(K, 3) where the human fingertips touch the object: for each fingertip keypoint (21-keypoint order) within
    `within_m` of an object point, the nearest of the points (N, 3). No finger names: L_F asks only that some Allegro
    fingertip be at each."""
    tips = keypoints_m[list(FINGERTIP_KEYPOINTS)]
    distance = torch.cdist(tips, points_m)
    nearest = distance.argmin(-1)
    return points_m[nearest[distance.amin(-1) <= within_m]]


def _nearest_distance(points: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """(N,) distance of each point to its nearest other point: the pair chosen without gradient, then differentiated
    alone (the gradient of the minimum, without a backward through the whole distance matrix)."""
    with torch.no_grad():
        nearest = torch.cdist(points, others).argmin(-1)
    return (points - others[nearest]).norm(dim=-1)


class TransferObjective:
    """The loss terms of a robot grasp against one demonstration on one object (:func:`transfer_objective`)."""

    def __init__(self, hand: HandModel, sdf: ObjectSDF, points: torch.Tensor, heat_human: torch.Tensor,
                 keypoints: torch.Tensor, region: torch.Tensor, config: TransferConfig,
                 T_table_object: Optional[torch.Tensor]) -> None:
        self.hand, self.sdf, self.points, self.heat_human = hand, sdf, points, heat_human
        self.keypoints, self.region = keypoints, region
        self.fingertip_contacts = human_fingertip_contacts(keypoints, points, config.fingertip_contact_m)
        self.n_human, self.f_human = palm_vectors(keypoints)
        self.config, self.T_table_object = config, T_table_object
        self.pairs = hand.self_collision_pairs

    def terms(self, T: torch.Tensor, q: torch.Tensor) -> dict[str, torch.Tensor]:
        c, hand = self.config.interpenetration, self.hand
        T_link = hand.link_poses(T[None], q[None])
        samples, normals = hand.surface(T_link)
        samples, normals = samples[0], normals[0]
        d_robot, grad = self.sdf.query(samples, 0.0)
        heat_robot = contact_heatmap(_nearest_distance(self.points, samples), self.config.tau_m)
        centres = hand.sphere_centres(T_link)[0]
        radii = hand.sphere_radii_m.to(centres)
        with torch.no_grad():
            deepest = (radii - torch.cdist(self.points, centres)).argmax(-1)
        inside_robot = (radii[deepest] - (self.points - centres[deepest]).norm(dim=-1)).clamp_min(0)
        push = torch.tanh((-d_robot).clamp_min(0) / c.alpha2_m).sum() + torch.tanh(inside_robot / c.alpha2_m).sum()
        pull = torch.tanh(d_robot.clamp(0.0, c.delta_m) / c.beta2_m).sum()
        near = d_robot.abs() < c.delta_m
        normal = (1.0 + (normals * grad).sum(-1))[near].sum()
        if len(self.pairs):
            i, j = self.pairs[:, 0], self.pairs[:, 1]
            overlap = (radii[i] + radii[j] - (centres[i] - centres[j]).norm(dim=-1)).clamp_min(0)
            self_penetration = torch.tanh(overlap / c.alpha2_m).sum()
        else:
            self_penetration = T.new_zeros(())
        if self.T_table_object is None:
            table = T.new_zeros(())
        else:
            z = samples @ self.T_table_object[2, :3] + self.T_table_object[2, 3]
            table = torch.tanh((-z).clamp_min(0) / c.alpha2_m).sum()
        if len(self.fingertip_contacts):
            tips = hand.fingertip_points(T_link)[0]
            fingertips = torch.cdist(self.fingertip_contacts, tips).amin(-1).sum()
        else:
            fingertips = T.new_zeros(())
        R = T[:3, :3]
        return {
            "contact": (self.heat_human - heat_robot).abs().mean(),
            "orientation": (R[:, 0] - self.n_human).abs().sum() + (R[:, 2] - self.f_human).abs().sum(),
            "interpenetration": c.alpha1 * push + c.beta1 * pull + c.gamma1 * normal,
            "self_penetration": self_penetration,
            "table": table,
            "fingertips": fingertips,
            "push": push, "pull": pull, "normal": normal,
            "penetration_depth_m": (-d_robot).clamp_min(0).max(),
            "penetration_volume_cm3": ((-d_robot).clamp_min(0) * hand.sample_area_m2.to(d_robot)).sum() * 1e6,
            "heat_robot": heat_robot,
        }

    def similarity(self, T_object_palm: torch.Tensor, q_rad: torch.Tensor, batch: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
        """(B,) contact-heatmap and orientation differences of B grasps (palm poses (B, 4, 4), joints (B, 16)), without
        gradient, `batch` grasps at a time: what :meth:`terms` calls "contact" and "orientation", for many grasps."""
        with torch.no_grad():
            parts = [self.similarity_terms(T_object_palm[start: start + batch], q_rad[start: start + batch])
                     for start in range(0, len(q_rad), batch)]
        return torch.cat([contact for contact, _ in parts]), torch.cat([orientation for _, orientation in parts])

    def similarity_terms(self, T_object_palm: torch.Tensor, q_rad: torch.Tensor,
                         num_points: Optional[int] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(B,) contact-heatmap and orientation differences of B grasps (palm poses (B, 4, 4), joints (B, 16)), with
        gradient (float64); the heatmaps on the first `num_points` object points (a random subset: they are drawn in
        random order) or all."""
        T, q = T_object_palm.double(), q_rad.double()
        points, heat_human = self.points[:num_points], self.heat_human[:num_points]
        samples, _ = self.hand.surface(self.hand.link_poses(T, q))
        with torch.no_grad():  # each point's nearest sample: argmin of |s|^2 - 2 p.s in float32, centred
            centre = points.mean(0)
            s32, p32 = (samples - centre).float(), (points - centre).float()
            nearest = (s32.square().sum(-1)[:, None, :] - 2 * p32 @ s32.transpose(1, 2)).argmin(-1)
        distance = (points - torch.gather(samples, 1, nearest[..., None].expand(-1, -1, 3))).norm(dim=-1)
        contact = (heat_human - contact_heatmap(distance, self.config.tau_m)).abs().mean(-1)
        R = T[:, :3, :3]
        orientation = (R[:, :, 0] - self.n_human).abs().sum(-1) + (R[:, :, 2] - self.f_human).abs().sum(-1)
        return contact, orientation

    def trust_region_penalty(self, T_object_palm: torch.Tensor, q_rad: torch.Tensor, contact_reference: float,
                             region: SimilarityRegion, refinement: PhysicsRefinement) -> torch.Tensor:
        """(B,) the soft similarity trust region of :class:`PhysicsRefinement` for B grasps (palm poses (B, 4, 4),
        joints (B, 16)), with gradient, in the dtype of `q_rad`."""
        contact, orientation = self.similarity_terms(T_object_palm, q_rad, refinement.penalty_points)
        excess_contact = (contact - (contact_reference + region.max_contact_increase)).clamp_min(0)
        excess_orientation = (orientation - region.max_orientation_difference).clamp_min(0)
        penalty = (refinement.contact_weight * excess_contact.square()
                   + refinement.orientation_weight * excess_orientation.square())
        return penalty.to(q_rad.dtype)

    def total(self, terms: dict[str, torch.Tensor], names: tuple[str, ...]) -> torch.Tensor:
        w = self.config.weights
        weight = {"contact": w.contact, "orientation": w.orientation, "interpenetration": w.interpenetration,
                  "self_penetration": w.self_penetration, "table": w.table, "fingertips": w.fingertips}
        return sum(weight[name] * terms[name] for name in names)


def transfer_objective(demonstration: HumanDemonstration, hand: HandModel, sdf: ObjectSDF,
                       config: TransferConfig = TransferConfig(), T_object_table: Optional[np.ndarray] = None,
                       seed: int = 0) -> TransferObjective:
    """The objective of `demonstration` on the object `sdf` (its frame): object points drawn from the SDF's surface
    samples (seeded), the human heatmap on them and the human contact region.

    Raises :class:`TransferError` for another frame, or a hand farther than ``max_demo_distance_m`` from the object."""
    if demonstration.frame_id != sdf.frame_id:
        raise TransferError(f"the demonstration is in frame {demonstration.frame_id!r}, the object in "
                            f"{sdf.frame_id!r}: transform it first (HumanDemonstration.transformed)")
    generator = torch.Generator().manual_seed(seed)
    surface = sdf.surface_points_m
    points = surface[torch.randperm(len(surface), generator=generator)[: config.num_object_points]]
    keypoints = demonstration_keypoints(demonstration)
    d_human = _human_distances(demonstration, keypoints, points)
    if float(d_human.min()) > config.max_demo_distance_m:
        raise TransferError(f"the demonstrated hand is {100 * float(d_human.min()):.1f} cm from the object at its "
                            f"closest; a grasp touches it (at most {100 * config.max_demo_distance_m:.0f} cm)")
    heat_human = contact_heatmap(d_human, config.tau_m)
    region = points[heat_human >= config.contact_region_heat]
    if len(region) == 0:
        region = points[d_human.argmin()][None]
    T_table_object = None if T_object_table is None else torch.linalg.inv(torch.as_tensor(T_object_table, dtype=torch.float64))
    return TransferObjective(hand, sdf, points, heat_human, keypoints, region, config, T_table_object)


def transfer_grasp(demonstration: HumanDemonstration, hand: HandModel, sdf: ObjectSDF,
                   config: TransferConfig = TransferConfig(), T_object_table: Optional[np.ndarray] = None,
                   seed: int = 0, pregrasp: SynthesisConfig = SynthesisConfig()) -> TransferResult:
    """Transfer `demonstration` (in the object frame, the SDF's) to the Allegro `hand` (see the module docstring);
    the pre-grasp is made by :func:`allegro_grasp` with the ``pregrasp*`` settings of `pregrasp`.

    Raises :class:`TransferError` for a demonstration in another frame or farther than ``max_demo_distance_m`` from
    the object."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    objective = transfer_objective(demonstration, hand, sdf, config, T_object_table, seed)
    T0 = initial_palm_pose(objective.keypoints)  # (a) the open hand at the human palm
    timings["init_s"] = time.monotonic() - started
    best = None
    for finger_init in ("contact", "discrete") if config.finger_init == "both" else (config.finger_init,):
        T, q, loss = _fingers_then_everything(objective, T0, finger_init, timings)
        if best is None or loss < best[2]:
            best = (T, q, loss)
    result = robot_grasp_result(objective, best[0], best[1], pregrasp)
    timings["total_s"] = time.monotonic() - started
    result.timings_s = timings
    return result


def _fingers_then_everything(objective: TransferObjective, T0: torch.Tensor, finger_init: str,
                             timings: dict[str, float]) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Steps (b) and (c) from the open hand at palm pose `T0`: the palm pose (4, 4), joints (16,) and step (c)'s final
    objective (over all of :data:`TERMS`, so that starts compare whatever ``terms`` step (c) used). Adds its times to
    `timings`."""
    config, hand, region = objective.config, objective.hand, objective.region
    lower, upper = hand.lower_limits_rad, hand.upper_limits_rad
    translation = T0[:3, 3].clone().requires_grad_(True)
    rot6d = rot6d_from_matrix(T0[:3, :3]).clone().requires_grad_(True)
    q = hand.open_joint_angles_rad.clone().to(torch.float64).requires_grad_(True)

    # (b) the fingers alone: toward the nearest human contact region with L_I + L_S, or closed in discrete steps
    t = time.monotonic()
    T_fixed = pose_from_translation_rot6d(translation.detach()[None], rot6d.detach()[None])[0]
    if finger_init == "discrete":
        with torch.no_grad():
            q.copy_(discrete_finger_closing(hand, objective.sdf, T_fixed, q.detach(), config.discrete_bins))
    optimizer = torch.optim.AdamW([q], lr=config.finger_lr, weight_decay=0.0)
    for _ in range(config.finger_iterations if finger_init == "contact" else 0):
        optimizer.zero_grad()
        tips = hand.fingertip_points(hand.link_poses(T_fixed[None], q[None]))[0]
        reach = torch.cdist(tips, region).amin(-1).sum()
        terms = objective.terms(T_fixed, q)
        loss = reach + objective.total(terms, ("interpenetration", "self_penetration", "table"))
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            q.copy_(torch.maximum(torch.minimum(q, upper), lower))
    timings[f"fingers_{finger_init}_s"] = time.monotonic() - t

    # (c) everything
    t = time.monotonic()
    optimizer = torch.optim.AdamW([{"params": [translation], "lr": config.lr_translation},
                                   {"params": [rot6d], "lr": config.lr_rotation},
                                   {"params": [q], "lr": config.lr_joints}], weight_decay=0.0)
    names = config.terms
    for iteration in range(config.iterations if names else 0):
        if iteration == config.lr_drop_at:
            for group in optimizer.param_groups:
                group["lr"] *= config.lr_drop_factor
        optimizer.zero_grad()
        T = pose_from_translation_rot6d(translation[None], rot6d[None])[0]
        loss = objective.total(objective.terms(T, q), names)
        if not torch.isfinite(loss):
            raise TransferError(f"the transfer's loss became non-finite at iteration {iteration}")
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            q.copy_(torch.maximum(torch.minimum(q, upper), lower))
    timings[f"optimise_{finger_init}_s"] = time.monotonic() - t
    timings["optimise_s"] = timings.get("optimise_s", 0.0) + timings[f"optimise_{finger_init}_s"]
    with torch.no_grad():
        T = pose_from_translation_rot6d(translation[None], rot6d[None])[0].detach()
        final = float(objective.total(objective.terms(T, q), TERMS))
    return T, q.detach(), final


def discrete_finger_closing(hand: HandModel, sdf: ObjectSDF, T_object_palm: torch.Tensor, q_rad: torch.Tensor,
                            bins: int = 10) -> torch.Tensor:
    """The seed's discrete finger closing (after YCB-Affordance): each Allegro flexion joint in turn, base to tip, set
    to the most closed of `bins` values between its current angle and its upper limit at which the hand's samples
    are no deeper in the object (summed depth) than before. (16,) joints."""
    q = q_rad.clone()

    def depth(qs: torch.Tensor) -> torch.Tensor:
        samples = hand.surface_points(hand.link_poses(T_object_palm.expand(len(qs), 4, 4), qs))
        return (-sdf.distance(samples, 0.0)).clamp_min(0).sum(-1)

    with torch.no_grad():
        for joints in ALLEGRO_FLEXION_JOINTS:
            for j in joints:
                candidates = q.repeat(bins, 1)
                candidates[:, j] = torch.linspace(float(q[j]), float(hand.upper_limits_rad[j]), bins, dtype=q.dtype)
                allowed = torch.nonzero(depth(candidates) <= depth(q[None])[0] + 1e-9).flatten()
                q = candidates[int(allowed.max())]
    return q


def robot_grasp_result(objective: TransferObjective, T_object_palm: torch.Tensor, q_rad: torch.Tensor,
                       pregrasp: SynthesisConfig = SynthesisConfig()) -> TransferResult:
    """An Allegro grasp in contact (palm pose (4, 4), joints (16,)) judged against the demonstration: its 37-D form
    (pre-grasp by :func:`allegro_grasp`), heatmaps, similarity and penetration."""
    hand, sdf = objective.hand, objective.sdf
    with torch.no_grad():
        terms = objective.terms(T_object_palm, q_rad)
        q_clamped, _, tip_normals = fingertip_contacts(hand, sdf, T_object_palm[None], q_rad[None])
    grasp, _, _ = allegro_grasp(T_object_palm[None], q_clamped, tip_normals, hand, sdf, objective.T_table_object, pregrasp)
    return TransferResult(
        grasp=grasp, T_object_palm=T_object_palm, joint_angles_rad=q_clamped[0], object_points_m=objective.points,
        heatmap_human=objective.heat_human, heatmap_robot=terms["heat_robot"],
        contact_heatmap_difference=float(terms["contact"]), orientation_difference=float(terms["orientation"]),
        penetration_depth_m=float(terms["penetration_depth_m"]),
        penetration_volume_cm3=float(terms["penetration_volume_cm3"]),
        epsilon_quality=hand_epsilon_quality(hand, sdf, T_object_palm, q_clamped[0]),
        fingertip_gap_m=float(terms["fingertips"]) / len(objective.fingertip_contacts) if len(objective.fingertip_contacts)
        else float("nan"),
        losses={k: float(v) for k, v in terms.items() if k != "heat_robot"}, timings_s={})


def random_moves(result: TransferResult, num: int, region: SimilarityRegion, hand: HandModel,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The transfer's contact state and `num` random moves of it with `region`'s spreads (joints kept within `hand`'s
    limits): palm poses (num + 1, 4, 4) and joints (num + 1, 16), the transfer first. Object frame."""
    T0, q0 = result.T_object_palm.double(), result.joint_angles_rad.double()
    T, q = T0.repeat(num + 1, 1, 1), q0.repeat(num + 1, 1)
    if num:
        noise = torch.randn(num, 3 + 3 + len(q0), generator=generator, dtype=torch.float64)
        T[1:, :3, 3] += region.translation_std_m * noise[:, :3]
        T[1:, :3, :3] = so3_exp(region.rotation_std_rad * noise[:, 3:6]) @ T0[:3, :3]
        q[1:] = torch.maximum(torch.minimum(q0 + region.joint_std_rad * noise[:, 6:], hand.upper_limits_rad),
                              hand.lower_limits_rad)
    return T, q


def similar_grasps(objective: TransferObjective, result: TransferResult, num: int, generator: torch.Generator,
                   region: SimilarityRegion = SimilarityRegion(),
                   pregrasp: SynthesisConfig = SynthesisConfig()) -> tuple[Grasp, torch.Tensor, torch.Tensor]:
    """The transferred grasp and up to ``num - 1`` variants of it that stay in the similarity region: its contact
    state (palm pose, joints) moved at random (``4 num`` draws), each kept while its contact heatmap and orientation
    differences stay within `region`; for an evaluator to choose among. Returns the 37-D grasps (the transfer first)
    and their (K,) contact heatmap and orientation differences. Object frame."""
    hand = objective.hand
    T, q = random_moves(result, 4 * max(num - 1, 0), region, hand, generator)
    contact, orientation = objective.similarity(T, q)
    keep = (contact <= contact[0] + region.max_contact_increase) & (orientation <= region.max_orientation_difference)
    keep[0] = True
    index = torch.nonzero(keep).flatten()[:num]
    T, q = T[index], q[index]
    q_clamped, _, tip_normals = fingertip_contacts(hand, objective.sdf, T, q)
    grasps, _, _ = allegro_grasp(T, q_clamped, tip_normals, hand, objective.sdf, objective.T_table_object, pregrasp)
    return grasps, contact[index], orientation[index]


@dataclass
class RefinedGrasps:
    """Transferred grasps refined by the synthesis core (:func:`refine_with_physics`), in the object frame, best first."""

    grasps: Grasp
    """(K,) 37-D grasps in the synthesis's physics-score order (failed ones last)."""
    T_object_palm: torch.Tensor
    """(K, 4, 4) their palm poses in contact."""
    joint_angles_rad: torch.Tensor
    """(K, 16) their joints in contact."""
    contact_heatmap_difference: torch.Tensor
    """(K,) mean |H_human - H_robot| of each."""
    orientation_difference: torch.Tensor
    """(K,) |n_r - n_h|_1 + |f_r - f_h|_1 of each."""
    physics_score: torch.Tensor
    """(K,) the synthesis's own score, lower is better."""
    elapsed_s: float


def refine_with_physics(objective: TransferObjective, result: TransferResult, synthesis_hand: HandModel,
                        synthesis: SynthesisConfig, refinement: PhysicsRefinement, generator: torch.Generator,
                        region: SimilarityRegion = SimilarityRegion(),
                        progress: Optional[Callable[[float], None]] = None) -> RefinedGrasps:
    """Refine `result` (a transfer on `objective`'s object) with the synthesis core on `synthesis_hand` (the Allegro
    with the contact links the synthesis uses) and `synthesis`'s losses and pre-grasps, inside the soft similarity trust
    region of `refinement`. The starts are the transfer and ``num_starts - 1`` random moves of its contact state
    (`region`'s spreads, seeded by `generator`). `progress(fraction of the steps)` is called after every chunk of
    steps and may raise (a cancel)."""
    T0, q0 = random_moves(result, refinement.num_starts - 1, region, synthesis_hand, generator)
    contact_reference = result.contact_heatmap_difference

    def penalty(state) -> torch.Tensor:
        return objective.trust_region_penalty(state.T_object_root, state.q_rad, contact_reference, region, refinement)

    T_object_table = None if objective.T_table_object is None else torch.linalg.inv(objective.T_table_object).numpy()
    config = dataclasses.replace(synthesis, num_steps=refinement.num_steps, offset_start_m=refinement.offset_start_m)
    refined = synthesize_grasps(synthesis_hand, objective.sdf, config, SynthesisOptions(
        initial_T_object_root=T0, initial_joint_angles_rad=q0, T_object_table=T_object_table, extra_objective=penalty,
        progress=progress))
    score = refined.physics_score()
    order = torch.argsort(score, stable=True)
    T, q = refined.T_object_root[order], refined.joint_angles_rad[order]
    contact, orientation = objective.similarity(T, q)
    return RefinedGrasps(refined.grasp[order], T, q, contact, orientation, score[order], refined.elapsed_s)
