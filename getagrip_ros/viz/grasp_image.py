"""Pictures of planned grasps (the hand rendered on the object, `viz.hand_render`) and of object clouds (three 3-D
views)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from getagrip_ros.grasp.grasp import Grasp  # noqa: E402
from getagrip_ros.robot.allegro import AllegroHand  # noqa: E402
from getagrip_ros.viz.figures import save_figure  # noqa: E402
from getagrip_ros.viz.hand_render import HandRenderConfig, HandRenderer, closed_on_points, grasp_views  # noqa: E402

_VIEWS = (("front", 10, 180), ("side", 10, -90), ("top", 89, -90))  # (name, elevation deg, azimuth deg)
TITLE_PX, TILE_CAPTION_PX = 28, 20


def grasp_picture(points_m: np.ndarray | None, grasps: Grasp, hand: AllegroHand, max_grasps: int = 9,
                  scores: np.ndarray | None = None, mesh=None, best_views: bool = True,
                  closed_joints_rad: np.ndarray | None = None, title: str = "",
                  config: HandRenderConfig = HandRenderConfig(), renderer: HandRenderer | None = None) -> np.ndarray:
    """(H, W, 3) uint8: grasps drawn with the Allegro hand itself (MuJoCo renders its links; `viz.hand_render`), in
    captioned tiles three to a row: the first (best) grasp from three views at its pre-grasp joints and closed on the
    object (`best_views`), then the first `max_grasps` one view each (left out for a single grasp shown with its best
    views). The hand is coloured by predicted y_PGS (red 0 -> green 1) when `scores` are given, else by rank.

    Args:
        points_m: (N, 3) object points in the grasps' frame (z up, table at z = 0), or None.
        mesh: a trimesh of the object in that frame, drawn with the points, or None.
        closed_joints_rad: (16,) the first grasp's closing target (as planned or commanded); None: solved here.
        title: a line above the tiles ("" = what the colours mean).
        renderer: a `HandRenderer` of these points and mesh to reuse (one is made and closed here otherwise).
    """
    g = grasps[:max_grasps].to(dtype=torch.float64)
    T = g.T_frame_palm.numpy()
    pts = None if points_m is None else np.asarray(points_m, dtype=float).reshape(-1, 3)
    centre = (pts if pts is not None and len(pts) else T[:, :3, 3]).mean(0) if len(g) else np.zeros(3)
    if scores is not None:
        values = np.clip(np.asarray(scores, dtype=float)[: len(g)], 0.0, 1.0)
        colors = plt.cm.RdYlGn(np.nan_to_num(values, nan=0.0))
        labels = [f"#{i + 1}: y_PGS {v:.2f}" for i, v in enumerate(values)]
        what = "hand colour = predicted y_PGS (red 0 -> green 1)"
    else:
        colors = plt.cm.viridis(np.linspace(1.0, 0.0, max(len(g), 2)))
        labels, what = [f"#{i + 1}" for i in range(len(g))], "hand colour = rank"
    best_views = best_views and len(g) > 0
    tiles: list[tuple[np.ndarray, str]] = []
    own = renderer is None
    r = HandRenderer(pts, None if mesh is None else mesh.vertices, None if mesh is None else mesh.faces, config) if own \
        else renderer
    config = r.config
    try:
        if best_views:
            closed = closed_on_points(hand, g[:1], pts, closed_targets_rad=closed_joints_rad).numpy()
            views = grasp_views(T[0], centre, config.distance_m)
            for q, posture in ((g.joint_angles_rad[0].numpy(), "pre-grasp"), (closed[0], "closed")):
                r.pose(T[0], q, tuple(colors[0]))
                tiles += [(r.render(view, with_mask=False).rgb, f"{labels[0]}, {posture}, {view.name}") for view in views]
        for i in range(0 if best_views and len(g) == 1 else len(g)):
            r.pose(T[i], g.joint_angles_rad[i].numpy(), tuple(colors[i]))
            tiles.append((r.render(grasp_views(T[i], centre, config.distance_m)[0], with_mask=False).rgb, labels[i]))
    finally:
        if own:
            r.close()
    return tile_image(tiles, title or f"best {len(g)} grasps; {what}; blue dots = the object's points",
                      (config.height_px, config.width_px))


def tile_image(tiles: list[tuple[np.ndarray, str]], title: str, tile_hw: tuple[int, int], columns: int = 3) -> np.ndarray:
    """Tiles with a caption band above each, `columns` to a row, under a title band (PIL; no figure)."""
    from PIL import Image, ImageDraw, ImageFont

    h, w = tile_hw
    band, rows = TILE_CAPTION_PX, max(1, int(np.ceil(len(tiles) / columns)))
    image = Image.new("RGB", (columns * w, TITLE_PX + rows * (h + band)), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.text((6, 6), title, fill=(0, 0, 0), font=ImageFont.load_default(size=15))
    font = ImageFont.load_default(size=13)
    for i, (rgb, caption) in enumerate(tiles):
        x, y = (i % columns) * w, TITLE_PX + (i // columns) * (h + band)
        draw.text((x + 4, y + 3), caption, fill=(0, 0, 0), font=font)
        image.paste(Image.fromarray(rgb), (x, y + band))
    return np.asarray(image)


def draw_grasps(points_m: np.ndarray | None, grasps: Grasp, hand: AllegroHand, path: str | Path, max_grasps: int = 9,
                title: str = "", scores: np.ndarray | None = None, mesh=None, best_views: bool = True,
                closed_joints_rad: np.ndarray | None = None, config: HandRenderConfig = HandRenderConfig()) -> Path:
    """Save `grasp_picture` as a PNG at `path` (its folder made)."""
    from PIL import Image

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(grasp_picture(points_m, grasps, hand, max_grasps, scores, mesh, best_views, closed_joints_rad, title,
                                  config)).save(path)
    return path


def draw_object(points_m: np.ndarray, path: str | Path, title: str = "", color_by_height: bool = True) -> Path:
    """Save a PNG of an object point cloud (world frame, metres), coloured by height above the table."""
    pts = np.asarray(points_m)
    pts = pts[np.random.default_rng(0).permutation(len(pts))[:5000]]
    colors = pts[:, 2] if color_by_height else "0.55"
    return _save_views(pts, title or f"object cloud, {len(points_m)} points", path, colors)


def _save_views(pts: np.ndarray, title: str, path: str | Path, colors="0.55") -> Path:
    fig = plt.figure(figsize=(15, 5.2))
    for k, (name, elev, azim) in enumerate(_VIEWS):
        ax = fig.add_subplot(1, 3, k + 1, projection="3d")
        ax.scatter(*pts.T, s=1, c=colors, cmap=None if isinstance(colors, str) else "viridis", depthshade=False)
        centre = pts.mean(0)
        r = 0.16
        ax.set(xlim=(centre[0] - r, centre[0] + r), ylim=(centre[1] - r, centre[1] + r), zlim=(0, 2 * r),
               xlabel="x (m)", ylabel="y (m)", zlabel="z (m)", title=f"{name} view")
        ax.view_init(elev=elev, azim=azim)
    fig.suptitle(title)
    return save_figure(fig, path, dpi=90)
