"""Draw the coarse-to-fine trajectory of grasp synthesis: the hand's surface samples on the object at several steps."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from getagrip_ros.synthesis.hand_model import HandModel  # noqa: E402
from getagrip_ros.synthesis.losses import HandState  # noqa: E402
from getagrip_ros.viz.figures import save_figure  # noqa: E402


def draw_synthesis_trajectory(object_points_m: np.ndarray, hand: HandModel, snapshots: Sequence[tuple[int, float, HandState]],
                              path: str | Path, grasps: Sequence[int] = (0,), title: str = "",
                              view: tuple[float, float] = (20.0, -60.0)) -> Path:
    """Save a PNG: one row per grasp index in `grasps`, one column per snapshot (step, level-set offset in m, the
    optimised variables); object points grey, the hand's contact samples red, its other samples blue (object frame,
    metres)."""
    pts = np.asarray(object_points_m)
    pts = pts[np.random.default_rng(0).permutation(len(pts))[:2500]]
    contact = hand.contact_mask.numpy()
    rows, cols = len(grasps), len(snapshots)
    fig = plt.figure(figsize=(3.2 * cols, 3.2 * rows))
    centre = pts.mean(0)
    for c, (step, offset_m, state) in enumerate(snapshots):
        with torch.no_grad():
            samples = hand.surface_points(hand.link_poses(state.T_object_root.double(), state.q_rad.double()))
        for r, g in enumerate(grasps):
            ax = fig.add_subplot(rows, cols, r * cols + c + 1, projection="3d")
            ax.scatter(*pts.T, s=0.6, c="0.6", depthshade=False)
            h = samples[g].numpy()[::3]
            k = contact[::3]
            ax.scatter(*h[~k].T, s=0.4, c="tab:blue", depthshade=False)
            ax.scatter(*h[k].T, s=0.8, c="tab:red", depthshade=False)
            radius = 0.17  # the table top (z = 0) at the bottom, room for the hand's 10 cm approach above
            ax.set(xlim=(centre[0] - radius, centre[0] + radius), ylim=(centre[1] - radius, centre[1] + radius),
                   zlim=(0.0, 2 * radius), xticks=[], yticks=[], zticks=[])
            ax.view_init(*view)
            if r == 0:
                ax.set_title(f"step {step}, offset {offset_m * 100:.1f} cm", fontsize=9)
    fig.suptitle(title or "coarse-to-fine synthesis (red: samples that may touch, blue: the rest)")
    return save_figure(fig, path)
