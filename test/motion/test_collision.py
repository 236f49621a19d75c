"""Collision checking: geometry helpers against coal, the table against MuJoCo, motions against dense sampling."""

from __future__ import annotations

import coal
import numpy as np
import pytest
import trimesh

from getagrip_ros.motion.collision import (
    CollisionChecker, CollisionCheckerConfig, box_box_lower_bound, sphere_box_distance,
)
from getagrip_ros.motion.robot_geometry import RobotCollisionModel
from getagrip_ros.motion.world import ObjectMesh, ObjectPointCloud, PlanningWorld, WorldBox, table_box, translation

from .conftest import OPEN_HAND, Q_READY, Q_REACH_FORWARD

EXACT = CollisionCheckerConfig(world_buffer_m=0.0)  # the true geometry, no buffer


def _random_rotations(rng: np.random.Generator, n: int) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return np.array([trimesh.transformations.quaternion_matrix(x)[:3, :3] for x in q])


def _coal_distance(g1, R1, t1, g2, R2, t2) -> float:
    return coal.distance(g1, coal.Transform3s(R1, t1), g2, coal.Transform3s(R2, t2), coal.DistanceRequest(),
                         coal.DistanceResult())


def test_sphere_box_distance_matches_coal():
    rng = np.random.default_rng(0)
    n = 200
    c, r = rng.uniform(-0.12, 0.12, (n, 3)), rng.uniform(0.005, 0.05, n)
    bc, bR, bh = rng.uniform(-0.05, 0.05, (n, 3)), _random_rotations(rng, n), rng.uniform(0.01, 0.1, (n, 3))
    ours = sphere_box_distance(c, r, bc, bR, bh)
    ref = np.array([_coal_distance(coal.Sphere(r[i]), np.eye(3), c[i], coal.Box(*(2 * bh[i])), bR[i], bc[i])
                    for i in range(n)])
    assert (ref > 0).sum() > 50 and (ref < 0).sum() > 20
    np.testing.assert_allclose(ours, ref, atol=1e-6)  # signed: penetration depths too


def test_box_box_lower_bound_never_exceeds_the_distance():
    rng = np.random.default_rng(1)
    n = 300
    ca, Ra, ha = rng.uniform(-0.2, 0.2, (n, 3)), _random_rotations(rng, n), rng.uniform(0.01, 0.08, (n, 3))
    cb, Rb, hb = rng.uniform(-0.2, 0.2, (n, 3)), _random_rotations(rng, n), rng.uniform(0.01, 0.08, (n, 3))
    bound = box_box_lower_bound(ca, Ra, ha, cb, Rb, hb)
    ref = np.array([_coal_distance(coal.Box(*(2 * ha[i])), Ra[i], ca[i], coal.Box(*(2 * hb[i])), Rb[i], cb[i])
                    for i in range(n)])
    assert (bound <= np.maximum(ref, 0) + 1e-6).all()
    separated = ref > 0.01
    assert (bound[separated] > 0.5 * ref[separated]).mean() > 0.5  # and useful: mostly within a factor 2


def test_table_verdicts_agree_with_mujoco(robot_model):
    """Random arm configurations: the links we find under the table top are the ones MuJoCo's contacts name."""
    import mujoco
    from getagrip_ros.sim.scene import SceneConfig
    from getagrip_ros.sim.world import SimWorld

    checker = CollisionChecker(robot_model, PlanningWorld(), CollisionCheckerConfig(world_buffer_m=0.0, self_collision=False))
    rng = np.random.default_rng(0)
    lo, hi = robot_model.lower_limits_rad, robot_model.upper_limits_rad
    with SimWorld(SceneConfig(robot="arm")) as world:
        m, d = world.model, world.data
        table = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "table")
        with_contacts = 0
        for _ in range(200):
            q = lo + (hi - lo) * rng.random(7)
            world.reset(q, OPEN_HAND)
            theirs = set()
            for i in range(d.ncon):
                c = d.contact[i]
                if table in (c.geom1, c.geom2) and c.dist < -1e-4:
                    theirs.add(m.body(m.geom_bodyid[c.geom2 if c.geom1 == table else c.geom1]).name)
            ours = {x.link for x in checker.report(q).contacts if x.other == "table" and x.distance_m < -1e-4}
            theirs.discard("fr3_link0")  # the base stands on the table; we never check it
            assert ours == theirs, q
            with_contacts += bool(ours)
    assert with_contacts >= 10


