"""Objects as MuJoCo free bodies, and the paper's acceptance test: drop 2 cm, must settle upright.

Frames: the table top is the plane z = 0 of the world; an object body's frame is the object frame
of its ``PreparedObject`` (lowest point at z = 0, bounding-box centre at x = y = 0, z up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

import mujoco
import numpy as np

from getagrip_ros.objects.errors import ObjectRejected

if TYPE_CHECKING:
    from getagrip_ros.objects.mesh_object import PreparedObject

COLLISION_GROUP = 3
"""MuJoCo geom group of the convex collision parts (hidden in the default viewer/renderer)."""
VISUAL_GROUP = 2
"""MuJoCo geom group of the non-colliding full-detail visual mesh."""
TORSIONAL_FRICTION = 0.005
ROLLING_FRICTION = 0.0001


def add_object_body(spec: mujoco.MjSpec, obj: "PreparedObject", name: str, pos_m: Sequence[float],
                    quat_wxyz: Sequence[float] = (1.0, 0.0, 0.0, 0.0), friction: float = 0.9,
                    density_kg_m3: float = 500.0, mass_kg: Optional[float] = None) -> mujoco.MjsBody:
    """Add `obj` to `spec` as a free body named `name` (a child of the world body) and return it.

    The body frame is the object frame, placed at `pos_m` / `quat_wxyz` in the world frame (for an
    object resting on a table whose top is world z = h: pos_m = (x, y, h)). Collision: one mesh geom
    per convex part (group 3, condim 3, sliding `friction`, margin 0; MuJoCo takes the larger friction
    and condim of two touching geoms, so give fingertips condim 4/6 for torsional friction). Visual:
    the full watertight mesh (group 2, no collisions). Mass and inertia are explicit, from uniform
    `density_kg_m3` over the watertight mesh, or `mass_kg` if given, so they need the spec's default
    ``compiler.inertiafromgeom`` (auto). Mesh and geom names are "<name>/part_NN" and "<name>/visual",
    the free joint is "<name>/free"; `name` must be unique in the spec.
    """
    if friction <= 0:
        raise ValueError(f"{obj.name}: friction must be positive, got {friction}")
    mass, com, inertia = obj.mass_properties(density_kg_m3, mass_kg)
    body = spec.worldbody.add_body(name=name, pos=list(pos_m), quat=list(quat_wxyz))
    body.add_freejoint(name=f"{name}/free")
    body.explicitinertial = True
    body.mass = mass
    body.ipos = com
    body.fullinertia = [inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2], inertia[1, 2]]
    for i, part in enumerate(obj.convex_parts):
        mesh_name = f"{name}/part_{i:02d}"
        spec.add_mesh(name=mesh_name, uservert=part.vertices.ravel().tolist(), userface=part.faces.ravel().tolist())
        body.add_geom(name=mesh_name, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=mesh_name, group=COLLISION_GROUP,
                      condim=3, margin=0.0, friction=[friction, TORSIONAL_FRICTION, ROLLING_FRICTION],
                      rgba=[0.8, 0.4, 0.2, 1.0])
    visual_name = f"{name}/visual"
    spec.add_mesh(name=visual_name, uservert=obj.mesh.vertices.ravel().tolist(), userface=obj.mesh.faces.ravel().tolist())
    body.add_geom(name=visual_name, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=visual_name, group=VISUAL_GROUP,
                  contype=0, conaffinity=0, rgba=[0.8, 0.4, 0.2, 1.0])
    return body


@dataclass(frozen=True)
class SettleConfig:
    """The drop test (paper, App. B.4: 2 cm drop, 200 steps, friction 0.9, density 500 kg/m^3)."""

    drop_height_m: float = 0.02
    steps: int = 200
    timestep_s: float = 0.005
    friction: float = 0.9
    """Sliding friction of the object and of the table."""
    density_kg_m3: float = 500.0
    mass_kg: Optional[float] = None
    """Explicit mass; None: density x volume."""
    max_rotation_rad: float = 2 * math.acos(0.95)
    """Upright = rotated less than this from the start at every step (paper: quaternion real part > 0.95)."""
    rest_window_steps: int = 15
    rest_position_tol_m: float = 1e-3
    rest_rotation_tol_rad: float = 1e-2
    """At rest = over the last `rest_window_steps` steps, within these of the final pose
    (paper: 15 steps, 1 mm, 0.01 rad)."""

    def __post_init__(self) -> None:
        if not 0 < self.rest_window_steps <= self.steps:
            raise ValueError(f"SettleConfig: rest_window_steps {self.rest_window_steps} must be in 1..steps ({self.steps})")
        if self.timestep_s <= 0 or self.drop_height_m < 0:
            raise ValueError(f"SettleConfig: timestep_s must be > 0 and drop_height_m >= 0, "
                             f"got {self.timestep_s}, {self.drop_height_m}")


@dataclass(frozen=True)
class SettleResult:
    """Outcome of one drop; heights are of the object-frame origin (its lowest point at the start) in the world."""

    settled: bool
    """Upright throughout and at rest at the end."""
    upright: bool
    at_rest: bool
    max_rotation_rad: float
    """Largest rotation from the initial orientation during the run."""
    final_height_m: float
    drop_m: float
    """Start height minus final height of the object-frame origin (about drop_height_m when it lands upright)."""
    final_speed_m_s: float
    final_angular_speed_rad_s: float
    reason: str
    """Why it did not settle; empty when settled."""


def _rotation_angles_rad(quats_wxyz: np.ndarray, reference_wxyz: np.ndarray) -> np.ndarray:
    dots = np.abs(quats_wxyz @ reference_wxyz) / (np.linalg.norm(quats_wxyz, axis=1) * np.linalg.norm(reference_wxyz))
    return 2 * np.arccos(np.clip(dots, 0.0, 1.0))


def settle_test(obj: "PreparedObject", config: SettleConfig = SettleConfig()) -> SettleResult:
    """Drop `obj` upright from `drop_height_m` onto a table plane (top at z = 0) and judge it.

    Raises ObjectRejected if MuJoCo cannot build the object (e.g. a flat convex part).
    """
    spec = mujoco.MjSpec()
    spec.option.timestep = config.timestep_s
    spec.worldbody.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[1.0, 1.0, 0.01], condim=3,
                            friction=[config.friction, TORSIONAL_FRICTION, ROLLING_FRICTION])
    add_object_body(spec, obj, "object", (0.0, 0.0, config.drop_height_m), friction=config.friction,
                    density_kg_m3=config.density_kg_m3, mass_kg=config.mass_kg)
    try:
        model = spec.compile()
    except ValueError as exc:  # MuJoCo's compile errors, e.g. a flat convex part
        raise ObjectRejected(f"{obj.name}: MuJoCo cannot build the object ({exc})") from exc
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    start = data.qpos[:7].copy()
    poses = np.empty((config.steps, 7))
    for step in range(config.steps):
        mujoco.mj_step(model, data)
        poses[step] = data.qpos[:7]
    rotation = _rotation_angles_rad(poses[:, 3:], start[3:])
    window = poses[-config.rest_window_steps:]
    moved_m = float(np.abs(window[:, :3] - poses[-1, :3]).max())
    turned_rad = float(_rotation_angles_rad(window[:, 3:], poses[-1, 3:]).max())
    upright = bool(rotation.max() < config.max_rotation_rad)
    at_rest = moved_m <= config.rest_position_tol_m and turned_rad <= config.rest_rotation_tol_rad
    if not upright:
        first = int(np.argmax(rotation >= config.max_rotation_rad)) + 1
        reason = (f"tipped over: rotated {math.degrees(rotation.max()):.0f} deg "
                  f"(limit {math.degrees(config.max_rotation_rad):.0f}) after {config.steps} steps, "
                  f"past the limit at step {first}")
    elif not at_rest:
        reason = (f"did not settle: moved {moved_m * 1000:.1f} mm / {math.degrees(turned_rad):.1f} deg in the last "
                  f"{config.rest_window_steps} of {config.steps} steps")
    else:
        reason = ""
    return SettleResult(settled=upright and at_rest, upright=upright, at_rest=at_rest,
                        max_rotation_rad=float(rotation.max()), final_height_m=float(poses[-1, 2]),
                        drop_m=float(start[2] - poses[-1, 2]), final_speed_m_s=float(np.linalg.norm(data.qvel[:3])),
                        final_angular_speed_rad_s=float(np.linalg.norm(data.qvel[3:6])), reason=reason)
