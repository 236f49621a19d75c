"""`trials report` on trials whose execution stopped early (few or no recorded states, a flat trace)."""

import time
import warnings

import matplotlib
import numpy as np
import pytest

from getagrip_ros.trials import messages as m
from getagrip_ros.trials.bag import TrialBagWriter, read_bag
from getagrip_ros.trials.report import write_report

matplotlib.use("Agg")


def stopped_early(bag_dir, samples: int, jitter_m: float, close: bool = True):
    """A trial that reached execution, announced every phase, and recorded `samples` object states of an object that
    did not move (up to `jitter_m` of simulation noise) before it stopped."""
    bag = TrialBagWriter(bag_dir, {"trial": bag_dir.name, "object": "tabletop20/cube",
                                   "method": {"sampler": "fixed", "evaluator": "bps", "perception": "depth"}})
    now = time.time_ns()
    bag.write_json("/trial/events", {"event": "stage_start", "stage": "execution", "time_ns": now}, now)
    for k, phase in enumerate(("hand_shape", "approach", "close", "lift")):
        bag.write_json("/trial/events", {"event": "phase", "phase": phase, "time_ns": now + k}, now + k)
    for i in range(samples):
        T = np.eye(4)
        T[2, 3] = 0.03 + jitter_m * (-1) ** i
        bag.write("/sim/object_state", m.object_state(T, {}, True, now + 10 * i),
                  now + 10 * i)
    if close:
        bag.write_json("/trial/outcome", {"success": False, "status": "ABORTED", "stage": "execution",
                                          "reason": "the arm stopped (joint limit)", "scorer_agrees": None})
        bag.close()
    return bag


@pytest.mark.parametrize("samples,jitter_m", [(0, 0.0), (1, 0.0), (2, 1e-9), (3, 0.0), (5, 1e-9), (40, 1e-12)])
def test_a_trial_whose_execution_stopped_early_gets_a_report(tmp_path, samples, jitter_m):
    """A flat trace of a few states made matplotlib autoscale the lift panel to a range of ~1e-7 cm, and the phase
    labels (placed at y = 20 in data units) then lay ~1e8 pixels away: FreeType failed with "raster overflow" (and
    with an exactly flat trace tight_layout gave up on the figure)."""
    stopped_early(tmp_path / "t", samples, jitter_m)
    assert len(read_bag(tmp_path / "t").topic("/sim/object_state")) == samples
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Tight layout not applied")
        out = write_report(tmp_path / "t", tmp_path / "report.png")
    image = matplotlib.pyplot.imread(out)
    assert image.shape[:2] == (880, 1280)  # 16 x 11 in at 80 dpi: the whole figure was drawn
    assert image[..., :3].std() > 0.01  # not blank


def test_a_report_of_a_crashed_trial_without_outcome(tmp_path):
    bag = stopped_early(tmp_path / "crashed", 3, 1e-9, close=False)
    bag.flush()  # what a crash leaves on disk (the writer would have flushed within FLUSH_INTERVAL_S)
    assert not read_bag(tmp_path / "crashed").complete
    assert write_report(tmp_path / "crashed", tmp_path / "crashed.png").stat().st_size > 10_000
    bag.close()
