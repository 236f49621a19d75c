"""`getagrip trials summarize DIR`: every trial bag under a folder -> a table, summary.json and plots."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from getagrip_ros.trials.bag import read_bag

SUMMARY_TOPICS = {"/trial/metadata", "/trial/outcome"}


def find_bags(folder: str | Path) -> list[Path]:
    """Trial bag folders (holding an .mcap) under `folder`, sorted by path."""
    folder = Path(folder)
    return sorted({p.parent for p in folder.rglob("*.mcap")})


def trial_row(bag_path: Path) -> dict[str, Any]:
    """One trial's metadata and outcome (a bag cut short by a crash has no outcome: status INCOMPLETE)."""
    bag = read_bag(bag_path, SUMMARY_TOPICS)
    meta, outcome = bag.metadata, bag.outcome or {}
    method = meta.get("method", {})
    return {
        "trial": bag_path.name, "path": str(bag_path), "object": meta.get("object", "?"),
        "method": f"{method.get('sampler', '?')}+{method.get('evaluator', '?')}", "perception": method.get("perception", "?"),
        "seed": meta.get("seed"), "config_hash": meta.get("config_hash", ""),
        "success": outcome.get("success"), "scored_success": outcome.get("scored_success"),
        "scorer_agrees": outcome.get("scorer_agrees"), "status": outcome.get("status", "INCOMPLETE"),
        "stage": outcome.get("stage", "?"), "reason": outcome.get("reason", "the bag has no outcome (crashed run?)"),
        "timings_s": outcome.get("timings_s", {}), "bag_complete": bag.complete,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Success per method and object, failure reasons, scorer disagreements, mean stage timings."""
    per_method: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    timings: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r["status"] == "INCOMPLETE":  # a crashed attempt: listed, not counted
            continue
        per_method[r["method"]][r["object"]].append(bool(r["success"]))
        for stage, seconds in r["timings_s"].items():
            timings[stage].append(seconds)
    methods = {}
    for method, objects in per_method.items():
        outcomes = [s for v in objects.values() for s in v]
        methods[method] = {"trials": len(outcomes), "successes": sum(outcomes),
                           "success_rate": sum(outcomes) / len(outcomes),
                           "per_object": {o: {"trials": len(v), "successes": sum(v)} for o, v in sorted(objects.items())}}
    return {
        "num_trials": len(rows), "methods": methods,
        "failure_reasons": dict(Counter(f"{r['status']} in {r['stage']}" for r in rows if not r["success"]).most_common()),
        "scorer_disagreements": [r["trial"] for r in rows if r["scorer_agrees"] is False],
        "incomplete_bags": [r["trial"] for r in rows if not r["bag_complete"] or r["status"] == "INCOMPLETE"],
        "mean_stage_time_s": {k: sum(v) / len(v) for k, v in timings.items()},
    }


def format_table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table, one line per trial."""
    head = f"{'trial':<34} {'object':<26} {'method':<16} {'result':<8} {'scorer':<7} {'total s':>8}  reason"
    lines = [head, "-" * len(head)]
    for r in rows:
        result = "LIFTED" if r["success"] else ("?" if r["success"] is None else "failed")
        scorer = {True: "agrees", False: "DIFFERS", None: "-"}[r["scorer_agrees"]]
        total = sum(r["timings_s"].values())
        lines.append(f"{r['trial'][:34]:<34} {r['object'][:26]:<26} {r['method'][:16]:<16} {result:<8} {scorer:<7} "
                     f"{total:8.1f}  {r['status']}: {r['reason'][:80]}")
    return "\n".join(lines)


def plot_summary(rows: list[dict[str, Any]], summary: dict[str, Any], path: Path) -> Path:
    """success rate per object and method, failure reasons, stage timings -> one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
    methods = sorted(summary["methods"])
    objects = sorted({r["object"] for r in rows})
    width = 0.8 / max(len(methods), 1)
    for i, method in enumerate(methods):
        per = summary["methods"][method]["per_object"]
        rates = [per[o]["successes"] / per[o]["trials"] if o in per else np.nan for o in objects]
        axes[0].bar(np.arange(len(objects)) + i * width, rates, width,
                    label=f"{method} ({100 * summary['methods'][method]['success_rate']:.0f}%)")
    axes[0].set_xticks(np.arange(len(objects)) + 0.4 - width / 2, [o.split("/")[-1] for o in objects], rotation=60, ha="right")
    axes[0].set_ylabel("success rate")
    axes[0].set_ylim(0, 1)
    axes[0].legend(fontsize=8)
    axes[0].set_title("success per object")
    reasons = summary["failure_reasons"]
    axes[1].barh(list(reasons)[::-1], list(reasons.values())[::-1], color="tab:red")
    axes[1].set_title("failures (status in stage)")
    stages = list(summary["mean_stage_time_s"])
    data = [[r["timings_s"][s] for r in rows if s in r["timings_s"]] for s in stages]
    if stages:
        axes[2].boxplot(data, tick_labels=stages)
        axes[2].tick_params(axis="x", rotation=30)
    axes[2].set_ylabel("seconds")
    axes[2].set_title("stage times")
    fig.suptitle(f"{summary['num_trials']} trials; scorer disagreements: {len(summary['scorer_disagreements'])}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def summarize_folder(folder: str | Path, out_dir: str | Path | None = None) -> tuple[list[dict], dict, Path]:
    """Read every bag under `folder`; write summary.json and summary.png (into out_dir, default the folder)."""
    bags = find_bags(folder)
    if not bags:
        raise FileNotFoundError(f"no trial bags (*.mcap) under {folder}")
    rows = [trial_row(b) for b in bags]
    summary = summarize(rows)
    out = Path(out_dir or folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"summary": summary, "trials": rows}, indent=1))
    return rows, summary, plot_summary(rows, summary, out / "summary.png")
