"""Build the MuJoCo scene (MjSpec) from the project's own robot description: robot, table, camera, object.

The robot bodies, joints, inertials and collision primitives come from
:mod:`getagrip_ros.robot.description` - the same facts the URDFs are generated from - so the
simulated robot and the planning model cannot drift apart.

Frames: the MuJoCo world frame is the robot base ``fr3_link0`` (z up, x forward); the table top is
the plane z = 0 of the world (Get a Grip's setup: table box centred at (0.50165, 0, -0.01)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import mujoco
import numpy as np

from getagrip_ros.robot.description import (
    ARM_JOINT_NAMES, BASE_LINK, HAND_JOINT_NAMES, LEFT_OPTICAL_FRAME, PALM_LINK, Box, Joint, Link, Sphere, arm_parts,
    hand_parts,
)

# Collision groups: robot geoms touch the table and objects but not each other.
ROBOT_BIT, TABLE_BIT, OBJECT_BIT = 1, 2, 4
CAMERA_NAME = "wrist_camera"
WRIST_MOCAP = "wrist_target"

#: Joint-space stiffness (N m/rad) and damping (N m s/rad) of the FR3 joint impedance example controllers
#: published by Franka (libfranka / franka_ros examples).
FR3_KP = (600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0)
FR3_KD = (50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0)
#: Allegro PD gains of Wonik's ROS 2 v4 driver (pd_gains.yaml), here in Get a Grip joint order
#: (index, middle, ring: abduction, MCP, PIP, DIP; thumb: CMC, axial, MCP, IP).
_ALLEGRO_FINGER_KP, _ALLEGRO_FINGER_KD = (0.4167, 0.6667, 0.75, 0.4167), (0.0208, 0.0417, 0.0458, 0.0333)
ALLEGRO_KP = _ALLEGRO_FINGER_KP * 3 + (0.8333, 0.5833, 0.5, 0.5)
ALLEGRO_KD = _ALLEGRO_FINGER_KD * 3 + (0.0417, 0.0417, 0.0417, 0.0333)


@dataclass(frozen=True)
class ActuatorGains:
    """Position (PD) control of the joints, from the actuators' published values (recorded with every result)."""

    arm_kp: tuple[float, ...] = FR3_KP
    arm_kd: tuple[float, ...] = FR3_KD
    hand_kp: tuple[float, ...] = ALLEGRO_KP
    hand_kd: tuple[float, ...] = ALLEGRO_KD
    gravity_compensation: bool = True
    """Compensate the robot's own weight, as the FR3 controller and the Allegro driver do."""


@dataclass(frozen=True)
class CameraConfig:
    """Wrist camera (ZED 2i left, rectified pinhole). Default: HD720 downscaled by 2 (fx = 533 / 2)."""

    width_px: int = 640
    height_px: int = 360
    fy_px: float = 266.5
    """Focal length in pixels (square pixels, principal point at the image centre)."""
    near_m: float = 0.05
    far_m: float = 5.0

    @property
    def fovy_deg(self) -> float:
        return math.degrees(2.0 * math.atan(self.height_px / 2.0 / self.fy_px))

    @property
    def K(self) -> np.ndarray:
        """(3, 3) intrinsics in pixels (u right, v down)."""
        return np.array([[self.fy_px, 0.0, self.width_px / 2.0], [0.0, self.fy_px, self.height_px / 2.0], [0.0, 0.0, 1.0]])


@dataclass(frozen=True)
class SceneConfig:
    """Everything that shapes the simulated world."""

    robot: Literal["arm", "floating_hand"] = "arm"
    """The FR3 with hand and camera, or the hand alone with its wrist pose commanded directly (6 DoF)."""
    timestep_s: float = 0.002
    jacobian: Literal["auto", "dense", "sparse"] = "auto"
    """MuJoCo's constraint Jacobian (auto: dense below 60 degrees of freedom). Sparse steps the floating-hand world
    ~1.2x faster with the same grasp labels (``benchmarks/bench_labels.py``)."""
    friction: float = 0.9
    """Sliding friction of the object, the robot and the table (the paper's 0.9)."""
    table_size_m: tuple[float, float, float] = (1.3208, 1.8288, 0.02)
    table_centre_m: tuple[float, float, float] = (0.50165, 0.0, -0.01)
    table_texture: bool = True
    """Speckled table top (as real tables are): image-based reconstruction cannot place a uniform plane."""
    gains: ActuatorGains = field(default_factory=ActuatorGains)
    camera: CameraConfig = field(default_factory=CameraConfig)
    skybox: bool = False
    """A light grey sky instead of black (pictures and videos; the wrist camera's images keep black)."""


