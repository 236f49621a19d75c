"""Shared fixtures: an isolated ROS environment for every test that starts ROS processes."""

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
