"""Deterministic procedural object shapes, built as watertight triangle meshes.

Every shape is a frozen dataclass of explicit dimensions (metres) whose ``mesh()`` builds the
surface in the shape's own frame: z up, resting upright with its base on the plane z = 0 and its
rotation axis (if any) on the z axis. Hollow shapes (cups, mugs, bowls) are closed solids with an
open cavity, never zero-thickness surfaces. ``sample_shape(family, rng)`` draws the dimensions of
one family member from a seeded generator, so a (family, seed) pair always gives the same mesh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

import numpy as np
import trimesh

SECTIONS = 48
"""Facets around every round shape (cylinders, revolved profiles, tori)."""

FAMILIES = ("box", "cylinder", "sphere", "capsule", "cup", "mug", "bottle", "bowl", "irregular", "composite")


def _positive(owner: object, **values: float) -> None:
    for key, value in values.items():
        if not np.isfinite(value) or value <= 0:
            raise ValueError(f"{type(owner).__name__}: {key} must be a positive finite number, got {value}")


def _revolve(profile_rz_m: np.ndarray) -> trimesh.Trimesh:
    """Solid of revolution about z of a closed (r, z) profile that starts and ends on the axis."""
    mesh = trimesh.creation.revolve(np.asarray(profile_rz_m, dtype=float), sections=SECTIONS)
    if mesh.volume < 0:
        mesh.invert()
    return mesh


def _union(meshes: list[trimesh.Trimesh]) -> trimesh.Trimesh:
    return trimesh.boolean.union(meshes, engine="manifold")


@dataclass(frozen=True)
class BoxShape:
    """Axis-aligned box resting on its bottom face."""

    size_m: tuple[float, float, float]

    def __post_init__(self) -> None:
        _positive(self, size_x_m=self.size_m[0], size_y_m=self.size_m[1], size_z_m=self.size_m[2])

    def mesh(self) -> trimesh.Trimesh:
        box = trimesh.creation.box(extents=self.size_m)
        box.apply_translation([0.0, 0.0, self.size_m[2] / 2])
        return box


@dataclass(frozen=True)
class CylinderShape:
    """Upright cylinder (axis z) standing on its flat end."""

    radius_m: float
    height_m: float

    def __post_init__(self) -> None:
        _positive(self, radius_m=self.radius_m, height_m=self.height_m)

    def mesh(self) -> trimesh.Trimesh:
        return _revolve(np.array([[0, 0], [self.radius_m, 0], [self.radius_m, self.height_m], [0, self.height_m]]))


@dataclass(frozen=True)
class SphereShape:
    """Sphere resting on the plane."""

    radius_m: float

    def __post_init__(self) -> None:
        _positive(self, radius_m=self.radius_m)

    def mesh(self) -> trimesh.Trimesh:
        sphere = trimesh.creation.icosphere(subdivisions=3, radius=self.radius_m)
        sphere.apply_translation([0.0, 0.0, -sphere.bounds[0, 2]])
        return sphere


@dataclass(frozen=True)
class CapsuleShape:
    """Capsule lying on its side, axis along x (a capsule cannot stand on its round end)."""

    radius_m: float
    length_m: float
    """End-to-end length including both hemispherical caps."""

    def __post_init__(self) -> None:
        _positive(self, radius_m=self.radius_m, length_m=self.length_m)
        if self.length_m <= 2 * self.radius_m:
            raise ValueError(f"CapsuleShape: length_m {self.length_m} must exceed the diameter {2 * self.radius_m}")

    def mesh(self) -> trimesh.Trimesh:
        capsule = trimesh.creation.capsule(height=self.length_m - 2 * self.radius_m, radius=self.radius_m, count=[24, 24])
        capsule.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [0, 1, 0]))
        capsule.apply_translation([0.0, 0.0, self.radius_m])
        return capsule


@dataclass(frozen=True)
class CupShape:
    """Open-top cup: a (possibly tapered) hollow cylinder with a solid bottom."""

    bottom_radius_m: float
    top_radius_m: float
    height_m: float
    wall_m: float
    bottom_thickness_m: float

    def __post_init__(self) -> None:
        _positive(self, bottom_radius_m=self.bottom_radius_m, top_radius_m=self.top_radius_m, height_m=self.height_m,
                  wall_m=self.wall_m, bottom_thickness_m=self.bottom_thickness_m)
        if self.wall_m >= 0.5 * min(self.bottom_radius_m, self.top_radius_m):
            raise ValueError(f"CupShape: wall_m {self.wall_m} leaves no cavity inside radius "
                             f"{min(self.bottom_radius_m, self.top_radius_m)}")
        if self.bottom_thickness_m >= 0.5 * self.height_m:
            raise ValueError(f"CupShape: bottom_thickness_m {self.bottom_thickness_m} is over half the "
                             f"height {self.height_m}")

    def outer_radius_at(self, z_m: float) -> float:
        """Outer radius of the wall at height z_m above the base."""
        return self.bottom_radius_m + (self.top_radius_m - self.bottom_radius_m) * z_m / self.height_m

    def mesh(self) -> trimesh.Trimesh:
        rb, rt, h, w, b = self.bottom_radius_m, self.top_radius_m, self.height_m, self.wall_m, self.bottom_thickness_m
        inner_bottom = self.outer_radius_at(b) - w
        return _revolve(np.array([[0, 0], [rb, 0], [rt, h], [rt - w, h], [inner_bottom, b], [0, b]]))


@dataclass(frozen=True)
class MugShape:
    """A cup with a handle: a torus section (in the xz plane, on the +x side) fused to the wall.

    The handle sticks out 1.5 x handle_radius_m + handle_thickness_m beyond the wall's mid-surface.
    """

    cup: CupShape
    handle_radius_m: float
    """Radius of the handle's centre line (half the handle's inner height plus its thickness)."""
    handle_thickness_m: float
    """Radius of the handle's round cross-section."""
    handle_centre_z_m: float

    def __post_init__(self) -> None:
        _positive(self, handle_radius_m=self.handle_radius_m, handle_thickness_m=self.handle_thickness_m,
                  handle_centre_z_m=self.handle_centre_z_m)
        reach = self.handle_radius_m + self.handle_thickness_m
        if self.handle_centre_z_m - reach < 0 or self.handle_centre_z_m + reach > self.cup.height_m:
            low, high = self.handle_centre_z_m - reach, self.handle_centre_z_m + reach
            raise ValueError(f"MugShape: handle spans z {low:.3f}..{high:.3f} m, outside the cup's height "
                             f"0..{self.cup.height_m} m")

    def mesh(self) -> trimesh.Trimesh:
        cup = self.cup
        wall_mid_r = cup.outer_radius_at(self.handle_centre_z_m) - cup.wall_m / 2
        handle = trimesh.creation.torus(self.handle_radius_m, self.handle_thickness_m, major_sections=SECTIONS,
                                        minor_sections=16)
        handle.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [1, 0, 0]))
        # The ring crosses the wall; the part inside the wall's mid-surface is cut away, leaving a C
        # shape fused to the wall at both ends.
        handle.apply_translation([wall_mid_r + 0.5 * self.handle_radius_m, 0.0, self.handle_centre_z_m])
        r_mid_bottom, r_mid_top = cup.bottom_radius_m - cup.wall_m / 2, cup.top_radius_m - cup.wall_m / 2
        cutter = _revolve(np.array([[0, -0.01], [r_mid_bottom, -0.01], [r_mid_bottom, 0], [r_mid_top, cup.height_m],
                                    [r_mid_top, cup.height_m + 0.01], [0, cup.height_m + 0.01]]))
        handle = trimesh.boolean.difference([handle, cutter], engine="manifold")
        return _union([cup.mesh(), handle])


