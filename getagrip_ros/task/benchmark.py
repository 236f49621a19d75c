"""The benchmark: the full simulated grasp task over a set of objects and methods, under a frozen protocol.

The protocol (objects, methods, trials per object, every task setting and every stage setting of the stack)
is written to ``protocol.yaml`` with its hash before the first trial; a later run in the same folder must
present the same protocol (it then resumes: finished trials are kept, crashed ones are kept under a new name
and run again). Every attempt's bag is retained under ``trials/``; ``results.json`` holds success per object
and method, failure reasons and timings.

Two modes run the same protocol through the same stage code: ``in_process`` (`task.in_process.InProcessStack`
in this process) and ``ros`` (the stack users launch: a bring-up with a process per node, started here with
the protocol's settings as node parameters, and every trial sent as a ``grasp_object`` goal).
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
from getagrip_ros.task.in_process import StackConfig

NAMED_SETS = ("tabletop-20",)
MODES = ("in_process", "ros")


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
    """sampler, evaluator, seed, trials_dir and work_dir are set per trial."""
    stack: StackConfig = field(default_factory=StackConfig)
    """Every stage's settings (the object is named per trial; the reset puts it on the table)."""

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


def _pending(protocol: BenchmarkProtocol, trials: Path):
    """(object, method, k, trial name) of every trial still to run; a crashed attempt (a bag without an outcome) is
    kept under a new name and run again."""
    from getagrip_ros.trials.bag import read_bag

    for obj in protocol.objects:
        for method in protocol.methods:
            for k in range(protocol.trials_per_object):
                name = f"{_slug(obj)}__{method}__{k:02d}"
                bag = trials / name
                if bag.exists():
                    if read_bag(bag, {"/trial/outcome"}).outcome is not None:
                        continue  # done in an earlier run
                    attempt = 1
                    while (trials / f"{name}__crashed_{attempt}").exists():
                        attempt += 1
                    bag.rename(trials / f"{name}__crashed_{attempt}")
                yield obj, method, k, name


def _trial_config(protocol: BenchmarkProtocol, method: str, k: int, out: Path) -> GraspTaskConfig:
    sampler, evaluator = method.split("+", 1)
    return replace(protocol.task, sampler=sampler, evaluator=evaluator, seed=protocol.task.seed + k,
                   trials_dir=str(out / "trials"), work_dir=str(out / "work"))


def run_benchmark(protocol: BenchmarkProtocol, out_dir: str | Path,
                  on_trial: Callable[[str, Any], None] = lambda name, result: None, mode: str = "in_process",
                  log: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Run (or resume) every trial of the protocol in `mode`; returns the results (also written to results.json).
    on_trial(name, result) gets each trial's `TaskResult` (in_process) or GraspObject result (ros)."""
    from getagrip_ros.trials.summary import summarize_folder

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {list(MODES)}")
    out = Path(out_dir).resolve()
    freeze(protocol, out)
    trials = out / "trials"
    trials.mkdir(exist_ok=True)
    pending = list(_pending(protocol, trials))
    position = np.array([*protocol.stack.sim.object_xy_m, 0.0])
    if pending and mode == "in_process":
        from getagrip_ros.task.grasp_task import GraspTask, TrialObject
        from getagrip_ros.task.in_process import InProcessStack

        stack = InProcessStack(protocol.stack)
        try:
            for obj, method, k, name in pending:
                config = _trial_config(protocol, method, k, out)
                on_trial(name, GraspTask(stack, config).run(position, name, obj=TrialObject(obj)))
        finally:
            stack.close()
    elif pending:
        from getagrip_ros.ros.benchmark_client import BenchmarkStack

        with BenchmarkStack(protocol.stack, _trial_config(protocol, protocol.methods[0], 0, out), out, log) as stack:
            for obj, method, k, name in pending:
                config = _trial_config(protocol, method, k, out)
                on_trial(name, stack.run_trial(position, name, obj, config))
    rows, summary, plot = summarize_folder(trials, out)
    results = {"protocol_hash": protocol.hash(), "mode": mode, "summary": summary, "plot": str(plot),
               "trials": [{k: r[k] for k in ("trial", "object", "method", "success", "scored_success", "status", "stage",
                                             "reason", "timings_s")} for r in rows]}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    return results
