"""NeRF grasp data for a subset of a data-engine run (the NeRF evaluator's training input).

Per object with a shard (:func:`nerf_object`): rebuild the floating-hand world it was labelled in (same
preparation, placement and yaw; the object's pose is checked against the shard's), render RGB-D views along
the capture spirals, train nerfacto on them (:func:`getagrip_ros.perception.nerf.train.train_nerf`), then
query the NeRF's density sigma on each labelled grasp's four finger grids and on a global grid centred on the
object frame Oy's origin. :func:`build_nerf_subset` does this for several objects, keeps each object's result
in ``<work_dir>/<object>/grids.npz`` (a rerun skips finished objects) and writes one HDF5 file in the public
NeRF layout (:func:`getagrip_ros.training.datasets.write_nerf_grasp_dataset`): finger frames and grids in Oy,
the shard's labels. Frames: world z up, table top at z = 0; metres.

Size: one grasp holds 4 x 31 x 31 x 41 float32 densities (630 kB) at the public grid, and one NeRF takes
minutes on a CPU: this is for a small subset of objects (the paper trains its NeRF evaluator on GPU data).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from getagrip_ros.data.generate import (_HAND_AWAY_M, SHARDS_DIR, GenerationConfig, ObjectShard, load_shard, shard_path,
                                        shard_world)
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.perception.capture_trajectory import SpiralConfig, spiral_poses
from getagrip_ros.perception.density import (
    DensityFn, FingerGridConfig, GlobalGridConfig, evaluate_density, finger_frames, finger_grid_points_world,
    global_grid_points_m,
)
from getagrip_ros.perception.nerf.config import NerfTrainConfig, nerf_profile
from getagrip_ros.perception.nerf_dataset import write_nerf_dataset
from getagrip_ros.planning.evaluators import finger_grid_inputs
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.sim.scene import CameraConfig
from getagrip_ros.training.datasets import PUBLIC_GLOBAL_GRID_SIZE_M, write_nerf_grasp_dataset

GRIDS_FILE = "grids.npz"
POSE_TOLERANCE_M = 1e-6


@dataclass(frozen=True)
class NerfSubsetConfig:
    spiral: SpiralConfig = field(default_factory=SpiralConfig)
    """Capture views (the paper's ~100 images on the spirals; views are not checked for the arm's reach)."""
    camera: CameraConfig = field(default_factory=lambda: CameraConfig(320, 180, 133.25))
    """ZED 2i HD720 / 4, as perception."""
    nerf: NerfTrainConfig = field(default_factory=lambda: nerf_profile("cpu"))
    finger_grid: FingerGridConfig = field(default_factory=FingerGridConfig)
    """The public 31 x 31 x 41 grids."""
    global_grid: GlobalGridConfig = field(default_factory=lambda: GlobalGridConfig(30, PUBLIC_GLOBAL_GRID_SIZE_M))
    """The public global grid (30^3 over 0.3 m), centred on Oy's origin."""
    max_grasps_per_object: int = 0
    """Keep at most this many of each object's grasps (0: all); the kept ones are spread over the shard."""
    grasp_batch: int = 8
    """Grasps whose grids are queried at once."""


@dataclass(frozen=True)
class NerfObjectResult:
    """One object's NeRF grids (arrays as in the public NeRF layout) and where its NeRF lies."""

    object_name: str
    nerf_densities: np.ndarray
    """(n, 4, nx, ny, nz) float32 sigma (1/m) on each finger's grid."""
    T_Oy_finger: np.ndarray
    """(n, 4, 4, 4) float32 finger frames in Oy."""
    global_density: np.ndarray
    """(R, R, R) float32 sigma on the global grid centred on Oy's origin."""
    y_pick: np.ndarray
    y_coll: np.ndarray
    y_PGS: np.ndarray
    grasp_rows: np.ndarray
    """(n,) int64 rows of the shard's grasps these are."""
    nerf_config: str
    """The trained NeRF's config.yml."""
    timings_s: dict

    def save(self, path: Path) -> Path:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.savez(f, **{k.name: np.asarray(getattr(self, k.name)) for k in dataclasses.fields(self)
                           if k.name != "timings_s"}, timings_s=np.array(json.dumps(self.timings_s)))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: Path) -> "NerfObjectResult":
        with np.load(path) as f:
            values = {k: f[k] for k in f.files}
        values["object_name"], values["nerf_config"] = str(values["object_name"]), str(values["nerf_config"])
        values["timings_s"] = json.loads(str(values["timings_s"]))
        return cls(**values)


