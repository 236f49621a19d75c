import numpy as np
import pytest
import trimesh

import getagrip_ros.objects.mesh_object as mesh_object
from getagrip_ros.objects.catalog import user_object
from getagrip_ros.objects.mesh_object import (DecompositionConfig, MeshFileError, ObjectRejected, ObjectSpec,
                                              PrepareConfig, convex_decomposition, make_watertight, prepare_object)
from getagrip_ros.objects.procedural import BoxShape, CupShape, MugShape

MUG = MugShape(CupShape(0.04, 0.04, 0.095, 0.005, 0.008), 0.028, 0.007, 0.05)


def inside_convex(part: trimesh.Trimesh, points: np.ndarray) -> np.ndarray:
    normals = part.face_normals
    offsets = np.einsum("fk,fk->f", normals, part.triangles[:, 0])
    return np.all(points @ normals.T - offsets <= 1e-9, axis=1)


@pytest.fixture
def coacd_calls(monkeypatch):
    """Counts CoACD runs; the real CoACD still runs."""
    calls = []
    real = mesh_object._run_coacd

    def counting(mesh, config):
        calls.append(config)
        return real(mesh, config)

    monkeypatch.setattr(mesh_object, "_run_coacd", counting)
    return calls


def test_mug_is_decomposed_and_the_cache_is_hit_the_second_time(tmp_path, coacd_calls):
    spec = ObjectSpec("procedural/test_mug", "procedural", MUG)
    config = PrepareConfig(cache_dir=str(tmp_path))
    first = prepare_object(spec, config)
    assert len(coacd_calls) == 1
    assert 2 <= len(first.convex_parts) <= config.decomposition.max_convex_hulls
    assert all(part.is_convex and part.volume > 0 for part in first.convex_parts)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    # The parts cover the solid (surface points pushed 0.1 mm inwards) and leave the cavity's axis free.
    points, faces = first.mesh.sample(2000, return_index=True, seed=0)
    points = points - 1e-4 * first.mesh.face_normals[faces]
    assert np.any([inside_convex(p, points) for p in first.convex_parts], axis=0).mean() > 0.95
    cup_axis_x = first.mesh.bounds[0, 0] + 0.04
    axis_points = np.stack([np.full(7, cup_axis_x), np.zeros(7), np.linspace(0.03, 0.09, 7)], axis=1)
    assert not np.any([inside_convex(p, axis_points) for p in first.convex_parts])

    second = prepare_object(spec, config)
    assert len(coacd_calls) == 1, "second call must load the cached decomposition"
    for a, b in zip(first.convex_parts, second.convex_parts, strict=True):
        np.testing.assert_array_equal(a.vertices, b.vertices)
        np.testing.assert_array_equal(a.faces, b.faces)


@pytest.fixture
def fake_coacd(monkeypatch):
    """Replaces CoACD by a fast stand-in (two halves of the hull) and records its calls."""
    calls = []

    def fake(mesh, config):
        calls.append(config)
        centre = mesh.bounds.mean(0)
        left = mesh.vertices[mesh.vertices[:, 0] <= centre[0] + 1e-9]
        right = mesh.vertices[mesh.vertices[:, 0] >= centre[0] - 1e-9]
        return [trimesh.convex.convex_hull(left), trimesh.convex.convex_hull(right)]

    monkeypatch.setattr(mesh_object, "_run_coacd", fake)
    return calls


def test_cache_is_keyed_by_geometry_and_parameters_and_survives_corruption(tmp_path, fake_coacd):
    cup = prepare_object(ObjectSpec("p/cup", "procedural", CupShape(0.04, 0.04, 0.1, 0.004, 0.008)),
                         PrepareConfig(decomposition=DecompositionConfig(convex_volume_ratio=0.0))).mesh
    config = DecompositionConfig()
    parts = convex_decomposition(cup, "p/cup", config, tmp_path)
    assert len(fake_coacd) == 1 and len(parts) == 2
    assert convex_decomposition(cup, "p/cup", config, tmp_path)[1].volume == pytest.approx(parts[1].volume)
    assert len(fake_coacd) == 1
    convex_decomposition(cup, "p/cup", DecompositionConfig(threshold=0.03), tmp_path)
    assert len(fake_coacd) == 2, "other decomposition parameters are another cache entry"
    bigger = cup.copy()
    bigger.apply_scale(1.1)
    convex_decomposition(bigger, "p/cup", config, tmp_path)
    assert len(fake_coacd) == 3, "other geometry is another cache entry"
    for entry in tmp_path.glob("*.npz"):
        entry.write_bytes(b"truncated")
    again = convex_decomposition(cup, "p/cup", config, tmp_path)
    assert len(fake_coacd) == 4 and len(again) == 2


