"""Named object sets with train/val/test splits by object, and user mesh files.

Sets: "procedural" (80 seeded members of each procedural family, 800 objects), "pybullet-random"
(the 1000 random meshes shipped in the pybullet wheel's ``pybullet_data/random_urdfs``) and
"tabletop-20" (procedural stand-ins for the 20 real objects of the paper's hardware test, Table 4).
Listing is cheap: meshes are built or loaded only by ``prepare_object``.
"""

from __future__ import annotations

import hashlib
import math
import xml.etree.ElementTree as ET
from functools import lru_cache
from pathlib import Path
from typing import Literal, Optional, Union

import numpy as np
import trimesh

from getagrip_ros.objects.mesh_object import MeshFile, ObjectSpec
from getagrip_ros.objects.procedural import (FAMILIES, BottleShape, BowlShape, BoxShape, CapsuleShape, CompositeShape,
                                             CupShape, CylinderShape, BlobShape, MugShape, PlacedShape, RevolvedShape,
                                             Shape, SphereShape, sample_shape)

SETS = ("procedural", "pybullet-random", "tabletop-20")
SPLITS = ("train", "val", "test")
PROCEDURAL_PER_FAMILY = 80
DIFFICULTIES = ("easy", "medium", "hard")

SPLIT_FRACTIONS: dict[str, tuple[float, float, float]] = {
    "procedural": (0.8, 0.1, 0.1),
    "pybullet-random": (0.8, 0.1, 0.1),
    "tabletop-20": (0.0, 0.0, 1.0),  # the paper's real objects are unseen test objects only
}
"""(train, val, test) fractions per set; an object's split comes from a hash of its name."""


def split_of(name: str, fractions: tuple[float, float, float]) -> str:
    """"train", "val" or "test" for object `name`: a fixed function of the name, so splits never overlap."""
    u = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") / 2.0**64
    if u < fractions[0]:
        return "train"
    return "val" if u < fractions[0] + fractions[1] else "test"


def _procedural() -> list[ObjectSpec]:
    return [ObjectSpec(f"procedural/{family}_{seed:04d}", "procedural", sample_shape(family, seed), (family,))
            for family in FAMILIES for seed in range(PROCEDURAL_PER_FAMILY)]


def pybullet_random_dir() -> Path:
    """Folder of the pybullet wheel's random objects (000/000.urdf ... 999/999.urdf)."""
    try:
        import pybullet_data
    except ImportError as exc:
        raise FileNotFoundError("the 'pybullet-random' set needs the pybullet package (pip install pybullet)") from exc
    path = Path(pybullet_data.getDataPath()) / "random_urdfs"
    if not path.is_dir():
        raise FileNotFoundError(f"pybullet random objects not found at {path}")
    return path


def _urdf_mesh(urdf: Path) -> MeshFile:
    """The collision mesh file and scale of a one-link URDF."""
    try:
        root = ET.parse(urdf).getroot()
    except ET.ParseError as exc:
        raise ValueError(f"{urdf}: not valid XML ({exc})") from exc
    mesh = root.find(".//collision/geometry/mesh")
    if mesh is None:
        mesh = root.find(".//visual/geometry/mesh")
    if mesh is None or not mesh.get("filename"):
        raise ValueError(f"{urdf}: no <mesh filename=...> in a collision or visual geometry")
    scale = tuple(float(s) for s in mesh.get("scale", "1 1 1").split())
    if len(scale) != 3:
        raise ValueError(f"{urdf}: mesh scale must have 3 numbers, got {mesh.get('scale')!r}")
    return MeshFile(str(urdf.parent / mesh.get("filename")), scale)


def _pybullet_random() -> list[ObjectSpec]:
    folders = sorted(p for p in pybullet_random_dir().iterdir() if p.is_dir())
    return [ObjectSpec(f"pybullet/{f.name}", "pybullet", _urdf_mesh(f / f"{f.name}.urdf")) for f in folders]


def _placed(shape: Shape, x: float = 0.0, y: float = 0.0, z: float = 0.0, roll: float = 0.0, pitch: float = 0.0,
            yaw: float = 0.0) -> PlacedShape:
    return PlacedShape(shape, (x, y, z), (roll, pitch, yaw))


def _ball(centre_m: tuple[float, float, float], radius_m: float) -> PlacedShape:
    """A sphere centred at `centre_m`."""
    return _placed(SphereShape(radius_m), centre_m[0], centre_m[1], centre_m[2] - radius_m)


