"""A human grasp demonstration: 21 hand keypoints or a MANO mesh, in a named frame, validated.

Two forms, as JSON objects (metres):

- ``{"format": "keypoints21", "frame_id": "world", "keypoints_m": [[x, y, z], ... 21]}`` in the MediaPipe
  hand-landmark order (:data:`KEYPOINT_NAMES`), the output of any hand tracker;
- ``{"format": "mano_mesh", "frame_id": ..., "vertices_m": [778 x [x, y, z]], "joints_m": [21 x [x, y, z]]}``,
  the output of a MANO layer, its joints in the same order (manopth's output order). No MANO model file is needed.

An optional ``"handedness"`` is ``"right"`` (the default) or ``"left"``. Validation refuses wrong counts,
non-finite values, an empty frame and bones of impossible length (outside ``[0.5, 2]`` times an adult hand's,
:data:`REFERENCE_KEYPOINTS_M`) with a :class:`DemonstrationError` that says why. Files are read as plain JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping, Optional

import numpy as np

#: MediaPipe hand-landmark order.
KEYPOINT_NAMES = (
    "wrist",
    "thumb_cmc", "thumb_mcp", "thumb_ip", "thumb_tip",
    "index_mcp", "index_pip", "index_dip", "index_tip",
    "middle_mcp", "middle_pip", "middle_dip", "middle_tip",
    "ring_mcp", "ring_pip", "ring_dip", "ring_tip",
    "pinky_mcp", "pinky_pip", "pinky_dip", "pinky_tip",
)
NUM_KEYPOINTS = 21
NUM_MANO_VERTICES = 778
FINGERS = ("thumb", "index", "middle", "ring", "pinky")
#: Keypoint indices of each finger, base to tip (the thumb from its CMC, the others from their MCP).
FINGER_KEYPOINTS = {finger: tuple(range(1 + 4 * i, 5 + 4 * i)) for i, finger in enumerate(FINGERS)}
#: The 20 bones of the keypoint skeleton: (parent, child) keypoint indices.
BONES = tuple((0 if k == 0 else chain[k - 1], chain[k]) for chain in FINGER_KEYPOINTS.values() for k in range(4))

#: An adult right hand, flat and open, in its wrist frame (x: out of the palm, z: from the wrist to the middle
#: finger, y: towards the thumb). Rounded adult dimensions: hand length ~19 cm (wrist to middle fingertip),
#: breadth at the knuckles ~8.5 cm (their centres span 6 cm); finger segments MCP-PIP / PIP-DIP / DIP-tip of
#: 4.0/2.3/2.0 cm (index), 4.5/2.7/2.1 (middle), 4.2/2.6/2.1 (ring), 3.4/1.9/1.9 (little); thumb CMC-MCP 4.5,
#: MCP-IP 3.2, IP-tip 2.8 cm, the thumb pointing forward and out of the palm plane.
REFERENCE_KEYPOINTS_M = np.array(
    [
        [0.0, 0.0, 0.0],
        # thumb: CMC, then along (0.30, 0.55, 0.78)
        [0.012, 0.022, 0.030], [0.0255, 0.04675, 0.0651], [0.0351, 0.06435, 0.09006], [0.0435, 0.07975, 0.11190],
        # index
        [0.0, 0.030, 0.085], [0.0, 0.030, 0.125], [0.0, 0.030, 0.148], [0.0, 0.030, 0.168],
        # middle
        [0.0, 0.010, 0.088], [0.0, 0.010, 0.133], [0.0, 0.010, 0.160], [0.0, 0.010, 0.181],
        # ring
        [0.0, -0.010, 0.082], [0.0, -0.010, 0.124], [0.0, -0.010, 0.150], [0.0, -0.010, 0.171],
        # little
        [0.0, -0.030, 0.074], [0.0, -0.030, 0.108], [0.0, -0.030, 0.127], [0.0, -0.030, 0.146],
    ],
    dtype=np.float64,
)


def bone_lengths_m(keypoints_m: np.ndarray) -> np.ndarray:
    """(..., 21, 3) keypoints -> (..., 20) bone lengths in the order of :data:`BONES`."""
    parents, children = zip(*BONES)
    return np.linalg.norm(keypoints_m[..., list(children), :] - keypoints_m[..., list(parents), :], axis=-1)


REFERENCE_BONE_LENGTHS_M = bone_lengths_m(REFERENCE_KEYPOINTS_M)


class DemonstrationError(ValueError):
    """A demonstration that cannot be used; the message says why."""


@dataclass(frozen=True)
class HumanDemonstration:
    """A validated demonstration. ``keypoints_m`` (21, 3) in ``frame_id``; ``vertices_m`` (778, 3) for MANO."""

    format: Literal["keypoints21", "mano_mesh"]
    frame_id: str
    keypoints_m: np.ndarray
    vertices_m: Optional[np.ndarray] = None
    handedness: Literal["right", "left"] = "right"

    def transformed(self, T_target_frame: np.ndarray, target_frame: str) -> "HumanDemonstration":
        """The same demonstration in `target_frame`, given ``T_target_frame`` (4, 4) (e.g. from TF)."""
        T = np.asarray(T_target_frame, dtype=np.float64)
        if T.shape != (4, 4) or not np.isfinite(T).all():
            raise DemonstrationError("the transform to the target frame must be a finite 4x4 matrix")

        def move(points: Optional[np.ndarray]) -> Optional[np.ndarray]:
            return None if points is None else points @ T[:3, :3].T + T[:3, 3]

        return HumanDemonstration(self.format, target_frame, move(self.keypoints_m), move(self.vertices_m), self.handedness)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (see the module docstring)."""
        out: dict[str, Any] = {"format": self.format, "frame_id": self.frame_id, "handedness": self.handedness}
        if self.format == "keypoints21":
            out["keypoints_m"] = self.keypoints_m.tolist()
        else:
            out["vertices_m"] = self.vertices_m.tolist()
            out["joints_m"] = self.keypoints_m.tolist()
        return out