def test_convex_mesh_is_its_own_single_part(tmp_path, fake_coacd):
    spec = ObjectSpec("p/box", "procedural", BoxShape((0.05, 0.06, 0.1)))
    obj = prepare_object(spec, PrepareConfig(cache_dir=str(tmp_path)))
    assert len(obj.convex_parts) == 1 and not fake_coacd
    assert obj.convex_parts[0].volume == pytest.approx(0.05 * 0.06 * 0.1)
    assert not list(tmp_path.iterdir()), "nothing to cache for a convex mesh"


def test_user_stl_round_trip_with_scale_rests_on_its_most_stable_face(tmp_path, hull_only):
    path = tmp_path / "long box.stl"
    box_mm = trimesh.creation.box(extents=(50.0, 50.0, 100.0))  # millimetres, standing on its small face
    box_mm.apply_transform(trimesh.transformations.rotation_matrix(0.3, [1, 1, 0]))  # stored tilted
    box_mm.export(path)
    spec = user_object(path, scale=0.001)
    assert spec.name == "user/long_box"
    obj = prepare_object(spec, hull_only)
    # Lies on a long face (the most stable pose), its long side turned along x.
    np.testing.assert_allclose(obj.extents_m, [0.1, 0.05, 0.05], atol=1e-6)
    assert obj.volume_m3 == pytest.approx(0.05 * 0.05 * 0.1, rel=1e-6)
    assert obj.mesh.bounds[0, 2] == pytest.approx(0.0, abs=1e-12)


def test_user_ply_and_glb_round_trip_keeping_the_given_orientation(tmp_path, hull_only):
    cylinder_cm = trimesh.creation.cylinder(radius=2.0, height=12.0, sections=32)  # centimetres, axis z
    for suffix in (".ply", ".glb"):
        path = tmp_path / f"can{suffix}"
        cylinder_cm.export(path)
        obj = prepare_object(user_object(path, scale=0.01, resting_pose="as_given"), hull_only)
        np.testing.assert_allclose(obj.extents_m, [0.04, 0.04, 0.12], atol=1e-6)
        assert obj.volume_m3 == pytest.approx(cylinder_cm.volume * 1e-6, rel=1e-6)
        np.testing.assert_allclose(obj.mesh.bounds.mean(0)[:2], 0.0, atol=1e-12)


@pytest.mark.parametrize("name, contents, message", [
    ("empty.obj", b"", "mesh file is empty"),
    ("garbage.stl", bytes(range(256)) * 7, "cannot read mesh|no valid triangles"),
    ("garbage.ply", b"\x00\xff" * 300, "cannot read mesh|no valid triangles"),
    ("garbage.obj", b"hello this is not a mesh\n\x00\x01\x02 v v v f 1 2\n", "cannot read mesh|no valid triangles"),
    ("nan.obj", b"v nan 0 0\nv 1 nan 0\nv 0 0 nan\nf 1 2 3\n", "no valid triangles"),
    ("mesh.xyz", b"1 2 3\n", "unsupported mesh file type '.xyz'"),
])
def test_broken_files_raise_a_clear_error_naming_the_file(tmp_path, hull_only, name, contents, message):
    path = tmp_path / name
    path.write_bytes(contents)
    with pytest.raises(MeshFileError, match=message) as info:
        prepare_object(user_object(path), hull_only)
    assert str(path) in str(info.value) and f"user/{path.stem}" in str(info.value)


def test_missing_file_raises(tmp_path, hull_only):
    with pytest.raises(MeshFileError, match="does not exist"):
        prepare_object(user_object(tmp_path / "nowhere.obj"), hull_only)


def _sphere_with_two_holes() -> trimesh.Trimesh:
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=0.04)
    sphere.update_faces(np.abs(sphere.triangles_center[:, 2]) < 0.03)  # both poles cut off: 2 holes of many edges
    return sphere


