"""Train / validation / test split by object: all grasps of an object go to one split."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class ObjectSplit:
    """Grasp indices (sorted) and object codes (sorted) of each split."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    train_objects: tuple[str, ...]
    val_objects: tuple[str, ...]
    test_objects: tuple[str, ...]


def _num_objects_for(fraction: float, num_objects: int) -> int:
    """round(fraction * num_objects), at least 1 for a positive fraction."""
    return 0 if fraction == 0 else max(1, int(round(fraction * num_objects)))


def split_by_object(grasp_object_codes: Sequence[str] | np.ndarray, val_fraction: float = 0.1,
                    test_fraction: float = 0.0, seed: int = 0, train_object_fraction: float = 1.0) -> ObjectSplit:
    """Split grasps by their object code; the same codes and seed always give the same split.

    The fractions are of the objects (a positive fraction gets at least one object); the rest is training, of
    which only a seeded ``train_object_fraction`` is kept (dataset-size ablations: the validation and test
    objects do not depend on it, and a smaller fraction's objects are a subset of a larger one's).
    Raises ValueError for bad fractions or when there are too few objects for every requested split.
    """
    if not (0 <= val_fraction < 1 and 0 <= test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError(f"split: need 0 <= val_fraction, test_fraction and val_fraction + test_fraction < 1, "
                         f"got {val_fraction} and {test_fraction}")
    if not 0 < train_object_fraction <= 1:
        raise ValueError(f"split: train_object_fraction must be in (0, 1], got {train_object_fraction}")
    codes = np.asarray(grasp_object_codes).astype(str)
    objects = np.unique(codes)
    num_val, num_test = _num_objects_for(val_fraction, len(objects)), _num_objects_for(test_fraction, len(objects))
    if len(objects) - num_val - num_test < 1:
        raise ValueError(f"split: {len(objects)} object(s) cannot give a non-empty train split plus "
                         f"{num_val} validation and {num_test} test object(s); add objects or lower the fractions")
    shuffled = np.random.default_rng(seed).permutation(objects)
    val_objects, test_objects = shuffled[:num_val], shuffled[num_val:num_val + num_test]
    train_objects = shuffled[num_val + num_test:]
    train_objects = train_objects[: _num_objects_for(train_object_fraction, len(train_objects))]

    def members(split_objects: np.ndarray) -> np.ndarray:
        return np.flatnonzero(np.isin(codes, split_objects))

    return ObjectSplit(train=members(train_objects), val=members(val_objects), test=members(test_objects),
                       train_objects=tuple(sorted(train_objects.tolist())),
                       val_objects=tuple(sorted(val_objects.tolist())),
                       test_objects=tuple(sorted(test_objects.tolist())))
