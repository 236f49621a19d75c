"""Time-parameterisation: at rest on every waypoint, exactly on the path, within velocity and acceleration limits."""

from __future__ import annotations

import numpy as np
import pytest

from getagrip_ros.motion.time_parameterization import TimeParameterizationConfig, time_parameterize


def assert_within_limits(times_s: np.ndarray, positions: np.ndarray, config: TimeParameterizationConfig) -> None:
    """Finite-difference velocities and accelerations (divided differences) of the samples within the limits."""
    dt = np.diff(times_s)
    velocity = np.diff(positions, axis=0) / dt[:, None]
    assert (np.abs(velocity) <= config.velocity_limits_rad_s * (1 + 1e-6)).all()
    acceleration = np.diff(velocity, axis=0) / ((dt[1:] + dt[:-1]) / 2)[:, None]
    assert (np.abs(acceleration) <= config.acceleration_limits_rad_s2 * (1 + 1e-6) + 1e-9).all()


def test_limits_respected_and_waypoints_reached():
    config = TimeParameterizationConfig()
    path = np.array([[0.0, -0.8, 0.0, -2.4, 0.0, 1.6, 0.8],
                     [0.5, -0.5, 0.2, -2.0, 0.3, 1.9, 0.2],
                     [0.5, -0.5, 0.2, -2.0, 0.3, 1.9, 0.2],  # a repeated waypoint is dropped
                     [-0.3, 0.1, -0.1, -1.5, -0.2, 2.4, 1.2]])
    trajectory = time_parameterize(path, config)
    assert trajectory.joint_names[0] == "fr3_joint1" and len(trajectory.joint_names) == 7
    assert trajectory.times_s[0] == 0.0
    np.testing.assert_allclose(trajectory.positions_rad[0], path[0])
    np.testing.assert_allclose(trajectory.positions_rad[-1], path[-1])
    assert_within_limits(trajectory.times_s, trajectory.positions_rad, config)
    # at rest on the middle waypoint, reached exactly
    hit = np.flatnonzero(np.all(np.abs(trajectory.positions_rad - path[1]) < 1e-12, axis=1))
    assert len(hit) == 1 and 0 < hit[0] < len(trajectory.times_s) - 1
    # every sample lies on one of the two straight segments
    for q in trajectory.positions_rad:
        on_first = np.linalg.matrix_rank(np.stack([path[1] - path[0], q - path[0]]), tol=1e-9) <= 1
        on_second = np.linalg.matrix_rank(np.stack([path[3] - path[1], q - path[1]]), tol=1e-9) <= 1
        assert on_first or on_second
    assert trajectory.duration_s < 30.0


def test_slowest_joint_sets_the_pace():
    """A single joint moving 1 rad at 0.25 x 1 rad/s and 0.25 x 10 rad/s^2: a trapezoid of 4.4 s."""
    config = TimeParameterizationConfig()
    path = np.zeros((2, 7))
    path[1, 1] = 1.0  # fr3_joint2: 1 rad/s, 10 rad/s^2
    trajectory = time_parameterize(path, config)
    v, a = 0.25, 2.5
    assert trajectory.duration_s == pytest.approx(1.0 / v + v / a)
    scaled = TimeParameterizationConfig(velocity_scale=1.0, acceleration_scale=1.0)
    assert time_parameterize(path, scaled).duration_s == pytest.approx(1.0 / 1.0 + 1.0 / 10.0)


def test_short_moves_are_triangular_and_single_points_are_fine():
    config = TimeParameterizationConfig()
    path = np.zeros((2, 7))
    path[1, 0] = 0.01
    trajectory = time_parameterize(path, config)
    assert trajectory.duration_s == pytest.approx(2 * np.sqrt(0.01 / 2.5))
    assert_within_limits(trajectory.times_s, trajectory.positions_rad, config)
    still = time_parameterize(np.zeros((3, 7)), config)
    assert len(still.times_s) == 1


def test_bad_input():
    with pytest.raises(ValueError, match="shape"):
        time_parameterize(np.zeros((3, 6)))
    with pytest.raises(ValueError, match="NaN"):
        time_parameterize(np.full((2, 7), np.nan))
    with pytest.raises(ValueError, match="velocity_scale"):
        TimeParameterizationConfig(velocity_scale=0.0)
    with pytest.raises(ValueError, match="positive"):
        TimeParameterizationConfig(max_acceleration_rad_s2=(10.0,) * 6)


def test_through_a_dense_path_without_stops_within_limits():
    """A smooth curve of 50 points: one profile along it, within the limits, no stops, at least min_duration_s."""
    from getagrip_ros.motion.time_parameterization import time_parameterize_through

    config = TimeParameterizationConfig()
    s = np.linspace(0.0, 1.0, 50)[:, None]
    path = np.array(Q_START) + 0.3 * np.hstack([s, s**2, -s, np.sin(s), s, 0.5 * s, np.zeros_like(s)])
    fast = time_parameterize_through(path, config)
    np.testing.assert_allclose(fast.positions_rad[0], path[0])
    np.testing.assert_allclose(fast.positions_rad[-1], path[-1])
    assert_within_limits(fast.times_s, fast.positions_rad, config)
    speed = np.abs(np.diff(fast.positions_rad, axis=0)).max(axis=1)
    middle = speed[len(speed) // 4: 3 * len(speed) // 4]
    assert (middle > 0.5 * middle.max()).all()  # keeps moving through the waypoints
    slow = time_parameterize_through(path, config, min_duration_s=3 * fast.duration_s)
    assert slow.duration_s == pytest.approx(3 * fast.duration_s, rel=1e-6)
    assert_within_limits(slow.times_s, slow.positions_rad, config)
    with pytest.raises(ValueError, match="does not move"):
        time_parameterize_through(np.repeat(path[:1], 3, axis=0), config)
    with pytest.raises(ValueError, match="NaN"):
        time_parameterize_through(np.where(s > 0.5, np.nan, path), config)


Q_START = (0.0, -0.8, 0.0, -2.4, 0.0, 1.6, 0.8)