def _limb(start_m: tuple[float, float, float], end_m: tuple[float, float, float], radius_m: float) -> PlacedShape:
    """A capsule whose cap centres are `start_m` and `end_m`."""
    start, end = np.asarray(start_m), np.asarray(end_m)
    dx, dy, dz = end - start
    pitch, yaw = -math.atan2(dz, math.hypot(dx, dy)), math.atan2(dy, dx)
    # The capsule's own frame has its axis along x through (0, 0, radius); rotate it, then centre it.
    rotation = trimesh.transformations.euler_matrix(0.0, pitch, yaw, axes="sxyz")[:3, :3]
    pos = (start + end) / 2 - rotation @ np.array([0.0, 0.0, radius_m])
    capsule = CapsuleShape(radius_m, float(np.linalg.norm(end - start)) + 2 * radius_m)
    return _placed(capsule, *(float(p) for p in pos), pitch=pitch, yaw=yaw)


def _tabletop20() -> list[ObjectSpec]:
    """Stand-ins for the paper's 20 hardware objects with its difficulty labels (Table 4 / App. E.2).

    Easy: simple round or boxy shapes graspable from most directions. Medium: distractors (handle,
    nozzle), thin directions or a narrow stem. Hard: non-convex figurines and out-of-distribution
    tools (strainer, mallet). Sizes follow typical real objects.
    """
    half_pi = math.pi / 2
    objects = {
        "easy": {
            "apple": RevolvedShape(((0, 0.004), (0.012, 0.0), (0.028, 0.006), (0.038, 0.02), (0.041, 0.036),
                                    (0.038, 0.052), (0.03, 0.065), (0.016, 0.073), (0.006, 0.072), (0, 0.066))),
            "cube": BoxShape((0.06, 0.06, 0.06)),
            "yellow_cup": CupShape(0.03, 0.04, 0.10, 0.003, 0.006),
            "conditioner": BottleShape(0.03, 0.15, 0.02, 0.015, 0.025),
            "green_tea": BoxShape((0.075, 0.065, 0.13)),
            "purple_cup": CupShape(0.035, 0.035, 0.085, 0.004, 0.008),
        },
        "medium": {
            "red_mug": MugShape(CupShape(0.04, 0.04, 0.095, 0.005, 0.008), 0.028, 0.007, 0.05),
            "goblet": RevolvedShape(((0, 0), (0.035, 0), (0.035, 0.005), (0.008, 0.008), (0.006, 0.02), (0.006, 0.085),
                                     (0.02, 0.095), (0.034, 0.11), (0.041, 0.13), (0.042, 0.17), (0.038, 0.17),
                                     (0.037, 0.13), (0.03, 0.113), (0.016, 0.102), (0, 0.099))),
            "spray_bottle": CompositeShape((
                _placed(BottleShape(0.035, 0.14, 0.02, 0.014, 0.02)),
                _placed(BoxShape((0.07, 0.03, 0.045)), x=0.015, z=0.175),
                _placed(CylinderShape(0.006, 0.02), x=0.045, z=0.2, pitch=half_pi),
                _placed(BoxShape((0.012, 0.02, 0.05)), x=0.042, z=0.13),
            )),
            "milk_carton": CompositeShape((
                _placed(BoxShape((0.07, 0.07, 0.19))),
                _placed(BoxShape((0.07, 0.008, 0.02)), z=0.185),
            )),
            "red_box": BoxShape((0.18, 0.12, 0.045)),
            "lunchbox": CompositeShape((
                _placed(BoxShape((0.18, 0.06, 0.12))),
                _placed(BoxShape((0.186, 0.066, 0.014)), z=0.1),
            )),
        },
        "hard": {
            "dragon": CompositeShape((
                _placed(BlobShape((0.12, 0.06, 0.07), 0.25, seed=11)),
                _limb((0.04, 0.0, 0.04), (0.08, 0.0, 0.09), 0.012),
                _ball((0.09, 0.0, 0.1), 0.022),
                _limb((-0.045, 0.0, 0.02), (-0.13, 0.03, 0.012), 0.01),
                _placed(BoxShape((0.06, 0.004, 0.05)), x=-0.01, y=0.02, z=0.045, roll=-math.radians(35)),
                _placed(BoxShape((0.06, 0.004, 0.05)), x=-0.01, y=-0.02, z=0.045, roll=math.radians(35)),
            )),
            "goggles": CompositeShape((
                _placed(CylinderShape(0.028, 0.025), x=-0.035),
                _placed(CylinderShape(0.028, 0.025), x=0.035),
                _placed(BoxShape((0.03, 0.015, 0.012)), z=0.008),
                _placed(BoxShape((0.17, 0.006, 0.02)), y=0.026),
            )),
            "minion": CompositeShape((
                _placed(RevolvedShape(((0, 0), (0.03, 0), (0.03, 0.07), (0.027, 0.085), (0.018, 0.096), (0, 0.1)))),
                _placed(CylinderShape(0.032, 0.012), z=0.062),
                _placed(CylinderShape(0.013, 0.01), x=0.027, z=0.068, pitch=half_pi),
                _limb((0.0, 0.028, 0.05), (0.01, 0.045, 0.02), 0.006),
                _limb((0.0, -0.028, 0.05), (0.01, -0.045, 0.02), 0.006),
            )),
            "strainer": CompositeShape((
                _placed(BowlShape(0.07, 0.05, 0.003, 0.03)),
                _placed(BoxShape((0.12, 0.015, 0.006)), x=0.125, z=0.044),
                _placed(BoxShape((0.02, 0.015, 0.006)), x=-0.075, z=0.044),
            )),
            "bunny": CompositeShape((
                _placed(BlobShape((0.09, 0.07, 0.07), 0.15, seed=3)),
                _ball((0.035, 0.0, 0.068), 0.028),
                _limb((0.03, 0.01, 0.085), (0.02, 0.025, 0.14), 0.008),
                _limb((0.03, -0.01, 0.085), (0.02, -0.025, 0.14), 0.008),
            )),
            "squirrel": CompositeShape((
                _placed(BlobShape((0.07, 0.06, 0.08), 0.15, seed=5)),
                _ball((0.025, 0.0, 0.07), 0.024),
                _placed(BlobShape((0.04, 0.05, 0.12), 0.2, seed=7), x=-0.035),
            )),
            "dino": CompositeShape((
                _placed(CapsuleShape(0.025, 0.14), z=0.025),
                *[_placed(CylinderShape(0.008, 0.032), x=sx * 0.035, y=sy * 0.015) for sx in (-1, 1) for sy in (-1, 1)],
                _limb((0.06, 0.0, 0.05), (0.085, 0.0, 0.09), 0.01),
                _ball((0.095, 0.0, 0.095), 0.017),
                _limb((-0.065, 0.0, 0.05), (-0.12, 0.0, 0.02), 0.01),
            )),
            "mallet": CompositeShape((
                _placed(CylinderShape(0.03, 0.10), y=0.05, z=0.03, roll=half_pi),
                _placed(CylinderShape(0.013, 0.22), z=0.03, pitch=half_pi + math.atan2(0.017, 0.22)),
            )),
        },
    }
    return [ObjectSpec(f"tabletop20/{name}", "tabletop20", shape, (difficulty,))
            for difficulty, shapes in objects.items() for name, shape in shapes.items()]


