"""Cloud cleaning: crop, outliers and stray clusters go, the object stays; empty results are errors."""

import numpy as np
import pytest

from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.perception.point_cloud import CloudCleaningConfig, clean_object_cloud

CONFIG = CloudCleaningConfig(component_link_m=0.01)


def test_outliers_stray_clusters_and_out_of_box_points_are_removed():
    rng = np.random.default_rng(0)
    box = box_surface_points(n=6000, seed=1)  # 6 x 6 x 12 cm box at (0.65, 0)
    outliers = rng.uniform([0.5, -0.15, 0.0], [0.8, 0.15, 0.25], size=(40, 3))
    cluster = rng.normal([0.78, 0.12, 0.05], 0.004, size=(20, 3))  # a separate little blob
    far = np.array([[0.65, 0.0, 0.5], [1.5, 0.0, 0.1]])  # outside the object box
    cloud = np.concatenate([box, outliers, cluster, far, [[np.nan, 0, 0]]])
    cleaned = clean_object_cloud(cloud, np.array([0.65, 0.0, 0.0]), CONFIG)
    assert cleaned.counts["input"] == len(cloud) - 1 and cleaned.counts["crop"] == len(cloud) - 3
    assert cleaned.counts["subsample"] == 5000
    pts = cleaned.points_m
    inside = (np.abs(pts[:, 0] - 0.65) <= 0.031) & (np.abs(pts[:, 1]) <= 0.031) & (pts[:, 2] <= 0.121)
    assert inside.all() and len(pts) > 4500


@pytest.mark.slow
def test_paper_one_millimetre_links_keep_dense_clouds():
    dense = box_surface_points(size_m=(0.02, 0.02, 0.02), n=20000, seed=2)  # ~1000 points / cm^2
    cleaned = clean_object_cloud(dense, np.array([0.65, 0.0, 0.0]), CloudCleaningConfig(num_points=20000))
    assert cleaned.counts["component"] > 0.9 * cleaned.counts["radius"]


@pytest.mark.parametrize("cloud, step", [
    (np.zeros((0, 3)), "cropping"),
    (np.array([[2.0, 0.0, 0.1]] * 500), "cropping"),
    (np.random.default_rng(0).uniform([0.45, -0.2, 0.0], [0.85, 0.2, 0.3], size=(300, 3)), "radius outlier"),
])
def test_too_few_points_is_a_clear_error(cloud, step):
    with pytest.raises(ValueError, match=step):
        clean_object_cloud(cloud, np.array([0.65, 0.0, 0.0]), CONFIG)
