"""The simulated robot behind the nodes' "sim" backend: a MuJoCo arm world with one catalog object.

Every MuJoCo call runs in one worker thread (the renderer's EGL context belongs to the thread that made
it current; the physics is not thread-safe). Between goals the physics advances to the wall clock and
applies the latest hand setpoint from the hand topics (see `set_hand_target`); during a goal motions
run at `real_time_factor` times real time (0: as fast as the CPU allows).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SimBackendConfig:
    """The simulated world of the 'sim' backend."""

    object_name: str = "tabletop20/green_tea"
    """Catalog object standing on the table (getagrip_ros.objects.catalog)."""
    object_xy_m: tuple[float, ...] = (0.65, 0.0)
    """World x, y of the object (Get a Grip puts objects at x = 0.65 m)."""
    object_yaw_rad: float = 0.0
    camera_width_px: int = 640
    camera_height_px: int = 360
    camera_fy_px: float = 266.5
    """Focal length in pixels (square pixels, principal point at the image centre)."""
    object_cache_dir: str = ""
    """Convex-decomposition cache of the object; "" = ~/.cache/getagrip_ros/convex."""
    real_time_factor: float = 0.0
    """Motions during a goal run at this multiple of real time; 0 = as fast as possible."""


class SimBackend:
    """The simulated robot, camera and object, driven from one worker thread."""

    def __init__(self, config: SimBackendConfig) -> None:
        self.config = config
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sim")
        self._last_step_wall = time.monotonic()
        self._hand_target: np.ndarray | None = None
        self._target_lock = threading.Lock()
        self.run(self._build, config)

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call fn(*args) in the simulation thread and return its result (exceptions propagate)."""
        return self._worker.submit(fn, *args).result()

    def _build(self, config: SimBackendConfig) -> None:
        from getagrip_ros.objects.catalog import object_by_name
        from getagrip_ros.objects.mesh_object import PrepareConfig, prepare_object
        from getagrip_ros.sim.robots import SimArm, SimHand
        from getagrip_ros.sim.scene import CameraConfig, SceneConfig
        from getagrip_ros.sim.world import ObjectPlacement, SimWorld

        if len(config.object_xy_m) != 2:
            raise ValueError(f"sim.object_xy_m needs 2 values, got {list(config.object_xy_m)}")
        if not config.real_time_factor >= 0:
            raise ValueError(f"sim.real_time_factor must be >= 0, got {config.real_time_factor}")
        obj = prepare_object(object_by_name(config.object_name), PrepareConfig(cache_dir=config.object_cache_dir or None))
        camera = CameraConfig(config.camera_width_px, config.camera_height_px, config.camera_fy_px)
        self.object = obj
        self.world = SimWorld(SceneConfig(robot="arm", camera=camera), obj,
                              ObjectPlacement(xy_m=tuple(config.object_xy_m), yaw_rad=config.object_yaw_rad))
        self.arm, self.hand = SimArm(self.world), SimHand(self.world)
        self.description = f"simulated FR3 and Allegro hand, {obj.name} at x, y = {list(config.object_xy_m)} m"

    def camera(self, with_depth: bool):
        from getagrip_ros.perception.cameras import SimCamera

        return SimCamera(self.world, with_depth=with_depth)

    def joint_state(self):
        return self.world.joint_state()

    def set_hand_target(self, q_rad: np.ndarray) -> None:
        """Any thread: the hand position setpoint (16, Get a Grip order) applied from the next idle step on."""
        with self._target_lock:
            self._hand_target = np.asarray(q_rad, dtype=float).copy()

    def advance_idle(self):
        """Between goals: apply the hand setpoint, advance the physics to the wall clock (at most 0.2 s at a time);
        returns the joint state."""
        with self._target_lock:
            target, self._hand_target = self._hand_target, None
        if target is not None:
            self.world.command(self.world.hand_joints, target)
        now = time.monotonic()
        steps = int(min(now - self._last_step_wall, 0.2) / self.world.model.opt.timestep)
        self._last_step_wall = now
        if steps > 0:
            self.world.step(steps)
        return self.world.joint_state()

    def paced(self, should_stop: Callable[[], bool], on_poll: Callable[[], None] | None = None) -> Callable[[], bool]:
        """A should_stop for motions in the simulation thread that also keeps the physics at real_time_factor times
        the wall clock (it is polled every 10 ms of simulated time) and calls on_poll (e.g. publish the state)."""
        rtf = self.config.real_time_factor
        sim_start, wall_start = self.world.time_s, time.monotonic()

        def poll() -> bool:
            if rtf > 0:
                ahead = (self.world.time_s - sim_start) / rtf - (time.monotonic() - wall_start)
                if ahead > 0:
                    time.sleep(ahead)
            if on_poll is not None:
                on_poll()
            return should_stop()

        return poll

    def mark_time(self) -> None:
        """After a goal: its physics time is not caught up, and hand setpoints that arrived during it are dropped
        (the hand must not jump to a stale command)."""
        self._last_step_wall = time.monotonic()
        with self._target_lock:
            self._hand_target = None

    def close(self) -> None:
        try:
            self.run(self.world.close)
        finally:
            self._worker.shutdown(wait=True)
