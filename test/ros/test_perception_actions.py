"""The train_nerf and extract_object actions served by real nodes in other processes, called over ROS 2, on the
small simulated mug datasets (test/conftest.py)."""

import json
import math
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from sensor_msgs.msg import PointCloud2

from getagrip_interfaces.action import ExtractObject, TrainNerf
from getagrip_interfaces.msg import Status
from getagrip_ros.paths import config_path
from getagrip_ros.perception.nerf_dataset import read_nerf_dataset
from getagrip_ros.ros.client import call_action, cancel_after_feedback, send_goal, wait_for_message
from getagrip_ros.ros.conversions import point_cloud2_to_numpy
from getagrip_ros.ros.processes import NodeProcess

NUM_ITERATIONS = 8


def spin_for(node, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)


@contextmanager
def _serving(ros_env, name: str, *extra_args: str):
    """Run getagrip_ros.ros.<name>_node with config/<name>.yaml until the block ends; it must exit cleanly."""
    args = ["--ros-args", "--params-file", str(config_path(f"{name}.yaml")), *extra_args]
    # one torch thread: with two, a NeRF iteration took 5-20x longer while another process used the 2 cores
    # (OpenMP threads wait for each other); with one it takes ~0.3-0.9 s (cpu profile, 512 rays)
    env = {**ros_env, "OMP_NUM_THREADS": "1"}
    with NodeProcess(f"getagrip_ros.ros.{name}_node", args, env=env) as proc:
        assert proc.wait_for_output(f"{name} ready", timeout_s=60), proc.output()
        yield proc
    assert proc.process.returncode == 0, proc.output()  # clean shutdown on SIGINT


@contextmanager
def _client(node, action_type, name: str):
    client = ActionClient(node, action_type, name)
    try:
        assert client.wait_for_server(timeout_sec=20)
        spin_for(node, 1.0)  # let discovery finish both ways, or the first goal's response can be lost
        yield client
    finally:
        client.destroy()


@pytest.fixture(scope="module")
def train_server(ros_env, tmp_path_factory):
    with _serving(ros_env, "train_nerf", "-p", f"data_roots:=[{tmp_path_factory.getbasetemp()}]") as proc:
        yield proc


@pytest.fixture(scope="module")
def train_client(rclpy_node, train_server):
    with _client(rclpy_node, TrainNerf, "train_nerf") as client:
        yield client


@pytest.fixture(scope="module")
def extract_server(ros_env, tmp_path_factory):
    # a coarser density-centroid grid (50^3, not 100^3) keeps the NeRF test short; the depth backend has none.
    # NeRF runs are accepted from this test session's temporary folders only
    roots = f"data_roots:=[{tmp_path_factory.getbasetemp()}]"
    with _serving(ros_env, "extract_object", "-p", "extraction.centroid_resolution:=50", "-p", roots) as proc:
        yield proc


@pytest.fixture(scope="module")
def extract_client(rclpy_node, extract_server):
    with _client(rclpy_node, ExtractObject, "extract_object") as client:
        yield client


def train_goal(dataset_dir, output_dir, profile="cpu", num_iterations=NUM_ITERATIONS, seed=0) -> TrainNerf.Goal:
    return TrainNerf.Goal(dataset_dir=str(dataset_dir), output_dir=str(output_dir), profile=profile,
                          num_iterations=num_iterations, seed=seed)


@pytest.fixture(scope="module")
def trained(rclpy_node, train_client, mug_datasets, tmp_path_factory):
    """A short training over ROS (the node's first goal: it imports nerfstudio): (status, result, feedback)."""
    feedback = []
    goal = train_goal(mug_datasets / "mug", tmp_path_factory.mktemp("nerf_runs"))
    status, result = call_action(rclpy_node, train_client, goal, timeout_s=180, feedback=feedback.append)
    spin_for(rclpy_node, 0.3)  # feedback is a topic: the last message may come after the result
    return status, result, feedback


# -- train_nerf ------------------------------------------------------------------------------------

def test_training_succeeds_with_feedback_per_iteration_and_a_nerfstudio_run(trained, train_server):
    status, result, feedback = trained
    assert status == GoalStatus.STATUS_SUCCEEDED, (result.status.reason, train_server.output()[-3000:])
    assert result.status.code == Status.SUCCEEDED and f"{NUM_ITERATIONS} iterations" in result.status.reason
    assert [f.iteration for f in feedback] == list(range(1, NUM_ITERATIONS + 1))
    assert all(f.num_iterations == NUM_ITERATIONS and math.isfinite(f.loss) for f in feedback)
    config = Path(result.config_path)
    assert config.name == "config.yml" and config.is_file()
    assert list((config.parent / "nerfstudio_models").glob("*.ckpt"))
    assert math.isfinite(result.eval_psnr_db) and math.isfinite(result.final_psnr_db)
    assert [t.stage for t in result.timings] == ["train"] and result.timings[0].duration_s > 0


