"""Batched forward kinematics of a URDF kinematic tree in torch (revolute, prismatic and fixed joints).

Small on purpose: it reads joint origins, axes and limits from a URDF and composes them. It is used
for the hand on every grasp (thousands at a time, differentiable); pinocchio serves as the
independent reference in the tests.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import torch

from getagrip_ros.grasp.rotations import euler_xyz_to_matrix, so3_exp


@dataclass(frozen=True)
class UrdfJoint:
    """One URDF joint: child pose in parent at q = 0 (T_parent_child), axis in the child frame."""

    name: str
    type: str  # revolute | continuous | prismatic | fixed
    parent: str
    child: str
    origin_xyz_m: tuple[float, float, float]
    origin_rpy_rad: tuple[float, float, float]
    axis: tuple[float, float, float]
    lower: float
    upper: float
    velocity: float

    @property
    def movable(self) -> bool:
        return self.type != "fixed"


def _floats(text: str | None, default: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split()) if text else default


def parse_urdf_joints(urdf: str | Path) -> list[UrdfJoint]:
    """Joints of a URDF file (or XML text) in document order."""
    text = Path(urdf).read_text() if not str(urdf).lstrip().startswith("<") else str(urdf)
    root = ET.fromstring(text)
    joints = []
    for j in root.iter("joint"):
        origin, axis, limit = j.find("origin"), j.find("axis"), j.find("limit")
        jtype = j.get("type")
        if jtype not in ("revolute", "continuous", "prismatic", "fixed"):
            raise ValueError(f"joint {j.get('name')}: unsupported type {jtype!r}")
        joints.append(
            UrdfJoint(
                name=j.get("name"),
                type=jtype,
                parent=j.find("parent").get("link"),
                child=j.find("child").get("link"),
                origin_xyz_m=_floats(origin.get("xyz") if origin is not None else None, (0.0, 0.0, 0.0)),
                origin_rpy_rad=_floats(origin.get("rpy") if origin is not None else None, (0.0, 0.0, 0.0)),
                axis=_floats(axis.get("xyz") if axis is not None else None, (1.0, 0.0, 0.0)),
                lower=float(limit.get("lower", "-inf")) if limit is not None and jtype != "continuous" else -float("inf"),
                upper=float(limit.get("upper", "inf")) if limit is not None and jtype != "continuous" else float("inf"),
                velocity=float(limit.get("velocity", "inf")) if limit is not None else float("inf"),
            )
        )
    return joints


class KinematicTree(torch.nn.Module):
    """Forward kinematics from a root link to chosen links, batched over configurations.

    Args:
        urdf: URDF path or XML text.
        root_link: link whose frame the returned poses are expressed in.
        target_links: links whose poses :meth:`forward` returns, in this order.
        joint_names: order of the configuration vector (default: movable joints on the paths to
            the targets, in document order).
    """

    def __init__(self, urdf: str | Path, root_link: str, target_links: list[str],
                 joint_names: list[str] | None = None) -> None:
        super().__init__()
        joints = parse_urdf_joints(urdf)
        by_child = {j.child: j for j in joints}
        chains: list[list[UrdfJoint]] = []
        for link in target_links:
            chain, current = [], link
            while current != root_link:
                if current not in by_child:
                    raise ValueError(f"link {link!r} is not below {root_link!r} in the URDF")
                chain.append(by_child[current])
                current = by_child[current].parent
            chains.append(chain[::-1])
        used = {j.name for chain in chains for j in chain if j.movable}
        if joint_names is None:
            joint_names = [j.name for j in joints if j.name in used]
        missing = used - set(joint_names)
        if missing:
            raise ValueError(f"joint_names lacks joints that move the targets: {sorted(missing)}")
        by_name = {j.name: j for j in joints}
        for name in joint_names:
            if name not in by_name or not by_name[name].movable:
                raise ValueError(f"{name!r} is not a movable joint of the URDF")

        self.root_link = root_link
        self.target_links = list(target_links)
        self.joint_names = list(joint_names)
        self.joints = [by_name[n] for n in joint_names]
        # Unique joints on all chains, parents before children, each with its parent slot.
        order: list[UrdfJoint] = []
        for chain in chains:
            for j in chain:
                if j not in order:
                    order.append(j)
        self._order = order
        slot_of_link = {root_link: -1}
        self._parent_slot, self._q_index, self._type = [], [], []
        for i, j in enumerate(order):
            self._parent_slot.append(slot_of_link[j.parent])
            slot_of_link[j.child] = i
            self._q_index.append(self.joint_names.index(j.name) if j.movable else -1)
            self._type.append(j.type)
        self._revolute_slots = [i for i, t in enumerate(self._type) if t in ("revolute", "continuous")]
        self._revolute_of_slot = {slot: k for k, slot in enumerate(self._revolute_slots)}
        self._target_slot = [slot_of_link[link] for link in target_links]
        self._target_chains = [[order.index(j) for j in chain if j.movable] for chain in chains]
        T0 = torch.zeros(len(order), 4, 4, dtype=torch.float64)
        T0[:, :3, :3] = euler_xyz_to_matrix(torch.tensor([j.origin_rpy_rad for j in order], dtype=torch.float64))
        T0[:, :3, 3] = torch.tensor([j.origin_xyz_m for j in order], dtype=torch.float64)
        T0[:, 3, 3] = 1.0
        self.register_buffer("joint_origins", T0)
        self.register_buffer("joint_axes", torch.tensor([j.axis for j in order], dtype=torch.float64))
        self.register_buffer("lower_limits", torch.tensor([j.lower for j in self.joints], dtype=torch.float64))
        self.register_buffer("upper_limits", torch.tensor([j.upper for j in self.joints], dtype=torch.float64))

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        """(B, num_joints) joint positions (rad or m) -> (B, num_targets, 4, 4) poses in root_link."""
        poses = self._joint_poses(q)
        eye = torch.eye(4, dtype=q.dtype, device=q.device).expand(q.shape[0], 4, 4)
        return torch.stack([eye if s < 0 else poses[s] for s in self._target_slot], dim=1)

    def point_jacobian(self, q: torch.Tensor, points_in_targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions and analytic Jacobians of points fixed in the target links.

        Args:
            q: (B, num_joints).
            points_in_targets: (num_targets, 3) one point per target link, in that link's frame.

        Returns:
            (B, num_targets, 3) positions in root_link and (B, num_targets, 3, num_joints) d position / d q.
        """
        poses = self._joint_poses(q)
        B, dtype = q.shape[0], q.dtype
        axes = self.joint_axes.to(dtype)
        pts = points_in_targets.to(dtype)
        positions = torch.stack([pts[t] if s < 0 else poses[s][:, :3, :3] @ pts[t] + poses[s][:, :3, 3]
                                 for t, s in enumerate(self._target_slot)], dim=1)
        J = torch.zeros(B, len(self._target_slot), 3, self.num_joints, dtype=dtype, device=q.device)
        for t, chain in enumerate(self._target_chains):
            for slot in chain:
                axis_root = poses[slot][:, :3, :3] @ axes[slot]
                col = self._q_index[slot]
                if self._type[slot] == "prismatic":
                    J[:, t, :, col] = axis_root
                else:
                    J[:, t, :, col] = torch.linalg.cross(axis_root, positions[:, t] - poses[slot][:, :3, 3], dim=-1)
        return positions, J

    def frame_jacobian(self, q: torch.Tensor, target: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Pose of one target link and its geometric Jacobian, both in root_link.

        Returns:
            (B, 4, 4) T_root_target and (B, 6, num_joints): rows 0-2 linear velocity of the target
            origin, rows 3-5 angular velocity.
        """
        poses = self._joint_poses(q)
        slot = self._target_slot[target]
        eye = torch.eye(4, dtype=q.dtype, device=q.device).expand(q.shape[0], 4, 4)
        T = eye if slot < 0 else poses[slot]
        axes = self.joint_axes.to(q.dtype)
        J = torch.zeros(q.shape[0], 6, self.num_joints, dtype=q.dtype, device=q.device)
        for s in self._target_chains[target]:
            axis_root = poses[s][:, :3, :3] @ axes[s]
            col = self._q_index[s]
            if self._type[s] == "prismatic":
                J[:, :3, col] = axis_root
            else:
                J[:, :3, col] = torch.linalg.cross(axis_root, T[:, :3, 3] - poses[s][:, :3, 3], dim=-1)
                J[:, 3:, col] = axis_root
        return T, J

    def _joint_poses(self, q: torch.Tensor) -> list[torch.Tensor]:
        """Pose in root_link of every joint's child frame (after its motion), in self._order."""
        if q.ndim != 2 or q.shape[1] != self.num_joints:
            raise ValueError(f"q: expected shape (B, {self.num_joints}), got {tuple(q.shape)}")
        origins = self.joint_origins.to(q.dtype)
        axes = self.joint_axes.to(q.dtype)
        eye = torch.eye(4, dtype=q.dtype, device=q.device).expand(q.shape[0], 4, 4)
        revolute = self._revolute_slots
        if revolute:  # every revolute joint's rotation in one batched call (one autograd node, not one per joint)
            q_revolute = q[:, [self._q_index[i] for i in revolute], None]
            rotations = torch.zeros(q.shape[0], len(revolute), 4, 4, dtype=q.dtype, device=q.device)
            rotations[..., :3, :3] = so3_exp(axes[revolute] * q_revolute)
            rotations[..., 3, 3] = 1.0
        poses: list[torch.Tensor] = []
        for i, (parent, qi, jtype) in enumerate(zip(self._parent_slot, self._q_index, self._type)):
            T = origins[i].expand(q.shape[0], 4, 4)
            if jtype in ("revolute", "continuous"):
                T = T @ rotations[:, self._revolute_of_slot[i]]
            elif jtype == "prismatic":
                motion = eye.clone()
                motion[:, :3, 3] = axes[i] * q[:, qi : qi + 1]
                T = T @ motion
            poses.append(T if parent < 0 else poses[parent] @ T)
        return poses
