"""The transform tree behind the nodes' /tf lookups: chains, inverses, times, and what it refuses."""

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from getagrip_ros.grasp.transform_tree import TransformLookupError, TransformTree, TransformTreeConfig


def pose(rotvec, translation_m) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    T[:3, 3] = translation_m
    return T


def test_lookups_compose_up_and_down_the_tree_and_invert():
    tree = TransformTree()
    T_world_base = pose([0, 0, 0.3], [0.1, 0.0, 0.0])
    T_base_camera = pose([0.2, -0.4, 1.0], [0.5, 0.2, 0.6])
    T_world_mocap = pose([1.0, 0.5, -0.2], [-1.0, 2.0, 0.5])
    tree.set_transform("world", "base", T_world_base, 0.0, static=True)
    tree.set_transform("base", "camera", T_base_camera, 0.0, static=True)
    tree.set_transform("world", "mocap", T_world_mocap, 5.0)
    expected = np.linalg.inv(T_world_mocap) @ T_world_base @ T_base_camera
    np.testing.assert_allclose(tree.lookup("mocap", "camera"), expected, atol=1e-12)
    np.testing.assert_allclose(tree.lookup("camera", "mocap"), np.linalg.inv(expected), atol=1e-12)
    np.testing.assert_allclose(tree.lookup("world", "camera"), T_world_base @ T_base_camera, atol=1e-12)
    np.testing.assert_allclose(tree.lookup("camera", "camera"), np.eye(4))
    assert tree.frames() == ["base", "camera", "mocap", "world"]


def test_dynamic_transforms_interpolate_at_a_time_and_refuse_to_extrapolate():
    tree = TransformTree(TransformTreeConfig(tolerance_s=0.1))
    tree.set_transform("world", "tracker", pose([0, 0, 0], [0.0, 0.0, 0.0]), 10.0)
    tree.set_transform("world", "tracker", pose([0, 0, math.pi / 2], [1.0, 0.0, 0.0]), 11.0)
    halfway = tree.lookup("world", "tracker", 10.5)
    np.testing.assert_allclose(halfway[:3, 3], [0.5, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(Rotation.from_matrix(halfway[:3, :3]).as_rotvec(), [0, 0, math.pi / 4], atol=1e-12)
    np.testing.assert_allclose(tree.lookup("world", "tracker")[:3, 3], [1.0, 0.0, 0.0])  # None: the newest
    np.testing.assert_allclose(tree.lookup("world", "tracker", 11.05)[:3, 3], [1.0, 0.0, 0.0])  # within tolerance
    with pytest.raises(TransformLookupError, match="known from t = 10.000 s to 11.000 s, not at 12.000 s"):
        tree.lookup("world", "tracker", 12.0)
    with pytest.raises(TransformLookupError, match="not at 9.000 s"):
        tree.lookup("tracker", "world", 9.0)


def test_old_dynamic_samples_are_dropped_and_static_ones_hold_at_any_time():
    tree = TransformTree(TransformTreeConfig(cache_s=5.0))
    for t in range(20):
        tree.set_transform("world", "tracker", pose([0, 0, 0], [float(t), 0, 0]), float(t))
    tree.set_transform("world", "table", pose([0, 0, 0], [0, 0, 0.7]), 0.0, static=True)
    assert tree.lookup("world", "tracker", 14.0)[0, 3] == 14.0
    with pytest.raises(TransformLookupError, match="known from t = 14.000 s"):
        tree.lookup("world", "tracker", 13.0)
    np.testing.assert_allclose(tree.lookup("table", "tracker", 16.0)[:3, 3], [16.0, 0, -0.7])
    assert tree.lookup("world", "table", 1e9)[2, 3] == 0.7


def test_unknown_frames_separate_trees_and_malformed_transforms_are_refused_with_a_reason():
    tree = TransformTree()
    with pytest.raises(TransformLookupError, match="frame 'camera'.*none yet"):
        tree.lookup("world", "camera")
    tree.set_transform("world", "base", np.eye(4), 0.0)
    tree.set_transform("mocap", "marker", np.eye(4), 0.0)
    with pytest.raises(TransformLookupError, match="'marker' and 'base' are in separate trees"):
        tree.lookup("base", "marker")
    with pytest.raises(TransformLookupError, match=r"frame 'camera' \(known frames: \['base', 'marker'"):
        tree.lookup("world", "camera")
    with pytest.raises(ValueError, match="would close a loop"):
        tree.set_transform("base", "world", np.eye(4), 0.0)
    bad = np.eye(4)
    bad[0, 0] = 2.0
    for T, match in ((bad, "orthonormal"), (np.full((4, 4), np.nan), "finite"), (np.diag([1.0, 1.0, -1.0, 1.0]),
                                                                                 "right-handed")):
        with pytest.raises(ValueError, match=match):
            tree.set_transform("world", "camera", T, 0.0)
    with pytest.raises(ValueError, match="two different"):
        tree.set_transform("world", "world", np.eye(4), 0.0)
    assert "camera" not in tree.frames()
    # a new parent replaces the old one: the frame moves to the other tree
    tree.set_transform("mocap", "base", np.eye(4), 0.0)
    np.testing.assert_allclose(tree.lookup("marker", "base"), np.eye(4))
