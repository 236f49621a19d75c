"""Object catalog costs and acceptance rates on this machine.

Per procedural family: time to prepare an object from scratch (generate, repair, place, convex
decomposition with an empty cache), the same call again (decomposition cache hit) and one drop test.
Then the share of tabletop-20 and of an evenly spaced sample of the pybullet random objects that
pass prepare_object with the drop test, with the rejection reasons. "parts/mesh" is the summed
volume of the convex collision parts over the true volume (1 = the parts fit the mesh exactly).
Run: python benchmarks/bench_objects.py [--pybullet-sample 100] [--per-family 3]  (about 5 min on 2 cores)
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from collections import Counter

from getagrip_ros.objects.catalog import list_objects
from getagrip_ros.objects.mesh_object import ObjectRejected, PrepareConfig, prepare_object
from getagrip_ros.objects.procedural import FAMILIES
from getagrip_ros.objects.settle import SettleConfig, settle_test


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def reason_kind(message: str) -> str:
    """A rejection message without the object name and numbers, for grouping."""
    return re.sub(r"[-\d.]+", "N", message.split(": ", 1)[1])


def acceptance(specs, config: PrepareConfig) -> tuple[int, Counter, list[float]]:
    passed, reasons, seconds = 0, Counter(), []
    for spec in specs:
        start = time.perf_counter()
        try:
            prepare_object(spec, config)
            passed += 1
        except ObjectRejected as exc:
            reasons[reason_kind(str(exc))] += 1
        seconds.append(time.perf_counter() - start)
    return passed, reasons, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-family", type=int, default=3, help="procedural objects timed per family")
    parser.add_argument("--pybullet-sample", type=int, default=100, help="pybullet random objects checked (evenly spaced)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache_dir:
        config = PrepareConfig(cache_dir=cache_dir)
        print(f"{'family':10s} {'prepare (cold) s':>17s} {'cache hit s':>12s} {'settle s':>9s} {'parts':>6s} "
              f"{'parts/mesh':>10s} {'faces':>6s}")
        for family in FAMILIES:
            specs = [s for s in list_objects("procedural") if s.tags == (family,)][: args.per_family]
            cold, warm, settle, parts, fill, faces = [], [], [], [], [], []
            for spec in specs:
                obj, t_cold = timed(lambda: prepare_object(spec, config))
                _, t_warm = timed(lambda: prepare_object(spec, config))
                _, t_settle = timed(lambda: settle_test(obj))
                cold.append(t_cold), warm.append(t_warm), settle.append(t_settle)
                parts.append(len(obj.convex_parts)), faces.append(len(obj.mesh.faces))
                fill.append(sum(p.volume for p in obj.convex_parts) / obj.volume_m3)
            print(f"{family:10s} {statistics.mean(cold):17.2f} {statistics.mean(warm):12.3f} {statistics.mean(settle):9.3f}"
                  f" {statistics.mean(parts):6.1f} {statistics.mean(fill):10.2f} {statistics.mean(faces):6.0f}")

        checked = PrepareConfig(cache_dir=cache_dir, settle=SettleConfig())
        for label, specs in (("tabletop-20", list_objects("tabletop-20")),
                             ("pybullet-random", list_objects("pybullet-random")[:: max(1, 1000 // args.pybullet_sample)])):
            passed, reasons, seconds = acceptance(specs, checked)
            print(f"{label}: {passed}/{len(specs)} pass ({100 * passed / len(specs):.0f}%), prepare+settle per object "
                  f"median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s")
            for reason, count in reasons.most_common():
                print(f"  rejected {count:3d}: {reason}")


if __name__ == "__main__":
    main()