def test_report_names_the_obstacle_and_the_link(robot_model):
    checker = CollisionChecker(robot_model, PlanningWorld())
    assert checker.is_valid(Q_READY) and not checker.report(Q_READY).in_collision
    q_low = np.array([0.0, 1.2, 0.0, -0.8, 0.0, 1.6, 0.785])  # hand pushed into the table in front of the robot
    assert not checker.is_valid(q_low)
    report = checker.report(q_low)
    assert report.in_collision and report.contacts[0].other == "table"
    assert "in collision with the table (link " in report.describe()
    links = {c.link for c in report.contacts}
    assert links & {"palm_link", "link_3.0_tip", "link_7.0_tip", "link_11.0_tip", "link_15.0_tip"}


def test_buffer_is_enforced(robot_model):
    """A box 0.5 mm below the lowest fingertip: valid without a buffer, invalid with the 1 mm buffer."""
    placed = robot_model.place(Q_REACH_FORWARD)
    s = robot_model.shapes
    bottom = placed.centres_m[:, 2] - s.radius_m - (np.abs(placed.rotations[:, 2, :]) * s.half_extents_m).sum(1)
    bottom[s.body == 0] = np.inf  # the base is not checked
    lowest = int(np.argmin(bottom))
    c = placed.centres_m
    top = bottom[lowest] - 0.0005
    floor = WorldBox("floor", (0.2, 0.2, 0.02), translation((c[lowest, 0], c[lowest, 1], top - 0.01)))
    assert CollisionChecker(robot_model, PlanningWorld((floor,)), EXACT).is_valid(Q_REACH_FORWARD)
    buffered = CollisionChecker(robot_model, PlanningWorld((floor,)), CollisionCheckerConfig(world_buffer_m=0.001))
    assert not buffered.is_valid(Q_REACH_FORWARD)
    assert buffered.report(Q_REACH_FORWARD).contacts[0].other == "floor"


def test_self_collision_is_found(robot_model):
    """Random configurations include folded ones where the hand hits the arm; those are refused and reported."""
    checker = CollisionChecker(robot_model, PlanningWorld(boxes=()))
    no_self = CollisionChecker(robot_model, PlanningWorld(boxes=()), CollisionCheckerConfig(self_collision=False))
    rng = np.random.default_rng(3)
    lo, hi = robot_model.lower_limits_rad, robot_model.upper_limits_rad
    found = 0
    for _ in range(300):
        q = lo + (hi - lo) * rng.random(7)
        if not checker.is_valid(q):
            assert not no_self.is_valid(q) or any(c.self_collision for c in checker.report(q).contacts)
            found += any(c.self_collision for c in checker.report(q).contacts)
    assert found >= 5
    assert checker.is_valid(Q_READY)


def test_object_mesh_is_solid_and_point_clouds_work(robot_model):
    """A fingertip sphere wholly inside a cube mesh crosses no triangle, yet the solid cube is hit."""
    placed = robot_model.place(Q_READY)
    tip = robot_model.shapes.link_names.index("link_7.0_tip")
    cube = trimesh.creation.box((0.06, 0.06, 0.06))  # half size 30 mm > the tip's 12 mm radius
    centre = tuple(placed.centres_m[tip])
    mesh_world = PlanningWorld(boxes=(), objects=(ObjectMesh("cube", cube.vertices, cube.faces, translation(centre)),))
    surface = coal.BVHModelOBBRSS()
    surface.beginModel(len(cube.faces), len(cube.vertices))
    surface.addVertices(np.asarray(cube.vertices) + centre)
    surface.addTriangles(np.asarray(cube.faces))
    surface.endModel()
    tip_sphere = coal.Sphere(float(robot_model.shapes.radius_m[tip]))
    assert _coal_distance(tip_sphere, np.eye(3), placed.centres_m[tip], surface, np.eye(3), np.zeros(3)) > 0.01
    checker = CollisionChecker(robot_model, mesh_world)
    assert not checker.is_valid(Q_READY)
    report = checker.report(Q_READY)
    assert any(c.inside and c.link == "link_7.0_tip" and c.other == "cube" for c in report.contacts)
    palm = robot_model.frame_pose(Q_READY, "palm_link")[:3, 3]

    small = trimesh.creation.box((0.05, 0.05, 0.05))
    points = small.sample(3000, seed=0) + palm + [0.0, 0.0, -0.2]  # a cloud well below the hand
    cloud_world = PlanningWorld(boxes=(), objects=(ObjectPointCloud("cloud", points, 0.004),))
    assert CollisionChecker(robot_model, cloud_world).is_valid(Q_READY)
    touching = PlanningWorld(boxes=(), objects=(ObjectPointCloud("cloud", points + [0.0, 0.0, 0.2], 0.004),))
    touching_checker = CollisionChecker(robot_model, touching)
    assert not touching_checker.is_valid(Q_READY)
    assert touching_checker.report(Q_READY).contacts[0].other == "cloud"


