"""NeRF grasp data for a subset of a data-engine run: the labelled world rebuilt and rendered, finger and global
grids that the trainer reads back at the right places, and one real nerfacto run end to end (resumable)."""

import dataclasses

import numpy as np
import pytest
import torch

from getagrip_ros.cli.generate import main
from getagrip_ros.data.generate import CloudConfig, GenerationConfig, generate_dataset, load_shard, shard_path
from getagrip_ros.data.grasp_generation import GraspOptimizationConfig
from getagrip_ros.data.labels import LabelConfig
from getagrip_ros.data.nerf_subset import (
    GRIDS_FILE, NerfSubsetConfig, build_nerf_subset, grasp_density_grids, render_shard_world,
)
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import PrepareConfig
from getagrip_ros.objects.settle import SettleConfig
from getagrip_ros.perception.capture_trajectory import SpiralConfig
from getagrip_ros.perception.density import FingerGridConfig, GlobalGridConfig, finger_grid_points_finger_m
from getagrip_ros.perception.nerf.config import nerf_profile
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.sim.scene import CameraConfig
from getagrip_ros.training.datasets import global_grid_inputs, read_nerf_grasp_dataset

OBJECT = "procedural/box_0000"
SMALL = NerfSubsetConfig(spiral=SpiralConfig(num_images=10), camera=CameraConfig(96, 54, 40.0),
                         nerf=nerf_profile("cpu", num_iterations=30, train_rays_per_batch=512, eval_rays_per_batch=512),
                         finger_grid=FingerGridConfig(num_x=7, num_y=7, num_z=9), max_grasps_per_object=3)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A one-object data-engine run (8 starts, 2 trials per grasp); returns (run folder, generation config)."""
    root = tmp_path_factory.mktemp("nerf_subset")
    config = GenerationConfig(
        grasps_per_object=8, optimization=GraspOptimizationConfig(num_steps=40, num_surface_points=800),
        labels=LabelConfig(num_perturbations=2), augmentations_per_good_grasp=1,
        cloud=CloudConfig(spiral=SpiralConfig(num_images=8), camera=CameraConfig(160, 90, 66.6)),
        prepare=PrepareConfig(settle=SettleConfig(), cache_dir=str(root / "cache")), seed=3)
    generate_dataset([OBJECT], root / "run", config)
    return root / "run", config


def box_density(T_world_object: np.ndarray, half_extent_m: float = 0.03):
    """sigma = 1000 / m inside an axis-aligned cube (object frame) around the object's origin, 0 outside."""
    T_object_world = torch.as_tensor(np.linalg.inv(T_world_object), dtype=torch.float32)

    def density(points_world_m: torch.Tensor) -> torch.Tensor:
        local = points_world_m @ T_object_world[:3, :3].T + T_object_world[:3, 3]
        return 1000.0 * (local.abs().max(dim=-1).values < half_extent_m).float()

    return density


def test_grids_hold_the_density_where_the_trainer_places_them(run):
    run_dir, _ = run
    shard = load_shard(shard_path(run_dir, OBJECT))
    density = box_density(shard.T_world_object)
    grasps_Oy = Grasp.from_vector(shard.grasps_Oy[:4], "Oy")
    finger, glob = FingerGridConfig(num_x=5, num_y=5, num_z=7), GlobalGridConfig(12, 0.3)
    sigma, T_Oy_finger, global_sigma = grasp_density_grids(density, grasps_Oy, shard.T_world_Oy, AllegroHand(), finger,
                                                           glob, batch=3)
    assert sigma.shape == (4, 4, 5, 5, 7) and T_Oy_finger.shape == (4, 4, 4, 4) and global_sigma.shape == (12, 12, 12)
    # finger grids: the trainer maps each grid point through T_object_finger (Oy); in the world the density there is
    # what the file holds, and the frame's origin is the fingertip, z its closing direction
    T_world_Oy = shard.T_world_Oy.astype(np.float32)
    local = finger_grid_points_finger_m(finger).numpy()
    points_Oy = np.einsum("bfij,xyzj->bfxyzi", T_Oy_finger[..., :3, :3], local) + T_Oy_finger[:, :, None, None, None, :3, 3]
    points_world = points_Oy @ T_world_Oy[:3, :3].T + T_world_Oy[:3, 3]
    np.testing.assert_array_equal(sigma, density(torch.from_numpy(points_world)).numpy())
    np.testing.assert_allclose(T_Oy_finger[..., :3, 2], grasps_Oy.fingertip_directions.numpy(), atol=1e-5)
    tips_palm = AllegroHand().fingertip_positions(grasps_Oy.joint_angles_rad.float()).double()
    tips_Oy = torch.einsum("bij,bfj->bfi", grasps_Oy.palm_rotation.double(), tips_palm) + grasps_Oy.palm_position_m[:, None]
    np.testing.assert_allclose(T_Oy_finger[..., :3, 3], tips_Oy.numpy(), atol=1e-5)
    assert 0 < (sigma > 0).mean() < 1  # the grids reach into the box and out of it
    # global grid: the same through the trainer's Oy coordinates (indexed along Oy's axes)
    coords_Oy = global_grid_inputs(torch.from_numpy(global_sigma)[None], glob)[0, 1:].permute(1, 2, 3, 0).numpy()
    np.testing.assert_array_equal(global_sigma, density(torch.from_numpy(coords_Oy @ T_world_Oy[:3, :3].T
                                                                         + T_world_Oy[:3, 3])).numpy())
    assert 0 < (global_sigma > 0).mean() < 0.5


