"""The human hand as capsules: from a demonstration's keypoints, or as a hand model for the synthesis core.

A keypoint hand's surface is a union of capsules (:data:`CAPSULES`): one along each finger bone, with the
radius of an adult finger segment, and five across the palm. Distances from object points to it give the
demonstration's contact heatmap; its palm normal and forward vectors give the orientation it is compared on.

:func:`human_hand_model` builds the same capsules as a :class:`HandModel` (a 20-joint kinematic tree from a
generated URDF), so that ``synthesis`` can make human grasps, whose keypoints (:func:`model_keypoints`) are
demonstrations. Frames: the hand's wrist frame has x out of the palm, z from the wrist to the middle finger, y
towards the thumb (the Allegro palm frame's axes). Metres, radians.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial.transform import Rotation

from getagrip_ros.human_demo.demonstration import (BONES, FINGER_KEYPOINTS, KEYPOINT_NAMES, REFERENCE_KEYPOINTS_M,
                                                   HumanDemonstration)
from getagrip_ros.synthesis.hand_model import HandModel, SurfaceSamplingConfig, hand_model_from_urdf

#: Capsule radius of each finger segment (base to tip), from adult finger breadths: about 1.9 cm at the
#: index's proximal phalanx, 1.5 cm at the little finger's distal one; the thumb is thicker.
SEGMENT_RADII_M = {
    "thumb": (0.011, 0.010, 0.009),
    "index": (0.0095, 0.0085, 0.0075),
    "middle": (0.0095, 0.0085, 0.0075),
    "ring": (0.009, 0.008, 0.007),
    "pinky": (0.008, 0.0075, 0.0065),
}
#: Palm capsules (keypoint a, keypoint b, radius): a palm about 2.4 cm thick and the thenar eminence.
PALM_CAPSULES = (
    (0, 1, 0.013), (1, 5, 0.010), (0, 5, 0.012), (0, 9, 0.012), (0, 13, 0.012), (0, 17, 0.012),
    (5, 9, 0.011), (9, 13, 0.011), (13, 17, 0.011),
)


def _finger_capsules() -> tuple[tuple[int, int, float], ...]:
    out = []
    for finger, chain in FINGER_KEYPOINTS.items():
        for k, radius in enumerate(SEGMENT_RADII_M[finger]):
            out.append((chain[k], chain[k + 1], radius))
    return tuple(out)


#: Every capsule of the keypoint hand: (keypoint a, keypoint b, radius in metres).
CAPSULES = PALM_CAPSULES + _finger_capsules()
#: The fingertip keypoints, thumb first.
FINGERTIP_KEYPOINTS = tuple(chain[-1] for chain in FINGER_KEYPOINTS.values())


def capsule_distance(points_m: torch.Tensor, keypoints_m: torch.Tensor) -> torch.Tensor:
    """Signed distance (m, negative inside) of points (..., N, 3) to the capsule hand of keypoints (..., 21, 3).

    Leading dimensions broadcast; differentiable in both arguments."""
    a_idx, b_idx, radii = zip(*CAPSULES)
    a = keypoints_m[..., list(a_idx), :].unsqueeze(-3)  # (..., 1, C, 3)
    b = keypoints_m[..., list(b_idx), :].unsqueeze(-3)
    radius = torch.tensor(radii, dtype=keypoints_m.dtype, device=keypoints_m.device)
    p = points_m.unsqueeze(-2)  # (..., N, 1, 3)
    ab = b - a
    t = (((p - a) * ab).sum(-1) / (ab * ab).sum(-1).clamp_min(1e-12)).clamp(0.0, 1.0)
    closest = a + t.unsqueeze(-1) * ab
    return ((p - closest).norm(dim=-1) - radius).min(dim=-1).values


def contact_heatmap(distance_m: torch.Tensor, tau_m: float = 0.01) -> torch.Tensor:
    """The soft contact indicator of the seed paper: exp(-d / tau), d clamped at 0 (1 on and inside the hand)."""
    return torch.exp(-distance_m.clamp_min(0.0) / tau_m)


def palm_vectors(keypoints_m: torch.Tensor, handedness: str = "right") -> tuple[torch.Tensor, torch.Tensor]:
    """The palm normal n (out of the palm) and forward vector f (along the palm, to the fingers) of keypoints
    (..., 21, 3): unit vectors, f orthogonal to n."""
    wrist, index_mcp, middle_mcp, pinky_mcp = (keypoints_m[..., i, :] for i in (0, 5, 9, 17))
    n = torch.linalg.cross(index_mcp - wrist, pinky_mcp - wrist)
    n = n / n.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    if handedness == "left":
        n = -n
    forward = middle_mcp - wrist
    forward = forward - (forward * n).sum(-1, keepdim=True) * n
    return n, forward / forward.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def demonstration_keypoints(demonstration: HumanDemonstration) -> torch.Tensor:
    """The demonstration's keypoints (21, 3) as float64; a left hand is mirrored into the right hand in the same
    place (across the plane through the wrist that holds its palm normal and forward vector)."""
    keypoints = torch.as_tensor(demonstration.keypoints_m, dtype=torch.float64)
    if demonstration.handedness == "right":
        return keypoints
    n, f = palm_vectors(keypoints, "left")
    side = torch.linalg.cross(f, n)  # towards the thumb of the mirrored (right) hand
    offset = keypoints - keypoints[0]
    return keypoints - 2.0 * (offset @ side).unsqueeze(-1) * side


# ---------------------------------------------------------------------------------------------------
# A human hand model for the synthesis core
#: Joint limits (rad): MCP abduction and flexion, PIP, DIP; the thumb's CMC abduction and flexion, MCP, IP.
FINGER_LIMITS_RAD = {"abduction": (-0.35, 0.35), "mcp": (-0.3, 1.6), "pip": (0.0, 1.75), "dip": (0.0, 1.4)}
THUMB_LIMITS_RAD = {"abduction": (-0.7, 0.7), "mcp": (-0.3, 1.2), "pip": (0.0, 1.0), "dip": (-0.2, 1.4)}
_SEGMENTS = ("proximal", "middle", "distal")


def _rpy(R: np.ndarray) -> str:
    return " ".join(f"{v:.9f}" for v in Rotation.from_matrix(R).as_euler("xyz"))


def _finger_frame(direction: np.ndarray) -> np.ndarray:
    """Rotation whose z is `direction` and whose x is the palm normal (+x of the wrist) made orthogonal to it."""
    z = direction / np.linalg.norm(direction)
    x = np.array([1.0, 0.0, 0.0]) - z[0] * z
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], axis=1)


def _capsule_xml(a: np.ndarray, b: np.ndarray, radius: float, end_spheres: bool) -> str:
    """A capsule as a cylinder (+ end spheres) in a link frame, from a to b."""
    length = float(np.linalg.norm(b - a))
    R = _finger_frame(b - a) if length > 0 else np.eye(3)
    mid = (a + b) / 2
    xml = (f'<collision><origin xyz="{mid[0]:.6f} {mid[1]:.6f} {mid[2]:.6f}" rpy="{_rpy(R)}"/>'
           f'<geometry><cylinder radius="{radius}" length="{length:.6f}"/></geometry></collision>')
    for point in ((a, b) if end_spheres else (b,)):
        xml += (f'<collision><origin xyz="{point[0]:.6f} {point[1]:.6f} {point[2]:.6f}"/>'
                f'<geometry><sphere radius="{radius}"/></geometry></collision>')
    return xml


def human_hand_urdf(keypoints_m: np.ndarray = REFERENCE_KEYPOINTS_M) -> str:
    """A right human hand as URDF text from open-hand keypoints (21, 3) in its wrist frame: a palm link with the
    palm capsules, and per finger an abduction and three flexion joints (20 joints), links named
    ``{finger}_{proximal,middle,distal}`` with their capsules."""
    links = ['<link name="wrist">' + "".join(
        _capsule_xml(keypoints_m[a], keypoints_m[b], r, True) for a, b, r in PALM_CAPSULES) + "</link>"]
    joints = []
    for finger, chain in FINGER_KEYPOINTS.items():
        limits = THUMB_LIMITS_RAD if finger == "thumb" else FINGER_LIMITS_RAD
        base, points = keypoints_m[chain[0]], keypoints_m[list(chain)]
        R = _finger_frame(points[1] - points[0])
        lengths = np.linalg.norm(np.diff(points, axis=0), axis=1)
        links.append(f'<link name="{finger}_knuckle"/>')
        joints.append(
            f'<joint name="{finger}_abduction" type="revolute"><parent link="wrist"/><child link="{finger}_knuckle"/>'
            f'<origin xyz="{base[0]:.6f} {base[1]:.6f} {base[2]:.6f}" rpy="{_rpy(R)}"/><axis xyz="1 0 0"/>'
            f'<limit lower="{limits["abduction"][0]}" upper="{limits["abduction"][1]}" effort="1" velocity="1"/></joint>')
        parent, offset = f"{finger}_knuckle", 0.0
        for k, (segment, joint) in enumerate(zip(_SEGMENTS, ("mcp", "pip", "dip"))):
            name = f"{finger}_{segment}"
            tip = np.array([0.0, 0.0, lengths[k]])
            links.append(f'<link name="{name}">' + _capsule_xml(np.zeros(3), tip, SEGMENT_RADII_M[finger][k], False) + "</link>")
            joints.append(
                f'<joint name="{finger}_{joint}" type="revolute"><parent link="{parent}"/><child link="{name}"/>'
                f'<origin xyz="0 0 {offset:.6f}"/><axis xyz="0 1 0"/>'
                f'<limit lower="{limits[joint][0]}" upper="{limits[joint][1]}" effort="1" velocity="1"/></joint>')
            parent, offset = name, float(lengths[k])
    return '<robot name="human_hand_right">' + "".join(links) + "".join(joints) + "</robot>"


#: The fingers whose distal segments carry contact, per grasp kind (the "all" kind: every link).
CONTACT_FINGERS = {"distal": tuple(FINGER_KEYPOINTS), "tripod": ("thumb", "index", "middle"), "pinch": ("thumb", "index")}


@dataclass(frozen=True)
class HumanHandModelConfig:
    """Build options of the human hand model."""

    contact: str = "all"
    """Links that may carry contact forces: "all" (power grasps), "distal" (the five distal segments), "tripod" (the
    thumb's, index's and middle finger's distal segments) or "pinch" (the thumb's and index's)."""
    sampling: SurfaceSamplingConfig = SurfaceSamplingConfig(num_samples=2000)


def human_hand_model(config: HumanHandModelConfig = HumanHandModelConfig(),
                     keypoints_m: np.ndarray = REFERENCE_KEYPOINTS_M) -> HandModel:
    """The right human hand as a :class:`HandModel` (root ``wrist``; joints per finger: abduction, mcp, pip, dip)."""
    if config.contact not in CONTACT_FINGERS and config.contact != "all":
        raise ValueError(f"contact must be 'all', {', '.join(repr(k) for k in CONTACT_FINGERS)}, got {config.contact!r}")
    urdf = human_hand_urdf(keypoints_m)
    segment_links = [f"{finger}_{segment}" for finger in FINGER_KEYPOINTS for segment in _SEGMENTS]
    links = ["wrist", *segment_links]
    joints = [f"{finger}_{joint}" for finger in FINGER_KEYPOINTS for joint in ("abduction", "mcp", "pip", "dip")]
    distal = [f"{finger}_distal" for finger in FINGER_KEYPOINTS]
    contact = links if config.contact == "all" else [f"{finger}_distal" for finger in CONTACT_FINGERS[config.contact]]
    tips = [[0.0, 0.0, float(np.linalg.norm(keypoints_m[chain[3]] - keypoints_m[chain[2]]))]
            for chain in FINGER_KEYPOINTS.values()]
    palm_centre = keypoints_m[[0, 5, 9, 13, 17]].mean(axis=0) + np.array([0.012, 0.0, 0.0])
    return hand_model_from_urdf(
        "human_right", urdf, "wrist", links, joints, contact,
        [0.0] * len(joints), palm_centre, (1.0, 0.0, 0.0),
        fingertip_links=distal, fingertip_points_in_link_m=tips, sampling=config.sampling)


def model_keypoints(model: HandModel, T_object_root: torch.Tensor, q_rad: torch.Tensor) -> torch.Tensor:
    """The 21 keypoints (B, 21, 3) of a human hand model (:func:`human_hand_model`) posed at T_object_root (B, 4, 4)
    with joints q_rad (B, 20): the wrist, then per finger its base joint, the next two joints and the tip."""
    T_object_link = model.link_poses(T_object_root, q_rad)
    tips = model.fingertip_points(T_object_link)
    names = model.link_names
    out = [T_object_root[:, :3, 3]]
    for f, finger in enumerate(FINGER_KEYPOINTS):
        out += [T_object_link[:, names.index(f"{finger}_{segment}"), :3, 3] for segment in _SEGMENTS]
        out.append(tips[:, f])
    return torch.stack(out, dim=1)


__all__ = ["BONES", "CAPSULES", "FINGERTIP_KEYPOINTS", "KEYPOINT_NAMES", "HumanHandModelConfig", "capsule_distance",
           "contact_heatmap", "demonstration_keypoints", "human_hand_model", "human_hand_urdf", "model_keypoints",
           "palm_vectors"]