def test_check_motion_is_conservative(robot_model):
    """Random motions (valid ends) in a world with the table and a wall, checked against dense sampling (every 4 mm of
    motion) of the true geometry: a motion judged valid never touches it, and a motion that touches it is refused.
    (Between checked states a point may move 1 mm closer than the 1 mm buffer: the dense check uses no buffer, and for
    self-collisions 2 mm more allowance.)"""
    wall = WorldBox("wall", (0.1, 0.1, 0.65), translation((0.45, 0.0, 0.325)))
    world = PlanningWorld((table_box(), wall))
    checker = CollisionChecker(robot_model, world)
    truth = CollisionChecker(robot_model, world, CollisionCheckerConfig(world_buffer_m=0.0, self_collision_allowance_m=0.022))
    start, goal = Q_READY.copy(), Q_READY.copy()
    start[0], goal[0] = -0.9, 0.9
    assert checker.is_valid(start) and checker.is_valid(goal)
    assert not checker.check_motion(start, goal)  # the sweep of joint 1 passes through the wall

    rng = np.random.default_rng(0)
    lo, hi = robot_model.lower_limits_rad, robot_model.upper_limits_rad
    valid = crossing = 0
    for _ in range(300):
        a = lo + (hi - lo) * rng.random(7)
        b = np.clip(a + rng.uniform(-1.2, 1.2, 7), lo, hi)
        if not (checker.is_valid(a) and checker.is_valid(b)):
            continue
        if crossing < 6 and not all(truth.is_valid(a + s * (b - a)) for s in np.linspace(0.05, 0.95, 19)):
            assert not checker.check_motion(a, b), (a, b)  # it touches the geometry: refused
            crossing += 1
        elif valid < 6 and checker.check_motion(a, b):
            motion_m = float((robot_model.shapes.reach_m @ np.abs(b - a)).max())
            samples = np.linspace(0.0, 1.0, max(2, int(np.ceil(motion_m / 0.004)) + 1))
            assert all(truth.is_valid(a + s * (b - a)) for s in samples), (a, b)  # judged valid: free
            valid += 1
        if valid >= 6 and crossing >= 6:
            break
    assert valid >= 6 and crossing >= 6


def test_small_obstacles_between_checked_states_are_found(robot_model):
    """A 1 cm cube put on a robot shape at a random instant of a long motion (away from both ends) is always hit."""
    rng = np.random.default_rng(5)
    lo, hi = robot_model.lower_limits_rad, robot_model.upper_limits_rad
    moving = np.flatnonzero(robot_model.shapes.body >= 4)
    tried = 0
    while tried < 12:
        a = lo + (hi - lo) * rng.random(7)
        b = np.clip(a + rng.uniform(-1.0, 1.0, 7), lo, hi)
        t = rng.uniform(0.2, 0.8)
        k = rng.choice(moving)
        centre = robot_model.place(a + t * (b - a)).centres_m[k]
        cube = WorldBox("cube", (0.01, 0.01, 0.01), translation(tuple(centre)))
        checker = CollisionChecker(robot_model, PlanningWorld((cube,)), CollisionCheckerConfig(self_collision=False))
        if not (checker.is_valid(a) and checker.is_valid(b)):
            continue
        tried += 1
        assert not checker.check_motion(a, b), (a, b, t, k)


def test_checker_rejects_bad_configs():
    with pytest.raises(ValueError, match="world_buffer_m"):
        CollisionCheckerConfig(world_buffer_m=-0.001)
    with pytest.raises(ValueError, match="motion_resolution_m"):
        CollisionCheckerConfig(motion_resolution_m=0.0)
    with pytest.raises(ValueError, match="16 finite"):
        RobotCollisionModel(hand_rad=np.zeros(15))


def _shape_points(model: RobotCollisionModel, q: np.ndarray) -> np.ndarray:
    """(K, 8, 3) world points on each shape: box corners, or sphere centre + radius along 8 diagonals."""
    placed = model.place(q)
    s = model.shapes
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
    local = np.where(s.is_sphere[:, None, None], signs[None] * s.radius_m[:, None, None] / np.sqrt(3),
                     signs[None] * s.half_extents_m[:, None, :])
    return placed.centres_m[:, None] + np.einsum("kij,kpj->kpi", placed.rotations, local)