def _dome() -> trimesh.Trimesh:
    sphere = trimesh.creation.icosphere(subdivisions=2, radius=0.05)
    sphere.update_faces(sphere.triangles_center[:, 2] > 0.0)  # an open dome: one big hole
    return sphere


def _tube() -> trimesh.Trimesh:
    can = trimesh.creation.cylinder(radius=0.03, height=0.1, sections=32)
    can.update_faces(np.abs(can.face_normals[:, 2]) < 0.5)  # the side only: both ends open
    return can


@pytest.mark.parametrize("make, holes, volume_range_m3", [
    (_sphere_with_two_holes, 2, (0.9 * (4 / 3 * np.pi * 0.04**3 - 2 * np.pi * 0.01**2 * 0.11 / 3), 4 / 3 * np.pi * 0.04**3)),
    (_dome, 1, (0.9 * 2 / 3 * np.pi * 0.05**3, 2 / 3 * np.pi * 0.05**3)),
    (_tube, 2, (0.9 * np.pi * 0.03**2 * 0.1, np.pi * 0.03**2 * 0.1)),
], ids=["sphere_2_holes", "dome", "tube"])
def test_a_mesh_with_holes_is_closed_by_the_meshfix_repair(tmp_path, hull_only, make, holes, volume_range_m3):
    """Holes of many edges (which trimesh's own hole filling leaves open) are filled: the object is prepared, one
    closed outward-facing solid of about the volume the holes' rims enclose."""
    mesh = make()
    assert f"{holes} holes" in mesh_object._defects(mesh)
    trimesh_only = mesh.copy()
    trimesh.repair.fill_holes(trimesh_only)
    assert not trimesh_only.is_watertight, "the case needs more than trimesh's fill_holes"
    path = tmp_path / "holey.obj"
    mesh.export(path)
    obj = prepare_object(user_object(path), hull_only)
    assert obj.mesh.is_watertight and obj.mesh.is_volume and obj.mesh.body_count == 1
    assert volume_range_m3[0] <= obj.volume_m3 <= volume_range_m3[1] * 1.01
    assert obj.mesh.bounds[0, 2] == pytest.approx(0.0, abs=1e-12)


def test_a_textured_mesh_split_along_its_seams_is_welded_by_position(tmp_path, hull_only, monkeypatch):
    """A 6 cm cube whose faces each have their own texture coordinates (as exported textured models are): trimesh
    keeps its vertices apart along the seams (6 loose squares), the repair welds them by position - exactly, with no
    MeshFix patch."""
    monkeypatch.setattr(mesh_object, "_close_with_meshfix", lambda mesh, name: pytest.fail("MeshFix was not needed"))
    box = trimesh.creation.box((0.06, 0.06, 0.06))
    lines = [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in box.vertices]
    lines += [f"vt {u} {v}" for u, v in ((0, 0), (1, 0), (1, 1), (0, 1), (0.5, 0.5), (0.2, 0.8))]
    for i, face in enumerate(box.faces):  # every triangle its own texture coordinates: no vertex shared
        lines.append("f " + " ".join(f"{v + 1}/{(i + k) % 6 + 1}" for k, v in enumerate(face)))
    path = tmp_path / "textured.obj"
    path.write_text("\n".join(lines) + "\n")
    loaded = mesh_object.load_mesh_file(path)
    loaded.merge_vertices()
    assert not loaded.is_watertight, "the file's seams keep its vertices apart"
    obj = prepare_object(user_object(path), hull_only)
    assert obj.mesh.is_watertight and len(obj.mesh.vertices) == 8
    assert obj.volume_m3 == pytest.approx(0.06**3, rel=1e-9)


def _sheet(n: int, height_m) -> trimesh.Trimesh:
    """An open one-sided n x n grid over 10 x 10 cm, at z = height_m(x, y)."""
    x, y = np.meshgrid(np.linspace(0.0, 0.1, n), np.linspace(0.0, 0.1, n))
    cells = [i * n + j for i in range(n - 1) for j in range(n - 1)]
    faces = [[a, a + 1, a + n + 1] for a in cells] + [[a, a + n + 1, a + n] for a in cells]
    return trimesh.Trimesh(np.c_[x.ravel(), y.ravel(), np.ravel(height_m(x, y))], faces)


