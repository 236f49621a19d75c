import numpy as np
import pytest

from getagrip_ros.objects.mesh_object import ObjectSpec, prepare_object
from getagrip_ros.objects.procedural import (FAMILIES, BoxShape, CompositeShape, CupShape, MugShape, PlacedShape,
                                             SphereShape, sample_shape)

SEEDS = (0, 1, 2)


@pytest.mark.parametrize("family", FAMILIES)
def test_family_members_are_watertight_upright_and_sized(family, hull_only):
    for seed in SEEDS:
        shape = sample_shape(family, seed)
        raw = shape.mesh()
        assert raw.is_watertight and raw.is_volume, f"{family} seed {seed}"
        assert raw.bounds[0, 2] == pytest.approx(0.0, abs=1e-6), "generated resting on z = 0"
        obj = prepare_object(ObjectSpec(f"procedural/{family}_{seed}", "procedural", shape), hull_only)
        lo, hi = obj.mesh.bounds
        assert obj.mesh.is_watertight
        assert 0.05 <= obj.extents_m.max() <= 0.30
        assert lo[2] == pytest.approx(0.0, abs=1e-12)
        np.testing.assert_allclose((lo[:2] + hi[:2]) / 2, 0.0, atol=1e-12)
        # Procedural shapes are generated upright: the object frame is a pure translation of the shape frame.
        np.testing.assert_allclose(obj.T_object_source[:3, :3], np.eye(3), atol=1e-12)
        assert obj.volume_m3 == pytest.approx(raw.volume, rel=1e-9)


@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_same_mesh_other_seed_other_mesh(family):
    a, b, c = sample_shape(family, 7), sample_shape(family, 7), sample_shape(family, 8)
    assert a == b and a != c
    mesh_a, mesh_b = a.mesh(), b.mesh()
    np.testing.assert_array_equal(mesh_a.vertices, mesh_b.vertices)
    np.testing.assert_array_equal(mesh_a.faces, mesh_b.faces)


def test_hollow_shapes_are_open_at_the_top():
    cup = CupShape(0.04, 0.04, 0.10, 0.004, 0.008)
    mesh = cup.mesh()
    solid_volume = np.pi * 0.04**2 * 0.10
    cavity_volume = np.pi * 0.036**2 * 0.092
    assert mesh.volume == pytest.approx(solid_volume - cavity_volume, rel=0.02)
    mug = MugShape(cup, handle_radius_m=0.028, handle_thickness_m=0.007, handle_centre_z_m=0.05)
    mug_mesh = mug.mesh()
    assert mug_mesh.body_count == 1 and mug_mesh.is_watertight
    assert mug_mesh.volume > mesh.volume
    # The handle sticks out on +x by 1.5 x handle radius + thickness from the wall's mid-surface.
    assert mug_mesh.bounds[1, 0] == pytest.approx(0.038 + 1.5 * 0.028 + 0.007, abs=1e-3)


def test_bad_dimensions_and_unknown_family_raise_with_reason():
    with pytest.raises(ValueError, match="CupShape: wall_m"):
        CupShape(0.03, 0.03, 0.1, 0.02, 0.005)
    with pytest.raises(ValueError, match="BoxShape: size_y_m must be a positive"):
        BoxShape((0.1, -0.1, 0.1))
    with pytest.raises(ValueError, match="unknown procedural family 'vase'.*mug"):
        sample_shape("vase", 0)
    apart = CompositeShape((PlacedShape(SphereShape(0.03)), PlacedShape(SphereShape(0.03), pos_m=(0.2, 0.0, 0.0))))
    with pytest.raises(ValueError, match="2 separate solids"):
        apart.mesh()
