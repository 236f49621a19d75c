"""Perception quality and speed over catalog objects: depth fusion and NeRF (CPU / paper profiles).

For each object the simulated FR3 moves the wrist camera along the capture spirals (reachable poses only)
and renders RGB + depth (320 x 180, the ZED 2i HD720 field of view). Then:
- depth: TSDF fusion -> cleaning -> BPS (the CPU-friendly default backend);
- nerf-<profile>: nerfacto training with the Get a Grip settings -> density centroid -> opaque depth points
  (5000, opacity > 0.5, in the box) -> cleaning -> BPS -> marching-cubes mesh at density 15.
Prints the median / 90th-percentile distance from each cleaned cloud to the true mesh (mm) and the time per
stage. Usage:

    python benchmarks/bench_perception.py [--objects 6] [--nerf cpu] [--nerf-objects 6] [--iterations 400]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.perception.capture_trajectory import SpiralConfig
from getagrip_ros.perception.extract import extract_from_depth, extract_from_nerf
from getagrip_ros.perception.nerf_dataset import write_nerf_dataset
from getagrip_ros.sim.capture_views import render_capture_views
from getagrip_ros.sim.scene import CameraConfig
from getagrip_ros.status import StageError

OBJECTS = ("tabletop20/cube", "tabletop20/apple", "tabletop20/red_mug", "tabletop20/goblet", "tabletop20/bunny",
           "tabletop20/spray_bottle")
POSITION = np.array([0.55, 0.0, 0.0])
CAMERA = CameraConfig(320, 180, 133.25)  # ZED 2i HD720 / 4


def capture(name: str, folder: Path):
    """Render the capture spirals; returns (dataset dir, true mesh in the world, seconds, number of views)."""
    obj = prepare_object(object_by_name(name))
    start = time.perf_counter()
    views = render_capture_views(obj, tuple(POSITION[:2]), CAMERA, SpiralConfig(num_images=100))
    write_nerf_dataset(folder, views.rgb, views.K, views.T_world_camera, views.depth_m,
                       metadata={"object_position_m": POSITION.tolist(), "object": name})
    return folder, views.true_mesh_world, time.perf_counter() - start, len(views.rgb)


def nerf_representation(dataset: Path, runs: Path, profile: str, iterations: int):
    from getagrip_ros.perception.extract import capture_centre
    from getagrip_ros.perception.nerf.config import nerf_profile
    from getagrip_ros.perception.nerf.model import load_nerf
    from getagrip_ros.perception.nerf.nerf_cloud import CaptureCameras
    from getagrip_ros.perception.nerf.train import train_nerf
    from getagrip_ros.perception.nerf_dataset import read_nerf_dataset

    trained = train_nerf(dataset, runs, nerf_profile(profile, num_iterations=iterations))
    nerf = load_nerf(trained.config_path)
    ds = read_nerf_dataset(dataset)
    cameras = CaptureCameras(ds.T_world_camera_optical, ds.K, ds.rgb.shape[2], ds.rgb.shape[1])
    rep = extract_from_nerf(nerf, cameras, capture_centre(ds), runs)
    return rep, {"train": trained.train_time_s, **rep.timings_s}, trained.eval_psnr_db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=len(OBJECTS))
    parser.add_argument("--names", nargs="*", default=None, help="catalog objects to use instead of the default six")
    parser.add_argument("--nerf", default="cpu", help="comma-separated NeRF profiles to run ('' = none)")
    parser.add_argument("--nerf-objects", type=int, default=len(OBJECTS), help="objects to run the NeRF on")
    parser.add_argument("--iterations", type=int, default=400)
    args = parser.parse_args()
    profiles = [p for p in args.nerf.split(",") if p]
    distances: dict[str, list[np.ndarray]] = {}
    failures: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k, name in enumerate((args.names or OBJECTS)[:args.objects]):
            dataset, true_mesh, t_capture, views = capture(name, Path(tmp) / name.replace("/", "_"))
            tree = cKDTree(true_mesh.sample(200_000))
            runs = [("depth", None)] + [(f"nerf-{p}", p) for p in profiles if k < args.nerf_objects]
            for backend, profile in runs:
                try:
                    if profile is None:
                        from getagrip_ros.perception.nerf_dataset import read_nerf_dataset

                        ds = read_nerf_dataset(dataset)
                        rep = extract_from_depth(ds.depth_m, [ds.K] * len(ds), ds.T_world_camera_optical, POSITION)
                        times, extra = rep.timings_s, ""
                    else:
                        rep, times, psnr = nerf_representation(dataset, Path(tmp) / f"runs_{k}_{profile}", profile,
                                                               args.iterations)
                        extra = f"  held-out PSNR {psnr:.1f} dB"
                except StageError as err:
                    failures[backend] = failures.get(backend, 0) + 1
                    print(f"{name:24s} {backend:11s} FAILED: {err.reason}", flush=True)
                    continue
                d = tree.query(rep.points_world_m)[0] * 1000
                distances.setdefault(backend, []).append(d)
                print(f"{name:24s} {backend:11s} {views:3d} views  cloud {len(d):5d} pts  median {np.median(d):6.2f} mm  "
                      f"p90 {np.percentile(d, 90):6.2f} mm  | capture {t_capture:.1f}s  "
                      + "  ".join(f"{s} {v:.2f}s" for s, v in times.items()) + extra, flush=True)
    for backend, ds in distances.items():
        d = np.concatenate(ds)
        print(f"ALL {backend:11s}: {len(ds)} objects, median {np.median(d):.2f} mm, p90 {np.percentile(d, 90):.2f} mm"
              f", failed on {failures.get(backend, 0)}")
    for backend, n in failures.items():
        if backend not in distances:
            print(f"ALL {backend:11s}: failed on all {n} objects")


if __name__ == "__main__":
    main()