_BUILDERS = {"procedural": _procedural, "pybullet-random": _pybullet_random, "tabletop-20": _tabletop20}


@lru_cache(maxsize=None)
def _set_specs(set_name: str) -> tuple[ObjectSpec, ...]:
    return tuple(_BUILDERS[set_name]())


def list_objects(set_name: str, split: Optional[str] = None) -> list[ObjectSpec]:
    """Specs of a named set (one of SETS), optionally only one split ("train", "val", "test")."""
    if set_name not in _BUILDERS:
        raise ValueError(f"unknown object set '{set_name}' (known: {', '.join(SETS)})")
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split '{split}' (known: {', '.join(SPLITS)})")
    specs = _set_specs(set_name)
    if split is None:
        return list(specs)
    return [s for s in specs if split_of(s.name, SPLIT_FRACTIONS[set_name]) == split]


def object_by_name(name: str) -> ObjectSpec:
    """The catalog spec called `name` (e.g. "procedural/mug_0003", "pybullet/042", "tabletop20/goblet")."""
    prefix = name.split("/", 1)[0]
    set_name = {"procedural": "procedural", "pybullet": "pybullet-random", "tabletop20": "tabletop-20"}.get(prefix)
    matches = [s for s in _set_specs(set_name) if s.name == name] if set_name else []
    if not matches:
        raise ValueError(f"no catalog object named '{name}' (names start with procedural/, pybullet/ or tabletop20/)")
    return matches[0]


def user_object(path: Union[str, Path], scale: Union[float, tuple[float, float, float]] = 1.0,
                resting_pose: Literal["most_stable", "as_given"] = "most_stable") -> ObjectSpec:
    """Spec "user/<file stem>" (blanks -> "_") for a mesh file (obj/stl/ply/glb); `scale`: file units to metres."""
    path = Path(path)
    name = "_".join(path.stem.split())
    scale_xyz = (float(scale),) * 3 if isinstance(scale, (int, float)) else tuple(float(s) for s in scale)
    return ObjectSpec(f"user/{name}", "user", MeshFile(str(path), scale_xyz, resting_pose))
