"""A differentiable hand surface for any hand: kinematic tree, surface samples, collision spheres, adjacency.

``HandModel`` is hand-agnostic: a :class:`KinematicTree` rooted at the hand's root link (the wrist/palm
frame), points with outward normals on each link's surface (each link's own frame), the links allowed to
carry contact forces, inscribed spheres per link for self-collision, and the link pairs whose collisions
are ignored (neighbours in the chain). The wrist pose is free: ``T_object_root`` (B, 4, 4) places the root
in the object (SDF) frame; use :func:`pose_from_translation_rot6d` to build it from free variables.

``allegro_hand_model`` builds it for the Allegro right hand from the collision boxes and spheres of
``urdf/allegro_right.urdf``, joints in the project's 16-joint Get a Grip order. Metres, radians.
"""

from __future__ import annotations

import copy
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Sequence

import numpy as np
import torch

from getagrip_ros.grasp.rotations import euler_xyz_to_matrix, matrix_from_rot6d
from getagrip_ros.robot.urdf_chain import KinematicTree, parse_urdf_joints


# ---------------------------------------------------------------------------------------------------
# Collision shapes of a URDF
@dataclass(frozen=True, eq=False)
class CollisionShape:
    """One URDF collision primitive in its link's frame.

    kind: "box" (``size_m`` = full side lengths), "sphere" (``radius_m``) or "cylinder" (``radius_m``,
    ``length_m``, axis = the shape's z). ``T_link_shape`` (4, 4) places the primitive in the link.
    """

    kind: Literal["box", "sphere", "cylinder"]
    T_link_shape: np.ndarray
    size_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    radius_m: float = 0.0
    length_m: float = 0.0

    @property
    def area_m2(self) -> float:
        if self.kind == "box":
            x, y, z = self.size_m
            return 2.0 * (x * y + y * z + x * z)
        if self.kind == "sphere":
            return 4.0 * math.pi * self.radius_m**2
        return 2.0 * math.pi * self.radius_m * (self.radius_m + self.length_m)


def collision_shapes_from_urdf(urdf: str | Path, links: Sequence[str]) -> dict[str, list[CollisionShape]]:
    """The box, sphere and cylinder collision primitives of `links` (meshes are refused: ValueError)."""
    text = Path(urdf).read_text() if not str(urdf).lstrip().startswith("<") else str(urdf)
    root = ET.fromstring(text)
    by_name = {link.get("name"): link for link in root.iter("link")}
    shapes: dict[str, list[CollisionShape]] = {}
    for name in links:
        if name not in by_name:
            raise ValueError(f"link {name!r} is not in the URDF")
        shapes[name] = []
        for collision in by_name[name].findall("collision"):
            origin = collision.find("origin")
            xyz = [float(v) for v in (origin.get("xyz", "0 0 0") if origin is not None else "0 0 0").split()]
            rpy = [float(v) for v in (origin.get("rpy", "0 0 0") if origin is not None else "0 0 0").split()]
            T = np.eye(4)
            T[:3, :3] = euler_xyz_to_matrix(torch.tensor(rpy, dtype=torch.float64)).numpy()
            T[:3, 3] = xyz
            geometry = collision.find("geometry")
            box, sphere, cylinder = (geometry.find(k) for k in ("box", "sphere", "cylinder"))
            if box is not None:
                size = tuple(float(v) for v in box.get("size").split())
                shapes[name].append(CollisionShape("box", T, size_m=size))
            elif sphere is not None:
                shapes[name].append(CollisionShape("sphere", T, radius_m=float(sphere.get("radius"))))
            elif cylinder is not None:
                shapes[name].append(CollisionShape("cylinder", T, radius_m=float(cylinder.get("radius")),
                                                   length_m=float(cylinder.get("length"))))
            else:
                kinds = [child.tag for child in geometry]
                raise ValueError(f"link {name!r}: unsupported collision geometry {kinds} (box, sphere, cylinder)")
    return shapes