@dataclass(frozen=True)
class BottleShape:
    """Solid (capped) bottle: a cylindrical body, a smooth shoulder and a narrow neck."""

    body_radius_m: float
    body_height_m: float
    shoulder_height_m: float
    neck_radius_m: float
    neck_height_m: float

    def __post_init__(self) -> None:
        _positive(self, body_radius_m=self.body_radius_m, body_height_m=self.body_height_m,
                  shoulder_height_m=self.shoulder_height_m, neck_radius_m=self.neck_radius_m,
                  neck_height_m=self.neck_height_m)
        if self.neck_radius_m >= self.body_radius_m:
            raise ValueError(f"BottleShape: neck_radius_m {self.neck_radius_m} must be below "
                             f"body_radius_m {self.body_radius_m}")

    @property
    def height_m(self) -> float:
        return self.body_height_m + self.shoulder_height_m + self.neck_height_m

    def mesh(self) -> trimesh.Trimesh:
        r, rn, hb, hs = self.body_radius_m, self.neck_radius_m, self.body_height_m, self.shoulder_height_m
        t = np.linspace(0, 1, 9)[1:-1]
        shoulder = np.stack([rn + (r - rn) * 0.5 * (1 + np.cos(np.pi * t)), hb + hs * t], axis=1)
        profile = np.vstack([[0, 0], [r, 0], [r, hb], shoulder, [rn, hb + hs], [rn, self.height_m], [0, self.height_m]])
        return _revolve(profile)


