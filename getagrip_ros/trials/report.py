"""One trial bag -> a PNG report: the object as the camera saw it, the cloud with the top grasps coloured by
predicted score, the executed grasp, and the lift (object height and hand contacts over the execution).
Everything is read back from the bag, so the report also checks what was recorded."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from getagrip_ros.trials.bag import TrialBag, read_bag
from getagrip_ros.trials.messages import grasp_from_msgs, points_from_cloud


def write_report(bag_path: str | Path | TrialBag, path: str | Path, max_grasps: int = 9) -> Path:
    """Draw the trial bag at `bag_path` (or one read already) into the PNG `path`."""
    # a file that is no bag raises (NotABagError, FileNotFoundError) before anything is drawn
    bag = bag_path if isinstance(bag_path, TrialBag) else read_bag(bag_path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from getagrip_ros.robot.allegro import AllegroHand
    from getagrip_ros.viz.figures import save_figure
    from getagrip_ros.viz.grasp_image import grasp_picture
    from getagrip_ros.viz.hand_render import HandRenderer

    meta, outcome = bag.metadata, bag.outcome or {}
    fig, axes = plt.subplots(2, 2, figsize=(16, 11))
    images = bag.topic("/camera/image_raw")
    ax = axes[0, 0]
    if images:
        msg = images[len(images) // 2].msg
        ax.imshow(np.asarray(msg.data, np.uint8).reshape(msg.height, msg.width, 3))
        ax.set_title(f"{meta.get('object', '?')}: capture image {len(images) // 2 + 1} of {len(images)}")
    ax.axis("off")
    hand = AllegroHand()
    clouds, candidates, chosen = bag.topic("/object/points"), bag.topic("/grasps/candidates"), bag.topic("/grasps/chosen")
    cloud = points_from_cloud(clouds[-1].msg) if clouds else None
    scene = HandRenderer(cloud) if clouds and (candidates or chosen) else contextlib.nullcontext()
    with scene as renderer:  # one scene for both pictures
        for ax, grasp_msgs, title, best in (
                (axes[0, 1], candidates, f"the best {max_grasps} grasps on the perceived cloud (hand colour = predicted "
                                         "y_PGS, red 0 -> green 1)", False),
                (axes[1, 0], chosen, "the executed grasp: pre-grasp and closed on the cloud", True)):
            ax.axis("off")
            if not clouds or not grasp_msgs:
                ax.set_title(f"{title}: not reached")
                continue
            grasps, labels = grasp_from_msgs([m.msg for m in grasp_msgs])
            scores = labels[:, 0] if np.isfinite(labels[:, 0]).all() else None
            ax.imshow(grasp_picture(cloud, grasps, hand, max_grasps if not best else 1, scores, best_views=best,
                                    closed_joints_rad=_commanded_close(bag) if best else None, title=" ",
                                    renderer=renderer))
            ax.set_title(title)
    ax = axes[1, 1]
    states = bag.stage_messages("/sim/object_state", "execution")  # the capture's come before
    if states:
        _plot_lift(ax, states, bag.json("/trial/events"))
    else:
        ax.axis("off")
        ax.set_title("no object trace (hardware trial, or execution not reached)")
    verdict = "LIFTED" if outcome.get("success") else "not lifted"
    scorer = {True: "agrees", False: "DISAGREES"}.get(outcome.get("scorer_agrees"), "could not judge")
    method = meta.get("method") if isinstance(meta.get("method"), dict) else {}
    fig.suptitle(f"trial {meta.get('trial', '?')}: {method.get('sampler')} + {method.get('evaluator')} "
                 f"({method.get('perception')} perception) -> {verdict} ({outcome.get('status', 'INCOMPLETE')}: "
                 f"{str(outcome.get('reason') or 'no outcome')[:90]}); independent scorer {scorer}", fontsize=11)
    return save_figure(fig, path)


def _commanded_close(bag: TrialBag) -> np.ndarray | None:
    """The hand's joints at the end of the recorded close trajectory (Get a Grip order), or None."""
    from getagrip_ros.robot.description import HAND_JOINT_NAMES

    close = bag.topic("/motion/close")
    if not close or not close[-1].msg.points:
        return None
    q = dict(zip(close[-1].msg.joint_names, close[-1].msg.points[-1].positions))
    return np.array([q[n] for n in HAND_JOINT_NAMES]) if all(n in q for n in HAND_JOINT_NAMES) else None


def _plot_lift(ax, states: list, events: list[dict]) -> None:
    """Object rise and touching links over the recorded states (one every 50 ms of simulated time).

    An execution that stopped early has few states (one, or a flat trace): the y range is kept at least 2 units
    tall and the phase labels sit in axes coordinates, so no text lands far outside a tiny data range (which made
    FreeType fail with "raster overflow"); states or phases without a finite value are left out."""
    stamps = np.array([s.stamp_ns for s in states], dtype=np.int64)
    t = 0.05 * np.arange(len(states))  # states are recorded every 50 ms of simulated time during the execution
    z = np.array([s.msg.pose.position.z for s in states], dtype=float)
    links = np.array([len(s.msg.touching_links) for s in states], dtype=float)
    finite = np.isfinite(z)
    rise = 100 * (z - z[finite][0]) if finite.any() else np.full_like(z, np.nan)
    marker = "o" if len(states) < 20 else None
    ax.plot(t, rise, label="object rise (cm)", marker=marker)
    ax.plot(t, links, label="robot links touching it", marker=marker)
    values = np.concatenate([rise[np.isfinite(rise)], links, [0.0]])
    low, high = float(values.min()), float(values.max())
    if high - low < 2.0:
        middle = 0.5 * (low + high)
        low, high = middle - 1.0, middle + 1.0
    pad = 0.05 * (high - low)
    ax.set_ylim(low - pad, high + pad)
    ax.set_xlim(-0.025, max(float(t[-1]), 0.5) + 0.025)
    phases: dict[float, list[str]] = {}  # phases that start at the same state share one line
    for e in events:
        if e.get("event") != "phase" or not isinstance(e.get("time_ns"), (int, float)) or not np.isfinite(e["time_ns"]):
            continue
        x = float(t[min(int(np.searchsorted(stamps, e["time_ns"])), len(t) - 1)])
        phases.setdefault(x, []).append(str(e.get("phase", "?"))[:30])
    for x, names in phases.items():
        ax.axvline(x, color="0.7", linewidth=0.8)
        ax.text(x, 0.98, " / ".join(names), rotation=90, fontsize=8, va="top", ha="right",
                transform=ax.get_xaxis_transform(), clip_on=True)
    ax.set_xlabel(f"simulated seconds (one recorded state every 50 ms; {len(states)} recorded)")
    ax.legend(loc="best")
    ax.set_title("the lift (simulation ground truth)")
