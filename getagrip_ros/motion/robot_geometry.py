"""Collision geometry of the FR3 + Allegro + ZED 2i for arm motion planning (hand joints held fixed).

The shapes are the project's own primitives (`robot.description.arm_parts()` / `hand_parts()`: the
cuRobo spheres of the arm, boxes of the mount and the hand, fingertip spheres); forward kinematics is
pinocchio's on the generated URDF. While the arm moves the hand joints stay fixed, so fr3_link7, the
mount and the whole hand form one rigid body ("end effector", body 7) whose shapes are expressed in
fr3_link7 once per hand configuration.

Every shape also carries a bound on how far any of its points can move per radian of each arm joint
(``reach_m``, metres per radian): the distance from the joint's origin to the farthest point of the
shape, summed along the kinematic chain (a configuration-independent triangle-inequality bound). For
a straight joint-space motion dq, no point of shape k moves more than ``reach_m[k] @ |dq|`` metres.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from getagrip_ros.paths import urdf_path
from getagrip_ros.robot.description import (
    ARM_JOINT_NAMES, FULL_URDF_NAME, HAND_JOINT_NAMES, Box, Sphere, arm_parts, hand_parts,
)

NUM_ARM_JOINTS = 7
#: Body of each arm link; every link past fr3_link7 (mount, palm, fingers) is rigid with body 7 while planning.
ARM_LINK_BODY = {f"fr3_link{i}": i for i in range(8)}
END_EFFECTOR_BODY = 7

#: Link pairs never checked against each other (neighbours that touch by construction), as in Get a Grip's
#: cuRobo model (`self_collision_ignore`), plus the mount boxes (connector, zed2i) against fr3_link5 and fr3_link6, as
#: that model ignores fr3_link5/6 against fr3_link7, whose spheres stand in for the mount there.
SELF_COLLISION_IGNORE: frozenset[frozenset[str]] = frozenset(
    frozenset(pair) for pair in (
        ("fr3_link0", "fr3_link1"), ("fr3_link1", "fr3_link2"), ("fr3_link2", "fr3_link3"), ("fr3_link3", "fr3_link4"),
        ("fr3_link4", "fr3_link5"), ("fr3_link5", "fr3_link6"), ("fr3_link5", "fr3_link7"), ("fr3_link5", "palm_link"),
        ("fr3_link6", "fr3_link7"), ("fr3_link5", "connector"), ("fr3_link5", "zed2i"), ("fr3_link6", "connector"),
        ("fr3_link6", "zed2i"),
    )
)


@dataclass(frozen=True)
class ShapeSet:
    """K robot shapes, each a box (half_extents_m > 0, radius_m = 0) or a sphere (half_extents_m = 0).

    Attributes:
        link_names: (K,) URDF link of each shape.
        body: (K,) int, moving body of each shape (0 = fr3_link0 ... 6 = fr3_link6, 7 = link7 + mount + hand).
        is_sphere: (K,) bool.
        radius_m: (K,) sphere radius (0 for boxes).
        half_extents_m: (K, 3) box half side lengths (0 for spheres).
        T_body_shape: (K, 4, 4) pose of each shape in its body's frame (fr3_link<body>).
        reach_m: (K, 7) metres a point of the shape can move per radian of each arm joint (0 for joints upstream).
        bounding_radius_m: (K,) radius of the sphere around the shape's centre that holds it.
    """

    link_names: tuple[str, ...]
    body: np.ndarray
    is_sphere: np.ndarray
    radius_m: np.ndarray
    half_extents_m: np.ndarray
    T_body_shape: np.ndarray
    reach_m: np.ndarray
    bounding_radius_m: np.ndarray

    def __len__(self) -> int:
        return len(self.link_names)


@dataclass(frozen=True)
class PlacedShapes:
    """World-frame placement of a ShapeSet at one arm configuration: centres (K, 3) m, rotations (K, 3, 3)."""

    centres_m: np.ndarray
    rotations: np.ndarray


class RobotCollisionModel:
    """Shapes of the robot and their world placement for arm joints q (7,), rad; hand joints set by `set_hand`.

    Args:
        urdf: the full robot URDF (default: this package's fr3_algr_zed2i.urdf, generated from the same description).
        hand_rad: (16,) initial hand joints (Get a Grip order).
    """

    def __init__(self, urdf: str | Path | None = None, hand_rad: np.ndarray | None = None) -> None:
        self.model = pin.buildModelFromUrdf(str(urdf or urdf_path(FULL_URDF_NAME)))
        self.data = self.model.createData()
        self._arm_q_index = np.array([self.model.joints[self.model.getJointId(n)].idx_q for n in ARM_JOINT_NAMES])
        self._hand_q_index = np.array([self.model.joints[self.model.getJointId(n)].idx_q for n in HAND_JOINT_NAMES])
        self._arm_joint_ids = [self.model.getJointId(n) for n in ARM_JOINT_NAMES]
        self.lower_limits_rad = np.array([self.model.lowerPositionLimit[i] for i in self._arm_q_index])
        self.upper_limits_rad = np.array([self.model.upperPositionLimit[i] for i in self._arm_q_index])
        links, joints = arm_parts()
        hand_links, hand_joints = hand_parts()
        self._link_shapes = [(link.name, shape) for link in links + hand_links for shape in link.shapes]
        by_child = {j.child: j for j in joints + hand_joints}
        self._parent_of = {child: j.parent for child, j in by_child.items()}
        # Norm of each arm joint's origin offset (m): |t| of fr3_joint(i+1) in fr3_link(i).
        self._arm_offsets_m = np.array([float(np.linalg.norm(by_child[f"fr3_link{i}"].xyz_m)) for i in range(1, 8)])
        self._q = pin.neutral(self.model)
        self.hand_rad = np.zeros(16)
        self.shapes: ShapeSet = self.set_hand(np.zeros(16) if hand_rad is None else hand_rad)

    # -- geometry ------------------------------------------------------------------------------------
    def body_of(self, link: str) -> int:
        """Moving body (0..7) of a URDF link; 7 = fr3_link7 and everything mounted on it."""
        while link not in ARM_LINK_BODY:
            link = self._parent_of[link]
        return ARM_LINK_BODY[link]

    def set_hand(self, hand_rad: np.ndarray) -> ShapeSet:
        """Fix the 16 hand joints (rad) for the following queries; returns the shapes (also in `self.shapes`)."""
        hand = np.asarray(hand_rad, dtype=float).reshape(-1)
        if hand.shape != (16,) or not np.isfinite(hand).all():
            raise ValueError(f"hand joints: expected 16 finite values (rad), got shape {hand.shape}")
        self.hand_rad = hand.copy()
        q = pin.neutral(self.model)
        q[self._hand_q_index] = hand
        pin.forwardKinematics(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        T_world_body = [self.data.oMf[self.model.getFrameId(f"fr3_link{i}")].homogeneous for i in range(8)]
        names, body, is_sphere, radius, half, poses, bound_r = [], [], [], [], [], [], []
        for link, shape in self._link_shapes:
            b = self.body_of(link)
            T_world_link = self.data.oMf[self.model.getFrameId(link)].homogeneous
            T_shape = np.eye(4)
            T_shape[:3, 3] = shape.xyz_m
            T_body_shape = np.linalg.solve(T_world_body[b], T_world_link @ T_shape)
            names.append(link)
            body.append(b)
            if isinstance(shape, Sphere):
                is_sphere.append(True), radius.append(shape.radius_m), half.append((0.0, 0.0, 0.0))
                bound_r.append(shape.radius_m)
            elif isinstance(shape, Box):
                h = tuple(s / 2 for s in shape.size_m)
                is_sphere.append(False), radius.append(0.0), half.append(h)
                bound_r.append(float(np.linalg.norm(h)))
            else:  # pragma: no cover - the description has only boxes and spheres
                raise TypeError(f"unsupported shape {shape!r} on {link}")
            poses.append(T_body_shape)
        body_a, poses_a, bound_a = np.array(body), np.array(poses), np.array(bound_r)
        # reach[k, i]: joint i+1 moves shape k only if its body is past it; bound = chain length + shape extent.
        reach = np.zeros((len(names), NUM_ARM_JOINTS))
        for k in range(len(names)):
            b = body_a[k]
            for i in range(b):  # joints fr3_joint(i+1), i = 0..b-1, move body b
                reach[k, i] = self._arm_offsets_m[i + 1: b].sum() + np.linalg.norm(poses_a[k, :3, 3]) + bound_a[k]
        self.shapes = ShapeSet(tuple(names), body_a, np.array(is_sphere), np.array(radius), np.array(half),
                               poses_a, reach, bound_a)
        return self.shapes

    # -- kinematics ----------------------------------------------------------------------------------
    def body_poses(self, q_arm_rad: np.ndarray) -> np.ndarray:
        """(7,) arm joints -> (8, 4, 4) T_world_body for fr3_link0..fr3_link7 (hand at `hand_rad`)."""
        self._q[self._arm_q_index] = q_arm_rad
        pin.forwardKinematics(self.model, self.data, self._q)
        out = np.empty((8, 4, 4))
        out[0] = np.eye(4)  # fr3_link0 is the world frame
        for i, jid in enumerate(self._arm_joint_ids):
            out[i + 1] = self.data.oMi[jid].homogeneous
        return out

    def place(self, q_arm_rad: np.ndarray) -> PlacedShapes:
        """World placement of every shape at arm joints q (7,), rad."""
        T = self.body_poses(q_arm_rad)[self.shapes.body] @ self.shapes.T_body_shape
        return PlacedShapes(T[:, :3, 3], T[:, :3, :3])

    def frame_pose(self, q_arm_rad: np.ndarray, frame: str) -> np.ndarray:
        """(4, 4) T_world_frame of any URDF frame (e.g. "palm_link") at arm joints q, hand at `hand_rad`."""
        self._q[self._arm_q_index] = q_arm_rad
        self._q[self._hand_q_index] = self.hand_rad
        pin.forwardKinematics(self.model, self.data, self._q)
        return pin.updateFramePlacement(self.model, self.data, self.model.getFrameId(frame)).homogeneous.copy()

    def end_effector_points(self, frames: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Frames rigid with the end effector (body 7) at the current hand joints: their origins in fr3_link7
        (N, 3) and the reach bound of each (N, 7), as for shapes: no such point moves more than reach @ |dq|."""
        q = np.zeros(NUM_ARM_JOINTS)
        T7 = self.body_poses(q)[END_EFFECTOR_BODY]
        points = np.array([np.linalg.solve(T7, self.frame_pose(q, f))[:3, 3] for f in frames]).reshape(-1, 3)
        if any(self.body_of(f) != END_EFFECTOR_BODY for f in frames):
            raise ValueError(f"not all of {list(frames)} are rigid with fr3_link7")
        reach = np.array([[self._arm_offsets_m[i + 1:END_EFFECTOR_BODY].sum() + np.linalg.norm(p)
                           for i in range(NUM_ARM_JOINTS)] for p in points]).reshape(-1, NUM_ARM_JOINTS)
        return points, reach

    def self_collision_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(P,), (P,) shape indices a < b checked for self-collision: different bodies, not neighbours, not fr3_link0
        against fr3_link1 ... (see SELF_COLLISION_IGNORE); pairs inside the rigid end effector never move."""
        s = self.shapes
        a, b = np.triu_indices(len(s), k=1)
        keep = s.body[a] != s.body[b]
        keep &= np.array([frozenset((s.link_names[i], s.link_names[j])) not in SELF_COLLISION_IGNORE
                          for i, j in zip(a, b)])
        return a[keep], b[keep]