@dataclass(frozen=True)
class BowlShape:
    """Open bowl: a half-ellipse wall of constant thickness on a flat foot."""

    rim_radius_m: float
    height_m: float
    wall_m: float
    foot_radius_m: float

    def __post_init__(self) -> None:
        _positive(self, rim_radius_m=self.rim_radius_m, height_m=self.height_m, wall_m=self.wall_m,
                  foot_radius_m=self.foot_radius_m)
        if not self.foot_radius_m < 0.9 * self.rim_radius_m:
            raise ValueError(f"BowlShape: foot_radius_m {self.foot_radius_m} must be below 0.9 x "
                             f"rim_radius_m {self.rim_radius_m}")
        if self.wall_m >= 0.3 * self.height_m:
            raise ValueError(f"BowlShape: wall_m {self.wall_m} is too thick for height_m {self.height_m}")

    def mesh(self) -> trimesh.Trimesh:
        big_r, h, w, rf = self.rim_radius_m, self.height_m, self.wall_m, self.foot_radius_m
        # Outer wall: quarter ellipse centred at (0, h) with semi-axes (big_r, h), from the foot to the rim.
        theta_foot = np.arcsin(rf / big_r)
        theta = np.linspace(theta_foot, np.pi / 2, 16)
        outer = np.stack([big_r * np.sin(theta), h * (1 - np.cos(theta))], axis=1)
        foot_z = outer[0, 1]
        # Inner wall: the same ellipse shrunk by the wall thickness, down to the cavity floor on the axis.
        inner_floor = foot_z + w
        theta_in = np.linspace(np.pi / 2, 0, 16)
        inner = np.stack([(big_r - w) * np.sin(theta_in), h - (h - inner_floor) * np.cos(theta_in)], axis=1)
        profile = np.vstack([[0, 0], [rf, 0], outer, inner])
        return _revolve(profile)


@dataclass(frozen=True)
class RevolvedShape:
    """Solid of revolution about z of a closed (r, z) profile (apples, goblets, figurines)."""

    profile_rz_m: tuple[tuple[float, float], ...]
    """Counter-clockwise outline in the (r, z) half-plane, first and last points on the axis (r = 0)."""

    def __post_init__(self) -> None:
        profile = np.asarray(self.profile_rz_m, dtype=float)
        if profile.ndim != 2 or profile.shape[1] != 2 or len(profile) < 3:
            raise ValueError(f"RevolvedShape: profile must be >= 3 (r, z) points, got shape {profile.shape}")
        if profile[0, 0] != 0 or profile[-1, 0] != 0 or np.any(profile[:, 0] < 0):
            raise ValueError("RevolvedShape: profile must start and end on the axis (r = 0) and never cross it")

    def mesh(self) -> trimesh.Trimesh:
        return _revolve(np.asarray(self.profile_rz_m, dtype=float))


@dataclass(frozen=True)
class BlobShape:
    """Irregular lumpy solid: a radially perturbed sphere scaled to a size, with a flat base cut off."""

    size_m: tuple[float, float, float]
    """Extents before the base is cut (the cut lowers the height by flat_base_fraction)."""
    roughness: float
    """Bumps: the radius varies within 1 +- 2 x roughness before scaling (0 = ellipsoid; <= 0.35 keeps it >= 0.3)."""
    seed: int
    flat_base_fraction: float = 0.15

    def __post_init__(self) -> None:
        _positive(self, size_x_m=self.size_m[0], size_y_m=self.size_m[1], size_z_m=self.size_m[2])
        if not 0 <= self.roughness <= 0.35:
            raise ValueError(f"BlobShape: roughness {self.roughness} must be in [0, 0.35]")
        if not 0 < self.flat_base_fraction < 0.5:
            raise ValueError(f"BlobShape: flat_base_fraction {self.flat_base_fraction} must be in (0, 0.5)")

    def mesh(self) -> trimesh.Trimesh:
        rng = np.random.default_rng(self.seed)
        blob = trimesh.creation.icosphere(subdivisions=3)
        directions = blob.vertices / np.linalg.norm(blob.vertices, axis=1, keepdims=True)
        waves = np.zeros(len(directions))
        for _ in range(5):  # plane waves of random direction, frequency and phase over the unit sphere
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
            waves += np.sin(rng.uniform(1.0, 3.0) * np.pi * directions @ axis + rng.uniform(0, 2 * np.pi)) / 5
        radius = 1.0 + 2.0 * self.roughness * waves
        blob.vertices = directions * radius[:, None]
        blob.apply_scale(np.asarray(self.size_m) / blob.extents)
        cut_z = blob.bounds[0, 2] + self.flat_base_fraction * blob.extents[2]
        keep = trimesh.creation.box(extents=2 * blob.extents + 0.1)
        keep.apply_translation([0.0, 0.0, cut_z + keep.extents[2] / 2])
        blob = trimesh.boolean.intersection([blob, keep], engine="manifold")
        blob.apply_translation([0.0, 0.0, -cut_z])
        return blob


