"""Depth fusion: the arm-driven simulated camera captures a spiral, the fused object matches the true mesh."""

import numpy as np
import pytest
from scipy.spatial import cKDTree

from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import PrepareConfig, prepare_object
from getagrip_ros.perception.bps import encode_bps
from getagrip_ros.perception.capture_trajectory import SpiralConfig
from getagrip_ros.perception.depth_fusion import fuse_depth
from getagrip_ros.perception.point_cloud import CloudCleaningConfig, clean_object_cloud
from getagrip_ros.sim.capture_views import render_capture_views
from getagrip_ros.sim.scene import CameraConfig


def test_spiral_capture_fusion_cleaning_and_bps_recover_the_object(tmp_path):
    mug = prepare_object(object_by_name("tabletop20/red_mug"), PrepareConfig(cache_dir=str(tmp_path)))
    views = render_capture_views(mug, (0.55, 0.0), CameraConfig(240, 136, 100.0), SpiralConfig(num_images=15))
    position, true_mesh = views.object_position_m, views.true_mesh_world
    fused = fuse_depth(views.depth_m, [views.K] * len(views.depth_m), views.T_world_camera, position)
    cleaned = clean_object_cloud(fused.points_m, position, CloudCleaningConfig(component_link_m=0.01))
    distance = cKDTree(true_mesh.sample(100_000)).query(cleaned.points_m)[0]
    assert np.median(distance) < 0.002 and np.percentile(distance, 90) < 0.004
    # the cloud covers the mug (not just one side) and nothing of the table
    assert np.allclose(cleaned.points_m.min(0)[:2], true_mesh.bounds[0][:2], atol=0.01)
    assert np.allclose(cleaned.points_m.max(0), true_mesh.bounds[1], atol=0.01)
    assert cleaned.points_m[:, 2].min() > 0.003
    bps = encode_bps(cleaned.points_m)
    assert bps.distances_m.min() < 0.01 and bps.distances_m.max() < 0.5


def test_empty_scene_is_a_clear_error():
    depth = np.zeros((20, 30), dtype=np.float32)  # no returns at all
    K = np.array([[30.0, 0, 15], [0, 30.0, 10], [0, 0, 1]])
    T = np.eye(4)
    T[:3, 3] = [0.55, 0.0, 0.5]
    with pytest.raises(ValueError, match="no surface above the table"):
        fuse_depth([depth], [K], [T], np.array([0.55, 0.0, 0.0]))
    with pytest.raises(ValueError, match="as many depth images"):
        fuse_depth([], [], [], np.array([0.55, 0.0, 0.0]))