def render_shard_world(shard: ObjectShard, generation: GenerationConfig, config: NerfSubsetConfig) -> dict:
    """RGB-D views (and object masks) along the capture spirals of the world the shard was labelled in.

    Raises:
        ObjectRejected: the object is not in the catalog (e.g. a mesh file of its own) or cannot be prepared, or
            it does not rest where the shard says (the run used other settings than ``generation``).
    """
    T_hand = np.eye(4)
    T_hand[:3, 3] = _HAND_AWAY_M
    rgb, depth, masks, poses = [], [], [], []
    with shard_world(shard, generation, POSE_TOLERANCE_M) as world:
        world.reset(T_world_palm=T_hand)
        centre = np.array([*world.object_pose()[:2, 3], 0.0])
        for T_world_camera in spiral_poses(centre, config.spiral):
            world.set_camera_pose(T_world_camera)
            frame = world.render(config.camera)
            rgb.append(frame.rgb), depth.append(frame.depth_m), masks.append(frame.object_mask)
            poses.append(frame.T_world_camera)
    return {"rgb": np.stack(rgb), "depth_m": np.stack(depth), "object_mask": np.stack(masks), "K": frame.K,
            "T_world_camera": np.stack(poses), "object_position_m": centre}


@torch.no_grad()
def grasp_density_grids(density_fn: DensityFn, grasps_Oy: Grasp, T_world_Oy: np.ndarray, hand: AllegroHand,
                        finger_grid: FingerGridConfig, global_grid: GlobalGridConfig,
                        batch: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sigma of a world-frame density on the grasps' finger grids and on the global grid around Oy's origin
    (indexed along Oy's axes, as :func:`getagrip_ros.training.datasets.global_grid_inputs` reads it).

    Returns (densities (n, 4, nx, ny, nz), T_Oy_finger (n, 4, 4, 4), global densities (R, R, R)), float32.
    """
    T_world_Oy_t = torch.as_tensor(T_world_Oy, dtype=torch.float32)
    densities, frames = [], []
    for start in range(0, len(grasps_Oy), batch):
        T_Oy_finger = finger_frames(*finger_grid_inputs(grasps_Oy[start:start + batch], hand))
        points_world = finger_grid_points_world(T_world_Oy_t @ T_Oy_finger, finger_grid)
        densities.append(evaluate_density(density_fn, points_world).numpy())
        frames.append(T_Oy_finger.numpy())
    T = np.asarray(T_world_Oy, float)
    global_sigma = evaluate_density(density_fn, global_grid_points_m(T[:3, 3], global_grid, R_world_grid=T[:3, :3]))
    return np.concatenate(densities), np.concatenate(frames), global_sigma.numpy()


def _kept_rows(n: int, limit: int) -> np.ndarray:
    return np.arange(n) if limit <= 0 or limit >= n else np.unique(np.linspace(0, n - 1, limit).round().astype(int))


def nerf_object(shard: ObjectShard, work_dir: str | Path, generation: GenerationConfig = GenerationConfig(),
                config: NerfSubsetConfig = NerfSubsetConfig(), hand: AllegroHand | None = None,
                progress: Callable[[str], None] | None = None) -> NerfObjectResult:
    """Render, train a NeRF and query the grids of one object's labelled grasps (module docstring).

    work_dir receives the capture dataset (``dataset/``) and the NeRF run (``nerf/``); progress(stage) hears
    "render", "nerf <iteration>/<iterations>" (every 20 iterations) and "grids".
    """
    report = progress or (lambda stage: None)
    from getagrip_ros.perception.nerf.model import load_nerf
    from getagrip_ros.perception.nerf.train import train_nerf

    work_dir = Path(work_dir)
    timings, start = {}, time.perf_counter()
    report("render")
    views = render_shard_world(shard, generation, config)
    write_nerf_dataset(work_dir / "dataset", views["rgb"], views["K"], views["T_world_camera"], views["depth_m"],
                       metadata={"object_position_m": views["object_position_m"].tolist()}, overwrite=True)
    timings["render"] = time.perf_counter() - start
    trained = train_nerf(work_dir / "dataset", work_dir / "nerf", config.nerf, experiment_name="object",
                         on_progress=lambda p: p.iteration % 20 or report(f"nerf {p.iteration}/{p.num_iterations}"))
    timings["nerf"] = time.perf_counter() - start - timings["render"]
    report("grids")
    nerf = load_nerf(trained.config_path)
    rows = _kept_rows(len(shard.grasps_Oy), config.max_grasps_per_object)
    grasps_Oy = Grasp.from_vector(shard.grasps_Oy[rows], "Oy")
    densities, T_Oy_finger, global_sigma = grasp_density_grids(nerf.density_fn, grasps_Oy, shard.T_world_Oy,
                                                               hand or AllegroHand(), config.finger_grid,
                                                               config.global_grid, config.grasp_batch)
    timings["grids"] = time.perf_counter() - start - timings["render"] - timings["nerf"]
    return NerfObjectResult(shard.object_name, densities, T_Oy_finger, global_sigma, shard.y_pick[rows],
                            shard.y_coll[rows], shard.y_PGS[rows], rows, str(trained.config_path), timings)


def build_nerf_subset(run_dir: str | Path, objects: Sequence[str], out_h5: str | Path, work_dir: str | Path,
                      generation: GenerationConfig = GenerationConfig(), config: NerfSubsetConfig = NerfSubsetConfig(),
                      on_object: Callable[[str, str], None] | None = None,
                      progress: Callable[[str], None] | None = None) -> Path:
    """NeRF grids of the named objects of a run, written as one NeRF grasp dataset (module docstring).

    Objects already done in work_dir are read back, not redone; an object without a shard, or whose world
    cannot be rebuilt, is skipped with its reason passed to on_object(name, status); progress as in nerf_object.

    Raises:
        ValueError: no object could be done.
    """
    run_dir, work_dir = Path(run_dir), Path(work_dir)
    hand, results = AllegroHand(), []
    for name in objects:
        folder = work_dir / name.replace("/", "__")
        grids = folder / GRIDS_FILE
        path = shard_path(run_dir, name)
        if grids.is_file():
            results.append(NerfObjectResult.load(grids))
            status = "done before"
        elif not path.is_file():
            status = f"skipped: no shard in {run_dir / SHARDS_DIR}"
        else:
            try:
                result = nerf_object(load_shard(path), folder, generation, config, hand, progress)
            except ObjectRejected as exc:
                status = f"skipped: {exc}"
            else:
                results.append(result)
                result.save(grids)
                status = f"{len(result.y_PGS)} grasps, " + ", ".join(f"{k} {v:.0f} s" for k, v in result.timings_s.items())
        if on_object is not None:
            on_object(name, status)
    if not results:
        raise ValueError(f"no object of {list(objects)} has NeRF grids")
    counts = [len(r.y_PGS) for r in results]
    return write_nerf_grasp_dataset(
        out_h5, nerf_densities=np.concatenate([r.nerf_densities for r in results]),
        T_object_finger=np.concatenate([r.T_Oy_finger for r in results]),
        object_codes=[r.object_name for r, n in zip(results, counts) for _ in range(n)],
        **{y: np.concatenate([getattr(r, y) for r in results]) for y in ("y_pick", "y_coll", "y_PGS")},
        nerf_densities_global=np.stack([r.global_density for r in results]),
        nerf_densities_global_idx=np.repeat(np.arange(len(results)), counts), finger_grid=config.finger_grid,
        global_grid_size_m=config.global_grid.size_m,
        nerf_configs=[r.nerf_config for r, n in zip(results, counts) for _ in range(n)],
        grasp_idx=np.concatenate([r.grasp_rows for r in results]))