@dataclass(frozen=True)
class PlacedShape:
    """A shape moved rigidly: rotated by roll-pitch-yaw (static xyz) about its origin, then translated."""

    shape: "Shape"
    pos_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy_rad: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def mesh(self) -> trimesh.Trimesh:
        mesh = self.shape.mesh()
        transform = trimesh.transformations.euler_matrix(*self.rpy_rad, axes="sxyz")
        transform[:3, 3] = self.pos_m
        mesh.apply_transform(transform)
        return mesh


@dataclass(frozen=True)
class CompositeShape:
    """Union of overlapping placed shapes; the parts must touch (one connected solid)."""

    parts: tuple[PlacedShape, ...]

    def __post_init__(self) -> None:
        if len(self.parts) < 2:
            raise ValueError(f"CompositeShape: needs at least 2 parts, got {len(self.parts)}")

    def mesh(self) -> trimesh.Trimesh:
        mesh = _union([part.mesh() for part in self.parts])
        if mesh.body_count != 1:
            raise ValueError(f"CompositeShape: parts form {mesh.body_count} separate solids, they must overlap")
        return mesh


Shape = Union[BoxShape, CylinderShape, SphereShape, CapsuleShape, CupShape, MugShape, BottleShape, BowlShape,
              RevolvedShape, BlobShape, CompositeShape]


def _sample_box(rng: np.random.Generator) -> BoxShape:
    largest = rng.uniform(0.05, 0.25)
    others = largest * rng.uniform(0.25, 1.0, size=2)
    size = rng.permutation(np.maximum(np.r_[largest, others], 0.02))
    return BoxShape(tuple(float(s) for s in size))


def _sample_cylinder(rng: np.random.Generator) -> CylinderShape:
    radius = rng.uniform(0.02, 0.06)
    min_height = 0.03 if 2 * radius >= 0.05 else 0.05  # keeps the largest extent >= 5 cm
    return CylinderShape(float(radius), float(rng.uniform(min_height, 0.25)))


def _sample_sphere(rng: np.random.Generator) -> SphereShape:
    return SphereShape(float(rng.uniform(0.03, 0.10)))


def _sample_capsule(rng: np.random.Generator) -> CapsuleShape:
    radius = rng.uniform(0.015, 0.04)
    return CapsuleShape(float(radius), float(rng.uniform(max(0.08, 3 * radius), 0.25)))


def _sample_cup(rng: np.random.Generator) -> CupShape:
    bottom = rng.uniform(0.025, 0.045)
    return CupShape(bottom_radius_m=float(bottom), top_radius_m=float(bottom * rng.uniform(1.0, 1.3)),
                    height_m=float(rng.uniform(0.06, 0.15)), wall_m=float(rng.uniform(0.003, 0.006)),
                    bottom_thickness_m=float(rng.uniform(0.005, 0.01)))


def _sample_mug(rng: np.random.Generator) -> MugShape:
    cup = _sample_cup(rng)
    thickness = rng.uniform(0.005, 0.008)
    radius = min(rng.uniform(0.022, 0.035), 0.45 * cup.height_m - thickness)
    return MugShape(cup, handle_radius_m=float(radius), handle_thickness_m=float(thickness),
                    handle_centre_z_m=float(cup.height_m * rng.uniform(0.5, 0.55)))


