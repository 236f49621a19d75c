"""Simulated-world speed: physics real-time factor of the full robot + object scene on one core, and
wrist-camera rendering (RGB + depth + segmentation) at 256x256.

Targets (issue): physics >= 20x real time on one core; 100 renders at 256x256 in <= 30 s on 2 cores.
"""

from __future__ import annotations

import os
import time

import numpy as np

from getagrip_ros.objects.catalog import list_objects
from getagrip_ros.objects.mesh_object import PrepareConfig, prepare_object
from getagrip_ros.robot.description import ARM_JOINT_NAMES, FR3_Q_READY_RAD
from getagrip_ros.robot.interfaces import JointTrajectory
from getagrip_ros.sim.scene import CameraConfig, SceneConfig
from getagrip_ros.sim.world import SimWorld


def main() -> None:
    os.sched_setaffinity(0, {0})  # one core for the physics number
    specs = {s.name: s for s in list_objects("tabletop-20")}
    obj = prepare_object(specs["tabletop20/red_mug"], PrepareConfig())
    with SimWorld(SceneConfig(), obj) as world:
        goal = np.array(FR3_Q_READY_RAD) + np.array([0.3, 0.3, -0.2, 0.3, 0.2, -0.2, 0.3])
        trajectory = JointTrajectory.linear(ARM_JOINT_NAMES, FR3_Q_READY_RAD, goal, 10.0, 100)
        start = time.perf_counter()
        world.follow(trajectory)
        wall = time.perf_counter() - start
        print(f"physics, FR3 + Allegro + mug ({world.model.ngeom} geoms, dt {world.model.opt.timestep * 1e3:.0f} ms), "
              f"arm moving 10 s: {10.0 / wall:.0f}x real time on one core ({wall / 5000 * 1e6:.0f} us per step)")
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
        camera = CameraConfig(width_px=256, height_px=256, fy_px=266.5 * 256 / 360)
        world.reset()
        world.render(camera)
        start = time.perf_counter()
        for _ in range(100):
            frame = world.render(camera)
        wall = time.perf_counter() - start
        print(f"100 renders at 256x256 (RGB + depth + object mask, MUJOCO_GL={os.environ.get('MUJOCO_GL')}): {wall:.1f} s "
              f"({frame.object_mask.sum()} object pixels in the last frame)")


if __name__ == "__main__":
    main()
