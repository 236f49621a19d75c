"""Shared fixtures: an isolated ROS environment for every test that starts ROS processes; small perception datasets."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.motion.world import world_with_mesh
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.ros.processes import isolated_ros_environment

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs two workers on two cores: each gets one torch thread, and so do the processes it starts
    # (two processes of two spinning libgomp threads each slow each other several-fold).
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

#: The longest test files (1-3.5 min each with two workers, measured 2026-12-07), longest first. `make test` hands
#: files to its workers in collection order, so these go first and the run does not end with one worker alone on one.
LONG_FILES_FIRST = ("test/test_colcon_build.py", "test/test_demo.py", "test/ros/test_grasp_object_bringup.py",
                    "test/task/test_benchmark.py", "test/task/test_grasp_task.py", "test/data/test_generate.py",
                    "test/planning/test_simulation_evaluator.py", "test/human_demo/test_transfer.py",
                    "test/ros/test_perception_actions.py", "test/ros/test_processes.py",
                    "test/ros/test_plan_grasp_graspd.py")


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order


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


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Small randomly initialised learned models and a fixed grasp set, as a ModelFiles of their paths.

    ``evaluator.pt`` (BPS evaluator, width 64), ``sampler.pt`` (diffusion sampler, d_model 16, grasps normalised
    by the fixed set's statistics), ``fixed.npz`` (heuristic grasps on the test box that pass the cable filter, in
    Oy) and ``other_basis.pt`` (the evaluator saved with a shifted basis); ``.grasps_Oy`` holds the fixed set.
    """
    import numpy as np
    import torch

    from getagrip_ros.grasp.filters import cable_filter_mask
    from getagrip_ros.models.bps_evaluator import BpsEvaluator, BpsEvaluatorConfig
    from getagrip_ros.models.bps_sampler import BpsSampler, BpsSamplerConfig
    from getagrip_ros.models.checkpoints import save_checkpoint
    from getagrip_ros.objects.primitives import box_surface_points
    from getagrip_ros.perception.bps import public_basis_points_By
    from getagrip_ros.planning.heuristic_sampler import sample_heuristic_grasps
    from getagrip_ros.planning.object_input import object_from_points
    from getagrip_ros.planning.planner import ModelFiles
    from getagrip_ros.planning.samplers import save_grasp_set
    from getagrip_ros.robot.allegro import AllegroHand

    out = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    evaluator = BpsEvaluator(BpsEvaluatorConfig(hidden_width=64, block_neurons=32))
    g = torch.Generator().manual_seed(0)
    for m in evaluator.modules():  # running statistics of the order of real inputs, so outputs are not saturated
        if isinstance(m, torch.nn.BatchNorm1d):
            m.running_mean.copy_(torch.rand(m.num_features, generator=g) * 0.2)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) * 0.05 + 0.01)
    basis = public_basis_points_By()
    save_checkpoint(out / "evaluator.pt", "bps_evaluator", evaluator, evaluator.config, bps_basis=basis)
    save_checkpoint(out / "other_basis.pt", "bps_evaluator", evaluator, evaluator.config, bps_basis=basis + 0.01)
    points = box_surface_points()
    world = sample_heuristic_grasps(points, 400, AllegroHand(), "world", generator=torch.Generator().manual_seed(1))
    world = world[cable_filter_mask(world)]
    grasps_Oy = world.transformed(torch.linalg.inv(object_from_points(points, "world").T_frame_Oy), "Oy")
    save_grasp_set(out / "fixed.npz", grasps_Oy, y_PGS=np.ones(len(grasps_Oy), np.float32))
    vectors = grasps_Oy.to_vector().float()
    sampler = BpsSampler(BpsSamplerConfig(d_model=16, num_heads=8, block_neurons=32))
    save_checkpoint(out / "sampler.pt", "bps_sampler", sampler, sampler.config, bps_basis=basis,
                    grasp_mean=vectors.mean(0), grasp_std=vectors.std(0) + 1e-3)
    files = ModelFiles(bps_evaluator=str(out / "evaluator.pt"), bps_sampler=str(out / "sampler.pt"),
                       fixed_grasps=str(out / "fixed.npz"))
    return files


#: Grasps of the tabletop-20 cube labelled y_PGS = 1 by the data engine, with the cube's pose (see the file's "about").
CUBE = json.loads((Path(__file__).parent / "execution" / "cube_grasps.json").read_text())


@pytest.fixture(scope="session")
def cube():
    return prepare_object(object_by_name(CUBE["object"]))


@pytest.fixture(scope="session")
def cube_grasps() -> Grasp:
    """Grasps of the cube that lift it in the floating-hand world (world frame)."""
    return Grasp.from_vector(torch.tensor(CUBE["grasps_world"], dtype=torch.float64), "world")


@pytest.fixture(scope="session")
def cube_world(cube):
    """The planning world: table and the cube mesh where the simulated world puts it."""
    return world_with_mesh("cube", np.asarray(cube.mesh.vertices), np.asarray(cube.mesh.faces),
                           np.array(CUBE["T_world_object"]))


@pytest.fixture(scope="session")
def cube_mesh_path(tmp_path_factory, cube) -> str:
    """The cube's mesh in the world frame where the simulated world puts it, as a file (what plan_motion reads)."""
    import trimesh

    mesh = trimesh.Trimesh(np.asarray(cube.mesh.vertices), np.asarray(cube.mesh.faces)).copy()
    mesh.apply_transform(np.array(CUBE["T_world_object"]))
    path = tmp_path_factory.mktemp("mesh") / "cube_world.stl"
    mesh.export(path)
    return str(path)
