"""The benchmark: the full simulated grasp task over a set of objects and methods, under a frozen protocol.

The protocol (objects, methods, trials per object, every task and world setting) is written to
``protocol.yaml`` with its hash before the first trial; a later run in the same folder must present the
same protocol (it then resumes: finished trials are kept, crashed ones are kept under a new name and
run again). Every attempt's bag is retained under ``trials/``; ``results.json`` holds success per object
and method, failure reasons and timings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from getagrip_ros.task.config import GraspTaskConfig
from getagrip_ros.task.local_stages import LocalSimConfig

NAMED_SETS = ("tabletop-20",)


@dataclass(frozen=True)
class BenchmarkProtocol:
    """Everything that decides a benchmark's numbers."""

    objects: tuple[str, ...]
    """Catalog names or mesh files."""
    methods: tuple[str, ...] = ("fixed+none", "fixed+bps", "diffusion+none", "diffusion+bps")
    """sampler+evaluator."""
    trials_per_object: int = 1
    """Trial k of an object uses seed = task.seed + k."""
    task: GraspTaskConfig = field(default_factory=GraspTaskConfig)
    """sampler, evaluator, seed and trials_dir are set per trial."""
    sim: LocalSimConfig = field(default_factory=LocalSimConfig)
    """object_name is set per object."""

    def __post_init__(self) -> None:
        if not self.objects:
            raise ValueError("the protocol lists no objects")
        for m in self.methods:
            if not all(m.partition("+")[::2]):  # the evaluator may hold a "+" itself (bps+geometry)
                raise ValueError(f"method {m!r} is not sampler+evaluator")
        if self.trials_per_object < 1:
            raise ValueError("trials_per_object must be >= 1")

    def to_yaml(self) -> str:
        return yaml.safe_dump(json.loads(json.dumps(asdict(self))), sort_keys=True)

    def hash(self) -> str:
        return hashlib.sha256(self.to_yaml().encode()).hexdigest()[:16]


def from_dict(default: Any, values: dict[str, Any]) -> Any:
    """A dataclass like `default` with the fields in `values` (nested dicts for nested dataclasses, lists for tuples)."""
    changes = {}
    for f in dataclasses.fields(default):
        if f.name not in values:
            continue
        current, new = getattr(default, f.name), values[f.name]
        if dataclasses.is_dataclass(current):
            changes[f.name] = from_dict(current, new)
        elif isinstance(current, tuple):
            changes[f.name] = tuple(tuple(v) if isinstance(v, list) else v for v in new)
        else:
            changes[f.name] = new
    return replace(default, **changes)


def load_protocol(path: str | Path) -> BenchmarkProtocol:
    values = yaml.safe_load(Path(path).read_text())
    default = BenchmarkProtocol(objects=tuple(values["objects"]))
    return from_dict(default, values)


def resolve_objects(spec: str) -> tuple[str, ...]:
    """A named set ("tabletop-20"), a folder of meshes (obj/stl/ply/glb) or a comma-separated list of names."""
    from getagrip_ros.objects.catalog import list_objects

    if spec in NAMED_SETS:
        return tuple(o.name for o in list_objects(spec))
    folder = Path(spec).expanduser()
    if folder.is_dir():
        meshes = sorted(str(p.resolve()) for p in folder.iterdir() if p.suffix.lower() in (".obj", ".stl", ".ply", ".glb"))
        if not meshes:
            raise ValueError(f"no meshes (.obj .stl .ply .glb) in {folder}")
        return tuple(meshes)
    return tuple(s.strip() for s in spec.split(",") if s.strip())


def _slug(name: str) -> str:
    return Path(name).stem if "/" in name and Path(name).suffix else name.replace("/", "_")


def freeze(protocol: BenchmarkProtocol, out_dir: Path) -> None:
    """Write protocol.yaml (+ hash) once; a folder holding another protocol is refused."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "protocol.yaml"
    text = f"# hash {protocol.hash()}\n" + protocol.to_yaml()
    if path.exists():
        old = load_protocol(path)
        if old.hash() != protocol.hash():
            raise ValueError(f"{out_dir} holds a benchmark with another protocol (hash {old.hash()} != {protocol.hash()}); "
                             "use a new folder, or pass --protocol with its protocol.yaml to resume it")
        return
    path.write_text(text)


def run_benchmark(protocol: BenchmarkProtocol, out_dir: str | Path,
                  on_trial: Callable[[str, Any], None] = lambda name, result: None) -> dict[str, Any]:
    """Run (or resume) every trial of the protocol; returns the results (also written to results.json)."""
    from getagrip_ros.task.grasp_task import GraspTask
    from getagrip_ros.task.local_stages import LocalSimStages
    from getagrip_ros.trials.bag import read_bag
    from getagrip_ros.trials.summary import summarize_folder

    out = Path(out_dir)
    freeze(protocol, out)
    trials = out / "trials"
    trials.mkdir(exist_ok=True)
    for obj in protocol.objects:
        stages = None
        try:
            for method in protocol.methods:
                sampler, evaluator = method.split("+", 1)
                for k in range(protocol.trials_per_object):
                    name = f"{_slug(obj)}__{method}__{k:02d}"
                    bag = trials / name
                    if bag.exists():
                        if read_bag(bag, {"/trial/outcome"}).outcome is not None:
                            continue  # done in an earlier run
                        attempt = 1
                        while (trials / f"{name}__crashed_{attempt}").exists():
                            attempt += 1
                        bag.rename(trials / f"{name}__crashed_{attempt}")  # kept, and run again
                    if stages is None:
                        stages = LocalSimStages(replace(protocol.sim, object_name=obj,
                                                        work_dir=str(out / "work" / _slug(obj))))
                    config = replace(protocol.task, sampler=sampler, evaluator=evaluator, seed=protocol.task.seed + k,
                                     trials_dir=str(trials))
                    position = np.array([*protocol.sim.object_xy_m, 0.0])
                    on_trial(name, GraspTask(stages, config).run(position, name))
        finally:
            if stages is not None:
                stages.close()
    rows, summary, plot = summarize_folder(trials, out)
    results = {"protocol_hash": protocol.hash(), "summary": summary, "plot": str(plot),
               "trials": [{k: r[k] for k in ("trial", "object", "method", "success", "scored_success", "status", "stage",
                                             "reason", "timings_s")} for r in rows]}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    return results
