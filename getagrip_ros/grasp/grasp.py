"""The batched multi-finger grasp and its flat 37-D vector.

A grasp for the Allegro right hand is (T_frame_palm in SE(3), 16 pre-grasp joint angles,
4 unit fingertip closing directions), all expressed in one frame ``frame_id``. Fingers are ordered
index, middle, ring, thumb; joints follow the public Get a Grip order (``joint_0.0`` .. ``joint_15.0``).

The 37-D vector layout (public Get a Grip code):
``[palm xyz (3) | rot6d (6) | joint angles (16) | d_index, d_middle, d_ring, d_thumb (4 x 3)]``
with rot6d as in :mod:`getagrip_ros.grasp.rotations`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np
import torch

from getagrip_ros.grasp.rotations import matrix_from_rot6d, rot6d_from_matrix

NUM_FINGERS = 4
NUM_HAND_JOINTS = 16
GRASP_DIM = 37
FINGER_NAMES = ("index", "middle", "ring", "thumb")

SLICE_POSITION = slice(0, 3)
SLICE_ROT6D = slice(3, 9)
SLICE_JOINTS = slice(9, 25)
SLICE_DIRECTIONS = slice(25, 37)

ArrayLike = Union[np.ndarray, torch.Tensor]


class GraspValidationError(ValueError):
    """A grasp (or grasp vector) is malformed: wrong shape, non-finite, bad directions or joints."""


def _as_tensor(x: ArrayLike, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
    if not isinstance(x, torch.Tensor):
        raise GraspValidationError(f"{name}: expected a numpy array or torch tensor, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        x = x.to(torch.float64 if dtype is None else dtype)
    return x if dtype is None else x.to(dtype)


@dataclass
class Grasp:
    """A batch of B grasps in frame ``frame_id`` (metres, radians).

    Attributes:
        palm_position_m: (B, 3) position of the palm_link origin, p_frame_palm.
        palm_rotation: (B, 3, 3) R_frame_palm; columns = palm x (palm normal, grasping side),
            palm y (toward the index finger), palm z (along the fingers).
        joint_angles_rad: (B, 16) pre-grasp joint angles, Get a Grip order.
        fingertip_directions: (B, 4, 3) unit closing directions d_i in frame_id.
        frame_id: name of the frame all of the above are expressed in.
    """

    palm_position_m: torch.Tensor
    palm_rotation: torch.Tensor
    joint_angles_rad: torch.Tensor
    fingertip_directions: torch.Tensor
    frame_id: str = "world"

    def __post_init__(self) -> None:
        self.palm_position_m = _as_tensor(self.palm_position_m, "palm_position_m")
        dtype, device = self.palm_position_m.dtype, self.palm_position_m.device
        self.palm_rotation = _as_tensor(self.palm_rotation, "palm_rotation", dtype).to(device)
        self.joint_angles_rad = _as_tensor(self.joint_angles_rad, "joint_angles_rad", dtype).to(device)
        self.fingertip_directions = _as_tensor(self.fingertip_directions, "fingertip_directions", dtype).to(device)
        b = self.palm_position_m.shape[0] if self.palm_position_m.ndim == 2 else -1
        expected = {
            "palm_position_m": (self.palm_position_m, (b, 3)),
            "palm_rotation": (self.palm_rotation, (b, 3, 3)),
            "joint_angles_rad": (self.joint_angles_rad, (b, NUM_HAND_JOINTS)),
            "fingertip_directions": (self.fingertip_directions, (b, NUM_FINGERS, 3)),
        }
        for name, (value, shape) in expected.items():
            if tuple(value.shape) != shape:
                want = "(B, " + ", ".join(str(s) for s in shape[1:]) + ")"
                raise GraspValidationError(f"{name}: expected shape {want}, got {tuple(value.shape)}")

    # -- construction / conversion -----------------------------------------------------------
    @classmethod
    def from_vector(cls, vector: ArrayLike, frame_id: str = "world") -> "Grasp":
        """Build from (B, 37) or (37,) vectors (numpy or torch). Directions are kept as given."""
        v = _as_tensor(vector, "vector")
        if v.ndim == 1:
            v = v[None]
        if v.ndim != 2 or v.shape[1] != GRASP_DIM:
            raise GraspValidationError(f"vector: expected shape (B, {GRASP_DIM}) or ({GRASP_DIM},), got {tuple(v.shape)}")
        return cls(
            palm_position_m=v[:, SLICE_POSITION],
            palm_rotation=matrix_from_rot6d(v[:, SLICE_ROT6D]),
            joint_angles_rad=v[:, SLICE_JOINTS],
            fingertip_directions=v[:, SLICE_DIRECTIONS].reshape(-1, NUM_FINGERS, 3),
            frame_id=frame_id,
        )

    @classmethod
    def from_public_vector(cls, vector: ArrayLike, joint_lower_rad: ArrayLike, joint_upper_rad: ArrayLike,
                           frame_id: str = "world") -> "Grasp":
        """Build from (B, 37) vectors as the public code converts a sampler's output: joint angles clamped into
        [joint_lower_rad, joint_upper_rad] (16 each) and each closing direction divided by its norm (a zero
        direction becomes NaN, as there; `Grasp.finite` finds them)."""
        grasp = cls.from_vector(vector, frame_id)
        q = grasp.joint_angles_rad
        lower = _as_tensor(joint_lower_rad, "joint_lower_rad", q.dtype).to(q.device).reshape(NUM_HAND_JOINTS)
        upper = _as_tensor(joint_upper_rad, "joint_upper_rad", q.dtype).to(q.device).reshape(NUM_HAND_JOINTS)
        grasp.joint_angles_rad = torch.maximum(torch.minimum(q, upper), lower)
        d = grasp.fingertip_directions
        grasp.fingertip_directions = d / d.norm(dim=-1, keepdim=True)
        return grasp

    def finite(self) -> torch.Tensor:
        """(B,) bool: every number of the grasp is finite."""
        return torch.isfinite(self.to_vector()).all(1)

    def to_vector(self) -> torch.Tensor:
        """(B, 37) tensor in the public layout."""
        return torch.cat(
            [
                self.palm_position_m,
                rot6d_from_matrix(self.palm_rotation),
                self.joint_angles_rad,
                self.fingertip_directions.reshape(-1, NUM_FINGERS * 3),
            ],
            dim=1,
        )

    def to_numpy_vector(self) -> np.ndarray:
        """(B, 37) numpy array in the public layout."""
        return self.to_vector().detach().cpu().numpy()

    @classmethod
    def cat(cls, grasps: Sequence["Grasp"]) -> "Grasp":
        """Concatenate batches that share a frame."""
        if not grasps:
            raise GraspValidationError("cannot concatenate an empty list of grasps")
        frames = {g.frame_id for g in grasps}
        if len(frames) != 1:
            raise GraspValidationError(f"cannot concatenate grasps in different frames: {sorted(frames)}")
        return cls(
            palm_position_m=torch.cat([g.palm_position_m for g in grasps]),
            palm_rotation=torch.cat([g.palm_rotation for g in grasps]),
            joint_angles_rad=torch.cat([g.joint_angles_rad for g in grasps]),
            fingertip_directions=torch.cat([g.fingertip_directions for g in grasps]),
            frame_id=grasps[0].frame_id,
        )

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> "Grasp":
        """Copy to a device and/or dtype."""
        return Grasp(
            *(t.to(device=device, dtype=dtype) for t in
              (self.palm_position_m, self.palm_rotation, self.joint_angles_rad, self.fingertip_directions)),
            frame_id=self.frame_id,
        )

    # -- batch access ------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.palm_position_m.shape[0]

    def __getitem__(self, index: int | slice | torch.Tensor | np.ndarray | Sequence[int]) -> "Grasp":
        """Select grasps; an int keeps the batch dimension (returns a batch of one)."""
        if isinstance(index, int):
            index = slice(index, index + 1 if index != -1 else None)
        elif isinstance(index, np.ndarray):
            index = torch.from_numpy(index)
        elif isinstance(index, (list, tuple)):
            index = torch.as_tensor(index, dtype=torch.long)
        return Grasp(
            self.palm_position_m[index],
            self.palm_rotation[index],
            self.joint_angles_rad[index],
            self.fingertip_directions[index],
            frame_id=self.frame_id,
        )

    # -- geometry ----------------------------------------------------------------------------
    @property
    def T_frame_palm(self) -> torch.Tensor:
        """(B, 4, 4) homogeneous palm poses in frame_id."""
        T = torch.zeros(len(self), 4, 4, dtype=self.palm_position_m.dtype, device=self.palm_position_m.device)
        T[:, :3, :3] = self.palm_rotation
        T[:, :3, 3] = self.palm_position_m
        T[:, 3, 3] = 1.0
        return T

    @property
    def palm_normal(self) -> torch.Tensor:
        """(B, 3) palm x axis: the direction the palm faces (grasping side)."""
        return self.palm_rotation[:, :, 0]

    @property
    def finger_axis(self) -> torch.Tensor:
        """(B, 3) palm z axis: from the palm toward the middle finger."""
        return self.palm_rotation[:, :, 2]

    def transformed(self, T_new_old: ArrayLike, new_frame_id: str) -> "Grasp":
        """Express the grasps in another frame: T_new_old is the (4, 4) pose of frame_id in new_frame_id."""
        T = _as_tensor(T_new_old, "T_new_old", self.palm_position_m.dtype).to(self.palm_position_m.device)
        if tuple(T.shape) != (4, 4):
            raise GraspValidationError(f"T_new_old: expected shape (4, 4), got {tuple(T.shape)}")
        R, t = T[:3, :3], T[:3, 3]
        return Grasp(
            palm_position_m=self.palm_position_m @ R.T + t,
            palm_rotation=R @ self.palm_rotation,
            joint_angles_rad=self.joint_angles_rad.clone(),
            fingertip_directions=self.fingertip_directions @ R.T,
            frame_id=new_frame_id,
        )
