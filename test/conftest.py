"""Shared fixtures: an isolated ROS environment for every test that starts ROS processes; small perception datasets."""

import os

import numpy as np
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
    from getagrip_ros.perception.capture_trajectory import SpiralConfig, plan_capture
    from getagrip_ros.perception.nerf_dataset import write_nerf_dataset
    from getagrip_ros.sim.scene import CameraConfig, SceneConfig
    from getagrip_ros.sim.world import ObjectPlacement, SimWorld

    root = tmp_path_factory.mktemp("mug_datasets")
    position = np.array([0.55, 0.0, 0.0])
    obj = prepare_object(object_by_name("tabletop20/red_mug"), PrepareConfig(cache_dir=str(root / "cache")))
    trajectory = plan_capture(position, SpiralConfig(num_images=16))
    rgb, depth, poses = [], [], []
    with SimWorld(SceneConfig(camera=CameraConfig(96, 54, 40.0)), obj, ObjectPlacement(xy_m=tuple(position[:2]))) as world:
        for q in trajectory.arm_joints_rad:
            world.reset(arm_rad=q, hand_rad=np.zeros(16))
            frame = world.render()
            rgb.append(frame.rgb), depth.append(frame.depth_m), poses.append(frame.T_world_camera)
    rgb, depth, poses = np.stack(rgb), np.stack(depth), np.stack(poses)
    metadata = {"object_position_m": position.tolist()}
    write_nerf_dataset(root / "mug", rgb, frame.K, poses, depth, metadata=metadata)
    write_nerf_dataset(root / "mug_rgb_only", rgb, frame.K, poses, metadata=metadata)
    write_nerf_dataset(root / "three_views", rgb[:3], frame.K, poses[:3], metadata=metadata)
    return root
