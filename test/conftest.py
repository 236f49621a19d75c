"""Shared fixtures: an isolated ROS environment for every test that starts ROS processes; small perception datasets."""

import os

import pytest

from getagrip_ros.ros.processes import isolated_ros_environment


@pytest.fixture(scope="session")
def ros_env(tmp_path_factory):
    """Loopback-only ROS in a domain of this run, logs in a temp dir; applied to this process too."""
    env = isolated_ros_environment(log_dir=tmp_path_factory.mktemp("ros_log"))
    saved = {k: os.environ.get(k) for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID", "ROS_LOG_DIR")}
    os.environ.update({k: env[k] for k in saved})
    yield env
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def mug_datasets(tmp_path_factory):
    """Nerfstudio datasets rendered by the simulated wrist camera around a mug at x, y = 0.55, 0 m (recorded as
    object_position_m): ``mug`` (~13 reachable of 16 spiral views, 96x54, RGB + depth), ``mug_rgb_only`` (the
    same without depth) and ``three_views`` (its first 3 views). Returns the folder that holds them."""
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import PrepareConfig, prepare_object
    from getagrip_ros.perception.capture_trajectory import SpiralConfig
    from getagrip_ros.perception.nerf_dataset import write_nerf_dataset
    from getagrip_ros.sim.capture_views import render_capture_views
    from getagrip_ros.sim.scene import CameraConfig

    root = tmp_path_factory.mktemp("mug_datasets")
    obj = prepare_object(object_by_name("tabletop20/red_mug"), PrepareConfig(cache_dir=str(root / "cache")))
    views = render_capture_views(obj, (0.55, 0.0), CameraConfig(96, 54, 40.0), SpiralConfig(num_images=16))
    metadata = {"object_position_m": views.object_position_m.tolist()}
    rgb, K, poses = views.rgb, views.K, views.T_world_camera
    write_nerf_dataset(root / "mug", rgb, K, poses, views.depth_m, metadata=metadata)
    write_nerf_dataset(root / "mug_rgb_only", rgb, K, poses, metadata=metadata)
    write_nerf_dataset(root / "three_views", rgb[:3], K, poses[:3], metadata=metadata)
    return root
