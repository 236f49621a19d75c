"""Grasp labels y_coll, y_pick and y_PGS from the floating-hand world: the paper's labelling protocol.

Each grasp is tried ``num_perturbations`` times, each time with the wrist perturbed by the label noise
(:data:`~getagrip_ros.grasp.perturb.LABEL_NOISE`). One trial: the hand is teleported to the perturbed
palm pose with the grasp's pre-grasp joints (no approach); y_coll = 1 when no hand body touches the object
or the table there; then each fingertip closes ``close_distance_m`` along its direction d_i (joint targets
by fingertip IK, tracked by the PD actuators) and the hand lifts straight up; y_pick = 1 when the paper's
pick criterion holds after the lift. The labels are the means over the trials, y_PGS the mean of
y_coll * y_pick. World frame (z up, table top z = 0), metres, radians.
"""

from __future__ import annotations

import queue
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from scipy.spatial.transform import Rotation

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.perturb import LABEL_NOISE, PerturbationConfig, perturb_grasps
from getagrip_ros.grasp.validate import validate_grasp
from getagrip_ros.robot.allegro import AllegroHand, FingertipIKConfig, move_fingertips
from getagrip_ros.robot.description import PALM_LINK
from getagrip_ros.sim.grasp_trial import CloseLiftConfig, close_and_lift
from getagrip_ros.sim.world import OBJECT_BODY, SimWorld

#: Hand bodies that must not touch a picked object: the palm, and in every finger the links up to and
#: including the first phalanx that flexes toward the palm. Index/middle/ring: the abduction knuckles
#: link_0.0/4.0/8.0 (joints 0/4/8, 16 mm) and the proximal phalanges link_1.0/5.0/9.0 (flexed by joints
#: 1/5/9). Thumb: its base housing link_12.0 (mounted on the palm, rotated by joint 12), its knuckle
#: link_13.0 (joint 13, like link_0.0) and its proximal phalanx link_14.0 (the first flexing link, joint
#: 14, 51 mm like link_1.0). The middle and distal phalanges and the fingertips may touch.
FORBIDDEN_LINKS = (PALM_LINK, "link_0.0", "link_1.0", "link_4.0", "link_5.0", "link_8.0", "link_9.0",
                   "link_12.0", "link_13.0", "link_14.0")
TABLE_BODY = "world"
_EULER_AXES = "xyz"


@dataclass(frozen=True)
class LabelConfig:
    """The labelling protocol (the paper's values)."""

    num_perturbations: int = 5
    """Trials per grasp, each with its own wrist perturbation."""
    perturbation: PerturbationConfig = LABEL_NOISE
    """Wrist translation U[-5, 5] mm per axis, roll/pitch/yaw U[-2.5, 2.5] deg."""
    close_distance_m: float = 0.05
    """Each fingertip's closing target lies this far along d_i from its pre-grasp position."""
    ik: FingertipIKConfig = field(default_factory=FingertipIKConfig)
    motion: CloseLiftConfig = field(default_factory=lambda: CloseLiftConfig(give_up_after_m=0.05))
    """Close 0.5 s, hold 0.2 s, lift 20 cm in 1.0 s, hold lifted 0.5 s; a lift that leaves the object on the
    table stops once the wrist has risen 5 cm (same labels on 1920 trials, 10% faster)."""
    min_hand_links: int = 3
    forbidden_links: tuple[str, ...] = FORBIDDEN_LINKS
    max_relative_motion_m: float = 0.10
    """Largest displacement of the object in the palm frame during the lift."""
    max_rotation_deg: float = 45.0
    """Largest rotation of the object relative to the palm during the lift, about each (x, y, z) Euler axis."""
    min_rise_fraction: float = 0.0
    """A pick also needs the object to rise at least this fraction of the lift (``motion.lift_m``). 0: not checked
    (the paper's criterion); the whole-task executor asks 0.9 (``lift_check_fraction``)."""


@dataclass(frozen=True)
class LabelTrial:
    """One perturbed simulation of a grasp."""

    T_world_palm: np.ndarray
    """(4, 4) perturbed palm pose the hand was placed at."""
    y_coll: float
    """1.0 when no hand body touched the object or the table at the pre-grasp, else 0.0."""
    y_pick: float
    """1.0 when the lift met the pick criterion, else 0.0."""
    reason: str
    colliding_bodies: tuple[tuple[str, str], ...]
    """(hand body, "object" or "world" = table) pairs in contact at the pre-grasp."""
    object_lift_m: float
    """Rise of the object from its resting height."""
    hand_links_touching: tuple[str, ...]
    """Hand links touching the object after the lift."""
    relative_motion_m: float
    rotation_deg: tuple[float, float, float]
    """Rotation of the object relative to the palm during the lift: fixed-axis x, y, z Euler angles in the palm frame."""