@pytest.mark.parametrize("make_goal, reason", [
    (lambda ds, out: train_goal("", out), "dataset_dir and output_dir must both be given"),
    (lambda ds, out: train_goal(ds / "missing", out), "transforms.json is missing"),
    (lambda ds, out: train_goal(ds / "mug", out, profile="fast"), "unknown profile 'fast'"),
    (lambda ds, out: train_goal(ds / "three_views", out), "too few images"),
    (lambda ds, out: train_goal(ds / "mug", out, num_iterations=2**32 - 1), "num_iterations must be in [0, 100000]"),
    (lambda ds, out: train_goal(ds / "mug", "/etc/getagrip_run"), "output_dir '/etc/getagrip_run' is outside the configured roots"),
    (lambda ds, out: train_goal("/usr/share", out), "dataset_dir '/usr/share' is outside the configured roots"),
], ids=["empty_dataset_dir", "no_dataset", "unknown_profile", "too_few_images", "huge_iterations",
        "output_outside_roots", "dataset_outside_roots"])
def test_bad_training_goals_abort_with_a_reason_and_the_node_keeps_serving(rclpy_node, train_client, train_server,
                                                                         mug_datasets, tmp_path, make_goal, reason):
    status, result = call_action(rclpy_node, train_client, make_goal(mug_datasets, tmp_path / "runs"), timeout_s=60)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.status.code == Status.INVALID_GOAL and reason in result.status.reason, result.status.reason
    assert result.config_path == "" and not (tmp_path / "runs").exists()
    assert train_server.process.poll() is None


def test_cancel_stops_training_without_a_checkpoint_and_the_node_trains_again(rclpy_node, train_client, mug_datasets,
                                                                              tmp_path):
    started = []
    handle = send_goal(rclpy_node, train_client, train_goal(mug_datasets / "mug", tmp_path / "cancelled", num_iterations=200),
                       timeout_s=30, feedback=started.append)
    status, result = cancel_after_feedback(rclpy_node, handle, started, 120, 60)
    assert status == GoalStatus.STATUS_CANCELED, result.status.reason
    assert result.status.code == Status.CANCELED and "cancelled after" in result.status.reason
    assert result.config_path == ""
    written = [p.name for p in (tmp_path / "cancelled").rglob("*") if p.is_file()]
    assert not [n for n in written if n.endswith(".ckpt") or n == "config.yml"], written
    # and the node trains again
    status, result = call_action(rclpy_node, train_client, train_goal(mug_datasets / "mug", tmp_path / "again", num_iterations=1),
                                 timeout_s=120)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.status.reason
    assert Path(result.config_path).is_file()


# -- extract_object --------------------------------------------------------------------------------

def test_depth_extraction_gives_cloud_bps_mesh_and_a_latched_cloud(rclpy_node, extract_client, extract_server,
                                                                   mug_datasets, tmp_path):
    goal = ExtractObject.Goal(backend="depth", dataset_dir=str(mug_datasets / "mug"), output_dir=str(tmp_path / "obj"))
    feedback = []
    status, result = call_action(rclpy_node, extract_client, goal, timeout_s=120, feedback=feedback.append)
    spin_for(rclpy_node, 0.3)  # feedback is a topic: the last message may come after the result
    assert status == GoalStatus.STATUS_SUCCEEDED, (result.status.reason, extract_server.output()[-3000:])
    assert result.status.code == Status.SUCCEEDED and result.status.reason.startswith("depth: ")
    cloud = point_cloud2_to_numpy(result.point_cloud)
    assert result.point_cloud.header.frame_id == "world" and len(cloud) > 100 and np.isfinite(cloud).all()
    assert len(result.bps) == 4096 and np.isfinite(result.bps).all() and min(result.bps) >= 0.0
    assert Path(result.mesh_path).is_file() and Path(result.mesh_path).parent == tmp_path / "obj"
    c = result.centroid.point
    assert result.centroid.header.frame_id == "world"
    mug_xy = read_nerf_dataset(mug_datasets / "mug").metadata["object_position_m"][:2]
    assert np.allclose([c.x, c.y], mug_xy, atol=0.03) and 0.0 < c.z < 0.15
    frame = result.object_frame.pose.position
    assert np.allclose([frame.x, frame.y, frame.z], [c.x, c.y, 0.0], atol=1e-6)  # on the table below the centroid
    summary = json.loads((tmp_path / "obj" / "object.json").read_text())
    assert (tmp_path / "obj" / "object.png").read_bytes()[:4] == b"\x89PNG"  # the picture people look at
    assert summary["backend"] == "depth" and summary["num_points"] == len(cloud)
    assert {"fusion", "point_cloud", "bps", "mesh"} <= {t.stage for t in result.timings}
    assert [f.stage for f in feedback] == ["fusion", "point_cloud", "bps", "mesh", "done"]
    assert [f.progress for f in feedback] == sorted(f.progress for f in feedback) and feedback[-1].progress == 1.0
    # a subscriber that comes after the result still gets the cloud (latched)
    latched = wait_for_message(rclpy_node, PointCloud2, "object_cloud", timeout_s=10, latched=True)
    assert latched is not None, "no latched object_cloud"
    assert np.allclose(point_cloud2_to_numpy(latched), cloud)


