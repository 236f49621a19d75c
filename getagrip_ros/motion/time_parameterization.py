"""Time-parameterisation of a joint-space waypoint path within joint velocity and acceleration limits.

Each straight segment is followed with one trapezoidal (or triangular) speed profile shared by all
joints, starting and ending at rest, so the executed motion stays exactly on the collision-checked
segments. The result is sampled every `sample_period_s`; between samples `JointTrajectory`
interpolates linearly, and the finite-difference velocities and accelerations of the samples stay
within the limits too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from getagrip_ros.robot.description import ARM_JOINT_NAMES, FR3_VELOCITY_RAD_S
from getagrip_ros.robot.interfaces import JointTrajectory

#: FR3 joint acceleration limits (Franka's control parameters: 10 rad/s^2 for every joint).
FR3_ACCELERATION_RAD_S2 = (10.0,) * 7


@dataclass(frozen=True)
class TimeParameterizationConfig:
    """Joint limits of the timed trajectory (rad/s, rad/s^2) and its sampling."""

    max_velocity_rad_s: tuple[float, ...] = FR3_VELOCITY_RAD_S
    """FR3 "rectangular" velocity limits, fr3_joint1..7."""
    max_acceleration_rad_s2: tuple[float, ...] = FR3_ACCELERATION_RAD_S2
    """FR3 acceleration limits (10 rad/s^2 each), fr3_joint1..7."""
    velocity_scale: float = 0.25
    """Fraction of the velocity limits used (Get a Grip executes at 0.25 of the URDF limits)."""
    acceleration_scale: float = 0.25
    """Fraction of the acceleration limits used."""
    sample_period_s: float = 0.01
    """Spacing of the trajectory's samples (JointTrajectory interpolates linearly between them)."""

    def __post_init__(self) -> None:
        v, a = np.asarray(self.max_velocity_rad_s, float), np.asarray(self.max_acceleration_rad_s2, float)
        if v.shape != a.shape or v.ndim != 1 or not ((v > 0).all() and (a > 0).all()):
            raise ValueError("max_velocity_rad_s and max_acceleration_rad_s2 must be positive and of equal length")
        for name in ("velocity_scale", "acceleration_scale"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if not self.sample_period_s > 0:
            raise ValueError(f"sample_period_s must be > 0, got {self.sample_period_s}")

    @property
    def velocity_limits_rad_s(self) -> np.ndarray:
        """Limits actually used: max_velocity_rad_s * velocity_scale."""
        return np.asarray(self.max_velocity_rad_s, float) * self.velocity_scale

    @property
    def acceleration_limits_rad_s2(self) -> np.ndarray:
        return np.asarray(self.max_acceleration_rad_s2, float) * self.acceleration_scale


def _segment_profile(delta_rad: np.ndarray, v_max: np.ndarray, a_max: np.ndarray) -> tuple[float, float, float]:
    """Rest-to-rest profile of the path fraction u in [0, 1]: (duration s, peak du/dt, du/dt^2)."""
    moving = np.abs(delta_rad) > 0
    V = float(np.min(v_max[moving] / np.abs(delta_rad[moving])))
    A = float(np.min(a_max[moving] / np.abs(delta_rad[moving])))
    if V * V / A >= 1.0:  # triangular: the peak speed is never reached
        t_acc = math.sqrt(1.0 / A)
        return 2 * t_acc, A * t_acc, A
    return 1.0 / V + V / A, V, A


def _fraction(t: np.ndarray, duration: float, V: float, A: float) -> np.ndarray:
    """u(t) of the profile, for 0 <= t <= duration."""
    t_acc = V / A
    u = np.where(t < t_acc, 0.5 * A * t**2, 0.5 * A * t_acc**2 + V * (t - t_acc))
    decel = t > duration - t_acc
    u = np.where(decel, 1.0 - 0.5 * A * (duration - t) ** 2, u)
    return np.clip(u, 0.0, 1.0)


def time_parameterize(path_rad: np.ndarray, config: TimeParameterizationConfig = TimeParameterizationConfig(),
                      joint_names: Sequence[str] = ARM_JOINT_NAMES) -> JointTrajectory:
    """Timed trajectory through the (N, n) waypoints, at rest at each, within the configured limits."""
    path = np.asarray(path_rad, dtype=float)
    n = len(joint_names)
    if path.ndim != 2 or path.shape[1] != n or len(path) == 0:
        raise ValueError(f"path: expected shape (N >= 1, {n}), got {path.shape}")
    if not np.isfinite(path).all():
        raise ValueError("path contains NaN or inf")
    v_max, a_max = config.velocity_limits_rad_s, config.acceleration_limits_rad_s2
    if len(v_max) != n:
        raise ValueError(f"limits are given for {len(v_max)} joints, the path has {n}")
    keep = np.concatenate([[True], np.abs(np.diff(path, axis=0)).max(axis=1) > 1e-12])
    path = path[keep]
    times, points, t0 = [0.0], [path[0]], 0.0
    for a, b in zip(path[:-1], path[1:]):
        delta = b - a
        duration, V, A = _segment_profile(delta, v_max, a_max)
        count = max(1, math.ceil(duration / config.sample_period_s))
        t = np.linspace(0.0, duration, count + 1)[1:]
        u = _fraction(t, duration, V, A)
        u[-1] = 1.0
        times.extend(t0 + t)
        points.extend(a + u[:, None] * delta)
        t0 += duration
    return JointTrajectory(tuple(joint_names), np.array(times), np.array(points))


def _trapezoid_for_duration(duration_s: float, A: float) -> float:
    """Peak rate V of a rest-to-rest trapezoid covering u in [0, 1] in exactly duration_s with acceleration A."""
    disc = (A * duration_s) ** 2 - 4.0 * A
    return A * duration_s / 2.0 if disc <= 0 else (A * duration_s - math.sqrt(disc)) / 2.0


def time_parameterize_through(path_rad: np.ndarray, config: TimeParameterizationConfig = TimeParameterizationConfig(),
                              joint_names: Sequence[str] = ARM_JOINT_NAMES, min_duration_s: float = 0.0) -> JointTrajectory:
    """Timed trajectory along a dense (N, n) waypoint path without stopping at the waypoints.

    One rest-to-rest trapezoidal profile of the path fraction u (knots spaced by the largest joint motion of each
    segment) whose peak rate keeps every joint within its velocity limit on every segment, and whose acceleration
    keeps it within its acceleration limit; the motion lasts at least min_duration_s. Meant for smooth paths (a
    Cartesian line solved by IK in small steps): the direction changes between segments are not limited.
    """
    path = np.asarray(path_rad, dtype=float)
    n = len(joint_names)
    if path.ndim != 2 or path.shape[1] != n or len(path) < 2:
        raise ValueError(f"path: expected shape (N >= 2, {n}), got {path.shape}")
    if not np.isfinite(path).all():
        raise ValueError("path contains NaN or inf")
    if not min_duration_s >= 0:
        raise ValueError(f"min_duration_s must be >= 0, got {min_duration_s}")
    v_max, a_max = config.velocity_limits_rad_s, config.acceleration_limits_rad_s2
    if len(v_max) != n:
        raise ValueError(f"limits are given for {len(v_max)} joints, the path has {n}")
    keep = np.concatenate([[True], np.abs(np.diff(path, axis=0)).max(axis=1) > 1e-12])
    path = path[keep]
    if len(path) < 2:
        raise ValueError("path does not move")
    step = np.abs(np.diff(path, axis=0)).max(axis=1)
    knots = np.concatenate([[0.0], np.cumsum(step)]) / step.sum()
    dq_du = np.abs(np.diff(path, axis=0)) / np.diff(knots)[:, None]  # (N-1, n)
    moving = dq_du > 0
    V = float(np.min((v_max / np.where(moving, dq_du, 1.0))[moving]))
    A = float(np.min((a_max / np.where(moving, dq_du, 1.0))[moving]))
    duration = 2 * math.sqrt(1.0 / A) if V * V / A >= 1.0 else 1.0 / V + V / A
    if duration < min_duration_s:
        duration, V = min_duration_s, _trapezoid_for_duration(min_duration_s, A)
    V = min(V, A * duration / 2.0)
    count = max(1, math.ceil(duration / config.sample_period_s))
    t = np.linspace(0.0, duration, count + 1)
    u = _fraction(t, duration, V, A)
    u[0], u[-1] = 0.0, 1.0
    points = np.stack([np.interp(u, knots, path[:, j]) for j in range(n)], axis=1)
    return JointTrajectory(tuple(joint_names), t, points)
