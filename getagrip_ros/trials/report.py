"""One trial bag -> a PNG report: the object as the camera saw it, the cloud with the top grasps coloured by
predicted score, the executed grasp, and the lift (object height and hand contacts over the execution).
Everything is read back from the bag, so the report also checks what was recorded."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from getagrip_ros.trials.bag import read_bag
from getagrip_ros.trials.messages import grasp_from_msgs, points_from_cloud


def write_report(bag_path: str | Path, path: str | Path, max_grasps: int = 10) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from getagrip_ros.robot.allegro import AllegroHand
    from getagrip_ros.viz.grasp_image import draw_grasps

    bag = read_bag(bag_path)
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
    with tempfile.TemporaryDirectory() as tmp:
        for ax, grasp_msgs, title in ((axes[0, 1], candidates, f"top {max_grasps} grasps, colour = predicted y_PGS"),
                                      (axes[1, 0], chosen, "the executed grasp")):
            ax.axis("off")
            if not clouds or not grasp_msgs:
                ax.set_title(f"{title}: not reached")
                continue
            grasps, labels = grasp_from_msgs([m.msg for m in grasp_msgs])
            scores = labels[:, 0] if np.isfinite(labels[:, 0]).all() else None
            image = draw_grasps(points_from_cloud(clouds[-1].msg), grasps, hand, Path(tmp) / "g.png", max_grasps, "", scores)
            ax.imshow(plt.imread(image))
            ax.set_title(title)
    ax = axes[1, 1]
    states = sorted(bag.topic("/sim/object_state"), key=lambda m: m.log_time_ns)  # written as they arrived
    if states:
        stamps = np.array([s.log_time_ns for s in states])
        t = 0.05 * np.arange(len(states))  # states are recorded every 50 ms of simulated time during the execution
        z = np.array([s.msg.pose.position.z for s in states])
        links = np.array([len(s.msg.touching_links) for s in states])
        ax.plot(t, 100 * (z - z[0]), label="object rise (cm)")
        ax.plot(t, links, label="robot links touching it")
        for e in bag.json("/trial/events"):
            if e.get("event") == "phase":
                x = t[min(int(np.searchsorted(stamps, e["time_ns"])), len(t) - 1)]
                ax.axvline(x, color="0.7", linewidth=0.8)
                ax.text(x, 20, e["phase"], rotation=90, fontsize=8, va="top")
        ax.set_xlabel("simulated seconds (one recorded state every 50 ms)")
        ax.legend()
        ax.set_title("the lift (simulation ground truth)")
    else:
        ax.axis("off")
        ax.set_title("no object trace (hardware trial, or execution not reached)")
    verdict = "LIFTED" if outcome.get("success") else "not lifted"
    scorer = {True: "agrees", False: "DISAGREES", None: "could not judge"}[outcome.get("scorer_agrees")]
    method = meta.get("method", {})
    fig.suptitle(f"trial {meta.get('trial', '?')}: {method.get('sampler')} + {method.get('evaluator')} "
                 f"({method.get('perception')} perception) -> {verdict} ({outcome.get('status', 'INCOMPLETE')}: "
                 f"{outcome.get('reason', 'no outcome')[:90]}); independent scorer {scorer}", fontsize=11)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
