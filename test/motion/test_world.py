"""The planning world: validation, and the same table as the simulated world."""

from __future__ import annotations

import numpy as np
import pytest

from getagrip_ros.motion.world import (
    TABLE_CENTRE_M, TABLE_SIZE_M, ObjectMesh, ObjectPointCloud, PlanningWorld, WorldBox, table_box, translation,
)


def test_table_matches_the_simulated_world():
    from getagrip_ros.sim.scene import SceneConfig

    assert TABLE_SIZE_M == SceneConfig().table_size_m
    assert TABLE_CENTRE_M == SceneConfig().table_centre_m
    box = table_box()
    assert box.T_world_box[2, 3] + box.size_m[2] / 2 == pytest.approx(0.0)  # top face at z = 0


def test_bad_geometry_is_refused():
    with pytest.raises(ValueError, match="3 positive lengths"):
        WorldBox("b", (0.1, 0.0, 0.1))
    rotation_scaled = np.diag([2.0, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="rigid transform"):
        WorldBox("b", (0.1, 0.1, 0.1), rotation_scaled)
    with pytest.raises(ValueError, match="finite"):
        ObjectMesh("m", np.full((3, 3), np.nan), np.array([[0, 1, 2]]))
    with pytest.raises(ValueError, match="face indices"):
        ObjectMesh("m", np.eye(3), np.array([[0, 1, 3]]))
    with pytest.raises(ValueError, match="integer"):
        ObjectMesh("m", np.eye(3), np.array([[0.0, 1.0, 2.0]]))
    with pytest.raises(ValueError, match="points_m"):
        ObjectPointCloud("c", np.zeros((0, 3)))
    with pytest.raises(ValueError, match="unique"):
        PlanningWorld((table_box(), table_box()))


def test_object_mesh_world_vertices():
    mesh = ObjectMesh("m", np.eye(3), np.array([[0, 1, 2]]), translation((0.65, 0.0, 0.0)))
    np.testing.assert_allclose(mesh.world_vertices_m, np.eye(3) + [0.65, 0.0, 0.0])
    world = PlanningWorld(objects=(mesh,)).with_boxes(WorldBox("wall", (0.1, 0.1, 0.1)))
    assert [b.name for b in world.boxes] == ["table", "wall"] and world.objects == (mesh,)


def test_motion_core_imports_no_ros():
    import ompl  # noqa: F401 - a dependency of the set-up: missing fails
    import subprocess
    import sys

    code = ("import sys, getagrip_ros.motion.planner, getagrip_ros.motion.ompl_backend; "
            "sys.exit(any(m == 'rclpy' or m.startswith('rclpy.') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_a_mesh_file_with_nan_vertices_is_refused_naming_them(tmp_path):
    from getagrip_ros.motion.world import load_object_mesh

    path = tmp_path / "object.obj"
    path.write_text("v 0.6 0 0\nv 0.7 0 0\nv 0.6 0.1 0\nv nan 0 0.1\nf 1 2 3\nf 1 2 4\n")
    with pytest.raises(ValueError, match=r"object.obj' has 1 vertices with NaN or inf"):
        load_object_mesh(str(path))
    path.write_text("v 0.6 0 0\nv 0.7 0 0\nv 0.6 0.1 0\nf 1 2 3\n")
    assert len(load_object_mesh(str(path)).faces) == 1
