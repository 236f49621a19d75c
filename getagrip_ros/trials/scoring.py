"""The independent scorer: success recomputed from a trial's recorded trace, not from the executor.

It reads the object states recorded during execution (simulation ground truth; `ObjectState` messages)
and the stage events, and judges the final part of the lift: the object must have risen with the hand,
be off the table and be held by hand links in (almost) every recorded sample of that window.
A hardware trial has no object trace; it stays unscored (None) rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScoringConfig:
    """How a recorded lift is judged (units: metres, seconds, newtons)."""

    lift_m: float = 0.2
    """The planned lift height."""
    min_rise_fraction: float = 0.75
    """The object must rise at least this fraction of lift_m (relative to its height before the grasp)..."""
    final_fraction: float = 0.3
    """... in every sample of the last final_fraction of the lift phase's samples (lift + hold until the execution
    ends; states are recorded at a fixed simulated-time rate, so the window does not depend on how fast the
    simulation ran against the wall clock) ..."""
    min_hand_links: int = 2
    """... touched by at least this many hand links ..."""
    min_contact_force_n: float = 0.05
    min_held_fraction: float = 0.9
    """... in at least this fraction of the window's samples, and never touching the table."""


@dataclass(frozen=True)
class ObjectTrace:
    """Recorded object states, oldest first (world frame)."""

    times_s: np.ndarray
    """(T,) seconds (any common origin)."""
    heights_m: np.ndarray
    """(T,) z of the object frame's origin."""
    hand_links: np.ndarray
    """(T,) number of hand links touching the object with at least ScoringConfig.min_contact_force_n."""
    touches_table: np.ndarray
    """(T,) bool."""


@dataclass(frozen=True)
class Score:
    success: bool | None
    """None: the trace cannot be judged (no object trace, too short)."""
    reason: str
    rise_m: float = float("nan")


def score_lift(trace: ObjectTrace, z_before_m: float, lift_start_s: float, lift_end_s: float,
               config: ScoringConfig = ScoringConfig()) -> Score:
    """Judge the final part of the lift phase [lift_start_s, lift_end_s] against the object's height before the grasp."""
    t = np.asarray(trace.times_s, float)
    if len(t) == 0 or not np.isfinite(z_before_m):
        return Score(None, "no object trace recorded (hardware, or the trial ended before execution)")
    if not (np.isfinite(lift_start_s) and np.isfinite(lift_end_s)):
        return Score(False, "the grasp never reached the lift")
    in_lift = np.flatnonzero((t >= lift_start_s) & (t <= lift_end_s + 1e-9))
    window = np.zeros(len(t), dtype=bool)
    window[in_lift[len(in_lift) - int(np.ceil(config.final_fraction * len(in_lift))):]] = True
    if window.sum() < 3:
        return Score(None, f"only {int(window.sum())} object samples in the final part of the lift")
    rise = np.asarray(trace.heights_m, float)[window] - z_before_m
    held = np.asarray(trace.hand_links)[window] >= config.min_hand_links
    table = np.asarray(trace.touches_table, bool)[window]
    final_rise = float(rise[-1])
    if (rise < config.min_rise_fraction * config.lift_m).any():
        needed_cm = 100 * config.min_rise_fraction * config.lift_m
        return Score(False, f"object rose only {100 * rise.min():.1f} cm (needs {needed_cm:.0f})", final_rise)
    if table.any():
        return Score(False, "object touched the table during the end of the lift", final_rise)
    if held.mean() < config.min_held_fraction:
        return Score(False, f"held by >= {config.min_hand_links} hand links in only {100 * held.mean():.0f}% of the "
                            "final samples", final_rise)
    return Score(True, f"object rose {100 * final_rise:.1f} cm and stayed in the hand", final_rise)


def trace_from_bag(bag, hand_link_names: tuple[str, ...], config: ScoringConfig = ScoringConfig()):
    """(ObjectTrace, z before the grasp, start of the lift phase, end of the execution stage; seconds) from a
    `TrialBag`; the trace is empty when the bag has no object states. Times come from the /trial/events records."""
    states = sorted(bag.topic("/sim/object_state"), key=lambda s: s.log_time_ns)  # written as they arrived
    events = sorted(bag.json("/trial/events"), key=lambda e: e["time_ns"])
    starts = [e for e in events if e.get("event") == "stage_start" and e.get("stage") == "execution"]
    ends = [e for e in events if e.get("event") == "stage_end" and e.get("stage") == "execution"]
    lifts = [e for e in events if e.get("event") == "phase" and e.get("phase") == "lift"]
    nan = float("nan")
    if not states or not starts:
        return ObjectTrace(np.zeros(0), np.zeros(0), np.zeros(0, int), np.zeros(0, bool)), nan, nan, nan
    t = np.array([s.log_time_ns for s in states], dtype=float) * 1e-9
    z = np.array([s.msg.pose.position.z for s in states])
    links = np.array([sum(1 for name, f in zip(s.msg.touching_links, s.msg.normal_forces_n)
                          if name in hand_link_names and f >= config.min_contact_force_n) for s in states])
    table = np.array([bool(s.msg.touches_table) for s in states])
    t_start = starts[-1]["time_ns"] * 1e-9
    before = t <= t_start
    z_before = float(z[before][-1]) if before.any() else float(z[0])
    t_end = ends[-1]["time_ns"] * 1e-9 if ends else float(t[-1])
    t_lift = lifts[-1]["time_ns"] * 1e-9 if lifts else nan
    return ObjectTrace(t, z, links, table), z_before, t_lift, t_end


def score_bag(bag, hand_link_names: tuple[str, ...], config: ScoringConfig = ScoringConfig()) -> Score:
    """Score a recorded trial from its object trace alone."""
    trace, z_before, t_lift, t_end = trace_from_bag(bag, hand_link_names, config)
    return score_lift(trace, z_before, t_lift, t_end, config)