def quat_wxyz_from_rpy(rpy_rad: tuple[float, float, float]) -> list[float]:
    """URDF fixed-axis roll-pitch-yaw -> MuJoCo quaternion (w, x, y, z)."""
    q = np.zeros(4)
    mujoco.mju_euler2Quat(q, np.asarray(rpy_rad, dtype=float), "XYZ")
    return q.tolist()


def _add_link_geoms(body: mujoco.MjsBody, link: Link, friction: float) -> None:
    for shape in link.shapes:
        geom = body.add_geom(name=f"{link.name}/{len(body.geoms)}", pos=list(shape.xyz_m), friction=[friction, 0.005, 0.0001],
                             contype=ROBOT_BIT, conaffinity=TABLE_BIT | OBJECT_BIT, condim=4, group=1)
        if isinstance(shape, Box):
            geom.type, geom.size = mujoco.mjtGeom.mjGEOM_BOX, [s / 2 for s in shape.size_m]
        elif isinstance(shape, Sphere):
            geom.type, geom.size = mujoco.mjtGeom.mjGEOM_SPHERE, [shape.radius_m, 0, 0]
        geom.rgba = [0.9, 0.9, 0.9, 1] if link.name.startswith("fr3") else [0.15, 0.15, 0.15, 1]


def _set_inertial(body: mujoco.MjsBody, link: Link) -> None:
    if link.inertial is None:
        return
    ixx, ixy, ixz, iyy, iyz, izz = link.inertial.inertia_kg_m2
    body.explicitinertial = True
    body.mass = link.inertial.mass_kg
    body.ipos = list(link.inertial.com_m)
    body.fullinertia = [ixx, iyy, izz, ixy, ixz, iyz]


