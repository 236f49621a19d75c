"""Perception quality and speed (depth-fusion backend) over catalog objects.

For each object: the simulated FR3 drives the wrist camera along the capture spirals (reachable poses
only), depth images are fused (TSDF), the object cloud is cleaned and encoded as a BPS. Prints the
median / 90th-percentile distance from the cleaned cloud to the true mesh and the time per stage.
The NeRF backend (paper profile and CPU profile) is not built yet.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.spatial import cKDTree

from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.perception.bps import encode_bps
from getagrip_ros.perception.capture_trajectory import SpiralConfig, plan_capture
from getagrip_ros.perception.depth_fusion import fuse_depth
from getagrip_ros.perception.point_cloud import CloudCleaningConfig, clean_object_cloud
from getagrip_ros.sim.scene import CameraConfig, SceneConfig
from getagrip_ros.sim.world import ObjectPlacement, SimWorld

OBJECTS = ("tabletop20/cube", "tabletop20/apple", "tabletop20/red_mug", "tabletop20/goblet", "tabletop20/bunny",
           "tabletop20/spray_bottle")
POSITION = np.array([0.55, 0.0, 0.0])


def main() -> None:
    camera = CameraConfig(320, 180, 133.25)  # ZED 2i HD720 / 4
    all_d = []
    for name in OBJECTS:
        obj = prepare_object(object_by_name(name))
        t = {}
        start = time.perf_counter()
        trajectory = plan_capture(POSITION, SpiralConfig(num_images=100))
        t["plan"] = time.perf_counter() - start
        depths, Ks, poses = [], [], []
        with SimWorld(SceneConfig(camera=camera), obj, ObjectPlacement(xy_m=tuple(POSITION[:2]))) as world:
            start = time.perf_counter()
            for q in trajectory.arm_joints_rad:
                world.reset(arm_rad=q, hand_rad=np.zeros(16))
                frame = world.render()
                depths.append(frame.depth_m), Ks.append(frame.K), poses.append(frame.T_world_camera)
            t["render"] = time.perf_counter() - start
            true_mesh = obj.mesh.copy()
            true_mesh.apply_transform(world.object_pose())
        start = time.perf_counter()
        fused = fuse_depth(depths, Ks, poses, POSITION)
        t["fuse"] = time.perf_counter() - start
        start = time.perf_counter()
        cleaned = clean_object_cloud(fused.points_m, POSITION, CloudCleaningConfig(component_link_m=0.01))
        t["clean"] = time.perf_counter() - start
        start = time.perf_counter()
        encode_bps(cleaned.points_m)
        t["bps"] = time.perf_counter() - start
        d = cKDTree(true_mesh.sample(200_000)).query(cleaned.points_m)[0] * 1000
        all_d.append(d)
        print(f"{name:24s} {len(trajectory.arm_joints_rad):3d}/100 views  cloud {len(cleaned.points_m):5d} pts  "
              f"median {np.median(d):.2f} mm  p90 {np.percentile(d, 90):.2f} mm  | "
              + "  ".join(f"{k} {v:.2f}s" for k, v in t.items()))
    d = np.concatenate(all_d)
    print(f"all objects: median {np.median(d):.2f} mm, p90 {np.percentile(d, 90):.2f} mm (depth fusion, 320x180 depth)")


if __name__ == "__main__":
    main()
