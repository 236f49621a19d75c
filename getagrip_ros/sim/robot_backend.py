"""The simulated robot a bring-up owns: one MuJoCo arm world (FR3 + Allegro + wrist camera) and one object.

`SimRobot` is the `RobotBackend` of simulation: capture and grasp execution both drive this one world, and
`reset` puts it back before every trial (the object at its pose, the robot at home, at rest; another catalog
object rebuilds the world). Every MuJoCo call runs in one worker thread (the renderer's EGL context belongs
to the thread that made it current; the physics is not thread-safe): `run` sends work there.

After each goal the world comes to rest (`release`); between goals it stays at rest and its time stands still,
except that a hand setpoint from the Allegro driver's topics (`set_hand_target`) is applied and the physics then
follows the wall clock for `hand_command_follow_s`, so the hand moves as a driver's would. So the world a goal
starts from depends only on the goals before it, not on how long the stack waited in between.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from getagrip_ros.robot.backend import (
    LiftCheck, ObjectObservation, ResetReport, RobotBackend, RobotSample, WorldReset,
)
from getagrip_ros.robot.interfaces import Arm, Hand, StopFn

SETTLED_RAD_S = 1e-3
"""At rest: every robot joint slower than this ..."""
SETTLED_M_S = 1e-3
"""... and the object slower than this (m/s, rad/s)."""


@dataclass(frozen=True)
class SimRobotConfig:
    """The simulated world (units: metres, radians, seconds)."""

    object_name: str = "tabletop20/green_tea"
    """Catalog object (getagrip_ros.objects.catalog) or a mesh file (obj/stl/ply/glb, metres) on the table."""
    object_xy_m: tuple[float, ...] = (0.65, 0.0)
    """World x, y of the object (Get a Grip puts objects at x = 0.65 m); a reset puts it back here."""
    object_yaw_rad: float = 0.0
    camera_width_px: int = 640
    """ZED 2i HD720 / 2."""
    camera_height_px: int = 360
    camera_fy_px: float = 266.5
    """Focal length in pixels (square pixels, principal point at the image centre)."""
    object_cache_dir: str = ""
    """Convex-decomposition cache of the objects; "" = ~/.cache/getagrip_ros/convex."""
    real_time_factor: float = 1.0
    """Grasp execution (hand shaping -> lift) runs at this multiple of real time; 0 = as fast as the CPU allows
    (the physics, and so the result, do not depend on it)."""
    capture_real_time_factor: float = 0.0
    """The capture spirals run at this multiple of real time; 0 = as fast as the CPU allows."""
    hand_command_follow_s: float = 1.0
    """Between goals: after a hand setpoint from the topics, the physics follows the wall clock this long."""
    settle_max_s: float = 2.0
    """After a goal the world comes to rest; the physics runs at most this long (simulated time) for it."""

    def validate(self) -> None:
        if len(self.object_xy_m) != 2:
            raise ValueError(f"sim.object_xy_m needs 2 values, got {list(self.object_xy_m)}")
        for name in ("real_time_factor", "capture_real_time_factor", "hand_command_follow_s", "settle_max_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"sim.{name} must be >= 0, got {getattr(self, name)}")


def prepare_named_object(name: str, cache_dir: str | None = None):
    """A world's object by the name a reset takes: a catalog name, or a mesh file's path."""
    from getagrip_ros.objects.catalog import object_by_name, user_object
    from getagrip_ros.objects.mesh_object import PrepareConfig, prepare_object

    spec = user_object(name) if Path(name).suffix and Path(name).is_file() else object_by_name(name)
    return prepare_object(spec, PrepareConfig(cache_dir=cache_dir))


class SimRobot(RobotBackend):
    """One simulated world, driven from one worker thread; `run` executes calls there (re-entrant)."""

    simulated = True

    def __init__(self, config: SimRobotConfig = SimRobotConfig()) -> None:
        config.validate()
        self.config = config
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sim")
        self._worker_thread = self._worker.submit(threading.current_thread).result()
        self._objects: dict[str, Any] = {}
        self._hand_target: np.ndarray | None = None
        self._hand_command_wall = -np.inf
        self._last_step_wall = time.monotonic()
        self._target_lock = threading.Lock()
        self.world = None
        self.run(self._build, config.object_name, tuple(config.object_xy_m), config.object_yaw_rad)

    # -- the world ---------------------------------------------------------------------------------
    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if threading.current_thread() is self._worker_thread:
            return fn(*args)
        return self._worker.submit(fn, *args).result()

    def _prepared(self, name: str):
        if name not in self._objects:
            self._objects[name] = prepare_named_object(name, self.config.object_cache_dir or None)
        return self._objects[name]

    def _build(self, name: str, xy_m: tuple[float, float], yaw_rad: float) -> None:
        from getagrip_ros.sim.robots import SimArm, SimHand
        from getagrip_ros.sim.scene import CameraConfig, SceneConfig
        from getagrip_ros.sim.world import ObjectPlacement, SimWorld

        obj = self._prepared(name)
        c = self.config
        if self.world is not None:
            self.world.close()
        self.world = SimWorld(SceneConfig(robot="arm", camera=CameraConfig(c.camera_width_px, c.camera_height_px,
                                                                           c.camera_fy_px)),
                              obj, ObjectPlacement(xy_m=(float(xy_m[0]), float(xy_m[1])), yaw_rad=float(yaw_rad)))
        self.object_name = name
        self._arm, self._hand = SimArm(self.world), SimHand(self.world)
        self.description = (f"simulated FR3 and Allegro hand, {obj.name} at x, y = {[round(v, 4) for v in xy_m]} m, "
                            f"yaw {yaw_rad:.3f} rad")

    @property
    def arm(self) -> Arm:
        return self._arm

    @property
    def hand(self) -> Hand:
        return self._hand

    def reset(self, request: WorldReset = WorldReset()) -> ResetReport:
        """Robot at home (the FR3 ready pose, the hand open), the object at rest where the request or the
        configuration puts it; another object or placement rebuilds the world. Call through `run`."""
        name = request.object_name or self.object_name
        if request.object_xy_m is not None:
            xy, yaw = tuple(float(v) for v in request.object_xy_m), float(request.object_yaw_rad)
            if len(xy) != 2 or not np.isfinite([*xy, yaw]).all():
                raise ValueError(f"object placement must be 2 finite x, y values and a finite yaw, got {list(xy)}, {yaw}")
        else:
            xy, yaw = tuple(float(v) for v in self.config.object_xy_m), float(self.config.object_yaw_rad)
        placement = self.world.placement
        same = name == self.object_name and tuple(placement.xy_m) == xy and placement.yaw_rad == yaw
        if same:
            self.world.reset()
            detail = "world reset"
        else:
            self._build(name, xy, yaw)
            detail = "world rebuilt"
        self.mark_time()
        state = self.sample().joint_state
        return ResetReport(self.object_name, self.world.object_pose(), state, detail)

    def camera(self, with_depth: bool):
        from getagrip_ros.perception.cameras import SimCamera

        return SimCamera(self.world, with_depth=with_depth)

    def sample(self) -> RobotSample:
        """Call through `run`."""
        world = self.world
        touching = world.object_contacts()
        links = {k: float(v) for k, v in touching.items() if k != "world"}
        return RobotSample(world.joint_state(), ObjectObservation(world.object_pose(), links, "world" in touching))

    def lift_check(self, min_rise_m: float) -> LiftCheck:
        from getagrip_ros.sim.grasp_trial import object_lift_check

        return object_lift_check(self.world, min_rise_m=min_rise_m)

    def hand_link_names(self) -> tuple[str, ...]:
        return tuple(self.world.hand_link_names())

    def physics_settings(self) -> dict[str, Any]:
        return {**self.world.physics_settings(), "sim_robot": asdict(self.config)}

    # -- time --------------------------------------------------------------------------------------
    def paced(self, should_stop: StopFn, motion: str) -> StopFn:
        """A should_stop for motions in the simulation thread (polled every 10 ms of simulated time) that keeps the
        physics at the real-time factor of `motion` ("capture" or "execution") x the wall clock (0: as fast as
        possible)."""
        if motion not in ("capture", "execution"):
            raise ValueError(f"unknown kind of motion {motion!r}")
        real_time_factor = self.config.capture_real_time_factor if motion == "capture" else self.config.real_time_factor
        world = self.world
        sim_start, wall_start = world.time_s, time.monotonic()

        def poll() -> bool:
            if real_time_factor > 0:
                ahead = (world.time_s - sim_start) / real_time_factor - (time.monotonic() - wall_start)
                if ahead > 0:
                    time.sleep(ahead)
            return should_stop()

        return poll

    def set_hand_target(self, q_rad: np.ndarray) -> None:
        """Any thread: a hand position setpoint (16, Get a Grip order) from the driver topics, applied between goals."""
        with self._target_lock:
            self._hand_target = np.asarray(q_rad, dtype=float).copy()

    def advance_idle(self) -> None:
        """Between goals, in the simulation thread: apply the latest hand setpoint; while one is recent, the physics
        follows the wall clock (at most 0.2 s per call); otherwise the world stays at rest."""
        now = time.monotonic()
        with self._target_lock:
            target, self._hand_target = self._hand_target, None
        if target is not None:
            self.world.command(self.world.hand_joints, target)
            self._hand_command_wall = now
        if now - self._hand_command_wall <= self.config.hand_command_follow_s:
            steps = int(min(now - self._last_step_wall, 0.2) / self.world.model.opt.timestep)
            if steps > 0:
                self.world.step(steps)
        self._last_step_wall = now

    def release(self) -> None:
        """After a goal, in the simulation thread: the world comes to rest (the physics runs, the robot holding its
        targets, until nothing moves, at most settle_max_s), and hand setpoints that arrived during the goal are
        dropped (the hand must not jump to a stale one)."""
        world, dt = self.world, self.world.model.opt.timestep
        steps = max(1, round(0.01 / dt))
        for _ in range(int(self.config.settle_max_s / 0.01)):
            robot_speed = float(np.abs(world.joint_state().velocities_rad_s).max())
            if robot_speed < SETTLED_RAD_S and max(world.object_speed()) < SETTLED_M_S:
                break
            world.step(steps)
        self.mark_time()

    def mark_time(self) -> None:
        self._last_step_wall = time.monotonic()
        with self._target_lock:
            self._hand_target = None
        self._hand_command_wall = -np.inf

    def close(self) -> None:
        try:
            if self.world is not None:
                self.run(self.world.close)
        finally:
            self._worker.shutdown(wait=True)