def _add_tree(spec: mujoco.MjSpec, parent: mujoco.MjsBody, parent_link: str, links: dict[str, Link],
              joints: list[Joint], config: SceneConfig, gains: dict[str, tuple[float, float, float]]) -> dict[str, mujoco.MjsBody]:
    """Add every link below parent_link; movable joints get a position actuator (kp, kd, effort limit)."""
    bodies = {}
    for joint in [j for j in joints if j.parent == parent_link]:
        body = parent.add_body(name=joint.child, pos=list(joint.xyz_m), quat=quat_wxyz_from_rpy(joint.rpy_rad))
        body.gravcomp = 1.0 if config.gains.gravity_compensation else 0.0
        link = links[joint.child]
        _set_inertial(body, link)
        _add_link_geoms(body, link, config.friction)
        if joint.axis is not None:
            body.add_joint(name=joint.name, type=mujoco.mjtJoint.mjJNT_HINGE, axis=list(joint.axis),
                           range=[joint.lower_rad, joint.upper_rad], limited=mujoco.mjtLimited.mjLIMITED_TRUE)
            kp, kd, effort = gains[joint.name]
            act = spec.add_actuator(name=joint.name, target=joint.name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
            act.set_to_position(kp=kp, kv=kd)
            act.forcerange, act.forcelimited = [-effort, effort], mujoco.mjtLimited.mjLIMITED_TRUE
            act.ctrlrange, act.ctrllimited = [joint.lower_rad, joint.upper_rad], mujoco.mjtLimited.mjLIMITED_TRUE
        bodies[joint.child] = body
        bodies.update(_add_tree(spec, body, joint.child, links, joints, config, gains))
    return bodies


def build_scene(config: SceneConfig = SceneConfig()) -> mujoco.MjSpec:
    """MjSpec of the world without an object; add one with getagrip_ros.objects before compiling."""
    spec = mujoco.MjSpec()
    spec.modelname = f"getagrip_{config.robot}"
    spec.compiler.degree = False  # joint ranges in radians
    spec.option.timestep = config.timestep_s
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = 10.0
    spec.option.jacobian = {"auto": mujoco.mjtJacobian.mjJAC_AUTO, "dense": mujoco.mjtJacobian.mjJAC_DENSE,
                            "sparse": mujoco.mjtJacobian.mjJAC_SPARSE}[config.jacobian]
    spec.visual.global_.offwidth = max(config.camera.width_px, 640)
    spec.visual.global_.offheight = max(config.camera.height_px, 480)
    spec.visual.headlight.ambient = [0.4, 0.4, 0.4]
    spec.visual.headlight.diffuse = [0.6, 0.6, 0.6]
    if config.skybox:
        spec.add_texture(name="sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX, builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
                         rgb1=[0.93, 0.94, 0.96], rgb2=[0.7, 0.74, 0.8], width=64, height=64)
    world = spec.worldbody
    world.add_light(name="ceiling", pos=[0.5, 0.0, 2.0], dir=[0, 0, -1], castshadow=False)
    table = world.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_BOX, size=[s / 2 for s in config.table_size_m],
                           pos=list(config.table_centre_m), rgba=[0.55, 0.45, 0.35, 1],
                           friction=[config.friction, 0.005, 0.0001], contype=TABLE_BIT,
                           conaffinity=ROBOT_BIT | OBJECT_BIT, condim=4)
    if config.table_texture:
        spec.add_texture(name="table_speckle", type=mujoco.mjtTexture.mjTEXTURE_2D,
                         builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, rgb1=[0.62, 0.5, 0.38], rgb2=[0.48, 0.38, 0.28],
                         mark=mujoco.mjtMark.mjMARK_RANDOM, random=0.15, markrgb=[0.25, 0.18, 0.12], width=512, height=512)
        material = spec.add_material(name="table_speckle", texrepeat=[8, 8], texuniform=True)
        material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "table_speckle"
        table.material, table.rgba = "table_speckle", [1, 1, 1, 1]

    links, joints = hand_parts()
    if config.robot == "arm":
        arm_links, arm_joints = arm_parts()
        links, joints = arm_links + links, arm_joints + joints
    links = {link.name: link for link in links}
    g = config.gains
    kp_kd = dict(zip(ARM_JOINT_NAMES + HAND_JOINT_NAMES, zip(g.arm_kp + g.hand_kp, g.arm_kd + g.hand_kd)))
    gains = {j.name: (*kp_kd[j.name], j.effort_nm) for j in joints if j.axis is not None}
    if config.robot == "arm":
        base = world.add_body(name=BASE_LINK)
        _set_inertial(base, links[BASE_LINK])
        optical = _add_tree(spec, base, BASE_LINK, links, joints, config, gains)[LEFT_OPTICAL_FRAME]
    else:
        world.add_body(name=WRIST_MOCAP, mocap=True, pos=[0.5, 0.0, 0.4])
        palm = world.add_body(name=PALM_LINK, pos=[0.5, 0.0, 0.4])
        palm.add_freejoint(name="wrist")
        palm.gravcomp = 1.0 if config.gains.gravity_compensation else 0.0
        _set_inertial(palm, links[PALM_LINK])
        _add_link_geoms(palm, links[PALM_LINK], config.friction)
        _add_tree(spec, palm, PALM_LINK, links, joints, config, gains)
        # The wrist follows the commanded pose through a stiff weld (the arm's role); object contacts stay physical.
        weld = spec.add_equality(type=mujoco.mjtEq.mjEQ_WELD, name1=PALM_LINK, name2=WRIST_MOCAP,
                                 objtype=mujoco.mjtObj.mjOBJ_BODY, solref=[0.01, 1.0])
        weld.data = [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1] + [0] * (len(weld.data) - 11)  # anchor, identity pose, torquescale
        optical = world.add_body(name=LEFT_OPTICAL_FRAME, mocap=True, pos=[0.5, 0.0, 0.8], quat=[0, 1, 0, 0])
    # MuJoCo cameras look along -z with y up; the ROS optical frame looks along +z with y down: Rx(pi).
    optical.add_camera(name=CAMERA_NAME, quat=[0.0, 1.0, 0.0, 0.0], fovy=config.camera.fovy_deg)
    return spec
