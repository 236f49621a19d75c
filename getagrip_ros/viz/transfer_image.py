"""Draw a human demonstration and its Allegro transfer side by side on the object, with both contact heatmaps."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from getagrip_ros.human_demo.human_hand import CAPSULES  # noqa: E402
from getagrip_ros.synthesis.hand_model import HandModel  # noqa: E402
from getagrip_ros.viz.figures import save_figure  # noqa: E402


def _view_azimuths_deg(keypoints_m: np.ndarray, object_points_m: np.ndarray) -> tuple[float, float]:
    """Two azimuths that look across the line from the object to the hand (the hand in profile), opposite sides."""
    toward_hand = keypoints_m.mean(0) - object_points_m.mean(0)
    side = np.degrees(np.arctan2(toward_hand[1], toward_hand[0])) + 90.0
    return side, side + 180.0


def draw_transfer(keypoints_m: np.ndarray, result, hand: HandModel, path: str | Path, title: str = "") -> Path:
    """Save a PNG: the human hand (its capsules on the demonstration's 21 keypoints) on the left, the transferred
    Allegro (its surface samples, in contact) on the right, the object's points coloured by each hand's contact
    heatmap (white 0 -> red 1), from two sides. `result` is a
    :class:`getagrip_ros.human_demo.transfer.TransferResult`; all in the object's frame, metres."""
    keypoints_m = np.asarray(keypoints_m, dtype=float)
    points = result.object_points_m.numpy()
    heat = {"human": result.heatmap_human.numpy(), "Allegro": result.heatmap_robot.numpy()}
    with torch.no_grad():
        samples = hand.surface_points(hand.link_poses(result.T_object_palm[None].double(),
                                                      result.joint_angles_rad[None].double()))[0].numpy()
    samples = samples[:: max(1, len(samples) // 1500)]
    everything = np.vstack([points, keypoints_m, samples])
    centre = 0.5 * (everything.min(0) + everything.max(0))
    half = 0.5 * float((everything.max(0) - everything.min(0)).max()) + 0.01
    fig = plt.figure(figsize=(11, 10))
    for row, azim in enumerate(_view_azimuths_deg(keypoints_m, points)):
        for col, who in enumerate(heat):
            ax = fig.add_subplot(2, 2, 2 * row + col + 1, projection="3d")
            ax.computed_zorder = False  # the hand over the object, half transparent: its contacts show through
            order = np.argsort(heat[who])  # hot points drawn last
            ax.scatter(*points[order].T, s=4, c=heat[who][order], cmap="Reds", vmin=0.0, vmax=1.0, depthshade=False)
            if who == "human":
                for a, b, radius in CAPSULES:
                    ax.plot(*keypoints_m[[a, b]].T, color="tab:blue", linewidth=1400 * radius, alpha=0.55,
                            solid_capstyle="round")
            else:
                ax.scatter(*samples.T, s=1.5, c="tab:blue", alpha=0.6, depthshade=False)
            ax.set(xlim=(centre[0] - half, centre[0] + half), ylim=(centre[1] - half, centre[1] + half),
                   zlim=(centre[2] - half, centre[2] + half), xlabel="x (m)", ylabel="y (m)", zlabel="z (m)")
            ax.set_title(f"{who} hand; heatmap on the object (red = contact)" if row == 0 else f"{who}, other side")
            ax.view_init(elev=20, azim=azim)
    fig.suptitle(title or (f"human demonstration -> Allegro: contact heatmap difference "
                           f"{result.contact_heatmap_difference:.3f}, orientation difference "
                           f"{result.orientation_difference:.3f}, max penetration {100 * result.penetration_depth_m:.2f} cm"))
    return save_figure(fig, path)