def test_motion_bounds_hold(robot_model):
    """The bounds conservative advancement relies on, measured: how far shape points move (in the world and relative
    to the other shape of each self-collision pair) over parts of random motions."""
    checker = CollisionChecker(robot_model, PlanningWorld(boxes=()))
    rng = np.random.default_rng(2)
    lo, hi = robot_model.lower_limits_rad, robot_model.upper_limits_rad
    a_idx, b_idx = checker.self_pairs
    body = robot_model.shapes.body
    t = np.linspace(0.0, 1.0, 41)
    for _ in range(25):
        q0 = lo + (hi - lo) * rng.random(7)
        dq = np.clip(q0 + rng.uniform(-1.5, 1.5, 7), lo, hi) - q0
        total, growth, pair_total = checker.motion_bounds(dq)
        rate = checker.motion_rates(q0, dq)
        points = np.array([_shape_points(robot_model, q0 + ti * dq) for ti in t])  # (T, K, 8, 3)
        moved = np.linalg.norm(points - points[0], axis=-1).max(-1)  # (T, K) from t = 0
        assert (moved <= t[:, None] * total[None] + 1e-9).all()
        assert (moved <= rate[None] * t[:, None] + 0.5 * growth[None] * t[:, None] ** 2 + 1e-9).all()
        # relative motion of each pair: the higher body's shape seen from the lower body's frame
        frames = np.array([robot_model.body_poses(q0 + ti * dq) for ti in t])  # (T, 8, 4, 4)
        far = np.where(body[a_idx] >= body[b_idx], a_idx, b_idx)
        near_body = np.minimum(body[a_idx], body[b_idx])
        near_frames = frames[:, near_body]  # (T, P, 4, 4)
        R, p = near_frames[..., :3, :3], near_frames[..., :3, 3]
        local = np.einsum("tpji,tpkj->tpki", R, points[:, far] - p[:, :, None])  # R^T (x - p)
        rel = np.linalg.norm(local - local[0], axis=-1).max(-1)  # (T, P)
        assert (rel <= t[:, None] * pair_total[None] + 1e-9).all()


def test_the_workspace_box_keeps_the_palm_flange_and_fingertips_inside_along_motions():
    """With the safety layer's box, a state whose frames leave it is invalid (and reported), and a motion whose ends are
    inside but whose middle swings out is caught by the conservative advancement - as dense sampling confirms."""
    from getagrip_ros.motion.collision import WorkspaceBox
    from getagrip_ros.robot.description import FINGERTIP_LINK_NAMES, FLANGE_LINK, PALM_LINK

    robot = RobotCollisionModel()
    robot.set_hand(OPEN_HAND)
    frames = (PALM_LINK, FLANGE_LINK, *FINGERTIP_LINK_NAMES)

    def xs(q):
        return np.array([robot.frame_pose(q, f)[0, 3] for f in frames])

    a, b = Q_READY.copy(), Q_READY.copy()
    a[0], b[0] = -0.6, 0.6  # a swing about the base: the hand is farthest forward half way
    middle = Q_READY.copy()
    middle[0] = 0.0
    x_ends, x_mid = max(xs(a).max(), xs(b).max()), xs(middle).max()
    assert x_mid > x_ends + 0.02
    box = WorkspaceBox((-2.0, -2.0, -2.0), ((x_ends + x_mid) / 2, 2.0, 2.0))
    free = CollisionChecker(robot, PlanningWorld(), CollisionCheckerConfig(self_collision=False))
    boxed = CollisionChecker(robot, PlanningWorld(), CollisionCheckerConfig(self_collision=False), box)
    assert boxed.is_valid(a) and boxed.is_valid(b) and free.is_valid(middle) and not boxed.is_valid(middle)
    assert "mm outside the workspace box" in boxed.report(middle).describe()
    assert free.check_motion(a, b) and not boxed.check_motion(a, b)
    inside = np.array(a)
    inside[0] = -0.5  # a short motion that stays out of the forward strip
    dense = [inside + t * (a - inside) for t in np.linspace(0, 1, 50)]
    assert all(xs(q).max() < box.max_m[0] - box.margin_m for q in dense) and boxed.check_motion(inside, a)
    with pytest.raises(ValueError, match="empty"):
        WorkspaceBox((0.0, 0.0, 0.0), (0.001, 1.0, 1.0))
