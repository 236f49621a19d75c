"""`getagrip trials compare A B`: the same trials run two ways (e.g. the benchmark in-process and over ROS), side by
side - per trial whether the outcomes agree, and where the two runs first differ (images, object cloud, ranked
grasps, chosen grasp, lift), so every disagreement can be explained from the bags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from getagrip_ros.trials.bag import read_bag
from getagrip_ros.trials.messages import points_from_cloud
from getagrip_ros.trials.summary import find_bags

FINAL_Z_TOLERANCE_M = 2e-3
"""The last recorded object height of two runs may differ this much and still be the same lift: over ROS the last
/sim/object_state sample is taken at a wall-clock moment of the hold, so identical runs on a loaded machine end up to
just over 1 mm apart (0.205 vs 0.204 m seen)."""
TOPICS = {"/trial/metadata", "/trial/outcome", "/trial/events", "/camera/image_raw", "/object/points", "/grasps/candidates", "/grasps/chosen",
          "/sim/object_state"}


def _product(bag) -> dict[str, Any]:
    """What each stage produced, in comparable form."""
    images = bag.topic("/camera/image_raw")
    points = bag.topic("/object/points")
    cloud = points_from_cloud(points[0].msg) if points else None
    z = [m.msg.pose.position.z for m in bag.topic("/sim/object_state")]
    plans = [e for e in bag.json("/trial/events") if e.get("event") == "motion_plan"]
    return {"motion_plan": plans[0] if plans else None, "images": [np.frombuffer(bytes(m.msg.data), np.uint8) for m in images], "cloud": cloud,
            "candidates": np.array([m.msg.vector for m in bag.topic("/grasps/candidates")], dtype=float),
            "chosen": np.array([m.msg.vector for m in bag.topic("/grasps/chosen")], dtype=float),
            "final_z_m": z[-1] if z else None}


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Where two runs of one trial first differ ("" = nowhere the bags show)."""
    if len(a["images"]) != len(b["images"]):
        return f"capture: {len(a['images'])} vs {len(b['images'])} images"
    for i, (x, y) in enumerate(zip(a["images"], b["images"])):
        if x.shape != y.shape or not np.array_equal(x, y):
            diff = np.abs(x.astype(int) - y.astype(int)).mean() if x.shape == y.shape else float("nan")
            return f"capture: image {i} differs (mean |diff| {diff:.3f} of 255)"
    if (a["cloud"] is None) != (b["cloud"] is None):
        return "perception: one run has no object cloud"
    if a["cloud"] is not None and (a["cloud"].shape != b["cloud"].shape or not np.array_equal(a["cloud"], b["cloud"])):
        return f"perception: object clouds differ ({len(a['cloud'])} vs {len(b['cloud'])} points)"
    if a["candidates"].shape != b["candidates"].shape:
        return f"grasp planning: {len(a['candidates'])} vs {len(b['candidates'])} ranked grasps"
    if len(a["candidates"]) and not np.allclose(a["candidates"], b["candidates"], atol=1e-5):
        return f"grasp planning: ranked grasps differ (max |diff| {np.abs(a['candidates'] - b['candidates']).max():.2e})"
    if a["chosen"].shape != b["chosen"].shape or (len(a["chosen"]) and not np.allclose(a["chosen"], b["chosen"], atol=1e-5)):
        return "motion planning: another grasp was chosen" + _choice(a.get("motion_plan"), b.get("motion_plan"))
    if a["final_z_m"] is not None and b["final_z_m"] is not None and abs(a["final_z_m"] - b["final_z_m"]) > FINAL_Z_TOLERANCE_M:
        return f"execution: the object ended at z = {a['final_z_m']:.3f} vs {b['final_z_m']:.3f} m"
    return ""


def _choice(a: dict | None, b: dict | None) -> str:
    """Which grasp each run chose, and why the other run refused the better-ranked one."""
    if not a or not b:
        return ""
    first, second = sorted((a, b), key=lambda p: p["grasp_index"])
    reason = next((r for r in second["rejected"] if r.split(":", 1)[0] == str(first["grasp_index"])), "")
    return f" (#{a['grasp_index']} vs #{b['grasp_index']}; the other run refused #{first['grasp_index']}: {reason})"


def _machines(a: dict | None, b: dict | None) -> str:
    """"" when both trials ran on the same kind of CPU (or a bag does not say), else how the two differ."""
    if not a or not b or a == b:
        return ""
    return "; ".join(f"{k} {a.get(k)!r} vs {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def compare_folders(a: str | Path, b: str | Path) -> dict[str, Any]:
    """Trials present in both folders (by name), each with both outcomes, whether they agree and where they differ."""
    bags_a = {p.name: p for p in find_bags(a)}
    bags_b = {p.name: p for p in find_bags(b)}
    rows = []
    for name in sorted(set(bags_a) & set(bags_b)):
        x, y = read_bag(bags_a[name], TOPICS), read_bag(bags_b[name], TOPICS)
        ox, oy = x.outcome or {}, y.outcome or {}
        rows.append({"trial": name, "object": x.metadata.get("object", "?"),
                     "a": {k: ox.get(k) for k in ("success", "status", "stage", "reason")},
                     "b": {k: oy.get(k) for k in ("success", "status", "stage", "reason")},
                     "agree": ox.get("success") == oy.get("success") and ox.get("status") == oy.get("status"),
                     "same_settings": x.metadata.get("config_hash") == y.metadata.get("config_hash"),
                     "machines": _machines(x.metadata.get("machine"), y.metadata.get("machine")),
                     "first_difference": first_difference(_product(x), _product(y))})
    agree = sum(r["agree"] for r in rows)
    return {"a": str(a), "b": str(b), "trials": rows, "agree": agree, "compared": len(rows),
            "only_a": sorted(set(bags_a) - set(bags_b)), "only_b": sorted(set(bags_b) - set(bags_a))}


def _verdict(o: dict[str, Any]) -> str:
    return "lifted" if o["success"] else f"{(o['status'] or '?').lower()} ({o['stage']})"


def format_markdown(report: dict[str, Any], a_name: str = "A", b_name: str = "B") -> str:
    lines = [f"| object | {a_name} | {b_name} | agree | where the runs first differ |", "|---|---|---|---|---|"]
    for r in report["trials"]:
        lines.append(f"| {r['object'].split('/')[-1]} | {_verdict(r['a'])} | {_verdict(r['b'])} | "
                     f"{'yes' if r['agree'] else '**no**'} | {r['first_difference'] or 'nowhere: identical'}"
                     f"{' (other machines: ' + r['machines'] + ')' if r.get('machines') else ''} |")
    return "\n".join(lines)


def write_comparison(a: str | Path, b: str | Path, out: str | Path, a_name: str = "A", b_name: str = "B") -> dict[str, Any]:
    report = compare_folders(a, b)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "agreement.json").write_text(json.dumps(report, indent=1))
    (out / "agreement.md").write_text(format_markdown(report, a_name, b_name) + "\n")
    return report