def _sample_bottle(rng: np.random.Generator) -> BottleShape:
    radius = rng.uniform(0.025, 0.045)
    height = rng.uniform(0.12, 0.28)
    return BottleShape(body_radius_m=float(radius), body_height_m=float(height * rng.uniform(0.55, 0.7)),
                       shoulder_height_m=float(height * rng.uniform(0.1, 0.2)),
                       neck_radius_m=float(rng.uniform(0.01, min(0.018, 0.6 * radius))),
                       neck_height_m=float(height * rng.uniform(0.1, 0.2)))


def _sample_bowl(rng: np.random.Generator) -> BowlShape:
    rim = rng.uniform(0.05, 0.12)
    return BowlShape(rim_radius_m=float(rim), height_m=float(rim * rng.uniform(0.45, 0.8)),
                     wall_m=float(rng.uniform(0.003, 0.006)), foot_radius_m=float(rim * rng.uniform(0.35, 0.55)))


def _sample_irregular(rng: np.random.Generator) -> BlobShape:
    largest = rng.uniform(0.06, 0.20)
    size = rng.permutation(np.r_[largest, largest * rng.uniform(0.5, 1.0, size=2)])
    return BlobShape(tuple(float(s) for s in size), roughness=float(rng.uniform(0.1, 0.3)), seed=int(rng.integers(2**31)))


def _sample_primitive(rng: np.random.Generator, scale_m: float) -> Shape:
    kind = rng.integers(4)
    if kind == 0:
        return BoxShape(tuple(float(s) for s in scale_m * rng.uniform(0.4, 1.0, size=3)))
    if kind == 1:
        return CylinderShape(float(scale_m * rng.uniform(0.2, 0.5)), float(scale_m * rng.uniform(0.4, 1.0)))
    if kind == 2:
        return SphereShape(float(scale_m * rng.uniform(0.25, 0.5)))
    radius = scale_m * rng.uniform(0.15, 0.3)
    return CapsuleShape(float(radius), float(max(scale_m * rng.uniform(0.8, 1.5), 2.5 * radius)))


def _sample_composite(rng: np.random.Generator) -> CompositeShape:
    """A box or cylinder base with 1-3 primitives on its top face or against its sides."""
    base_size = rng.uniform(0.05, 0.12)
    if rng.random() < 0.5:
        base = BoxShape(tuple(float(s) for s in base_size * rng.uniform(0.6, 1.0, size=3)))
        half_x, half_y, base_h = base.size_m[0] / 2, base.size_m[1] / 2, base.size_m[2]
    else:
        base = CylinderShape(float(base_size / 2), float(base_size * rng.uniform(0.6, 1.0)))
        half_x = half_y = base.radius_m * 0.7
        base_h = base.height_m
    parts = [PlacedShape(base)]
    for _ in range(rng.integers(1, 4)):
        shape = _sample_primitive(rng, base_size * rng.uniform(0.5, 0.9))
        yaw = float(rng.uniform(0, np.pi))
        if rng.random() < 0.6:  # on top, sunk a little into the base so the union is one solid
            pos = (float(rng.uniform(-0.5, 0.5) * half_x), float(rng.uniform(-0.5, 0.5) * half_y), base_h - 0.008)
        else:  # against a side, resting on the table
            side = rng.choice([-1.0, 1.0])
            pos = (float(side * half_x * 0.9), float(rng.uniform(-0.5, 0.5) * half_y), 0.0)
        parts.append(PlacedShape(shape, pos_m=pos, rpy_rad=(0.0, 0.0, yaw)))
    return CompositeShape(tuple(parts))


SAMPLERS: dict[str, Callable[[np.random.Generator], Shape]] = {
    "box": _sample_box, "cylinder": _sample_cylinder, "sphere": _sample_sphere, "capsule": _sample_capsule,
    "cup": _sample_cup, "mug": _sample_mug, "bottle": _sample_bottle, "bowl": _sample_bowl,
    "irregular": _sample_irregular, "composite": _sample_composite,
}


def sample_shape(family: str, seed: int) -> Shape:
    """The dimensions of member `seed` of `family` (one of FAMILIES); same inputs, same shape."""
    if family not in SAMPLERS:
        raise ValueError(f"unknown procedural family '{family}' (known: {', '.join(FAMILIES)})")
    family_key = int.from_bytes(family.encode(), "little") % (2**63)
    return SAMPLERS[family](np.random.default_rng([family_key, seed]))