def _crafted_config(folder) -> str:
    """A config.yml under the roots whose YAML asks to run a command (it must be refused, nothing run)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yml"
    path.write_text(f'!!python/object/apply:os.system ["touch {folder / "ran"}"]\n')
    return str(path)


def _nerf_goal_without_config(mug_datasets, out):
    return ExtractObject.Goal(backend="nerf", dataset_dir=str(mug_datasets / "mug"), output_dir=str(out))


@pytest.mark.parametrize("make_goal, reason", [
    (lambda ds, out: ExtractObject.Goal(backend="sdf", dataset_dir=str(ds / "mug"), output_dir=str(out)),
     "unknown backend 'sdf'"),
    (_nerf_goal_without_config, "needs nerf_config_path"),
    (lambda ds, out: ExtractObject.Goal(backend="depth", dataset_dir=str(ds / "mug_rgb_only"), output_dir=str(out)),
     "needs depth images"),
    (lambda ds, out: ExtractObject.Goal(backend="depth", dataset_dir=str(ds / "mug"), output_dir=""),
     "output_dir must be given"),
    (lambda ds, out: ExtractObject.Goal(backend="nerf", nerf_config_path="/etc/passwd", output_dir=str(out)),
     "is outside the configured roots"),
    (lambda ds, out: ExtractObject.Goal(backend="nerf", nerf_config_path=str(_crafted_config(out.parent)),
                                        output_dir=str(out)), "'os.system' is not allowed in a NeRF config"),
    (lambda ds, out: ExtractObject.Goal(backend="depth", dataset_dir=str(ds / "mug"), output_dir="/etc/getagrip_obj"),
     "output_dir '/etc/getagrip_obj' is outside the configured roots"),
], ids=["unknown_backend", "nerf_without_config", "rgb_only_dataset", "empty_output_dir", "nerf_outside_roots",
        "crafted_nerf_config", "output_outside_roots"])
def test_bad_extraction_goals_abort_with_a_reason_and_the_node_keeps_serving(rclpy_node, extract_client, extract_server,
                                                                           mug_datasets, tmp_path, make_goal, reason):
    status, result = call_action(rclpy_node, extract_client, make_goal(mug_datasets, tmp_path / "obj"), timeout_s=60)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.status.code == Status.INVALID_GOAL and reason in result.status.reason, result.status.reason
    assert result.mesh_path == "" and len(result.bps) == 0 and not (tmp_path / "obj" / "object.json").exists()
    assert not (tmp_path / "ran").exists() and extract_server.process.poll() is None


def test_nerf_extraction_from_a_short_training_ends_cleanly(rclpy_node, extract_client, extract_server, trained,
                                                            tmp_path):
    """8 iterations rarely give the field a surface: success or NO_RESULT with the reason, never a crash."""
    status, result, _ = trained
    assert status == GoalStatus.STATUS_SUCCEEDED
    goal = ExtractObject.Goal(backend="nerf", nerf_config_path=result.config_path, output_dir=str(tmp_path / "obj"))
    status, extracted = call_action(rclpy_node, extract_client, goal, timeout_s=120)
    if status == GoalStatus.STATUS_SUCCEEDED:
        assert extracted.status.code == Status.SUCCEEDED and len(extracted.bps) == 4096
    else:
        assert status == GoalStatus.STATUS_ABORTED and extracted.status.code == Status.NO_RESULT
        assert "no density above" in extracted.status.reason or "no surface" in extracted.status.reason, \
            extracted.status.reason
    assert extract_server.process.poll() is None