def _sample_shape(shape: CollisionShape, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n random points, area-uniform, and outward normals on a primitive, in the shape's frame."""
    if shape.kind == "sphere":
        v = rng.normal(size=(n, 3))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v * shape.radius_m, v
    if shape.kind == "box":
        half = np.asarray(shape.size_m) / 2.0
        areas = np.array([4 * half[1] * half[2], 4 * half[0] * half[2], 4 * half[0] * half[1]])
        axis = rng.choice(3, size=n, p=areas / areas.sum())
        sign = rng.choice([-1.0, 1.0], size=n)
        p = rng.uniform(-1.0, 1.0, size=(n, 3)) * half
        p[np.arange(n), axis] = sign * half[axis]
        normal = np.zeros((n, 3))
        normal[np.arange(n), axis] = sign
        return p, normal
    r, half_len = shape.radius_m, shape.length_m / 2.0
    side, cap = 2 * math.pi * r * shape.length_m, math.pi * r * r
    on_side = rng.uniform(size=n) < side / (side + 2 * cap)
    angle = rng.uniform(0.0, 2 * math.pi, size=n)
    radial = np.where(on_side, r, r * np.sqrt(rng.uniform(size=n)))
    z = np.where(on_side, rng.uniform(-half_len, half_len, size=n), rng.choice([-half_len, half_len], size=n))
    p = np.stack([radial * np.cos(angle), radial * np.sin(angle), z], 1)
    normal = np.where(on_side[:, None], np.stack([np.cos(angle), np.sin(angle), np.zeros(n)], 1),
                      np.stack([np.zeros(n), np.zeros(n), np.sign(z)], 1))
    return p, normal


def _depth_inside(shape: CollisionShape, points_link: np.ndarray) -> np.ndarray:
    """How deep (m, > 0 inside) link-frame points are inside a primitive."""
    T_shape_link = np.linalg.inv(shape.T_link_shape)
    p = points_link @ T_shape_link[:3, :3].T + T_shape_link[:3, 3]
    if shape.kind == "sphere":
        return shape.radius_m - np.linalg.norm(p, axis=1)
    if shape.kind == "box":
        return (np.asarray(shape.size_m) / 2.0 - np.abs(p)).min(axis=1)
    return np.minimum(shape.radius_m - np.linalg.norm(p[:, :2], axis=1), shape.length_m / 2.0 - np.abs(p[:, 2]))


def _inscribed_spheres(shape: CollisionShape) -> tuple[np.ndarray, np.ndarray]:
    """Spheres inside a primitive that cover its core (centres in the shape's frame, radii), for self-collision."""
    if shape.kind == "sphere":
        return np.zeros((1, 3)), np.array([shape.radius_m])
    if shape.kind == "cylinder":
        r, length = shape.radius_m, shape.length_m
        k = max(1, math.ceil(max(length - 2 * r, 0.0) / r) + 1)
        z = np.linspace(-(length / 2 - r), length / 2 - r, k) if length > 2 * r else np.zeros(1)
        return np.stack([np.zeros(k), np.zeros(k), z], 1), np.full(k, min(r, length / 2))
    size = np.asarray(shape.size_m)
    r = size.min() / 2.0
    axes = [np.linspace(-(s / 2 - r), s / 2 - r, max(1, math.ceil((s - 2 * r) / r - 1e-9) + 1)) if s > 2 * r + 1e-9
            else np.zeros(1) for s in size]
    centres = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    return centres, np.full(len(centres), r)


def _farthest_points(points: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of n points spread evenly (greedy farthest-point sampling)."""
    if n >= len(points):
        return np.arange(len(points))
    chosen = np.empty(n, dtype=np.int64)
    chosen[0] = rng.integers(len(points))
    dist = np.linalg.norm(points - points[chosen[0]], axis=1)
    for i in range(1, n):
        chosen[i] = int(np.argmax(dist))
        dist = np.minimum(dist, np.linalg.norm(points - points[chosen[i]], axis=1))
    return chosen


def _transform(T: np.ndarray, points: np.ndarray) -> np.ndarray:
    return points @ T[:3, :3].T + T[:3, 3]


# ---------------------------------------------------------------------------------------------------
# The hand-agnostic model
def pose_from_translation_rot6d(translation_m: torch.Tensor, rot6d: torch.Tensor) -> torch.Tensor:
    """(B, 3) translation and (B, 6) continuous rotation (Get a Grip rot6d) -> (B, 4, 4) homogeneous poses."""
    T = torch.zeros(*translation_m.shape[:-1], 4, 4, dtype=translation_m.dtype, device=translation_m.device)
    T[..., :3, :3] = matrix_from_rot6d(rot6d)
    T[..., :3, 3] = translation_m
    T[..., 3, 3] = 1.0
    return T


class HandModel:
    """Any hand as the synthesis core sees it (all tensors float64, on the CPU unless moved by :meth:`to`; calls
    follow the input dtype).

    Args:
        name: e.g. "allegro_right".
        tree: forward kinematics from the root link to ``tree.target_links`` (the model's links, in order).
        points_in_link_m, normals_in_link: (N, 3) surface samples and outward unit normals, each in its link's frame.
        sample_link: (N,) index into ``tree.target_links`` of each sample's link.
        sample_area_m2: (N,) surface area each sample stands for (contact-area metrics).
        contact_mask: (N,) True for samples that may carry contact forces.
        sphere_centres_in_link_m, sphere_radii_m, sphere_link: (S, 3), (S,), (S,) collision spheres for
            self-intersection.
        adjacent_links: pairs (i, j) of link indices whose mutual collisions are ignored (chain neighbours); links
            whose collision spheres already overlap in the open hand are added.
        open_joint_angles_rad: (J,) open hand that starts the optimisation.
        palm_point_in_root_m: (3,) the point of the palm placed on the approach line at the start.
        palm_normal_in_root: (3,) unit direction the palm faces (toward the object at the start).
        fingertip_links: link indices of the fingertips (outputs: one closing direction each).
        fingertip_points_in_link_m: (F, 3) a contact point on each fingertip, in its link's frame.
        pair_screen_configurations, pair_screen_margin_m: sphere pairs that never come within the margin of each
            other in this many random joint configurations are left out of self-intersection (0: keep all).
    """

    def __init__(self, name: str, tree: KinematicTree, points_in_link_m: torch.Tensor, normals_in_link: torch.Tensor,
                 sample_link: torch.Tensor, sample_area_m2: torch.Tensor, contact_mask: torch.Tensor,
                 sphere_centres_in_link_m: torch.Tensor, sphere_radii_m: torch.Tensor, sphere_link: torch.Tensor,
                 adjacent_links: Sequence[tuple[int, int]], open_joint_angles_rad: torch.Tensor,
                 palm_point_in_root_m: torch.Tensor, palm_normal_in_root: torch.Tensor,
                 fingertip_links: Sequence[int] = (), fingertip_points_in_link_m: Optional[torch.Tensor] = None,
                 pair_screen_configurations: int = 4000, pair_screen_margin_m: float = 0.01) -> None:
        f64 = dict(dtype=torch.float64)
        self.name = name
        self.tree = tree
        self.points_in_link_m = torch.as_tensor(points_in_link_m, **f64)
        self.normals_in_link = torch.as_tensor(normals_in_link, **f64)
        self.sample_link = torch.as_tensor(sample_link, dtype=torch.long)
        self.sample_area_m2 = torch.as_tensor(sample_area_m2, **f64)
        self.contact_mask = torch.as_tensor(contact_mask, dtype=torch.bool)
        self.sphere_centres_in_link_m = torch.as_tensor(sphere_centres_in_link_m, **f64).reshape(-1, 3)
        self.sphere_radii_m = torch.as_tensor(sphere_radii_m, **f64).reshape(-1)
        self.sphere_link = torch.as_tensor(sphere_link, dtype=torch.long).reshape(-1)
        self.adjacent_links = frozenset((min(a, b), max(a, b)) for a, b in adjacent_links)
        self.open_joint_angles_rad = torch.as_tensor(open_joint_angles_rad, **f64)
        self.palm_point_in_root_m = torch.as_tensor(palm_point_in_root_m, **f64)
        normal = torch.as_tensor(palm_normal_in_root, **f64)
        self.palm_normal_in_root = normal / normal.norm()
        self.fingertip_links = tuple(int(i) for i in fingertip_links)
        self.fingertip_points_in_link_m = (torch.zeros(0, 3, **f64) if fingertip_points_in_link_m is None
                                           else torch.as_tensor(fingertip_points_in_link_m, **f64).reshape(-1, 3))
        self._check()
        # samples ordered contact first, then by link: contact samples and each link's samples are contiguous
        order = torch.from_numpy(np.lexsort((self.sample_link.numpy(), (~self.contact_mask).numpy())))
        for attr in ("points_in_link_m", "normals_in_link", "sample_link", "sample_area_m2", "contact_mask"):
            setattr(self, attr, getattr(self, attr)[order])
        self.num_contact_samples = int(self.contact_mask.sum())
        """Samples 0 .. num_contact_samples - 1 may carry contact forces, the rest may not."""
        self._sample_runs = _runs(self.sample_link)
        sphere_order = torch.argsort(self.sphere_link, stable=True)
        for attr in ("sphere_centres_in_link_m", "sphere_radii_m", "sphere_link"):
            setattr(self, attr, getattr(self, attr)[sphere_order])
        self._sphere_runs = _runs(self.sphere_link)
        sphere_i, sphere_j = torch.triu_indices(len(self.sphere_radii_m), len(self.sphere_radii_m), offset=1)
        links_i, links_j = self.sphere_link[sphere_i], self.sphere_link[sphere_j]
        with torch.no_grad():  # links whose spheres overlap in the open hand are neighbours too (model artefacts)
            c = self.sphere_centres(self.link_poses(torch.eye(4, dtype=torch.float64)[None], self.open_joint_angles_rad[None]))[0]
            overlap = (c[sphere_i] - c[sphere_j]).square().sum(-1).sqrt() < self.sphere_radii_m[sphere_i] + self.sphere_radii_m[sphere_j]
        self.adjacent_links = self.adjacent_links | {(min(a, b), max(a, b)) for a, b in
                                                     zip(links_i[overlap].tolist(), links_j[overlap].tolist()) if a != b}
        ignored = torch.tensor([(min(a, b), max(a, b)) in self.adjacent_links or a == b
                                for a, b in zip(links_i.tolist(), links_j.tolist())], dtype=torch.bool)
        self.self_collision_pairs = self._reachable_pairs(torch.stack([sphere_i[~ignored], sphere_j[~ignored]], 1),
                                                          pair_screen_configurations, pair_screen_margin_m)
        """(P, 2) sphere index pairs on non-adjacent links that can come close: the pairs self-intersection looks at."""

    def to(self, device: str | torch.device) -> "HandModel":
        """A copy of the model with every tensor (and the kinematic tree) on `device`; this model is left as it is."""
        moved = copy.copy(self)
        moved.tree = copy.deepcopy(self.tree).to(device)
        for name, value in vars(self).items():
            if isinstance(value, torch.Tensor):
                setattr(moved, name, value.to(device))
        return moved

    def _reachable_pairs(self, pairs: torch.Tensor, num_configurations: int, margin_m: float) -> torch.Tensor:
        """The pairs that come within margin_m of touching in some of num_configurations random joint
        configurations (seeded); all pairs if num_configurations is 0."""
        if num_configurations <= 0 or len(pairs) == 0:
            return pairs
        lower = self.lower_limits_rad.clamp(min=-math.pi)
        upper = self.upper_limits_rad.clamp(max=math.pi)
        q = lower + (upper - lower) * torch.rand(num_configurations, self.num_joints, dtype=torch.float64,
                                                 generator=torch.Generator().manual_seed(0))
        n = len(self.sphere_radii_m)
        closest = torch.full((n, n), math.inf, dtype=torch.float64)  # centre distance of every sphere pair
        with torch.no_grad():
            for chunk in q.split(500):
                T = torch.eye(4, dtype=torch.float64).expand(len(chunk), 4, 4)
                c = self.sphere_centres(self.link_poses(T, chunk))
                closest = torch.minimum(closest, torch.cdist(c, c, compute_mode="donot_use_mm_for_euclid_dist").amin(0))
        i, j = pairs[:, 0], pairs[:, 1]
        return pairs[closest[i, j] - self.sphere_radii_m[i] - self.sphere_radii_m[j] < margin_m]

    def _check(self) -> None:
        n, num_links = len(self.points_in_link_m), len(self.tree.target_links)
        if n == 0:
            raise ValueError(f"hand {self.name!r}: no surface samples")
        for label, t, shape in (("normals_in_link", self.normals_in_link, (n, 3)), ("sample_link", self.sample_link, (n,)),
                                ("sample_area_m2", self.sample_area_m2, (n,)), ("contact_mask", self.contact_mask, (n,)),
                                ("open_joint_angles_rad", self.open_joint_angles_rad, (self.tree.num_joints,)),
                                ("sphere_radii_m", self.sphere_radii_m, (len(self.sphere_centres_in_link_m),)),
                                ("sphere_link", self.sphere_link, (len(self.sphere_centres_in_link_m),)),
                                ("fingertip_points_in_link_m", self.fingertip_points_in_link_m,
                                 (len(self.fingertip_links), 3))):
            if tuple(t.shape) != shape:
                raise ValueError(f"hand {self.name!r}: {label} has shape {tuple(t.shape)}, expected {shape}")
        for label, index in (("sample_link", self.sample_link), ("sphere_link", self.sphere_link),
                             ("fingertip_links", torch.tensor(self.fingertip_links, dtype=torch.long))):
            if len(index) and (int(index.min()) < 0 or int(index.max()) >= num_links):
                raise ValueError(f"hand {self.name!r}: {label} refers to links outside 0..{num_links - 1}")
        if not bool(self.contact_mask.any()):
            raise ValueError(f"hand {self.name!r}: no sample may carry contact forces (contact_mask all False)")

    # -- sizes -------------------------------------------------------------------------------------------
    @property
    def num_joints(self) -> int:
        return self.tree.num_joints

    @property
    def num_samples(self) -> int:
        return len(self.points_in_link_m)

    @property
    def link_names(self) -> list[str]:
        return self.tree.target_links

    @property
    def joint_names(self) -> list[str]:
        return self.tree.joint_names

    @property
    def lower_limits_rad(self) -> torch.Tensor:
        return self.tree.lower_limits

    @property
    def upper_limits_rad(self) -> torch.Tensor:
        return self.tree.upper_limits

    def samples_per_link(self) -> dict[str, int]:
        counts = torch.bincount(self.sample_link, minlength=len(self.link_names)).tolist()
        return dict(zip(self.link_names, counts))

    # -- kinematics --------------------------------------------------------------------------------------
    def link_poses(self, T_object_root: torch.Tensor, q_rad: torch.Tensor) -> torch.Tensor:
        """(B, 4, 4) root pose and (B, J) joints -> (B, L, 4, 4) T_object_link of every model link."""
        return T_object_root[:, None] @ self.tree(q_rad)

    def surface(self, T_object_link: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, 4, 4) link poses -> samples (B, N, 3) and their outward unit normals (B, N, 3), object frame."""
        return self.surface_points(T_object_link), self._per_link(T_object_link, self.normals_in_link, translate=False)

    def surface_points(self, T_object_link: torch.Tensor) -> torch.Tensor:
        """(B, L, 4, 4) link poses -> samples (B, N, 3) in the object frame (:meth:`surface` without the normals)."""
        return self._per_link(T_object_link, self.points_in_link_m, translate=True)

    def _per_link(self, T_object_link: torch.Tensor, local: torch.Tensor, translate: bool) -> torch.Tensor:
        """Per-sample (N, 3) link-frame vectors rotated (and translated) by their links' poses: (B, N, 3)."""
        local = local.to(T_object_link.dtype)
        out = []
        for link, start, end in self._sample_runs:  # one matmul per link (a gather of poses is slow to differentiate)
            v = local[start:end] @ T_object_link[:, link, :3, :3].transpose(-1, -2)
            out.append(v + T_object_link[:, link, None, :3, 3] if translate else v)
        return torch.cat(out, 1)

    def sphere_centres(self, T_object_link: torch.Tensor) -> torch.Tensor:
        """(B, L, 4, 4) -> (B, S, 3) collision-sphere centres in the object frame."""
        c = self.sphere_centres_in_link_m.to(T_object_link.dtype)
        return torch.cat([c[start:end] @ T_object_link[:, link, :3, :3].transpose(-1, -2) + T_object_link[:, link, None, :3, 3]
                          for link, start, end in self._sphere_runs], 1)

    def fingertip_points(self, T_object_link: torch.Tensor) -> torch.Tensor:
        """(B, L, 4, 4) -> (B, F, 3) fingertip contact points in the object frame."""
        T = T_object_link[:, list(self.fingertip_links)]
        return (T[..., :3, :3] @ self.fingertip_points_in_link_m.to(T.dtype)[..., None]).squeeze(-1) + T[..., :3, 3]


def _runs(index: torch.Tensor) -> list[tuple[int, int, int]]:
    """(value, start, end) of the runs of equal values in a 1-D tensor."""
    runs, values = [], index.tolist()
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            runs.append((values[start], start, i))
            start = i
    return runs


# ---------------------------------------------------------------------------------------------------
# Building a model from a URDF's collision primitives
def _link_adjacency(urdf: str | Path, links: Sequence[str]) -> list[tuple[int, int]]:
    """Pairs of `links` that are chain neighbours: rigidly joined (fixed joints), or parent and child through one
    movable joint (intermediate links that are not in `links` are walked through)."""
    joints = parse_urdf_joints(urdf)
    parent_of = {j.child: j for j in joints}
    index = {name: i for i, name in enumerate(links)}

    def rigid_root(link: str) -> str:
        while link in parent_of and not parent_of[link].movable:
            link = parent_of[link].parent
        return link

    group = {name: rigid_root(name) for name in links}
    pairs = set()
    for a in links:
        for b in links:
            if index[a] < index[b] and group[a] == group[b]:
                pairs.add((index[a], index[b]))
    for child in links:
        top = group[child]  # the group's top link: its joint to the parent group is movable
        if top in parent_of:
            parent_group = rigid_root(parent_of[top].parent)
            for other in links:
                if group[other] == parent_group:
                    pairs.add((min(index[child], index[other]), max(index[child], index[other])))
    return sorted(pairs)


@dataclass(frozen=True)
class SurfaceSamplingConfig:
    """How the hand's link surfaces are sampled."""

    num_samples: int = 3000
    """Surface samples on all links together, spread by area (paper's Allegro: about 3000)."""
    candidates_per_sample: int = 4
    """Random candidates drawn per kept sample; farthest-point sampling keeps an even subset."""
    internal_margin_m: float = 5e-4
    """Candidates deeper than this inside another primitive of the same rigid body are dropped (hidden)."""
    seed: int = 0


def hand_model_from_urdf(name: str, urdf: str | Path, root_link: str, links: Sequence[str], joint_names: Sequence[str],
                         contact_links: Sequence[str], open_joint_angles_rad: Sequence[float],
                         palm_point_in_root_m: Sequence[float], palm_normal_in_root: Sequence[float],
                         fingertip_links: Sequence[str] = (), fingertip_points_in_link_m: Sequence[Sequence[float]] = (),
                         sampling: SurfaceSamplingConfig = SurfaceSamplingConfig()) -> HandModel:
    """A :class:`HandModel` from the box/sphere/cylinder collision geometry of `links` in a URDF."""
    if sampling.num_samples < len(links):
        raise ValueError(f"num_samples {sampling.num_samples} is below the number of links ({len(links)})")
    tree = KinematicTree(urdf, root_link, list(links), list(joint_names))
    shapes = collision_shapes_from_urdf(urdf, links)
    rng = np.random.default_rng(sampling.seed)
    with torch.no_grad():
        T_root_link = tree(torch.zeros(1, tree.num_joints, dtype=torch.float64))[0].numpy()
    adjacency = _link_adjacency(urdf, links)
    rigid = {(a, b) for a, b in adjacency if not _movable_between(urdf, links[a], links[b])}
    total_area = sum(s.area_m2 for ss in shapes.values() for s in ss)
    if total_area <= 0:
        raise ValueError(f"hand {name!r}: the links have no collision primitives to sample")
    # candidates per link, without those hidden inside another primitive of the same rigid body
    candidates, kept_area = [], []
    for i, link in enumerate(links):
        pts, nrm, area = [], [], 0.0
        for k, shape in enumerate(shapes[link]):
            n = max(8, int(round(sampling.num_samples * sampling.candidates_per_sample * shape.area_m2 / total_area)))
            p, nn = _sample_shape(shape, n, rng)
            p, nn = _transform(shape.T_link_shape, p), nn @ shape.T_link_shape[:3, :3].T
            hidden = np.zeros(len(p), dtype=bool)
            for other_link, others in shapes.items():
                j = list(links).index(other_link)
                if j != i and (min(i, j), max(i, j)) not in rigid:
                    continue
                T_this_other = np.linalg.inv(T_root_link[i]) @ T_root_link[j]
                for m, other in enumerate(others):
                    if j == i and m == k:
                        continue
                    in_other = _transform(np.linalg.inv(T_this_other), p)
                    hidden |= _depth_inside(other, in_other) > sampling.internal_margin_m
            pts.append(p[~hidden])
            nrm.append(nn[~hidden])
            area += shape.area_m2 * float((~hidden).mean())
        candidates.append((np.concatenate(pts) if pts else np.zeros((0, 3)), np.concatenate(nrm) if nrm else np.zeros((0, 3))))
        kept_area.append(area)
    kept_area = np.asarray(kept_area)
    # samples per link by area (largest remainder), at least one on every link with a surface
    share = sampling.num_samples * kept_area / kept_area.sum()
    count = np.floor(share).astype(int)
    count[np.argsort(share - count)[::-1][: sampling.num_samples - count.sum()]] += 1
    count = np.where((kept_area > 0) & (count == 0), 1, count)
    points, normals, link_of, area_of = [], [], [], []
    for i, ((p, nn), n) in enumerate(zip(candidates, count)):
        if n == 0 or len(p) == 0:
            continue
        keep = _farthest_points(p, int(n), rng)
        points.append(p[keep])
        normals.append(nn[keep])
        link_of.append(np.full(len(keep), i))
        area_of.append(np.full(len(keep), kept_area[i] / len(keep)))
    link_of = np.concatenate(link_of)
    contact = set(contact_links)
    unknown = contact - set(links)
    if unknown:
        raise ValueError(f"contact links {sorted(unknown)} are not links of the model")
    centres, radii, sphere_link = [], [], []
    for i, link in enumerate(links):
        for shape in shapes[link]:
            c, r = _inscribed_spheres(shape)
            centres.append(_transform(shape.T_link_shape, c))
            radii.append(r)
            sphere_link.append(np.full(len(r), i))
    return HandModel(
        name=name, tree=tree,
        points_in_link_m=torch.from_numpy(np.concatenate(points)), normals_in_link=torch.from_numpy(np.concatenate(normals)),
        sample_link=torch.from_numpy(link_of), sample_area_m2=torch.from_numpy(np.concatenate(area_of)),
        contact_mask=torch.tensor([links[i] in contact for i in link_of]),
        sphere_centres_in_link_m=torch.from_numpy(np.concatenate(centres)), sphere_radii_m=torch.from_numpy(np.concatenate(radii)),
        sphere_link=torch.from_numpy(np.concatenate(sphere_link)), adjacent_links=adjacency,
        open_joint_angles_rad=torch.tensor(open_joint_angles_rad, dtype=torch.float64),
        palm_point_in_root_m=torch.tensor(palm_point_in_root_m, dtype=torch.float64),
        palm_normal_in_root=torch.tensor(palm_normal_in_root, dtype=torch.float64),
        fingertip_links=[list(links).index(f) for f in fingertip_links],
        fingertip_points_in_link_m=torch.tensor(np.asarray(fingertip_points_in_link_m, dtype=np.float64).reshape(-1, 3)),
    )


def _movable_between(urdf: str | Path, a: str, b: str) -> bool:
    """Whether a movable joint lies on the chain between links a and b."""
    parent_of = {j.child: j for j in parse_urdf_joints(urdf)}

    def path(link: str) -> list:
        out = []
        while link in parent_of:
            out.append(parent_of[link])
            link = parent_of[link].parent
        return out

    pa, pb = path(a), path(b)
    common = {j.name for j in pa} & {j.name for j in pb}
    return any(j.movable for j in pa + pb if j.name not in common)


# ---------------------------------------------------------------------------------------------------
# The Allegro right hand
#: Distal links and fingertips of the Allegro (index, middle, ring, thumb): the "distal" contact region.
ALLEGRO_DISTAL_LINKS = ("link_3.0", "link_3.0_tip", "link_7.0", "link_7.0_tip", "link_11.0", "link_11.0_tip",
                        "link_15.0", "link_15.0_tip")
#: Palm point put on the approach line at the start: the palm face (x = +0.0111 m) in front of the finger
#: bases, where the heuristic sampler also centres its grasps along z.
ALLEGRO_PALM_POINT_IN_PALM_M = (0.0111, 0.0, 0.035)


@dataclass(frozen=True)
class AllegroModelConfig:
    """Build options of the Allegro hand model."""

    contact_links: Literal["all", "distal"] = "distal"
    """Links that may carry contact forces: "all" (contact-rich power grasps) or "distal" (distal links and
    fingertips; Get a Grip's labels count palm and proximal contact as failure)."""
    sampling: SurfaceSamplingConfig = SurfaceSamplingConfig()
    open_joint_angles_rad: Optional[tuple[float, ...]] = None
    """Start joints (Get a Grip order). None: the project's slightly curled open hand
    (``robot.allegro.OPEN_HAND_JOINT_ANGLES_RAD``); an empty tuple: every joint at 0 clamped into its limits (flat),
    as the paper starts. Measured on tabletop-20 meshes (32 grasps, floating-hand labels): the curled start lifts
    more (apple: mean y_PGS 0.59 vs 0.26 from the flat hand), the flat hand leaves the fingers straight."""
    urdf: Optional[str] = None
    """Hand URDF (default: the package's ``urdf/allegro_right.urdf``)."""


def allegro_hand_model(config: AllegroModelConfig = AllegroModelConfig()) -> HandModel:
    """The Allegro right hand: palm, 16 finger links and 4 fingertips, joints in the Get a Grip order."""
    from getagrip_ros.paths import urdf_path
    from getagrip_ros.robot.allegro import MEAN_CONTACT_POINT_IN_TIP_M
    from getagrip_ros.robot.description import FINGERTIP_LINK_NAMES, HAND_JOINT_NAMES, HAND_LINK_NAMES, HAND_URDF_NAME, PALM_LINK

    if config.contact_links not in ("all", "distal"):
        raise ValueError(f"contact_links must be 'all' or 'distal', got {config.contact_links!r}")
    links = [PALM_LINK, *HAND_LINK_NAMES, *FINGERTIP_LINK_NAMES]
    contact = links if config.contact_links == "all" else ALLEGRO_DISTAL_LINKS
    urdf = config.urdf or urdf_path(HAND_URDF_NAME)
    if config.open_joint_angles_rad is None:
        from getagrip_ros.robot.allegro import OPEN_HAND_JOINT_ANGLES_RAD

        open_q = tuple(float(v) for v in OPEN_HAND_JOINT_ANGLES_RAD)
    elif len(config.open_joint_angles_rad) == 0:
        limits = {j.name: (j.lower, j.upper) for j in parse_urdf_joints(urdf)}
        open_q = tuple(min(max(0.0, limits[n][0]), limits[n][1]) for n in HAND_JOINT_NAMES)
    else:
        open_q = tuple(float(v) for v in config.open_joint_angles_rad)
    return hand_model_from_urdf(
        "allegro_right", urdf, PALM_LINK, links, HAND_JOINT_NAMES, contact,
        open_q, ALLEGRO_PALM_POINT_IN_PALM_M, (1.0, 0.0, 0.0),
        fingertip_links=FINGERTIP_LINK_NAMES, fingertip_points_in_link_m=[MEAN_CONTACT_POINT_IN_TIP_M] * len(FINGERTIP_LINK_NAMES),
        sampling=config.sampling)
