from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from getagrip_ros.objects.catalog import (DIFFICULTIES, SETS, SPLITS, list_objects, object_by_name, split_of,
                                          user_object)
from getagrip_ros.objects.mesh_object import MeshFile, ObjectRejected, PrepareConfig, prepare_object
from getagrip_ros.objects.procedural import FAMILIES, sample_shape
from getagrip_ros.objects.settle import SettleConfig


def test_procedural_set_has_80_stable_names_per_family():
    specs = list_objects("procedural")
    assert len(specs) == 800 and len({s.name for s in specs}) == 800
    assert Counter(s.tags[0] for s in specs) == {family: 80 for family in FAMILIES}
    assert object_by_name("procedural/mug_0003") == specs[FAMILIES.index("mug") * 80 + 3]
    # a member's shape depends on its family and number only (growing the set kept the earlier members)
    assert object_by_name("procedural/mug_0003").geometry == sample_shape("mug", 3)


@pytest.mark.slow
def test_every_procedural_object_is_a_valid_solid_in_the_size_range(hull_only):
    for spec in list_objects("procedural"):
        obj = prepare_object(spec, hull_only)  # raises ObjectRejected with the reason otherwise
        assert obj.mesh.is_watertight and obj.mesh.body_count == 1, spec.name


def test_pybullet_set_lists_the_1000_random_urdf_meshes():
    specs = list_objects("pybullet-random")
    assert [s.name for s in specs] == [f"pybullet/{i:03d}" for i in range(1000)]
    assert all(isinstance(s.geometry, MeshFile) and Path(s.geometry.path).is_file() for s in specs)
    assert specs[42].geometry.path.endswith("042/042.obj") and specs[42].geometry.scale_xyz == (0.015, 0.015, 0.015)


@pytest.mark.parametrize("name, one_part", [("pybullet/000", False), ("pybullet/014", True),
                                             pytest.param("pybullet/037", False, marks=pytest.mark.slow)])
def test_pybullet_objects_prepare_and_settle(name, one_part, cache_dir):
    """000, 014: 5 and 2 touching convex shells (014 forms a convex solid); 037: 53 shells, some sharing edges."""
    obj = prepare_object(object_by_name(name), PrepareConfig(cache_dir=cache_dir, settle=SettleConfig()))
    assert obj.mesh.is_watertight and obj.mesh.body_count == 1
    assert 0.05 <= obj.extents_m.max() <= 0.30 and obj.mesh.bounds[0, 2] == pytest.approx(0.0, abs=1e-12)
    assert (len(obj.convex_parts) == 1) == one_part


def test_pybullet_object_made_of_separate_pieces_is_rejected(hull_only):
    with pytest.raises(ObjectRejected, match="pybullet/086: mesh has 2 separate pieces that do not touch"):
        prepare_object(object_by_name("pybullet/086"), hull_only)


@pytest.mark.parametrize("set_name", SETS)
def test_splits_are_disjoint_and_cover_the_set(set_name):
    names = {split: {s.name for s in list_objects(set_name, split)} for split in SPLITS}
    everything = {s.name for s in list_objects(set_name)}
    assert set.union(*names.values()) == everything
    assert sum(len(n) for n in names.values()) == len(everything)
    if set_name == "tabletop-20":
        assert names["test"] == everything
    else:
        assert 0.74 < len(names["train"]) / len(everything) < 0.86
        assert names["val"] and names["test"]


def test_split_depends_only_on_the_name():
    assert split_of("pybullet/042", (0.8, 0.1, 0.1)) == split_of("pybullet/042", (0.8, 0.1, 0.1))
    assert {split_of(f"x/{i}", (0.0, 0.0, 1.0)) for i in range(50)} == {"test"}
    assert {split_of(f"x/{i}", (1.0, 0.0, 0.0)) for i in range(50)} == {"train"}


def test_unknown_set_split_or_name_raise_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown object set 'ycb'.*procedural, pybullet-random, tabletop-20"):
        list_objects("ycb")
    with pytest.raises(ValueError, match="unknown split 'dev'.*train, val, test"):
        list_objects("procedural", "dev")
    with pytest.raises(ValueError, match="no catalog object named 'procedural/vase_0001'"):
        object_by_name("procedural/vase_0001")


def test_tabletop20_has_the_papers_objects_and_difficulties(hull_only):
    specs = list_objects("tabletop-20")
    assert len(specs) == 20 and len({s.name for s in specs}) == 20
    assert all(len(s.tags) == 1 and s.tags[0] in DIFFICULTIES for s in specs)
    assert Counter(s.tags[0] for s in specs) == {"easy": 6, "medium": 6, "hard": 8}  # Table 4
    milk = prepare_object(object_by_name("tabletop20/milk_carton"), hull_only)
    np.testing.assert_allclose(milk.extents_m, [0.07, 0.07, 0.205], atol=1e-6)


def test_user_object_spec():
    spec = user_object("/data/my mug.obj", scale=(0.001, 0.001, 0.002), resting_pose="as_given")
    assert spec.name == "user/my_mug" and spec.source == "user"
    assert spec.geometry == MeshFile("/data/my mug.obj", (0.001, 0.001, 0.002), "as_given")


@pytest.mark.slow
def test_all_tabletop20_objects_prepare_and_settle(cache_dir):
    config = PrepareConfig(cache_dir=cache_dir, settle=SettleConfig())
    for spec in list_objects("tabletop-20"):
        obj = prepare_object(spec, config)
        assert obj.mesh.is_watertight, spec.name


@pytest.mark.slow
def test_first_member_of_every_procedural_family_settles(cache_dir):
    config = PrepareConfig(cache_dir=cache_dir, settle=SettleConfig())
    for spec in list_objects("procedural"):
        if spec.name.endswith("_0000"):
            try:
                prepare_object(spec, config)
            except ObjectRejected as exc:
                pytest.fail(str(exc))
