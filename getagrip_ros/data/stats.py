"""What a labelled BPS grasp dataset holds: counts, label means and histograms (printed and drawn as a PNG)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from getagrip_ros.models.bps_evaluator import LABEL_NAMES
from getagrip_ros.training.datasets import BpsGraspDataset

GOOD_Y_PGS = 0.9


@dataclass(frozen=True)
class DatasetStats:
    num_grasps: int
    num_objects: int
    """Objects with at least one grasp."""
    grasps_per_object: tuple[int, int, int]
    """(min, median, max) over those objects."""
    label_means: dict[str, float]
    positive_fraction: float
    """Grasps with y_PGS > 0."""
    good_fraction: float
    """Grasps with y_PGS >= 0.9 (the sampler's training set)."""
    objects_with_good_grasp: int

    def lines(self) -> list[str]:
        lo, median, hi = self.grasps_per_object
        means = ", ".join(f"{name} {value:.3f}" for name, value in self.label_means.items())
        return [f"{self.num_grasps} grasps over {self.num_objects} objects ({lo} / {median} / {hi} min / median / max "
                f"per object)",
                f"label means: {means}",
                f"y_PGS > 0: {100 * self.positive_fraction:.1f}%, y_PGS >= {GOOD_Y_PGS}: {100 * self.good_fraction:.1f}% "
                f"({self.objects_with_good_grasp} objects have one)"]


def dataset_stats(data: BpsGraspDataset) -> DatasetStats:
    y_pgs = data.labels[:, LABEL_NAMES.index("y_PGS")]
    per_object = np.bincount(data.grasp_bps_idx, minlength=len(data.object_codes))
    counts = per_object[per_object > 0]
    good_objects = np.unique(data.grasp_bps_idx[y_pgs >= GOOD_Y_PGS])
    return DatasetStats(
        num_grasps=data.num_grasps, num_objects=len(counts),
        grasps_per_object=(int(counts.min()), int(np.median(counts)), int(counts.max())) if len(counts) else (0, 0, 0),
        label_means={name: float(data.labels[:, i].mean()) for i, name in enumerate(LABEL_NAMES)},
        positive_fraction=float((y_pgs > 0).mean()), good_fraction=float((y_pgs >= GOOD_Y_PGS).mean()),
        objects_with_good_grasp=len(good_objects))


def plot_label_histograms(data: BpsGraspDataset, path: str | Path, title: str = "") -> Path:
    """One histogram per label (y_pick, y_coll, y_PGS) on a log count axis, written as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    stats = dataset_stats(data)
    fig = Figure(figsize=(11, 3.4), dpi=100)
    FigureCanvasAgg(fig)
    bins = np.linspace(0.0, 1.0, 22)  # averages over up to 10 trials fall in separate bins
    for i, name in enumerate(LABEL_NAMES):
        ax = fig.add_subplot(1, 3, i + 1)
        ax.hist(data.labels[:, i], bins=bins, color=("tab:blue", "tab:orange", "tab:green")[i])
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.8)
        ax.set_xlabel(name)
        ax.set_title(f"mean {stats.label_means[name]:.3f}")
        if i == 0:
            ax.set_ylabel("grasps")
    fig.suptitle(title or f"{stats.num_grasps} grasps, {stats.num_objects} objects; "
                          f"y_PGS > 0: {100 * stats.positive_fraction:.1f}%, >= {GOOD_Y_PGS}: {100 * stats.good_fraction:.1f}%")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
