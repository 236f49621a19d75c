"""Collision checking of arm configurations and straight joint-space motions (numpy + coal).

A configuration is valid when every robot shape keeps `world_buffer_m` (1 mm) from every obstacle, no two
non-neighbouring robot links overlap by more than `self_collision_allowance_m`, and - with a `WorkspaceBox` -
the palm, flange and fingertips stay inside the box the safety layer checks (so a plan never has to be refused
for leaving it).

Cheap bounds first, exact queries only where they matter: sphere-box distances are exact in numpy;
box-box distances start from a separating-axis lower bound; the object (mesh BVH or point-cloud octree)
is bounded by its axis-aligned box, and only shapes near it go to coal. A watertight mesh is solid:
a shape whose centre lies inside it (occupancy grid) is in collision even if it misses the surface.

Motions are checked by conservative advancement: every robot point moves at most
``reach_m @ |dq|`` metres (see `robot_geometry`), so from a state whose clearance is c the next
c metres of motion cannot collide; the next checked state is that far along, and never more than
`motion_resolution_m` (1 mm) of motion of any robot point when the clearance is smaller than that.
"""

from __future__ import annotations

from dataclasses import dataclass

import coal
import numpy as np
import trimesh

from getagrip_ros.motion.robot_geometry import END_EFFECTOR_BODY, RobotCollisionModel
from getagrip_ros.motion.world import ObjectMesh, PlanningWorld
from getagrip_ros.robot.description import FINGERTIP_LINK_NAMES, FLANGE_LINK, PALM_LINK

_FAR_M = 1e3  # "no obstacle" distance


@dataclass(frozen=True)
class WorkspaceBox:
    """End-effector frames that must stay inside a box of the world frame (the safety layer's workspace box)."""

    min_m: tuple[float, float, float]
    max_m: tuple[float, float, float]
    frames: tuple[str, ...] = (PALM_LINK, FLANGE_LINK, *FINGERTIP_LINK_NAMES)
    margin_m: float = 0.001
    """The frames keep this far inside the box."""

    def __post_init__(self) -> None:
        if not all(lo + 2 * self.margin_m < hi for lo, hi in zip(self.min_m, self.max_m)) or len(self.min_m) != 3:
            raise ValueError(f"workspace box {list(self.min_m)} - {list(self.max_m)} is empty (margin {self.margin_m} m)")