@dataclass(frozen=True)
class GraspLabel:
    """Smooth labels in [0, 1]: means over the trials."""

    y_coll: float
    y_pick: float
    y_pgs: float
    trials: tuple[LabelTrial, ...]


def _pregrasp_collisions(world: SimWorld) -> tuple[tuple[str, str], ...]:
    """(hand body, object or table) pairs in contact in the world's current state."""
    hand = set(world.hand_link_names())
    pairs = set()
    for c in world.contacts():
        for a, b in ((c.body_a, c.body_b), (c.body_b, c.body_a)):
            if a in hand and b in (OBJECT_BODY, TABLE_BODY):
                pairs.add((a, b))
    return tuple(sorted(pairs))


def _collision_reason(pairs: tuple[tuple[str, str], ...]) -> str:
    parts = []
    for body, what in ((OBJECT_BODY, "object"), (TABLE_BODY, "table")):
        links = [a for a, b in pairs if b == body]
        if links:
            parts.append(f"the {what} ({', '.join(links)})")
    return "pre-grasp touches " + " and ".join(parts)


def _pick_reason(lift_m: float, touching: dict[str, float], links: tuple[str, ...], relative_m: float,
                 rotation_deg: np.ndarray, config: LabelConfig) -> str | None:
    """Why the pick failed, or None when it succeeded."""
    if TABLE_BODY in touching:
        return f"object still on the table (lifted {lift_m * 100:.1f} cm)"
    forbidden = [link for link in links if link in config.forbidden_links]
    if forbidden:
        kinds = {PALM_LINK: "palm"} | {link: "proximal link" for link in FORBIDDEN_LINKS[1:]}
        groups: dict[str, list[str]] = {}
        for link in forbidden:
            groups.setdefault(kinds.get(link, "forbidden link"), []).append(link)
        named = " and ".join(f"{kind}{'s' if len(names) > 1 else ''} {', '.join(names)}" for kind, names in groups.items())
        return f"{named} {'touches' if len(forbidden) == 1 else 'touch'} the object"
    if len(links) < config.min_hand_links:
        return f"only {len(links)} hand links touch the object"
    if relative_m >= config.max_relative_motion_m:
        return f"object slipped {relative_m * 100:.1f} cm"
    if lift_m < config.min_rise_fraction * config.motion.lift_m:
        return f"object rose {lift_m * 100:.1f} cm of the {config.motion.lift_m * 100:.0f} cm lift"
    worst = int(np.argmax(np.abs(rotation_deg)))
    if abs(rotation_deg[worst]) >= config.max_rotation_deg:
        return f"object rotated {abs(rotation_deg[worst]):.0f} deg about the palm's {_EULER_AXES[worst]} axis"
    return None


def _run_trial(world: SimWorld, T_world_palm: np.ndarray, pregrasp_rad: np.ndarray, closed_rad: np.ndarray,
               config: LabelConfig) -> LabelTrial:
    world.reset(hand_rad=pregrasp_rad, T_world_palm=T_world_palm)
    collisions = _pregrasp_collisions(world)
    z0_m = world.object_pose()[2, 3]
    outcome = close_and_lift(world, T_world_palm, pregrasp_rad, closed_rad, config.motion)
    lift_m = float(outcome.T_world_object[2, 3] - z0_m)
    dR = outcome.T_palm_object_lifted[:3, :3] @ outcome.T_palm_object_closed[:3, :3].T  # rotation in the palm frame
    rotation_deg = Rotation.from_matrix(dR).as_euler(_EULER_AXES, degrees=True)
    failure = _pick_reason(lift_m, outcome.touching, outcome.hand_links_touching, outcome.relative_motion_m,
                           rotation_deg, config)
    pick_reason = failure or f"lifted {lift_m * 100:.1f} cm with {len(outcome.hand_links_touching)} links"
    reason = pick_reason if not collisions else f"{_collision_reason(collisions)}; {pick_reason}"
    return LabelTrial(T_world_palm, float(not collisions), float(failure is None), reason, collisions, lift_m,
                      outcome.hand_links_touching, outcome.relative_motion_m, tuple(float(a) for a in rotation_deg))


