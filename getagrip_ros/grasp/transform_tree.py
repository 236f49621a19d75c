"""A tree of timed rigid transforms between named frames (what ROS carries on ``/tf`` and ``/tf_static``).

Pure Python, no rclpy: :mod:`getagrip_ros.ros.tf_listener` fills it from the topics; nodes look up the pose of
one frame in another with it (e.g. a human demonstration given in a hand tracker's frame, moved into the
object's frame). As in TF, every frame has at most one parent. Static transforms hold at all times. Dynamic ones
are kept for ``cache_s`` seconds of their stamps and looked up at a time by interpolation between the two samples
around it (linear in translation, slerp in rotation); time ``None`` (a zero ROS stamp) asks for the newest sample
of each dynamic transform on the path.

Transforms are (4, 4) ``T_parent_child`` in metres; times are seconds.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

ROTATION_TOLERANCE = 1e-6
"""How far from orthonormal (max |R^T R - I|) a transform's rotation may be."""


class TransformLookupError(ValueError):
    """A transform that cannot be given: an unknown frame, frames in separate trees, or a time outside the samples."""


@dataclass(frozen=True)
class TransformTreeConfig:
    """How long dynamic transforms are kept and how a lookup may wait for them (the ROS listener's wait)."""

    cache_s: float = 60.0
    """Dynamic samples older than the newest one of their transform by more than this are dropped (s)."""
    tolerance_s: float = 0.1
    """A lookup at a time up to this far outside a dynamic transform's samples uses the nearest one (s); further
    away it fails (no extrapolation)."""
    wait_s: float = 2.0
    """How long a node waits for a transform that is not (yet) known before refusing the goal (s)."""


@dataclass
class _Edge:
    parent: str
    static: bool
    times_s: list[float]
    transforms: list[np.ndarray]


def _checked(T_parent_child: np.ndarray) -> np.ndarray:
    T = np.asarray(T_parent_child, dtype=np.float64)
    if T.shape != (4, 4) or not np.isfinite(T).all():
        raise ValueError("a transform must be a finite (4, 4) matrix")
    R = T[:3, :3]
    if np.abs(R.T @ R - np.eye(3)).max() > ROTATION_TOLERANCE or np.linalg.det(R) < 0 or \
            np.abs(T[3] - [0, 0, 0, 1]).max() > 0:
        raise ValueError("a transform's rotation must be orthonormal and right-handed, its last row 0 0 0 1")
    return T.copy()


def _inverse(T: np.ndarray) -> np.ndarray:
    inv = np.eye(4)
    inv[:3, :3] = T[:3, :3].T
    inv[:3, 3] = -T[:3, :3].T @ T[:3, 3]
    return inv


class TransformTree:
    """Thread-safe store of ``T_parent_child`` samples with lookups between any two connected frames."""

    def __init__(self, config: TransformTreeConfig = TransformTreeConfig()) -> None:
        self.config = config
        self._edges: dict[str, _Edge] = {}  # by child frame
        self._lock = threading.Lock()

    def set_transform(self, parent: str, child: str, T_parent_child: np.ndarray, time_s: float,
                      static: bool = False) -> None:
        """Add a sample of ``T_parent_child`` at ``time_s`` (ValueError: empty or equal names, a malformed matrix, or a
        parent that would close a loop). A new parent for `child` replaces its old one and its samples."""
        if not parent or not child or parent == child:
            raise ValueError(f"a transform needs two different, non-empty frames, got {parent!r} -> {child!r}")
        T = _checked(T_parent_child)
        if not np.isfinite(time_s):
            raise ValueError(f"a transform's time must be finite, got {time_s}")
        with self._lock:
            if child in self._chain(parent):
                raise ValueError(f"{parent!r} -> {child!r} would close a loop: {child!r} is already above {parent!r}")
            edge = self._edges.get(child)
            if edge is None or edge.parent != parent or edge.static != static:
                edge = self._edges[child] = _Edge(parent, static, [], [])
            if static:
                edge.times_s, edge.transforms = [time_s], [T]
                return
            index = bisect.bisect_right(edge.times_s, time_s)
            if index and edge.times_s[index - 1] == time_s:
                edge.transforms[index - 1] = T
            else:
                edge.times_s.insert(index, time_s)
                edge.transforms.insert(index, T)
            stale = bisect.bisect_left(edge.times_s, edge.times_s[-1] - self.config.cache_s)
            del edge.times_s[:stale], edge.transforms[:stale]

    def frames(self) -> list[str]:
        """Every frame named by a transform, sorted."""
        with self._lock:
            return self._frames()

    def _frames(self) -> list[str]:
        return sorted(set(self._edges) | {e.parent for e in self._edges.values()})

    def lookup(self, target: str, source: str, time_s: float | None = None) -> np.ndarray:
        """``T_target_source`` (4, 4): the pose of `source` in `target` at `time_s` (None: the newest samples).

        Raises TransformLookupError with the reason when it cannot be given.
        """
        if target == source:
            return np.eye(4)
        with self._lock:
            known = self._frames()
            missing = [f for f in (source, target) if f not in known]
            if missing:
                raise TransformLookupError(f"no transform names frame {missing[0]!r} (known frames: "
                                           f"{known or 'none yet'})")
            source_chain, target_chain = self._chain(source), self._chain(target)
            common = next((f for f in source_chain if f in target_chain), None)
            if common is None:
                raise TransformLookupError(f"frames {source!r} and {target!r} are in separate trees (roots "
                                           f"{source_chain[-1]!r} and {target_chain[-1]!r})")
            T_common_source = self._along(source_chain[:source_chain.index(common)], time_s)
            T_common_target = self._along(target_chain[:target_chain.index(common)], time_s)
        return _inverse(T_common_target) @ T_common_source

    def _chain(self, frame: str) -> list[str]:
        """`frame` and its ancestors up to its root."""
        chain = [frame]
        while chain[-1] in self._edges:
            chain.append(self._edges[chain[-1]].parent)
        return chain

    def _along(self, children: list[str], time_s: float | None) -> np.ndarray:
        """T_ancestor_child for the chain child -> ... (each entry a child of the next, the last one's parent the
        ancestor)."""
        T = np.eye(4)
        for child in reversed(children):
            T = T @ self._sample(child, time_s)
        return T

    def _sample(self, child: str, time_s: float | None) -> np.ndarray:
        edge = self._edges[child]
        if edge.static or time_s is None:
            return edge.transforms[-1]
        times = edge.times_s
        tolerance = self.config.tolerance_s
        if time_s <= times[0] or time_s >= times[-1]:
            nearest = 0 if time_s <= times[0] else -1
            if abs(time_s - times[nearest]) > tolerance:
                raise TransformLookupError(
                    f"{edge.parent!r} -> {child!r} is known from t = {times[0]:.3f} s to {times[-1]:.3f} s, not at "
                    f"{time_s:.3f} s (tolerance {tolerance} s; no extrapolation)")
            return edge.transforms[nearest]
        after = bisect.bisect_right(times, time_s)
        t0, t1 = times[after - 1], times[after]
        T0, T1 = edge.transforms[after - 1], edge.transforms[after]
        w = (time_s - t0) / (t1 - t0)
        T = np.eye(4)
        T[:3, :3] = Slerp([0.0, 1.0], Rotation.from_matrix(np.stack([T0[:3, :3], T1[:3, :3]])))([w]).as_matrix()[0]
        T[:3, 3] = (1 - w) * T0[:3, 3] + w * T1[:3, 3]
        return T