def _points(data: Mapping[str, Any], key: str, count: int) -> np.ndarray:
    if key not in data:
        raise DemonstrationError(f"missing {key!r}")
    try:
        points = np.asarray(data[key], dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise DemonstrationError(f"{key!r} must be a list of [x, y, z] numbers ({e})") from None
    if points.shape != (count, 3):
        raise DemonstrationError(f"{key!r} must hold {count} points of 3 coordinates, got shape {points.shape}")
    if not np.isfinite(points).all():
        raise DemonstrationError(f"{key!r} holds a NaN or an infinite value")
    return points


def check_bone_lengths(keypoints_m: np.ndarray, min_scale: float = 0.5, max_scale: float = 2.0) -> None:
    """Refuse a skeleton with a bone outside ``[min_scale, max_scale]`` times the adult reference's."""
    ratio = bone_lengths_m(keypoints_m) / REFERENCE_BONE_LENGTHS_M
    bad = np.flatnonzero((ratio < min_scale) | (ratio > max_scale))
    if len(bad):
        parent, child = BONES[int(bad[0])]
        length = float(bone_lengths_m(keypoints_m)[bad[0]])
        raise DemonstrationError(
            f"bone {KEYPOINT_NAMES[parent]}-{KEYPOINT_NAMES[child]} is {100 * length:.1f} cm long, "
            f"{ratio[bad[0]]:.2f}x an adult hand's {100 * REFERENCE_BONE_LENGTHS_M[bad[0]]:.1f} cm "
            f"(allowed {min_scale}x-{max_scale}x; keypoints in metres, in the MediaPipe order?)")


def demonstration_from_dict(data: Mapping[str, Any]) -> HumanDemonstration:
    """Parse and validate the JSON form (see the module docstring)."""
    if not isinstance(data, Mapping):
        raise DemonstrationError(f"a demonstration is a JSON object, got {type(data).__name__}")
    fmt = data.get("format")
    frame = data.get("frame_id")
    if not isinstance(frame, str) or not frame.strip():
        raise DemonstrationError("'frame_id' must be a non-empty string (the frame the points are in)")
    handedness = data.get("handedness", "right")
    if handedness not in ("right", "left"):
        raise DemonstrationError(f"'handedness' must be 'right' or 'left', got {handedness!r}")
    if fmt == "keypoints21":
        keypoints, vertices = _points(data, "keypoints_m", NUM_KEYPOINTS), None
    elif fmt == "mano_mesh":
        vertices, keypoints = _points(data, "vertices_m", NUM_MANO_VERTICES), _points(data, "joints_m", NUM_KEYPOINTS)
    else:
        raise DemonstrationError(f"'format' must be 'keypoints21' or 'mano_mesh', got {fmt!r}")
    check_bone_lengths(keypoints)
    return HumanDemonstration(fmt, frame.strip(), keypoints, vertices, handedness)


MAX_FILE_BYTES = 4 * 1024 * 1024


def load_demonstration(path: str | Path) -> HumanDemonstration:
    """Read a demonstration JSON file (plain JSON, at most 4 MiB)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise DemonstrationError(f"cannot read {path}: {e.strerror}") from None
    if size > MAX_FILE_BYTES:
        raise DemonstrationError(f"{path} is {size} bytes; a demonstration is at most {MAX_FILE_BYTES}")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DemonstrationError(f"{path} is not a JSON demonstration: {e}") from None
    return demonstration_from_dict(data)


def save_demonstration(demonstration: HumanDemonstration, path: str | Path) -> Path:
    """Write the JSON form."""
    path = Path(path)
    path.write_text(json.dumps(demonstration.to_dict()))
    return path