def closing_joints(grasps: Grasp, hand: AllegroHand, config: LabelConfig = LabelConfig()) -> np.ndarray:
    """(B, 16) float64 joints (rad) that the trials close to: each fingertip ``close_distance_m`` along its d_i."""
    directions_palm = grasps.fingertip_directions @ grasps.palm_rotation  # d_palm = R_world_palm^T d_world
    closed = move_fingertips(hand, grasps.joint_angles_rad, directions_palm, config.close_distance_m, config.ik)
    return closed.joint_angles_rad.detach().cpu().double().numpy()


def label_grasps(world: SimWorld, grasps: Grasp, hand: AllegroHand, config: LabelConfig = LabelConfig(),
                 generator: torch.Generator | None = None,
                 progress: Callable[[int, int], None] | None = None, threads: int = 1) -> list[GraspLabel]:
    """Label every grasp of a world-frame batch in the floating-hand world holding the object.

    The closing joints come from the unperturbed grasp (the wrist noise moves the whole hand rigidly).
    progress(done, total) is called after each grasp. threads > 1 runs the trials on that many replicas of the
    world at once (MuJoCo steps without Python's lock); every trial starts from a reset world, so the labels are
    the same for any number of threads.

    Raises:
        ValueError: grasps not in the world frame, malformed grasps (NaN, bad rotations, joints outside
            their limits), a world that is not the floating hand with an object, or threads < 1.
    """
    if grasps.frame_id != "world":
        raise ValueError(f"grasps must be in the world frame (z up, table top z = 0), got frame '{grasps.frame_id}'")
    if world.config.robot != "floating_hand" or world.object is None:
        raise ValueError("grasp labels need the floating-hand world with an object")
    if config.num_perturbations < 1:
        raise ValueError(f"num_perturbations must be >= 1, got {config.num_perturbations}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    grasps = validate_grasp(grasps.to("cpu", torch.float64), (hand.lower_limits_rad, hand.upper_limits_rad))
    closed_rad = closing_joints(grasps, hand, config)
    pregrasp_rad = grasps.joint_angles_rad.numpy()
    n = config.num_perturbations
    # the wrist noise is drawn grasp by grasp before any simulation, so it does not depend on the threads
    palms = [perturb_grasps(Grasp.cat([grasps[i]] * n), config.perturbation, generator).T_frame_palm.numpy()
             for i in range(len(grasps))]
    jobs = [(i, T) for i in range(len(grasps)) for T in palms[i]]
    labels: list[GraspLabel] = []

    def finish(i: int, trials: tuple[LabelTrial, ...]) -> None:
        y_coll, y_pick = (float(np.mean([getattr(t, y) for t in trials])) for y in ("y_coll", "y_pick"))
        labels.append(GraspLabel(y_coll, y_pick, float(np.mean([t.y_coll * t.y_pick for t in trials])), trials))
        if progress is not None:
            progress(i + 1, len(grasps))

    if threads == 1 or len(jobs) == 1:
        for i in range(len(grasps)):
            finish(i, tuple(_run_trial(world, T, pregrasp_rad[i], closed_rad[i], config) for T in palms[i]))
        return labels
    free = queue.SimpleQueue()
    for replica in [world] + [world.replica() for _ in range(min(threads, len(jobs)) - 1)]:
        free.put(replica)

    def run(job: tuple[int, np.ndarray]) -> LabelTrial:
        i, T = job
        replica = free.get()
        try:
            return _run_trial(replica, T, pregrasp_rad[i], closed_rad[i], config)
        finally:
            free.put(replica)

    with ThreadPoolExecutor(max_workers=min(threads, len(jobs))) as pool:
        results = pool.map(run, jobs)
        for i in range(len(grasps)):
            finish(i, tuple(next(results) for _ in range(n)))
    return labels


def label_grasp(world: SimWorld, grasp: Grasp, hand: AllegroHand, config: LabelConfig = LabelConfig(),
                generator: torch.Generator | None = None) -> GraspLabel:
    """Label one world-frame grasp (a batch of one); see :func:`label_grasps`."""
    if len(grasp) != 1:
        raise ValueError(f"label_grasp takes one grasp, got a batch of {len(grasp)} (use label_grasps)")
    return label_grasps(world, grasp, hand, config, generator)[0]