@dataclass(frozen=True)
class CollisionCheckerConfig:
    """Margins (metres) and resolutions of collision checking."""

    world_buffer_m: float = 0.001
    """Every robot shape keeps at least this distance from the table, boxes and the object."""
    self_collision: bool = True
    """Check non-neighbouring links of the robot against each other (see robot_geometry.SELF_COLLISION_IGNORE)."""
    self_collision_allowance_m: float = 0.02
    """Overlap tolerated between robot shapes of different links (the arm spheres are generous; cuRobo's
    self_collision_buffer in Get a Grip's model is -0.02 m)."""
    motion_resolution_m: float = 0.001
    """Largest motion of any robot point between two checked states of a motion when it is close to an obstacle."""
    exact_distance_below_m: float = 0.03
    """Object distances: shapes whose bounding-box lower bound is below this get an exact (coal) distance."""
    solid_grid_pitch_m: float = 0.003
    """Smallest cell size of the inside-the-object occupancy grid of watertight meshes."""
    solid_grid_max_cells: int = 50_000
    """Larger objects get coarser cells, never coarser than the robot's thinnest shape allows (see _CompiledObject)."""

    def __post_init__(self) -> None:
        for name in ("world_buffer_m", "self_collision_allowance_m", "exact_distance_below_m"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"CollisionCheckerConfig.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("motion_resolution_m", "solid_grid_pitch_m"):
            if not getattr(self, name) > 0:
                raise ValueError(f"CollisionCheckerConfig.{name} must be > 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class Contact:
    """A robot link closer to an obstacle (or to another link) than allowed."""

    link: str
    """Robot link of the offending shape."""
    other: str
    """Obstacle name ("table", the object's name, ...) or the other robot link for self-collisions."""
    distance_m: float
    """Signed distance between the two shapes (negative: overlap), before margins; for a shape inside a solid
    object, minus the shape's bounding radius."""
    self_collision: bool = False
    inside: bool = False
    """The shape's centre is inside the (solid) object."""

    def describe(self) -> str:
        if self.self_collision:
            return f"self-collision between {self.link} and {self.other} ({-self.distance_m * 1000:.1f} mm overlap)"
        if self.inside:
            return f"in collision with the {self.other} (link {self.link} inside it)"
        if self.other == "workspace box":
            return f"{self.link} {-self.distance_m * 1000:.1f} mm outside the workspace box"
        if self.distance_m < 0:
            return f"in collision with the {self.other} (link {self.link}, {-self.distance_m * 1000:.1f} mm deep)"
        return f"in collision with the {self.other} (link {self.link} within {self.distance_m * 1000:.1f} mm)"


@dataclass(frozen=True)
class CollisionReport:
    """All contacts of one configuration, worst first."""

    contacts: tuple[Contact, ...]

    @property
    def in_collision(self) -> bool:
        return bool(self.contacts)

    def describe(self) -> str:
        """e.g. "in collision with the table (link link_3.0, -2.0 mm away)" (+ how many more)."""
        if not self.contacts:
            return "collision-free"
        more = len(self.contacts) - 1
        return self.contacts[0].describe() + (f" and {more} more contact{'s' * (more > 1)}" if more else "")


# -- vectorised geometry ---------------------------------------------------------------------------------
def sphere_box_distance(c: np.ndarray, r: np.ndarray, box_c: np.ndarray, box_R: np.ndarray, box_h: np.ndarray) -> np.ndarray:
    """Signed distances (N,) between spheres (centres (N, 3), radii (N,)) and boxes (centres, rotations, half extents)."""
    d = c - box_c
    p = np.abs((box_R * d[..., :, None]).sum(-2)) - box_h  # |R^T d| - h, in the box frame
    outside = np.sqrt((np.maximum(p, 0.0) ** 2).sum(-1))
    inside = np.minimum(p.max(axis=-1), 0.0)
    return outside + inside - r


def box_box_lower_bound(ca: np.ndarray, Ra: np.ndarray, ha: np.ndarray, cb: np.ndarray, Rb: np.ndarray,
                        hb: np.ndarray) -> np.ndarray:
    """Lower bounds (N,) of the distances between box pairs: the largest gap along their 6 face normals
    (exact when a face separates them; <= 0 when those axes overlap, and then maybe still apart)."""
    Ra, Rb = np.broadcast_arrays(Ra, Rb)
    axes = np.concatenate([np.swapaxes(Ra, -1, -2), np.swapaxes(Rb, -1, -2)], axis=-2)  # (..., 6, 3) rows = axes
    d = np.abs(np.einsum("...ij,...j->...i", axes, cb - ca))
    ra = np.einsum("...ij,...j->...i", np.abs(axes @ Ra), ha)
    rb = np.einsum("...ij,...j->...i", np.abs(axes @ Rb), hb)
    return (d - ra - rb).max(axis=-1)


def _min_ratio(clearance_m: np.ndarray, motion_m: np.ndarray) -> float:
    """Smallest clearance / motion over the shapes that move (inf when none does)."""
    moving = motion_m > 0
    return float(np.min(clearance_m[moving] / motion_m[moving], initial=np.inf))


class _CompiledObject:
    """Coal geometry of one world object, its bounding box and (watertight meshes) an occupancy grid.

    The grid says whether a robot shape's centre is inside the solid. A cell of pitch p misjudges only points within
    p sqrt(3) / 2 of the surface, where a shape at least that thick crosses the surface and coal finds it; so p is
    kept below 2 / sqrt(3) times the thinnest robot shape's half size (`max_pitch_m`).
    """

    def __init__(self, obj, pitch_m: float, max_cells: int, max_pitch_m: float) -> None:
        self.name = obj.name
        self.grid: np.ndarray | None = None
        if isinstance(obj, ObjectMesh):
            v, f = obj.world_vertices_m, obj.faces
            bvh = coal.BVHModelOBBRSS()
            bvh.beginModel(len(f), len(v))
            bvh.addVertices(v)
            bvh.addTriangles(f)
            bvh.endModel()
            self.geometry = bvh
            self.lo, self.hi = v.min(0), v.max(0)
            mesh = trimesh.Trimesh(v, f, process=False)
            if mesh.is_watertight:
                volume = float(np.prod(self.hi - self.lo))
                pitch_m = min(max(pitch_m, (volume / max_cells) ** (1 / 3)), max_pitch_m)
                axes = [np.arange(self.lo[i] + pitch_m / 2, self.hi[i], pitch_m) for i in range(3)]
                grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1)
                self.grid = mesh.contains(grid.reshape(-1, 3)).reshape(grid.shape[:3])
                self.grid_origin, self.pitch = self.lo, pitch_m
        else:
            self.geometry = coal.makeOctree(obj.points_m, obj.resolution_m)
            half = obj.resolution_m  # octree cells extend beyond the points by up to one cell
            self.lo, self.hi = obj.points_m.min(0) - half, obj.points_m.max(0) + half
        self.centre, self.half = (self.lo + self.hi) / 2, (self.hi - self.lo) / 2

    def inside(self, points: np.ndarray) -> np.ndarray:
        """(N,) True where a point lies in an occupied cell of the solid grid."""
        if self.grid is None:
            return np.zeros(len(points), dtype=bool)
        idx = np.floor((points - self.grid_origin) / self.pitch).astype(int)
        ok = ((idx >= 0) & (idx < self.grid.shape)).all(-1)
        out = np.zeros(len(points), dtype=bool)
        out[ok] = self.grid[tuple(idx[ok].T)]
        return out


class CollisionChecker:
    """Validity of arm configurations (7,) and of straight motions between them, in one world.

    Distances are bounded first per link (a sphere around all shapes of the link), then per shape only for
    links near an obstacle or another link.

    Args:
        robot: robot shapes and kinematics; its hand joints (`set_hand`) hold for every query.
        world: obstacles in the world frame.
        config: margins and resolutions.
    """

    def __init__(self, robot: RobotCollisionModel, world: PlanningWorld,
                 config: CollisionCheckerConfig = CollisionCheckerConfig(), workspace: WorkspaceBox | None = None) -> None:
        self.robot, self.world, self.config, self.workspace = robot, world, config, workspace
        self._I = coal.Transform3s()
        boxes = world.boxes
        self._obstacle_names = [b.name for b in boxes] + [o.name for o in world.objects]
        self._boxes = [(b.T_world_box[:3, 3].copy(), b.T_world_box[:3, :3].copy(), np.array(b.size_m) / 2,
                        coal.Box(*b.size_m), coal.Transform3s(b.T_world_box[:3, :3].copy(), b.T_world_box[:3, 3].copy()))
                       for b in boxes]
        s = robot.shapes
        thinnest = float(np.where(s.is_sphere, s.radius_m, s.half_extents_m.min(axis=1))[s.body > 0].min())
        self._objects = [_CompiledObject(o, config.solid_grid_pitch_m, config.solid_grid_max_cells, 2 * thinnest / np.sqrt(3))
                         for o in world.objects]
        self.num_checks = 0
        self._setup_shapes()

    def _setup_points(self) -> None:
        """The workspace frames as points of the end effector (they move with the hand joints)."""
        if self.workspace is None:
            self._points, self._point_reach = np.zeros((0, 3)), np.zeros((0, 7))
            return
        self._points, self._point_reach = self.robot.end_effector_points(self.workspace.frames)
        self._box_lo = np.asarray(self.workspace.min_m, dtype=float) + self.workspace.margin_m
        self._box_hi = np.asarray(self.workspace.max_m, dtype=float) - self.workspace.margin_m

    def _box_clearances(self, T_body: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N,) how far each workspace frame is inside the (shrunk) box (negative: outside) and its position (N, 3)."""
        if not len(self._points):
            return np.zeros(0), np.zeros((0, 3))
        T = T_body[END_EFFECTOR_BODY]
        p = self._points @ T[:3, :3].T + T[:3, 3]
        return np.minimum(p - self._box_lo, self._box_hi - p).min(axis=1), p

    def _setup_shapes(self) -> None:
        self._setup_points()
        s = self.robot.shapes
        K = len(s)
        self._moving_mask = s.body > 0  # fr3_link0 stands on the table and never moves
        self._moving = np.flatnonzero(self._moving_mask)
        self._geoms = [coal.Sphere(float(s.radius_m[k])) if s.is_sphere[k] else coal.Box(*(2 * s.half_extents_m[k]))
                       for k in range(K)]
        # links: a bounding sphere (in the body frame) around each link's shapes
        self._links = list(dict.fromkeys(s.link_names))
        self._link_of = np.array([self._links.index(n) for n in s.link_names])
        centres = s.T_body_shape[:, :3, 3]
        self._link_body = np.array([s.body[self._link_of == i][0] for i in range(len(self._links))])
        self._link_centre = np.array([centres[self._link_of == i].mean(0) for i in range(len(self._links))])
        self._link_radius = np.array([
            (np.linalg.norm(centres[self._link_of == i] - self._link_centre[i], axis=1)
             + s.bounding_radius_m[self._link_of == i]).max() for i in range(len(self._links))])
        # self-collision pairs, grouped by link pair
        a, b = self.robot.self_collision_pairs() if self.config.self_collision else (np.zeros(0, int),) * 2
        self._pair_a, self._pair_b = a, b
        # Relative motion of a pair: only the joints between the two bodies move one shape against the other, so
        # the shape on the farther body moves at most pair_reach @ |dq| in the nearer body's frame.
        lo_body, hi_body = np.minimum(s.body[a], s.body[b]), np.maximum(s.body[a], s.body[b])
        far_shape = np.where(s.body[a] >= s.body[b], a, b)
        joints = np.arange(s.reach_m.shape[1])
        between = (joints[None] >= lo_body[:, None]) & (joints[None] < hi_body[:, None])
        self._pair_reach = s.reach_m[far_shape] * between
        groups = list(dict.fromkeys(zip(self._link_of[a].tolist(), self._link_of[b].tolist())))
        self._group_a = np.array([g[0] for g in groups], dtype=int)
        self._group_b = np.array([g[1] for g in groups], dtype=int)
        index = {g: i for i, g in enumerate(groups)}
        self._pair_group = np.array([index[g] for g in zip(self._link_of[a].tolist(), self._link_of[b].tolist())], dtype=int)
        sa, sb = s.is_sphere[a], s.is_sphere[b]
        ids = np.arange(len(a))
        self._kinds = (("ss", ids[sa & sb], a[sa & sb], b[sa & sb]),
                       ("sb", ids[sa != sb], np.where(sa, a, b)[sa != sb], np.where(sa, b, a)[sa != sb]),
                       ("bb", ids[~sa & ~sb], a[~sa & ~sb], b[~sa & ~sb]))

    def set_hand(self, hand_rad: np.ndarray) -> None:
        """Fix the 16 hand joints (rad) for the following queries."""
        self.robot.set_hand(hand_rad)
        self._setup_shapes()

    # -- distances ---------------------------------------------------------------------------------------
    def _place(self, q_arm_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Shape centres (K, 3), rotations (K, 3, 3), link bounding-sphere centres (L, 3) and T_world_body (8, 4, 4)."""
        T_body = self.robot.body_poses(np.asarray(q_arm_rad, dtype=float))
        T = T_body[self.robot.shapes.body] @ self.robot.shapes.T_body_shape
        Tl = T_body[self._link_body]
        link_c = (Tl[:, :3, :3] @ self._link_centre[:, :, None])[:, :, 0] + Tl[:, :3, 3]
        return T[:, :3, 3], T[:, :3, :3], link_c, T_body

    def _coal_distance(self, k: int, c: np.ndarray, R: np.ndarray, geom, tf) -> float:
        result = coal.DistanceResult()
        return coal.distance(self._geoms[k], coal.Transform3s(R[k], c[k]), geom, tf, coal.DistanceRequest(), result)

    def _coal_collides(self, k: int, c: np.ndarray, R: np.ndarray, geom, tf, margin_m: float) -> bool:
        request, result = coal.CollisionRequest(), coal.CollisionResult()
        request.security_margin = margin_m
        coal.collide(self._geoms[k], coal.Transform3s(R[k], c[k]), geom, tf, request, result)
        return result.isCollision()

    def _world_distances(self, c: np.ndarray, R: np.ndarray, link_c: np.ndarray, exact_below_m: float,
                         decide_only: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per shape: lower bound of the distance to the nearest obstacle (K,), that obstacle's index and whether
        the shape's centre is inside it (a solid object).

        Shapes whose bound is below exact_below_m get a tighter bound (exact for spheres against boxes; coal for the
        object and for boxes the separating-axis bound cannot clear). decide_only: only tell apart "at least
        world_buffer_m" from "closer" (coal collision queries instead of distances).
        """
        s, buffer = self.robot.shapes, self.config.world_buffer_m
        best, which, inside = np.full(len(s), _FAR_M), np.full(len(s), -1), np.zeros(len(s), dtype=bool)
        items = [(bc, bR, bh, geom, tf, None) for bc, bR, bh, geom, tf in self._boxes]
        items += [(o.centre, np.eye(3), o.half, o.geometry, self._I, o) for o in self._objects]
        for w, (bc, bR, bh, geom, tf, obj) in enumerate(items):
            d = sphere_box_distance(link_c, self._link_radius, bc, bR, bh)[self._link_of]
            is_in = np.zeros(len(s), dtype=bool)
            idx = np.flatnonzero(self._moving_mask & (d < exact_below_m))
            if len(idx):
                sph, box = idx[s.is_sphere[idx]], idx[~s.is_sphere[idx]]
                d[sph] = sphere_box_distance(c[sph], s.radius_m[sph], bc, bR, bh)
                d[box] = box_box_lower_bound(c[box], R[box], s.half_extents_m[box], bc, bR, bh)
                if obj is None:  # a world box: exact already for spheres; boxes the bound cannot clear go to coal
                    exact = box[d[box] < buffer]
                else:  # the object's bounding box: shapes near it go to coal, and to the inside test
                    exact = idx[d[idx] < exact_below_m]
                    centre_in = obj.inside(c[exact])
                    is_in[exact[centre_in]] = True
                    d[exact[centre_in]] = -s.bounding_radius_m[exact[centre_in]]
                    exact = exact[~centre_in]
                for k in exact:
                    if decide_only:
                        d[k] = -1.0 if self._coal_collides(k, c, R, geom, tf, buffer) else buffer
                    else:
                        d[k] = self._coal_distance(k, c, R, geom, tf)
            closer = d < best
            best[closer], which[closer], inside[closer] = d[closer], w, is_in[closer]
        return best, which, inside

    def _self_distances(self, c: np.ndarray, R: np.ndarray, link_c: np.ndarray, exact_below_m: float) -> np.ndarray:
        """(P,) lower bounds of the signed distances of the self-collision pairs: per link pair from the links'
        bounding spheres, per shape pair (sphere-sphere and sphere-box exact; box-box bounded) where that bound
        minus the allowance is below exact_below_m."""
        s = self.robot.shapes
        ga, gb = self._group_a, self._group_b
        diff = link_c[ga] - link_c[gb]
        d_group = np.sqrt((diff * diff).sum(-1)) - self._link_radius[ga] - self._link_radius[gb]
        d = d_group[self._pair_group]
        near = (d_group + self.config.self_collision_allowance_m < exact_below_m)[self._pair_group]
        for kind, ids, a, b in self._kinds:
            sel = near[ids]
            if not sel.any():
                continue
            ids, a, b = ids[sel], a[sel], b[sel]
            if kind == "ss":
                diff = c[a] - c[b]
                d[ids] = np.sqrt((diff * diff).sum(-1)) - s.radius_m[a] - s.radius_m[b]
            elif kind == "sb":
                d[ids] = sphere_box_distance(c[a], s.radius_m[a], c[b], R[b], s.half_extents_m[b])
            else:
                d[ids] = box_box_lower_bound(c[a], R[a], s.half_extents_m[a], c[b], R[b], s.half_extents_m[b])
        return d

    # -- queries -----------------------------------------------------------------------------------------
    def is_valid(self, q_arm_rad: np.ndarray) -> bool:
        """True when the configuration keeps the world buffer and has no self-collision."""
        self.num_checks += 1
        c, R, link_c, T_body = self._place(q_arm_rad)
        cfg = self.config
        if (self._box_clearances(T_body)[0] < 0).any():
            return False
        if cfg.self_collision and (self._self_distances(c, R, link_c, 0.0) < -cfg.self_collision_allowance_m).any():
            return False
        world, _, _ = self._world_distances(c, R, link_c, cfg.world_buffer_m, decide_only=True)
        return bool((world[self._moving] >= cfg.world_buffer_m).all())

    def clearances(self, q_arm_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower bounds of the margins left at a configuration (negative: invalid).

        Returns:
            (K + N,) per robot shape: distance to the nearest obstacle minus world_buffer_m (inf for fr3_link0), then
            per workspace frame: how far inside the box it is (N = 0 without a box), and
            (P,) per self-collision pair (`self_pairs`): distance plus self_collision_allowance_m.
        """
        world, self_c, _, _ = self._clearances(q_arm_rad)
        return world, self_c

    def _clearances(self, q_arm_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`clearances`, plus the shape centres (K, 3) and T_world_body (8, 4, 4) they were computed at."""
        self.num_checks += 1
        c, R, link_c, T_body = self._place(q_arm_rad)
        cfg = self.config
        world, _, _ = self._world_distances(c, R, link_c, cfg.exact_distance_below_m, decide_only=False)
        world = world - cfg.world_buffer_m
        world[~self._moving_mask] = np.inf
        box, points = self._box_clearances(T_body)
        self_c = self._self_distances(c, R, link_c, cfg.exact_distance_below_m) + cfg.self_collision_allowance_m
        return np.concatenate([world, box]), self_c, np.concatenate([c, points]), T_body

    @property
    def self_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Shape indices (P,), (P,) of the self-collision pairs, in the order of `clearances`."""
        return self._pair_a, self._pair_b

    def check_motion(self, q_from_rad: np.ndarray, q_to_rad: np.ndarray) -> bool:
        """True when the straight joint-space motion between two configurations is valid all along (both ends too).

        Steps along the segment (fraction t of dq) are as long as the clearances allow: shape k moves at most
        reach_m[k] @ |dq| per unit t (global bound), and at most a h + b h^2 / 2 over the next h, where a uses the
        shape's current distances to the joint axes and b bounds how fast those distances grow.
        """
        q0 = np.asarray(q_from_rad, dtype=float)
        dq = np.asarray(q_to_rad, dtype=float) - q0
        abs_dq = np.abs(dq)
        motion_m, growth, pair_motion_m = self.motion_bounds(dq)
        max_motion = float(motion_m.max())
        min_step = self.config.motion_resolution_m / max_motion if max_motion > 0 else 1.0
        moving = motion_m > 0
        t = 0.0
        while True:
            world, self_c, c, T_body = self._clearances(q0 + t * dq)
            if (world < 0).any() or (self_c < 0).any():
                return False
            if t >= 1.0:
                return True
            rate = self._axis_distances(c, T_body) @ abs_dq  # (K,) a: motion per unit t right now
            w = world[moving]
            a, b = rate[moving], growth[moving]
            local = np.where(b > 0, 2 * w / (a + np.sqrt(a * a + 2 * b * w)), w / np.maximum(a, 1e-300))
            step_world = float(np.min(np.maximum(local, w / motion_m[moving]), initial=np.inf))
            step = min(step_world, _min_ratio(self_c, pair_motion_m))
            t = min(1.0, t + max(step, min_step))

    def motion_bounds(self, dq_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bounds for a straight motion q0 + t dq, t in [0, 1], valid for any q0.

        Returns:
            (K + N,) metres any point of each shape (then each workspace frame) moves per unit t; (K + N,) b: how fast
            the current rate (`motion_rates`) can grow per unit t; (P,) metres each self-collision pair moves relative
            to each other per unit t.
        """
        abs_dq = np.abs(np.asarray(dq_rad, dtype=float))
        weighted = np.concatenate([self.robot.shapes.reach_m, self._point_reach]) * abs_dq  # (K + N, 7)
        beyond = np.cumsum(weighted[:, ::-1], axis=1)[:, ::-1] - weighted  # sum over joints j > i
        return weighted.sum(1), beyond @ abs_dq, self._pair_reach @ abs_dq

    def motion_rates(self, q_arm_rad: np.ndarray, dq_rad: np.ndarray) -> np.ndarray:
        """(K + N,) metres per unit t that any point of each shape (then each workspace frame) moves at q along dq,
        right now: over the next h, a point moves at most rate h + growth h^2 / 2 (see motion_bounds)."""
        _, _, _, T_body = self._place(q_arm_rad)
        c = (T_body[self.robot.shapes.body] @ self.robot.shapes.T_body_shape)[:, :3, 3]
        return self._axis_distances(np.concatenate([c, self._box_clearances(T_body)[1]]), T_body) @ np.abs(
            np.asarray(dq_rad, dtype=float))

    def _axis_distances(self, c: np.ndarray, T_body: np.ndarray) -> np.ndarray:
        """(K + N, 7) distance from each joint axis to the farthest point of each shape (then each workspace frame, a
        point) it moves (0 where it does not)."""
        origins, axes = T_body[1:, :3, 3], T_body[1:, :3, 2]  # joint i+1 turns fr3_link(i+1) about its z axis
        v = c[:, None, :] - origins[None]  # (K + N, 7, 3)
        along = (v * axes[None]).sum(-1, keepdims=True)
        radial = np.sqrt(((v - along * axes[None]) ** 2).sum(-1))
        n = len(self._points)
        radius = np.concatenate([self.robot.shapes.bounding_radius_m, np.zeros(n)])
        moved = np.concatenate([self.robot.shapes.reach_m, self._point_reach]) > 0
        return (radial + radius[:, None]) * moved

    def check_path(self, path_rad: np.ndarray) -> bool:
        """True when every segment of a (N, 7) waypoint path is valid."""
        path = np.asarray(path_rad, dtype=float)
        if len(path) == 1:
            return self.is_valid(path[0])
        return all(self.check_motion(a, b) for a, b in zip(path[:-1], path[1:]))

    def report(self, q_arm_rad: np.ndarray) -> CollisionReport:
        """Every contact (exact distances) of a configuration, deepest first; empty when valid."""
        c, R, link_c, _ = self._place(q_arm_rad)
        s, cfg = self.robot.shapes, self.config
        contacts = []
        world, which, inside = self._world_distances(c, R, link_c, max(cfg.exact_distance_below_m, cfg.world_buffer_m),
                                                     decide_only=False)
        for k in self._moving[world[self._moving] < cfg.world_buffer_m]:
            contacts.append(Contact(s.link_names[k], self._obstacle_names[int(which[k])], float(world[k]),
                                    inside=bool(inside[k])))
        box, _ = self._box_clearances(self.robot.body_poses(np.asarray(q_arm_rad, dtype=float)))
        for n in np.flatnonzero(box < 0):
            contacts.append(Contact(self.workspace.frames[n], "workspace box", float(box[n])))
        if cfg.self_collision:
            d = self._self_distances(c, R, link_c, np.inf)
            for p in np.flatnonzero(d < -cfg.self_collision_allowance_m):
                contacts.append(Contact(s.link_names[self._pair_a[p]], s.link_names[self._pair_b[p]], float(d[p]), True))
        deepest: dict[tuple[str, str, bool], Contact] = {}
        for contact in contacts:  # one contact per (link, obstacle): the deepest
            key = (contact.link, contact.other, contact.self_collision)
            if key not in deepest or contact.distance_m < deepest[key].distance_m:
                deepest[key] = contact
        return CollisionReport(tuple(sorted(deepest.values(), key=lambda x: x.distance_m)))
