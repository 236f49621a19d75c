import math

import mujoco
import numpy as np
import pytest
import trimesh

from getagrip_ros.objects.mesh_object import ObjectRejected, ObjectSpec, PrepareConfig, PreparedObject, prepare_object
from getagrip_ros.objects.procedural import BoxShape, CompositeShape, PlacedShape
from getagrip_ros.objects.settle import COLLISION_GROUP, VISUAL_GROUP, SettleConfig, add_object_body, settle_test

# A thin post carrying a long arm at its top: the centre of mass is far outside the 1.5 cm footprint.
TOP_HEAVY = CompositeShape((PlacedShape(BoxShape((0.015, 0.015, 0.15))),
                            PlacedShape(BoxShape((0.14, 0.03, 0.03)), pos_m=(0.06, 0.0, 0.13))))


@pytest.fixture
def box(hull_only):
    return prepare_object(ObjectSpec("p/box", "procedural", BoxShape((0.06, 0.08, 0.10))), hull_only)


def test_box_drops_and_settles_upright(box):
    result = settle_test(box)
    assert result.settled and result.upright and result.at_rest and result.reason == ""
    assert result.drop_m == pytest.approx(0.02, abs=1e-3)
    assert result.final_height_m == pytest.approx(0.0, abs=1e-3)
    assert result.max_rotation_rad < math.radians(1)
    assert result.final_speed_m_s < 1e-2 and result.final_angular_speed_rad_s < 1e-1


def test_a_still_falling_object_is_not_at_rest(box):
    result = settle_test(box, SettleConfig(steps=20, rest_window_steps=15))  # 0.1 s: still in the air
    assert not result.settled and result.upright and not result.at_rest
    assert result.reason.startswith("did not settle: moved")


def test_top_heavy_object_tips_over_and_is_rejected(hull_only, tmp_path):
    spec = ObjectSpec("p/top_heavy", "procedural", TOP_HEAVY)
    obj = prepare_object(spec, hull_only)
    result = settle_test(obj)
    assert not result.settled and not result.upright
    assert result.max_rotation_rad > SettleConfig().max_rotation_rad
    assert result.reason.startswith("tipped over: rotated")
    config = PrepareConfig(cache_dir=str(tmp_path), settle=SettleConfig())
    with pytest.raises(ObjectRejected, match=r"p/top_heavy: tipped over: rotated \d+ deg \(limit 36\) after 200 steps"):
        prepare_object(spec, config)


def test_added_body_has_density_mass_inertia_and_named_geoms(box):
    spec = mujoco.MjSpec()
    yaw_90 = (math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4))
    add_object_body(spec, box, "obj_a", (0.5, 0.1, 0.02), yaw_90)
    add_object_body(spec, box, "obj_b", (0.8, 0.0, 0.0), mass_kg=0.3)
    model = spec.compile()
    a, b = model.body("obj_a"), model.body("obj_b")
    mass = 500.0 * 0.06 * 0.08 * 0.10
    assert a.mass[0] == pytest.approx(mass, rel=1e-6) and b.mass[0] == pytest.approx(0.3, rel=1e-9)
    principal = sorted(mass / 12 * np.array([0.08**2 + 0.1**2, 0.06**2 + 0.1**2, 0.06**2 + 0.08**2]))
    np.testing.assert_allclose(sorted(a.inertia), principal, rtol=1e-6)
    np.testing.assert_allclose(model.body_pos[a.id], (0.5, 0.1, 0.02))
    np.testing.assert_allclose(model.body_quat[a.id], yaw_90, atol=1e-12)
    np.testing.assert_allclose(model.body_ipos[a.id], (0.0, 0.0, 0.05), atol=1e-9)
    assert model.joint("obj_a/free").type == mujoco.mjtJoint.mjJNT_FREE
    collision, visual = model.geom("obj_a/part_00"), model.geom("obj_a/visual")
    assert collision.group[0] == COLLISION_GROUP and collision.contype[0] == 1
    assert collision.friction[0] == pytest.approx(0.9)
    assert collision.margin[0] == 0.0 and collision.condim[0] == 3
    assert visual.group[0] == VISUAL_GROUP and visual.contype[0] == 0 and visual.conaffinity[0] == 0


def test_friction_and_bad_inputs_raise(box):
    with pytest.raises(ValueError, match="p/box: friction must be positive"):
        add_object_body(mujoco.MjSpec(), box, "o", (0, 0, 0), friction=0.0)
    with pytest.raises(ValueError, match="p/box: density and mass must be positive"):
        add_object_body(mujoco.MjSpec(), box, "o", (0, 0, 0), mass_kg=-1.0)
    with pytest.raises(ValueError, match="rest_window_steps"):
        SettleConfig(steps=10, rest_window_steps=15)


def test_a_flat_convex_part_is_reported_with_the_object_name(box):
    flat = trimesh.Trimesh([[0, 0, 0], [0.01, 0, 0], [0, 0.01, 0], [0.01, 0.01, 0]],
                           [[0, 1, 2], [1, 3, 2], [0, 2, 1], [1, 2, 3]], process=False)
    broken = PreparedObject("p/broken", box.mesh, (box.convex_parts[0], flat), (), np.eye(4))
    with pytest.raises(ObjectRejected, match="p/broken: MuJoCo cannot build the object .*coplanar"):
        settle_test(broken)
