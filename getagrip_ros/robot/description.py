"""Robot description of the FR3 arm + Allegro right hand v4 + wrist ZED 2i, and its URDF generator.

Plain Python (no ROS). Units: metres, radians, kilograms, seconds; URDF rpy = fixed-axis roll-pitch-yaw.
Sources of the numbers:
- FR3 joint origins = Franka's Craig DH table; limits = Franka's "rectangular" position/velocity limits;
  inertials = franka_description values (as shipped in the franky-sim 1.0.4 wheel, `assets/fr3.urdf`).
- Collision spheres of the arm = cuRobo sphere set of Get a Grip's `fr3_algr_zed2i` model.
- Flange / connector / palm / camera transforms and mount masses = Get a Grip's `fr3_algr_zed2i.urdf`.
- Allegro kinematics, collision boxes and masses = simlab `allegro_hand_description_right.urdf`
  (SIMLAB link/joint names, as used by Get a Grip).

CLI: ``python -m getagrip_ros.robot.description --out urdf/`` rewrites the two committed URDFs.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

PI = math.pi
Vec3 = tuple[float, float, float]
ZERO3: Vec3 = (0.0, 0.0, 0.0)

# ---------------------------------------------------------------------------------------------------
# Public names
BASE_LINK = "fr3_link0"  #: robot base = world frame of this stack (z up, x forward)
FLANGE_LINK = "fr3_flange"  #: link7 + 0.107 m along z, rotated -pi/4 about z (as Get a Grip)
CONNECTOR_LINK = "connector"
PALM_LINK = "palm_link"  #: hand root; +x palm normal, +y toward the index finger, +z along the fingers
CAMERA_LINK = "zed2i"  #: camera body frame (x forward, y left, z up)
LEFT_OPTICAL_FRAME = "zed2i_left_optical"  #: ROS optical convention: z forward, x right, y down
RIGHT_OPTICAL_FRAME = "zed2i_right_optical"
ARM_JOINT_NAMES = tuple(f"fr3_joint{i}" for i in range(1, 8))
HAND_JOINT_NAMES = tuple(f"joint_{i}.0" for i in range(16))  #: index 0-3, middle 4-7, ring 8-11, thumb 12-15
JOINT_NAMES = ARM_JOINT_NAMES + HAND_JOINT_NAMES
HAND_LINK_NAMES = tuple(f"link_{i}.0" for i in range(16))
FINGERTIP_LINK_NAMES = ("link_3.0_tip", "link_7.0_tip", "link_11.0_tip", "link_15.0_tip")  #: index, middle, ring, thumb
FULL_URDF_NAME = "fr3_algr_zed2i.urdf"
HAND_URDF_NAME = "allegro_right.urdf"
CUROBO_CONFIG_NAME = "fr3_algr_zed2i_curobo.yml"

FR3_Q_READY_RAD = (0.0, -PI / 4, 0.0, -3 * PI / 4, 0.0, PI / 2, PI / 4)  #: MoveIt "ready" / Get a Grip DEFAULT_Q_FR3


# ---------------------------------------------------------------------------------------------------
# Typed building blocks
@dataclass(frozen=True)
class Box:
    """Box with full side lengths `size_m`, centred at `xyz_m` in the link frame (axes aligned)."""

    size_m: Vec3
    xyz_m: Vec3 = ZERO3


@dataclass(frozen=True)
class Sphere:
    """Sphere of radius `radius_m` centred at `xyz_m` in the link frame."""

    radius_m: float
    xyz_m: Vec3 = ZERO3


Shape = Union[Box, Sphere]


@dataclass(frozen=True)
class Inertial:
    """Mass (kg), centre of mass in the link frame (m) and inertia about it (kg m^2: ixx ixy ixz iyy iyz izz)."""

    mass_kg: float
    com_m: Vec3
    inertia_kg_m2: tuple[float, float, float, float, float, float]

    @staticmethod
    def solid_box(mass_kg: float, box: Box) -> "Inertial":
        """Uniform solid box, centred on the box."""
        x, y, z = box.size_m
        k = mass_kg / 12.0
        ixx, iyy, izz = k * (y * y + z * z), k * (x * x + z * z), k * (x * x + y * y)
        return Inertial(mass_kg, box.xyz_m, (ixx, 0.0, 0.0, iyy, 0.0, izz))

    @staticmethod
    def solid_sphere(mass_kg: float, sphere: Sphere) -> "Inertial":
        """Uniform solid sphere (I = 2/5 m r^2)."""
        i = 0.4 * mass_kg * sphere.radius_m**2
        return Inertial(mass_kg, sphere.xyz_m, (i, 0.0, 0.0, i, 0.0, i))


@dataclass(frozen=True)
class Link:
    """A rigid body: inertial, collision shapes (also used as visuals) and a material name."""

    name: str
    inertial: Optional[Inertial] = None
    shapes: tuple[Shape, ...] = ()
    material: str = "grey"


@dataclass(frozen=True)
class Joint:
    """A joint (child frame pose in the parent frame). `axis=None` means a fixed joint."""

    name: str
    parent: str
    child: str
    xyz_m: Vec3 = ZERO3
    rpy_rad: Vec3 = ZERO3
    axis: Optional[Vec3] = None
    lower_rad: float = 0.0
    upper_rad: float = 0.0
    velocity_rad_s: float = 0.0
    effort_nm: float = 0.0


MATERIALS = {"white": (0.9, 0.9, 0.9, 1.0), "grey": (0.5, 0.5, 0.5, 1.0), "black": (0.15, 0.15, 0.15, 1.0)}


def _spheres(radius_m: float, *centres_m: Vec3) -> tuple[Sphere, ...]:
    return tuple(Sphere(radius_m, c) for c in centres_m)


# ---------------------------------------------------------------------------------------------------
# FR3 arm
#: (xyz m, rpy rad) of fr3_joint1..7; equal to Franka's Craig DH table (a, d, alpha).
FR3_JOINT_ORIGINS: tuple[tuple[Vec3, Vec3], ...] = (
    ((0.0, 0.0, 0.333), ZERO3),
    (ZERO3, (-PI / 2, 0.0, 0.0)),
    ((0.0, -0.316, 0.0), (PI / 2, 0.0, 0.0)),
    ((0.0825, 0.0, 0.0), (PI / 2, 0.0, 0.0)),
    ((-0.0825, 0.384, 0.0), (-PI / 2, 0.0, 0.0)),
    (ZERO3, (PI / 2, 0.0, 0.0)),
    ((0.088, 0.0, 0.0), (PI / 2, 0.0, 0.0)),
)
FR3_LOWER_RAD = (-2.3093, -1.5133, -2.4937, -2.7478, -2.4800, 0.8521, -2.6895)  #: "rectangular" limits
FR3_UPPER_RAD = (2.3093, 1.5133, 2.4937, -0.4461, 2.4800, 4.2094, 2.6895)
FR3_VELOCITY_RAD_S = (2.0, 1.0, 1.5, 1.25, 3.0, 1.5, 3.0)
FR3_EFFORT_NM = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)
FR3_FLANGE_Z_M = 0.107

#: franka_description inertials (com m, mass kg, inertia kg m^2 ixx ixy ixz iyy iyz izz).
FR3_INERTIALS: dict[str, Inertial] = {
    "fr3_link0": Inertial(2.3966, (-0.0172, 0.0004, 0.0745), (0.009, 0.0, 0.002, 0.0115, 0.0, 0.0085)),
    "fr3_link1": Inertial(2.927465, (4.128e-7, -0.01812513, -0.0386036),
                          (0.02392732, 1.331790e-5, -1.140477e-4, 0.02248216, -0.001995032, 0.006350098)),
    "fr3_link2": Inertial(2.935537, (0.003182886, -0.07432216, 0.008814608),
                          (0.04193895, 2.025733e-4, 0.004077784, 0.02514515, -0.004225216, 0.06170214)),
    "fr3_link3": Inertial(2.244901, (0.04070157, -0.004820057, -0.02897308),
                          (0.02410143, 0.002404695, -0.002856269, 0.01974053, -0.002104213, 0.01904449)),
    "fr3_link4": Inertial(2.615596, (-0.0459101, 0.0630493, -0.008518787),
                          (0.03452998, 0.01322552, 0.01015143, 0.02888162, -9.762834e-4, 0.04125471)),
    "fr3_link5": Inertial(2.327121, (-0.00160396, 0.02925363, -0.0972966),
                          (0.05161028, -0.005715173, -0.003567317, 0.0478773, 0.01067399, 0.01642363)),
    "fr3_link6": Inertial(1.817038, (0.05971312, -0.04102947, -0.01016927),
                          (0.005412334, 0.006193456, 0.001421929, 0.01405833, -0.001314075, 0.01608082)),
    "fr3_link7": Inertial(0.6271433, (0.004522582, 0.008626192, -0.01616333),
                          (2.109239e-4, -2.433299e-5, 4.564480e-5, 1.771857e-4, 8.744070e-5, 5.993191e-5)),
}

#: cuRobo collision spheres of the arm (Get a Grip fr3_algr_zed2i sphere set; link7's last six cover the mount).
FR3_SPHERES: dict[str, tuple[Sphere, ...]] = {
    "fr3_link0": _spheres(0.075, (0, 0, 0), (0, 0, 0.075), (0, 0, 0.15)),
    "fr3_link1": _spheres(0.06, (0, 0, 0), (0, -0.035, 0.053), (0, 0.022, 0.053), (0, 0.097, 0.053), (0, 0.12, 0.053)),
    "fr3_link2": _spheres(0.06, (0, 0, 0), (0, -0.053, -0.053))
    + _spheres(0.065, (0, -0.128, -0.065), (0, -0.183, -0.065)),
    "fr3_link3": _spheres(0.06, (0, -0.01, 0), (0.053, -0.01, 0.053), (0.075, -0.01, 0.053), (0.075, 0.043, 0.053),
                          (0.075, -0.073, 0.053)),
    "fr3_link4": _spheres(0.06, (-0.05, 0.03, -0.02), (-0.05, 0.065, -0.02), (-0.05, 0.09, -0.02),
                          (-0.05, 0.125, -0.02))
    + _spheres(0.05, (-0.05, 0.15, -0.04), (-0.05, 0.175, -0.06))
    + _spheres(0.04, (-0.05, 0.175, -0.08), (-0.05, 0.195, -0.08)),
    "fr3_link5": _spheres(0.035, (0, 0.0475, 0), (0, 0.0475, 0.0375), (0, 0.0475, 0.075))
    + _spheres(0.06, (0, 0.0475, 0.115), (0, 0, 0.115), (0, -0.0475, 0.115)),
    "fr3_link6": _spheres(0.075, (0, 0, 0), (0.03, 0.02, 0)),
    "fr3_link7": _spheres(0.06, (0, 0, 0)) + _spheres(0.035, (0.03, 0.05, 0), (0.05, 0.03, 0))
    + _spheres(0.03, (0, 0.102, 0.045), (-0.02, 0.082, 0.045), (-0.04, 0.062, 0.045), (-0.06, 0.042, 0.045),
               (-0.08, 0.022, 0.045), (-0.10, 0.002, 0.045)),
}

# ---------------------------------------------------------------------------------------------------
# Mount: flange -> connector -> palm_link / zed2i -> optical frames (Get a Grip's fr3_algr_zed2i model)
#: Connector: our estimate (no published geometry): a plate from the camera mount face (x = -0.05568) to the
#: palm's wrist face (x = 0.13398 - 0.095), flange-diameter wide, 0.02 m thick.
CONNECTOR_BOX = Box((0.0947, 0.063, 0.02), (-0.00835, 0.0, 0.01))
CONNECTOR_MASS_KG = 0.070
#: ZED 2i body box (0.04308 along the optical axis x, 0.17525 along the baseline y, 0.02913 tall), centred on
#: the published centre of mass; this puts the bottom face at z = 0 and both lenses inside the body.
ZED2I_BOX = Box((0.04308, 0.17525, 0.02913), (-0.003774, 0.0, 0.014944))
ZED2I_MASS_KG = 0.230
OPTICAL_RPY_RAD: Vec3 = (-PI / 2, 0.0, -PI / 2)  #: camera body (x fwd) -> ROS optical (z fwd)

MOUNT_JOINTS = (
    Joint("fr3_flange_joint", "fr3_link7", FLANGE_LINK, (0.0, 0.0, FR3_FLANGE_Z_M), (0.0, 0.0, -PI / 4)),
    Joint("connector_fr3_joint", FLANGE_LINK, CONNECTOR_LINK),
    Joint("connector_algr_joint", CONNECTOR_LINK, PALM_LINK, (0.13398, 0.0, 0.0265), (PI, -PI / 2, 0.0)),
    Joint("connector_zed2i_joint", CONNECTOR_LINK, CAMERA_LINK, (-0.05568, 0.0, 0.021803664), (0.0, -PI / 2, 0.0)),
    Joint("zed2i_left_optical_joint", CAMERA_LINK, LEFT_OPTICAL_FRAME, (-0.02, 0.06, 0.015), OPTICAL_RPY_RAD),
    Joint("zed2i_right_optical_joint", CAMERA_LINK, RIGHT_OPTICAL_FRAME, (-0.02, -0.06, 0.015), OPTICAL_RPY_RAD),
)

# ---------------------------------------------------------------------------------------------------
# Allegro right hand v4 (simlab numbers)
HAND_VELOCITY_RAD_S = 7.0
#: 0.7 N m: the value of Get a Grip's cuRobo model (the simlab URDF's 15 is a placeholder).
HAND_EFFORT_NM = 0.7
_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
_FINGER_BASE = {  # first joint index -> (xyz m, rpy rad) of the finger base in palm_link
    0: ((0.0, 0.0435, -0.001542), (-0.08726646255, 0.0, 0.0)),
    4: ((0.0, 0.0, 0.0007), ZERO3),
    8: ((0.0, -0.0435, -0.001542), (0.08726646255, 0.0, 0.0)),
}
_FINGER_LIMITS_RAD = ((-0.47, 0.47), (-0.196, 1.61), (-0.174, 1.709), (-0.227, 1.618))  # abduction, MCP, PIP, DIP
_FINGER_LENGTHS_M = (0.0164, 0.054, 0.0384, 0.0267)  # base, proximal, medial, distal (next joint / tip along z)
_FINGER_MASSES_KG = (0.0119, 0.065, 0.0355, 0.0096)
_PHALANX_SECTION_M = (0.0196, 0.0275)  # box x, y of every phalanx
PALM_BOX = Box((0.0408, 0.1130, 0.095), (-0.0093, 0.0, -0.0475))
PALM_MASS_KG = 0.4154
TIP_SPHERE = Sphere(0.012)
TIP_MASS_KG = 0.0168


def _phalanx_box(length_m: float) -> Box:
    return Box((*_PHALANX_SECTION_M, length_m), (0.0, 0.0, length_m / 2))


def _hand_joint(i: int, parent: str, xyz: Vec3, rpy: Vec3, axis: Vec3, limits: tuple[float, float]) -> Joint:
    return Joint(f"joint_{i}.0", parent, f"link_{i}.0", xyz, rpy, axis, limits[0], limits[1],
                 HAND_VELOCITY_RAD_S, HAND_EFFORT_NM)


def hand_parts() -> tuple[list[Link], list[Joint]]:
    """Links (palm_link first) and joints of the hand, in joint order 0..15 with each tip after its distal."""
    # Inertia of every hand link: uniform solid box of its collision box (tips: solid sphere), masses from simlab.
    links = [Link(PALM_LINK, Inertial.solid_box(PALM_MASS_KG, PALM_BOX), (PALM_BOX,), "black")]
    joints: list[Joint] = []

    def add_tip(distal: int, z_m: float) -> None:
        tip_inertial = Inertial.solid_sphere(TIP_MASS_KG, TIP_SPHERE)
        links.append(Link(f"link_{distal}.0_tip", tip_inertial, (TIP_SPHERE,), "white"))
        joints.append(Joint(f"joint_{distal}.0_tip", f"link_{distal}.0", f"link_{distal}.0_tip", (0.0, 0.0, z_m)))

    for first, (xyz, rpy) in _FINGER_BASE.items():
        for k in range(4):
            box = _phalanx_box(_FINGER_LENGTHS_M[k])
            links.append(Link(f"link_{first + k}.0", Inertial.solid_box(_FINGER_MASSES_KG[k], box), (box,), "black"))
            parent = PALM_LINK if k == 0 else f"link_{first + k - 1}.0"
            origin = (xyz, rpy) if k == 0 else ((0.0, 0.0, _FINGER_LENGTHS_M[k - 1]), ZERO3)
            joints.append(_hand_joint(first + k, parent, *origin, _Z if k == 0 else _Y, _FINGER_LIMITS_RAD[k]))
        add_tip(first + 3, _FINGER_LENGTHS_M[3])

    thumb = (  # (joint xyz m, rpy rad, axis, limits rad, collision box, mass kg) for joints 12..15
        ((-0.0182, 0.019333, -0.045987), (0.0, -1.65806278845, -1.5707963259), (-1.0, 0.0, 0.0), (0.263, 1.396),
         Box((0.0358, 0.034, 0.0455), (-0.0179, 0.009, 0.0145)), 0.0176),
        ((-0.027, 0.005, 0.0399), ZERO3, _Z, (-0.105, 1.163), _phalanx_box(0.0177), 0.0119),
        ((0.0, 0.0, 0.0177), ZERO3, _Y, (-0.189, 1.644), _phalanx_box(0.0514), 0.038),
        ((0.0, 0.0, 0.0514), ZERO3, _Y, (-0.162, 1.719), _phalanx_box(0.0423), 0.0388),
    )
    for k, (xyz, rpy, axis, limits, box, mass) in enumerate(thumb):
        links.append(Link(f"link_{12 + k}.0", Inertial.solid_box(mass, box), (box,), "black"))
        joints.append(_hand_joint(12 + k, PALM_LINK if k == 0 else f"link_{11 + k}.0", xyz, rpy, axis, limits))
    add_tip(15, 0.0423)
    return links, joints


def arm_parts() -> tuple[list[Link], list[Joint]]:
    """Links (fr3_link0 first) and joints of the arm and the flange/connector/camera mount (no hand)."""
    names = [f"fr3_link{i}" for i in range(8)]
    links = [Link(name, FR3_INERTIALS[name], FR3_SPHERES[name], "white") for name in names]
    joints = [
        Joint(name, f"fr3_link{i}", f"fr3_link{i + 1}", *FR3_JOINT_ORIGINS[i], _Z, FR3_LOWER_RAD[i], FR3_UPPER_RAD[i],
              FR3_VELOCITY_RAD_S[i], FR3_EFFORT_NM[i])
        for i, name in enumerate(ARM_JOINT_NAMES)
    ]
    links += [
        Link(FLANGE_LINK),
        Link(CONNECTOR_LINK, Inertial.solid_box(CONNECTOR_MASS_KG, CONNECTOR_BOX), (CONNECTOR_BOX,)),
        # zed2i: published mass and centre of mass; inertia of a uniform solid box (ZED2I_BOX).
        Link(CAMERA_LINK, Inertial.solid_box(ZED2I_MASS_KG, ZED2I_BOX), (ZED2I_BOX,)),
        Link(LEFT_OPTICAL_FRAME),
        Link(RIGHT_OPTICAL_FRAME),
    ]
    return links, joints + list(MOUNT_JOINTS)


# ---------------------------------------------------------------------------------------------------
# URDF text
HEADER = "<!-- generated by getagrip_ros.robot.description; do not edit -->"


def _f(value: float) -> str:
    text = f"{value:.12g}"
    return "0" if text == "-0" else text


def _v(values: Sequence[float]) -> str:
    return " ".join(_f(v) for v in values)


def _geometry(shape: Shape) -> str:
    if isinstance(shape, Box):
        return f'<box size="{_v(shape.size_m)}"/>'
    return f'<sphere radius="{_f(shape.radius_m)}"/>'


def _link_xml(link: Link) -> list[str]:
    if link.inertial is None and not link.shapes:
        return [f'  <link name="{link.name}"/>']
    out = [f'  <link name="{link.name}">']
    if link.inertial is not None:
        i = link.inertial
        names = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        out += ["    <inertial>", f'      <origin xyz="{_v(i.com_m)}" rpy="0 0 0"/>',
                f'      <mass value="{_f(i.mass_kg)}"/>',
                "      <inertia " + " ".join(f'{n}="{_f(x)}"' for n, x in zip(names, i.inertia_kg_m2)) + "/>",
                "    </inertial>"]
    for tag in ("visual", "collision"):
        for shape in link.shapes:
            out += [f"    <{tag}>", f'      <origin xyz="{_v(shape.xyz_m)}" rpy="0 0 0"/>',
                    f"      <geometry>{_geometry(shape)}</geometry>"]
            if tag == "visual":
                out.append(f'      <material name="{link.material}"/>')
            out.append(f"    </{tag}>")
    return out + ["  </link>"]


def _joint_xml(joint: Joint) -> list[str]:
    kind = "fixed" if joint.axis is None else "revolute"
    out = [f'  <joint name="{joint.name}" type="{kind}">', f'    <parent link="{joint.parent}"/>',
           f'    <child link="{joint.child}"/>', f'    <origin xyz="{_v(joint.xyz_m)}" rpy="{_v(joint.rpy_rad)}"/>']
    if joint.axis is not None:
        out += [f'    <axis xyz="{_v(joint.axis)}"/>',
                f'    <limit lower="{_f(joint.lower_rad)}" upper="{_f(joint.upper_rad)}" '
                f'velocity="{_f(joint.velocity_rad_s)}" effort="{_f(joint.effort_nm)}"/>']
    return out + ["  </joint>"]


def _urdf(robot_name: str, sections: Sequence[tuple[str, list[Link], list[Joint]]]) -> str:
    """URDF text; each section = (comment, links, joints); a link is written right after the joint that makes it."""
    out = ['<?xml version="1.0"?>', HEADER, f'<robot name="{robot_name}">']
    out += [f'  <material name="{n}"><color rgba="{_v(c)}"/></material>' for n, c in MATERIALS.items()]
    written: set[str] = set()
    for comment, links, joints in sections:
        by_name = {link.name: link for link in links}
        out += ["", "  <!-- " + "\n       ".join(comment.split("\n")) + " -->"]
        roots = [n for n in by_name if n not in {j.child for j in joints} and n not in written]
        for name in roots:
            out += _link_xml(by_name[name])
            written.add(name)
        for joint in joints:
            out += _joint_xml(joint)
            if joint.child in by_name and joint.child not in written:
                out += _link_xml(by_name[joint.child])
                written.add(joint.child)
    return "\n".join(out + ["</robot>", ""])


_ARM_COMMENT = ("FR3: joint origins = Craig DH table; limits = Franka 'rectangular' position/velocity limits;\n"
                "inertials = franka_description (as in franky-sim 1.0.4); collision = cuRobo spheres (metres).\n"
                "Mount as Get a Grip's fr3_algr_zed2i; connector box is an estimate, zed2i box centred on its COM.")
_HAND_COMMENT = ("Allegro right hand v4, simlab names and numbers; effort 0.7 N m = Get a Grip's cuRobo model.\n"
                 "Inertia = uniform solid box of each collision box (tips: solid sphere), simlab masses.")


def fr3_algr_zed2i_urdf() -> str:
    """URDF of the whole robot (root fr3_link0)."""
    return _urdf("fr3_algr_zed2i", [(_ARM_COMMENT, *arm_parts()), (_HAND_COMMENT, *hand_parts())])


def allegro_right_urdf() -> str:
    """URDF of the hand alone (root palm_link), e.g. for a floating hand."""
    return _urdf("allegro_right", [(_HAND_COMMENT, *hand_parts())])


def write_urdfs(out_dir: Union[str, Path]) -> list[Path]:
    """(Re)write fr3_algr_zed2i.urdf and allegro_right.urdf into `out_dir`; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    texts = {out / FULL_URDF_NAME: fr3_algr_zed2i_urdf(), out / HAND_URDF_NAME: allegro_right_urdf()}
    for path, text in texts.items():
        path.write_text(text)
    return list(texts)


def load_curobo_config(path: Union[str, Path, None] = None) -> dict:
    """Read the cuRobo robot YAML (default: config/fr3_algr_zed2i_curobo.yml) with urdf/asset paths made absolute.

    The YAML's `urdf_path` and `asset_root_path` are relative to this package's urdf/ folder; cuRobo keeps
    absolute paths as they are.
    """
    import yaml

    from getagrip_ros import paths

    cfg_path = Path(path) if path is not None else paths.config_path(CUROBO_CONFIG_NAME)
    with open(cfg_path, encoding="utf-8") as stream:
        cfg = yaml.safe_load(stream)
    kinematics = cfg["robot_cfg"]["kinematics"]
    urdf_dir = paths.share_dir() / "urdf"
    kinematics["urdf_path"] = str((urdf_dir / kinematics["urdf_path"]).resolve())
    kinematics["asset_root_path"] = str((urdf_dir / kinematics.get("asset_root_path", ".")).resolve())
    return cfg


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Write the generated URDFs of the FR3 + Allegro + ZED 2i robot.")
    parser.add_argument("--out", default="urdf", help="output folder (default: ./urdf)")
    for path in write_urdfs(parser.parse_args(argv).out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
