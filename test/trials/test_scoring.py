"""The independent scorer judges the recorded trace."""

import numpy as np

from getagrip_ros.trials.scoring import ObjectTrace, ScoringConfig, score_lift


def _trace(rise_m: np.ndarray, links: int | np.ndarray = 3, table: bool | np.ndarray = False) -> ObjectTrace:
    n = len(rise_m)
    return ObjectTrace(np.arange(n) * 0.05, 0.03 + rise_m, np.broadcast_to(links, n).copy(), np.broadcast_to(table, n).copy())


def _lift_then_hold(final_m: float = 0.2) -> np.ndarray:
    return np.concatenate([np.linspace(0, final_m, 20), np.full(10, final_m)])  # 1 s lift + 0.5 s hold


def test_held_object_that_rose_with_the_hand_is_a_success():
    score = score_lift(_trace(_lift_then_hold()), 0.03, 0.0, 1.45)
    assert score.success is True and abs(score.rise_m - 0.2) < 1e-9


def test_dropped_object_fails_even_if_it_rose_first():
    rise = _lift_then_hold()
    rise[-5:] = 0.0
    links = np.full(30, 3)
    links[-5:] = 0
    assert score_lift(_trace(rise, links), 0.03, 0.0, 1.45).success is False


def test_object_left_on_the_table_fails():
    score = score_lift(_trace(np.zeros(30), 0, True), 0.03, 0.0, 1.45)
    assert score.success is False and "rose only" in score.reason


def test_object_pushed_up_without_being_held_fails():
    assert score_lift(_trace(_lift_then_hold(), links=1), 0.03, 0.0, 1.45).success is False


def test_half_height_lift_fails_and_the_threshold_is_configurable():
    trace = _trace(_lift_then_hold(0.12))
    assert score_lift(trace, 0.03, 0.0, 1.45).success is False
    assert score_lift(trace, 0.03, 0.0, 1.45, ScoringConfig(min_rise_fraction=0.5)).success is True


def test_no_trace_is_not_judged():
    empty = ObjectTrace(np.zeros(0), np.zeros(0), np.zeros(0, int), np.zeros(0, bool))
    assert score_lift(empty, float("nan"), 0.0, 1.0).success is None
    assert score_lift(_trace(_lift_then_hold()), 0.03, float("nan"), float("nan")).success is False