def test_the_rendered_world_is_the_world_the_grasps_were_labelled_in(run):
    run_dir, generation = run
    shard = load_shard(shard_path(run_dir, OBJECT))
    views = render_shard_world(shard, generation, SMALL)
    assert views["rgb"].shape == (10, 54, 96, 3) and views["T_world_camera"].shape == (10, 4, 4)
    np.testing.assert_allclose(views["object_position_m"][:2], shard.T_world_object[:2, 3])
    assert views["object_mask"].any(axis=(1, 2)).all()  # every view sees the object
    moved = dataclasses.replace(shard, settings={**shard.settings, "yaw_rad": shard.settings["yaw_rad"] + 0.3})
    with pytest.raises(ObjectRejected, match="other settings"):
        render_shard_world(moved, generation, SMALL)
    with pytest.raises(ObjectRejected, match="cannot rebuild its world"):
        render_shard_world(dataclasses.replace(shard, object_name="procedural/no_such_object"), generation, SMALL)


def test_a_nerf_subset_end_to_end_with_nerfacto(run, tmp_path):
    run_dir, generation = run
    statuses, stages = [], []
    out = build_nerf_subset(run_dir, [OBJECT, "procedural/sphere_0000"], tmp_path / "nerf.h5", tmp_path / "work",
                            generation, SMALL, on_object=lambda name, status: statuses.append((name, status)),
                            progress=stages.append)
    assert stages == ["render", "nerf 20/30", "grids"]
    assert statuses[0][0] == OBJECT and "3 grasps" in statuses[0][1]
    assert statuses[1] == ("procedural/sphere_0000", f"skipped: no shard in {run_dir / 'shards'}")
    data = read_nerf_grasp_dataset(out)
    shard = load_shard(shard_path(run_dir, OBJECT))
    rows = np.unique(np.linspace(0, len(shard.y_PGS) - 1, 3).round().astype(int))
    np.testing.assert_array_equal(data.labels[:, 2], shard.y_PGS[rows])
    assert list(data.object_codes) == [OBJECT] * 3 and data.global_grid == GlobalGridConfig(30, 0.3)
    densities = data.read_nerf_densities(np.arange(3))
    assert densities.shape == (3, 4, 7, 7, 9) and np.isfinite(densities).all() and densities.max() > 0
    assert data.nerf_densities_global.shape == (1, 30, 30, 30) and data.nerf_densities_global.max() > 0
    # a rerun reads the finished object back instead of training again
    grids = tmp_path / "work" / OBJECT.replace("/", "__") / GRIDS_FILE
    stamp = grids.stat().st_mtime_ns
    build_nerf_subset(run_dir, [OBJECT], tmp_path / "again.h5", tmp_path / "work", generation, SMALL,
                      on_object=lambda name, status: statuses.append((name, status)))
    assert statuses[-1] == (OBJECT, "done before") and grids.stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(read_nerf_grasp_dataset(tmp_path / "again.h5").read_nerf_densities(np.arange(3)), densities)


def test_the_cli_refuses_a_nerf_subset_without_shards(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "empty"), "--nerf-subset", str(tmp_path / "n.h5"), "--quiet"]) == 2
    assert "no object" in capsys.readouterr().err
