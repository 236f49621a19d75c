"""Draw object clouds (and planned grasps on them) as PNGs (three orthographic-ish 3-D views)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from getagrip_ros.grasp.grasp import Grasp  # noqa: E402
from getagrip_ros.robot.allegro import AllegroHand  # noqa: E402
from getagrip_ros.viz.figures import save_figure  # noqa: E402

_VIEWS = (("front", 10, 180), ("side", 10, -90), ("top", 89, -90))  # (name, elevation deg, azimuth deg)


def draw_grasps(points_m: np.ndarray, grasps: Grasp, hand: AllegroHand, path: str | Path,
                max_grasps: int = 10, title: str = "", scores: np.ndarray | None = None) -> Path:
    """Save a PNG with the object points, palm normals and fingertips of the first (best) `max_grasps` grasps,
    coloured by predicted y_PGS (red 0 -> green 1) when `scores` are given, else by rank."""
    g = grasps[:max_grasps]
    T = g.T_frame_palm.double()
    tips_palm = hand.contact_positions(g.joint_angles_rad.to(hand.dtype)).double()
    tips = ((T[:, None, :3, :3] @ tips_palm[..., None]).squeeze(-1) + T[:, None, :3, 3]).numpy()
    palms = T[:, :3, 3].numpy()
    normals = T[:, :3, 0].numpy()
    if scores is not None:
        colors = plt.cm.RdYlGn(np.clip(np.asarray(scores, dtype=float)[: len(g)], 0.0, 1.0))
        what = f"colour = predicted y_PGS {float(np.min(scores[: len(g)])):.2f}-{float(np.max(scores[: len(g)])):.2f}"
    else:
        colors, what = plt.cm.viridis(np.linspace(1.0, 0.0, max(len(g), 2))), "colour = rank"
    pts = np.asarray(points_m)
    pts = pts[np.random.default_rng(0).permutation(len(pts))[:3000]]
    def draw(ax) -> None:
        for i in range(len(g)):
            c = colors[i]
            ax.scatter(*palms[i], s=30, color=c, marker="s")
            ax.quiver(*palms[i], *(0.05 * normals[i]), color=c, linewidth=1.5)
            ax.scatter(*tips[i].T, s=18, color=c)
            for f in range(4):
                ax.plot(*np.stack([palms[i], tips[i, f]]).T, color=c, linewidth=0.6)

    return _save_views(pts, draw, title or f"best {len(g)} grasps ({what}; squares = palms, dots = fingertips)", path)


def draw_object(points_m: np.ndarray, path: str | Path, title: str = "", color_by_height: bool = True) -> Path:
    """Save a PNG of an object point cloud (world frame, metres), coloured by height above the table."""
    pts = np.asarray(points_m)
    pts = pts[np.random.default_rng(0).permutation(len(pts))[:5000]]
    colors = pts[:, 2] if color_by_height else "0.55"
    return _save_views(pts, lambda ax: None, title or f"object cloud, {len(points_m)} points", path, colors)


def _save_views(pts: np.ndarray, draw, title: str, path: str | Path, colors="0.55") -> Path:
    fig = plt.figure(figsize=(15, 5.2))
    for k, (name, elev, azim) in enumerate(_VIEWS):
        ax = fig.add_subplot(1, 3, k + 1, projection="3d")
        ax.scatter(*pts.T, s=1, c=colors, cmap=None if isinstance(colors, str) else "viridis", depthshade=False)
        draw(ax)
        centre = pts.mean(0)
        r = 0.16
        ax.set(xlim=(centre[0] - r, centre[0] + r), ylim=(centre[1] - r, centre[1] + r), zlim=(0, 2 * r),
               xlabel="x (m)", ylabel="y (m)", zlabel="z (m)", title=f"{name} view")
        ax.view_init(elev=elev, azim=azim)
    fig.suptitle(title)
    return save_figure(fig, path, dpi=90)
