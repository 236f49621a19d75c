"""Split by object: no object in two splits, all of an object's grasps together, deterministic per seed."""

import numpy as np
import pytest

from getagrip_ros.training.split import split_by_object


def _codes(num_objects=20, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    return np.array([f"obj_{i}" for i in rng.integers(0, num_objects, 500)])


def test_split_keeps_objects_apart_and_covers_every_grasp():
    codes = _codes()
    split = split_by_object(codes, val_fraction=0.2, test_fraction=0.1, seed=3)
    parts = (split.train, split.val, split.test)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(codes)))
    objects = [set(codes[p]) for p in parts]
    assert not (objects[0] & objects[1] or objects[0] & objects[2] or objects[1] & objects[2])
    assert (len(split.train_objects), len(split.val_objects), len(split.test_objects)) == (14, 4, 2)
    assert objects == [set(split.train_objects), set(split.val_objects), set(split.test_objects)]
    for part, names in zip(parts, objects):  # every grasp of a split's objects is in that split
        assert sorted(part.tolist()) == np.flatnonzero(np.isin(codes, list(names))).tolist()


def test_split_is_deterministic_per_seed_and_independent_of_grasp_order():
    codes = _codes()
    a, b = split_by_object(codes, 0.2, 0.1, seed=3), split_by_object(codes, 0.2, 0.1, seed=3)
    assert a.val_objects == b.val_objects and a.test_objects == b.test_objects
    assert np.array_equal(a.train, b.train)
    assert split_by_object(codes[::-1], 0.2, 0.1, seed=3).val_objects == a.val_objects
    assert len({split_by_object(codes, 0.2, 0.1, seed=s).val_objects for s in range(5)}) > 1


def test_small_fractions_still_hold_out_one_object_and_too_few_objects_fail():
    assert len(split_by_object(_codes(3), val_fraction=0.01).val_objects) == 1
    assert split_by_object(_codes(3), val_fraction=0.1, test_fraction=0.0).test.size == 0
    with pytest.raises(ValueError, match="1 object"):
        split_by_object(["mug"] * 10, val_fraction=0.1)
    with pytest.raises(ValueError, match="2 object"):
        split_by_object(["mug", "cup"], val_fraction=0.1, test_fraction=0.1)
    with pytest.raises(ValueError, match="val_fraction"):
        split_by_object(_codes(), val_fraction=0.6, test_fraction=0.5)


def test_train_object_fraction_keeps_nested_training_subsets_and_the_same_validation():
    codes = _codes(40)
    full = split_by_object(codes, 0.1, 0.1, seed=2)
    quarter, tenth = (split_by_object(codes, 0.1, 0.1, seed=2, train_object_fraction=f) for f in (0.25, 0.1))
    assert len(full.train_objects) == 32 and len(quarter.train_objects) == 8 and len(tenth.train_objects) == 3
    assert set(tenth.train_objects) < set(quarter.train_objects) < set(full.train_objects)
    for part in (quarter, tenth):
        assert part.val_objects == full.val_objects and part.test_objects == full.test_objects
        assert np.array_equal(part.val, full.val)
        assert part.train.tolist() == np.flatnonzero(np.isin(codes, part.train_objects)).tolist()
    assert len(split_by_object(codes, 0.1, seed=2, train_object_fraction=1e-6).train_objects) == 1
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="train_object_fraction"):
            split_by_object(codes, 0.1, train_object_fraction=bad)