@pytest.mark.parametrize("sheet, message", [
    (_sheet(11, lambda x, y: 0 * x), r"mesh is not watertight \(1 holes, 0 non-manifold edges\) and flat \(0 m thick, "
                                     r"0\.1\d* m across\): no repair can make it a solid"),
    (_sheet(40, lambda x, y: 0.005 * np.sin(60 * x)), r"mesh is not watertight \(1 holes, 0 non-manifold edges\) and its "
                                                      r"repair would drop \d+% of its surface"),
], ids=["flat", "wavy"])
def test_a_mesh_that_no_repair_can_close_is_rejected_with_its_reason(tmp_path, hull_only, sheet, message):
    """An open sheet encloses nothing: flat, it is refused before any repair; wavy, MeshFix's result keeps too little
    of it. Either way the reason names the object and says why."""
    path = tmp_path / "sheet.obj"
    sheet.export(path)
    with pytest.raises(ObjectRejected, match=f"^user/sheet: {message}$"):
        prepare_object(user_object(path), hull_only)


def test_flat_sheet_is_rejected_as_degenerate():
    square = [[0, 0, 0], [0.1, 0, 0], [0.1, 0.1, 0], [0, 0.1, 0]]
    sheet = trimesh.Trimesh(square, [[0, 1, 2], [0, 2, 3], [0, 2, 1], [0, 3, 2]])  # both sides of a square
    with pytest.raises(ObjectRejected, match="sheet: mesh is degenerate"):
        make_watertight(sheet, "sheet")


@pytest.mark.parametrize("shared_wall", [True, False])
def test_touching_shells_are_fused_and_separate_ones_rejected(shared_wall):
    a = trimesh.creation.box(extents=(0.05, 0.05, 0.05))
    b = a.copy()
    if shared_wall:  # b = a mirrored about x = 0.025: both store the same wall, facing opposite ways
        b.vertices[:, 0] = 0.05 - b.vertices[:, 0]
        b.invert()
    else:  # b touches a face to face, shifted sideways, no vertex in common
        b.apply_translation([0.05, 0.02, 0.0])
    fused = make_watertight(trimesh.util.concatenate([a, b]), "two_cubes")
    assert fused.body_count == 1 and fused.is_watertight
    assert fused.volume == pytest.approx(2 * 0.05**3, rel=0.02)
    b.apply_translation([0.01, 0.0, 0.0])  # now 1 cm apart
    with pytest.raises(ObjectRejected, match="apart: mesh has 2 separate pieces that do not touch"):
        make_watertight(trimesh.util.concatenate([a, b]), "apart")


@pytest.mark.parametrize("size_m, shown", [((0.02, 0.02, 0.03), "3.0 cm"), ((0.1, 0.1, 0.4), "40.0 cm")])
def test_objects_outside_the_size_range_are_rejected(hull_only, size_m, shown):
    with pytest.raises(ObjectRejected, match=f"p/box: largest extent {shown} is outside \\[5, 30\\] cm"):
        prepare_object(ObjectSpec("p/box", "procedural", BoxShape(size_m)), hull_only)


def test_flat_debris_shells_are_dropped_before_fusing():
    cube = trimesh.creation.box(extents=(0.05, 0.05, 0.05))
    other = cube.copy()
    other.apply_translation([0.05, 0.02, 0.0])
    square = [[0.1, 0, 0], [0.11, 0, 0], [0.11, 0.01, 0], [0.1, 0.01, 0]]
    flat = trimesh.Trimesh(square, [[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]], process=False)  # closed, no volume
    with np.errstate(divide="ignore", invalid="ignore"):
        assert flat.is_watertight and abs(flat.volume) < 1e-12
    fused = make_watertight(trimesh.util.concatenate([cube, other, flat]), "with_debris")
    assert fused.body_count == 1 and fused.volume == pytest.approx(2 * 0.05**3, rel=0.02)
    with pytest.raises(ObjectRejected, match="only_debris: all its 2 closed shells are debris"):
        make_watertight(trimesh.util.concatenate([flat, flat.copy().apply_translation([0.0, 0.05, 0.0])]), "only_debris")
