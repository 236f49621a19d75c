"""The simulated world at run time: step physics, follow joint trajectories, render the wrist camera,
and answer ground-truth queries (object pose, contacts, joint states).

Frames: world = robot base fr3_link0 (z up, x forward), table top at z = 0. Camera poses are ROS
optical frames (z forward, x right, y down). Units: metres, radians, seconds, newtons.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Callable

import mujoco
import numpy as np

from getagrip_ros.robot.allegro import OPEN_HAND_JOINT_ANGLES_RAD
from getagrip_ros.robot.description import ARM_JOINT_NAMES, FR3_Q_READY_RAD, HAND_JOINT_NAMES, LEFT_OPTICAL_FRAME, PALM_LINK
from getagrip_ros.robot.interfaces import JointState, JointTrajectory, MotionResult
from getagrip_ros.sim.scene import CAMERA_NAME, WRIST_MOCAP, CameraConfig, SceneConfig, build_scene

if TYPE_CHECKING:
    from getagrip_ros.objects.mesh_object import PreparedObject

OBJECT_BODY = "object"
_STOP_CHECK_S = 0.01


@dataclass(frozen=True)
class ObjectPlacement:
    """Where and how the object is spawned (upright, its frame's origin on the table plane)."""

    xy_m: tuple[float, float] = (0.65, 0.0)
    """World x, y of the object frame origin (Get a Grip puts objects at x = 0.65 m)."""
    yaw_rad: float = 0.0
    drop_height_m: float = 0.0
    """Gap between the object's lowest point and the table at spawn."""
    density_kg_m3: float = 500.0
    mass_kg: float | None = None
    """Explicit mass; overrides the density when set."""


@dataclass(frozen=True)
class Contact:
    """One contact between two bodies; normal force in newtons (>= 0)."""

    body_a: str
    body_b: str
    normal_force_n: float
    position_m: tuple[float, float, float]


@dataclass(frozen=True)
class CameraFrame:
    """One wrist-camera image with ground truth."""

    rgb: np.ndarray
    """(H, W, 3) uint8."""
    depth_m: np.ndarray
    """(H, W) float32 distance along the optical axis (z of the optical frame); 0 where nothing was hit."""
    object_mask: np.ndarray
    """(H, W) bool: pixels showing the object."""
    K: np.ndarray
    """(3, 3) intrinsics, pixels."""
    T_world_camera: np.ndarray
    """(4, 4) pose of the ROS optical frame in the world."""


def _pose_matrix(pos: np.ndarray, xmat: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = np.asarray(xmat).reshape(3, 3)
    T[:3, 3] = pos
    return T


class SimWorld:
    """A MuJoCo world with the robot (arm or floating hand), the table and optionally one object.

    Args:
        config: scene settings (robot variant, timestep, friction, gains, camera).
        obj: a prepared object from the catalog (getagrip_ros.objects), or None.
        placement: where the object is spawned.
    """

    def __init__(self, config: SceneConfig = SceneConfig(), obj: "PreparedObject | None" = None,
                 placement: ObjectPlacement = ObjectPlacement()) -> None:
        self.config, self.placement, self.object = config, placement, obj
        spec = build_scene(config)
        if obj is not None:
            from getagrip_ros.objects.settle import add_object_body

            half = placement.yaw_rad / 2
            add_object_body(spec, obj, OBJECT_BODY, (*placement.xy_m, placement.drop_height_m),
                            (math.cos(half), 0.0, 0.0, math.sin(half)), friction=config.friction,
                            density_kg_m3=placement.density_kg_m3, mass_kg=placement.mass_kg)
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.arm_joints = ARM_JOINT_NAMES if config.robot == "arm" else ()
        self.hand_joints = HAND_JOINT_NAMES
        self._qadr = {n: m.joint(n).qposadr[0] for n in self.arm_joints + self.hand_joints}
        self._vadr = {n: m.joint(n).dofadr[0] for n in self.arm_joints + self.hand_joints}
        self._act = {m.actuator(i).name: i for i in range(m.nu)}
        self._object_body = m.body(OBJECT_BODY).id if obj is not None else -1
        self._body_names = [m.body(i).name for i in range(m.nbody)]
        self._renderer: mujoco.Renderer | None = None
        self.reset()

    def replica(self) -> "SimWorld":
        """Another world of the same compiled model (shared, read only) with its own state, reset; for simulating
        in parallel threads (one world per thread)."""
        other = copy.copy(self)
        other.data, other._renderer = mujoco.MjData(self.model), None
        other.reset()
        return other

    # -- state -------------------------------------------------------------------------------
    @property
    def time_s(self) -> float:
        return float(self.data.time)

    def reset(self, arm_rad=FR3_Q_READY_RAD, hand_rad=OPEN_HAND_JOINT_ANGLES_RAD,
              T_world_palm: np.ndarray | None = None) -> None:
        """Robot at the given joints (floating hand: wrist at T_world_palm), object at its placement, at rest."""
        mujoco.mj_resetData(self.model, self.data)
        q = dict(zip(self.arm_joints, arm_rad)) | dict(zip(self.hand_joints, hand_rad))
        for name, value in q.items():
            self.data.qpos[self._qadr[name]] = value
            self.data.ctrl[self._act[name]] = value
        if self.config.robot == "floating_hand":
            self.set_wrist_pose(np.eye(4) if T_world_palm is None else T_world_palm, teleport=True)
        mujoco.mj_forward(self.model, self.data)

    def show_state(self, joint_names: tuple[str, ...], q_rad: np.ndarray, T_world_object: np.ndarray | None = None) -> None:
        """Pose the robot (joints of this world in `joint_names`; others are left as they are) and the object as
        recorded, without physics (for re-rendering a trial; velocities untouched)."""
        for name, q in zip(joint_names, np.asarray(q_rad, dtype=float), strict=True):
            if name in self._qadr:
                self.data.qpos[self._qadr[name]] = q
        if T_world_object is not None and self._object_body >= 0:
            adr = self.model.jnt_qposadr[self.model.body_jntadr[self._object_body]]
            quat = np.zeros(4)
            mujoco.mju_mat2Quat(quat, np.ascontiguousarray(T_world_object[:3, :3], dtype=float).reshape(-1))
            self.data.qpos[adr : adr + 3], self.data.qpos[adr + 3 : adr + 7] = T_world_object[:3, 3], quat
        mujoco.mj_kinematics(self.model, self.data)

    def step(self, num_steps: int = 1) -> None:
        mujoco.mj_step(self.model, self.data, nstep=num_steps)

    def joint_state(self, names: tuple[str, ...] | None = None) -> JointState:
        names = names or self.arm_joints + self.hand_joints
        return JointState(tuple(names), np.array([self.data.qpos[self._qadr[n]] for n in names]),
                          np.array([self.data.qvel[self._vadr[n]] for n in names]),
                          np.array([self.data.actuator_force[self._act[n]] for n in names]))

    def body_pose(self, name: str) -> np.ndarray:
        """(4, 4) T_world_body."""
        b = self.data.body(name)
        return _pose_matrix(b.xpos, b.xmat)

    def object_pose(self) -> np.ndarray:
        """(4, 4) T_world_object (object frame: z up, lowest point on z = 0 when upright on the table)."""
        if self._object_body < 0:
            raise RuntimeError("this world has no object")
        return self.body_pose(OBJECT_BODY)

    def object_speed(self) -> tuple[float, float]:
        """(linear m/s, angular rad/s) speed of the object."""
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(self.model, self.data, mujoco.mjtObj.mjOBJ_BODY, self._object_body, vel, 0)
        return float(np.linalg.norm(vel[3:])), float(np.linalg.norm(vel[:3]))

    def contacts(self) -> list[Contact]:
        """Every active contact, with the names of the two bodies and its normal force."""
        out, force = [], np.zeros(6)
        for i in range(self.data.ncon):
            c = self.data.contact[i]
            mujoco.mj_contactForce(self.model, self.data, i, force)
            a, b = self.model.geom_bodyid[c.geom1], self.model.geom_bodyid[c.geom2]
            out.append(Contact(self._body_names[a], self._body_names[b], float(abs(force[0])), tuple(c.pos)))
        return out

    def object_contacts(self) -> dict[str, float]:
        """{body touching the object (hand link or "world" for the table): total normal force in N}."""
        touching: dict[str, float] = {}
        for c in self.contacts():
            if OBJECT_BODY in (c.body_a, c.body_b):
                other = c.body_b if c.body_a == OBJECT_BODY else c.body_a
                touching[other] = touching.get(other, 0.0) + c.normal_force_n
        return touching

    def physics_settings(self) -> dict:
        """Everything that shapes the physics of a result, to be recorded with it."""
        return {"scene": asdict(self.config), "object_placement": asdict(self.placement),
                "object": None if self.object is None else self.object.name, "mujoco": mujoco.__version__}

    # -- motion ------------------------------------------------------------------------------
    def _set_mocap(self, body: str, T_world_body: np.ndarray) -> np.ndarray:
        """Place a mocap body; returns its quaternion (w, x, y, z)."""
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, np.ascontiguousarray(T_world_body[:3, :3], dtype=float).reshape(-1))
        mocap = self.model.body(body).mocapid[0]
        self.data.mocap_pos[mocap], self.data.mocap_quat[mocap] = T_world_body[:3, 3], quat
        return quat

    def set_wrist_pose(self, T_world_palm: np.ndarray, teleport: bool = False) -> None:
        """Floating hand: command the wrist (palm_link) pose; teleport also moves the hand there now."""
        if self.config.robot != "floating_hand":
            raise RuntimeError("set_wrist_pose needs the floating-hand world")
        quat = self._set_mocap(WRIST_MOCAP, T_world_palm)
        if teleport:
            adr = self.model.joint("wrist").qposadr[0]
            self.data.qpos[adr : adr + 3], self.data.qpos[adr + 3 : adr + 7] = T_world_palm[:3, 3], quat
            self.data.qvel[self.model.joint("wrist").dofadr[0] : self.model.joint("wrist").dofadr[0] + 6] = 0.0
            mujoco.mj_forward(self.model, self.data)

    def command(self, joint_names: tuple[str, ...], q_rad: np.ndarray) -> None:
        """Set the position targets of these joints (they move there under the actuators' PD as the physics steps)."""
        for n, q in zip(joint_names, np.asarray(q_rad, dtype=float), strict=True):
            self.data.ctrl[self._act[n]] = q

    def hold(self, joint_names: tuple[str, ...]) -> None:
        """Command the joints to stay where they are now."""
        for n in joint_names:
            self.data.ctrl[self._act[n]] = self.data.qpos[self._qadr[n]]

    def follow(self, trajectory: JointTrajectory, should_stop: Callable[[], bool] | None = None,
               settle_s: float = 0.0, wrist_path: Callable[[float], np.ndarray] | None = None) -> MotionResult:
        """Track a joint trajectory with the position actuators (other joints hold their targets).

        Args:
            trajectory: joints of this robot (any subset), linearly interpolated.
            should_stop: polled every 10 ms; when it returns True the robot holds where it is.
            settle_s: extra time simulated after the last waypoint, holding the final targets.
            wrist_path: floating hand only: t_s -> (4, 4) T_world_palm commanded alongside (evaluated for every step
                before the first one: it must not depend on the simulation's state).
        """
        unknown = [n for n in trajectory.joint_names if n not in self._act]
        if unknown:
            raise ValueError(f"trajectory names joints this world does not have: {unknown}")
        if wrist_path is not None and self.config.robot != "floating_hand":
            raise RuntimeError("a wrist path needs the floating-hand world")
        acts = np.array([self._act[n] for n in trajectory.joint_names])
        qadr = np.array([self._qadr[n] for n in trajectory.joint_names])
        dt = self.model.opt.timestep
        n_steps = max(1, int(math.ceil((trajectory.duration_s + settle_s) / dt)))
        t_grid = np.arange(1, n_steps + 1) * dt
        targets = np.stack([np.interp(t_grid, trajectory.times_s, trajectory.positions_rad[:, j])
                            for j in range(len(acts))], axis=1)
        # PD on position and velocity error, as a joint trajectory controller: the position actuator
        # computes kp (ctrl - q) - kd qdot, so ctrl = q_ref + (kd / kp) qdot_ref adds the kd qdot_ref term.
        velocity = np.gradient(targets, dt, axis=0) if n_steps > 1 else np.zeros_like(targets)
        kd_over_kp = self.model.actuator_biasprm[acts, 2] / self.model.actuator_biasprm[acts, 1]
        commands = targets + velocity * kd_over_kp
        wrist_m, wrist_quat = self._wrist_commands(wrist_path, t_grid) if wrist_path is not None else (None, None)
        # the per-step loop is the labels' hot path: plain array writes, no lookups (same physics step by step)
        model, data, step = self.model, self.data, mujoco.mj_step
        ctrl, qpos = data.ctrl, data.qpos
        mocap = self.model.body(WRIST_MOCAP).mocapid[0] if wrist_path is not None else -1
        reached = np.empty_like(targets)
        check_every = max(1, int(round(_STOP_CHECK_S / dt)))
        for k in range(n_steps):
            if should_stop is not None and k % check_every == 0 and should_stop():
                ctrl[acts] = qpos[qadr]
                err = np.abs(targets[k] - qpos[qadr])
                return MotionResult(False, "stopped on request", k * dt, err, self._max_error(targets[:k], reached[:k], err))
            ctrl[acts] = commands[k]
            if mocap >= 0:
                data.mocap_pos[mocap] = wrist_m[k]
                data.mocap_quat[mocap] = wrist_quat[k if len(wrist_quat) > 1 else 0]
            step(model, data)
            reached[k] = qpos[qadr]
        final = np.abs(targets[-1] - qpos[qadr])
        return MotionResult(True, "reached the end of the trajectory", n_steps * dt, final,
                            self._max_error(targets, reached, np.zeros(len(acts))))

    @staticmethod
    def _max_error(targets: np.ndarray, reached: np.ndarray, floor: np.ndarray) -> np.ndarray:
        """Largest |target - reached| of each joint over the steps taken (at least floor)."""
        return np.maximum(np.abs(targets - reached).max(axis=0), floor) if len(targets) else floor

    @staticmethod
    def _wrist_commands(wrist_path: Callable[[float], np.ndarray], t_grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The wrist mocap's (n, 3) positions and its (n, 4) (w, x, y, z) quaternions along the path, or (1, 4) when
        the orientation never changes (the same numbers :meth:`set_wrist_pose` would write step by step)."""
        poses = [np.asarray(wrist_path(t), dtype=float) for t in t_grid]
        rotations = np.stack([T[:3, :3] for T in poses])
        if np.array_equal(rotations, np.broadcast_to(rotations[0], rotations.shape)):
            rotations = rotations[:1]
        quats = np.zeros((len(rotations), 4))
        for quat, R in zip(quats, rotations):
            mujoco.mju_mat2Quat(quat, np.ascontiguousarray(R).reshape(-1))
        return np.stack([T[:3, 3] for T in poses]), quats

    # -- camera ------------------------------------------------------------------------------
    def camera_pose(self) -> np.ndarray:
        """(4, 4) T_world_camera of the left optical frame (ROS convention)."""
        return self.body_pose(LEFT_OPTICAL_FRAME)

    def set_camera_pose(self, T_world_camera: np.ndarray) -> None:
        """Floating-hand world: place the free wrist camera (ROS optical frame pose)."""
        if self.config.robot != "floating_hand":
            raise RuntimeError("the arm world's camera is fixed to the wrist; move the arm instead")
        self._set_mocap(LEFT_OPTICAL_FRAME, T_world_camera)
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_camlight(self.model, self.data)  # camera poses are computed apart from body poses

    def render(self, camera: CameraConfig | None = None) -> CameraFrame:
        """RGB, depth and object mask from the wrist camera at its current pose."""
        cam = camera or self.config.camera
        if self._renderer is None or (self._renderer.height, self._renderer.width) != (cam.height_px, cam.width_px):
            self.close()
            self._renderer = mujoco.Renderer(self.model, cam.height_px, cam.width_px)
        self.model.cam_fovy[self.model.camera(CAMERA_NAME).id] = cam.fovy_deg
        self.model.vis.map.znear = cam.near_m / self.model.stat.extent
        self.model.vis.map.zfar = cam.far_m / self.model.stat.extent
        r = self._renderer
        r.update_scene(self.data, CAMERA_NAME)
        rgb = r.render().copy()
        r.enable_depth_rendering()
        r.update_scene(self.data, CAMERA_NAME)
        depth = r.render().astype(np.float32)
        r.disable_depth_rendering()
        r.enable_segmentation_rendering()
        r.update_scene(self.data, CAMERA_NAME)
        seg = r.render()
        r.disable_segmentation_rendering()
        depth[depth >= cam.far_m * 0.999] = 0.0
        geom_ids = seg[..., 0]
        is_geom = seg[..., 1] == mujoco.mjtObj.mjOBJ_GEOM
        body_of = np.append(self.model.geom_bodyid, -1)
        mask = is_geom & (body_of[np.where(is_geom, geom_ids, -1)] == self._object_body) & (self._object_body >= 0)
        return CameraFrame(rgb, depth, mask, cam.K, self.camera_pose())

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __enter__(self) -> "SimWorld":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def hand_link_names(self) -> tuple[str, ...]:
        """Bodies of the hand (palm, phalanges, fingertips)."""
        return tuple(n for n in self._body_names if n == PALM_LINK or n.startswith("link_"))
