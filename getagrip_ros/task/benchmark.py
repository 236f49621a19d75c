"""The benchmark: the full simulated grasp task over a set of objects and methods, under a frozen protocol.

The protocol (objects, methods, trials per object, every task setting and every stage setting of the stack)
is written to ``protocol.yaml`` with its hash before the first trial; a later run in the same folder must
present the same protocol (it then resumes: finished trials are kept, crashed ones are kept under a new name
and run again). Every attempt's bag is retained under ``trials/``; ``results.json`` holds success per object
and method, failure reasons and timings.

Before anything starts, the protocol is checked (unknown objects, sets, samplers, evaluators, missing model files
and out-of-range settings are refused with what is valid), and every object is prepared as the simulation will
prepare it: one that cannot be (a mesh no repair closes, a wrong size) is skipped, with its reason in
``results.json`` and ``summary.json`` (``skipped``), and the others run.

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

from getagrip_ros.objects.catalog import SETS as NAMED_SETS
from getagrip_ros.objects.mesh_object import MESH_FILE_SUFFIXES
from getagrip_ros.planning.planner import DEMONSTRATION_SAMPLERS, EVALUATORS, SAMPLERS
from getagrip_ros.serialization import json_default, torch_dtype
from getagrip_ros.task.config import GraspTaskConfig
from getagrip_ros.task.in_process import StackConfig

MODES = ("in_process", "ros")
MODEL_SETTINGS = {"fixed": ("fixed_grasps",), "fixed_graspd": ("fixed_grasps",), "diffusion": ("bps_sampler",), "bps": ("bps_evaluator",),
                  "geometry": ("geometry_evaluator",), "bps+geometry": ("bps_evaluator", "geometry_evaluator"),
                  "geometry>sim": ("geometry_evaluator",),
                  "nerf": ("nerf_evaluator",)}
"""The planner's model files (`planning.planner.ModelFiles` fields) each sampler and evaluator needs."""
_METHOD_HELP = (f"a method is sampler+evaluator, e.g. fixed+geometry; samplers: "
                f"{', '.join(s for s in SAMPLERS if s not in DEMONSTRATION_SAMPLERS)}; "
                f"evaluators: {', '.join(EVALUATORS)}")


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
    human_demos: str = ""
    """For human_demo+... methods: a folder with one demonstration per object (:func:`demonstration_path`), in the
    world frame of the object where the reset places it. Each trial's bag records the demonstration it used."""
    human_demo_kind: str = ""
    """Which of an object's demonstrations: ``<object>__<kind>.json`` (e.g. tripod); "" for ``<object>.json``."""

    def __post_init__(self) -> None:
        """Names and counts are checked here (no file is read); `check_protocol` also checks objects and models."""
        if not self.objects:
            raise ValueError("the protocol lists no objects")
        if not all(isinstance(o, str) and o.strip() for o in self.objects):
            raise ValueError(f"objects must be non-empty names or paths, got {list(self.objects)}")
        if not self.methods:
            raise ValueError(f"the protocol lists no methods; {_METHOD_HELP}")
        for m in self.methods:
            if not isinstance(m, str) or not all(m.partition("+")[::2]):  # the evaluator may hold a "+" (bps+geometry)
                raise ValueError(f"method {m!r} is not sampler+evaluator; {_METHOD_HELP}")
            sampler, evaluator = m.split("+", 1)
            if sampler in DEMONSTRATION_SAMPLERS and not self.human_demos:
                raise ValueError(f"method {m!r}: the {sampler} sampler needs a demonstration per object; give the "
                                 "folder that holds them (human_demos, --human-demos)")
            if sampler not in SAMPLERS:
                raise ValueError(f"unknown sampler {sampler!r} in method {m!r}; {_METHOD_HELP}")
            if evaluator not in EVALUATORS:
                raise ValueError(f"unknown evaluator {evaluator!r} in method {m!r}; {_METHOD_HELP}")
        if self.human_demos and not any(m.split("+", 1)[0] in DEMONSTRATION_SAMPLERS for m in self.methods):
            raise ValueError(f"human demonstrations are given but no method uses them (samplers: "
                             f"{', '.join(DEMONSTRATION_SAMPLERS)})")
        for what, items in (("method", self.methods), ("object", self.objects)):
            twice = sorted({i for i in items if items.count(i) > 1})
            if twice:
                raise ValueError(f"{what} {twice[0]!r} is listed twice; list each {what} once")
        if not isinstance(self.trials_per_object, int) or isinstance(self.trials_per_object, bool) \
                or self.trials_per_object < 1:
            raise ValueError(f"trials per object must be a whole number >= 1, got {self.trials_per_object!r}")

    def to_yaml(self) -> str:
        return yaml.safe_dump(json.loads(json.dumps(asdict(self), default=json_default)), sort_keys=True)

    def hash(self) -> str:
        return hashlib.sha256(self.to_yaml().encode()).hexdigest()[:16]


def from_dict(default: Any, values: dict[str, Any]) -> Any:
    """A dataclass like `default` with the fields in `values` (nested dicts for nested dataclasses, lists for tuples,
    names for torch dtypes)."""
    if not isinstance(values, dict):
        raise ValueError(f"{type(default).__name__}: expected a mapping of its fields, got {values!r}")
    names = [f.name for f in dataclasses.fields(default)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"unknown {type(default).__name__} field {unknown[0]!r}; fields: {', '.join(names)}")
    changes = {}
    for f in dataclasses.fields(default):
        if f.name not in values:
            continue
        current, new = getattr(default, f.name), values[f.name]
        if dataclasses.is_dataclass(current):
            changes[f.name] = from_dict(current, new)
        elif isinstance(current, tuple):
            changes[f.name] = tuple(tuple(v) if isinstance(v, list) else v for v in new)
        elif type(current).__module__ == "torch" and type(current).__name__ == "dtype":  # e.g. graspd.synthesis.dtype
            changes[f.name] = torch_dtype(new)
        else:
            changes[f.name] = new
    return replace(default, **changes)


def load_protocol(path: str | Path) -> BenchmarkProtocol:
    """The protocol of a protocol.yaml; ValueError (naming the file) for one that is not a valid protocol."""
    try:
        values = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from exc
    if not isinstance(values, dict) or not isinstance(values.get("objects"), list):
        raise ValueError(f"{path}: not a benchmark protocol (a mapping with a list of objects)")
    try:
        default = BenchmarkProtocol(objects=tuple(values["objects"]))
        return from_dict(default, values)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc


def _set_names(set_name: str) -> tuple[str, ...]:
    from getagrip_ros.objects.catalog import list_objects

    return tuple(o.name for o in list_objects(set_name))


def _meshes_in(folder: Path) -> tuple[str, ...]:
    meshes = sorted(str(p.resolve()) for p in folder.iterdir() if p.suffix.lower() in MESH_FILE_SUFFIXES)
    if not meshes:
        raise ValueError(f"no meshes ({' '.join(MESH_FILE_SUFFIXES)}) in {folder}")
    return tuple(meshes)


def resolve_objects(spec: str) -> tuple[str, ...]:
    """A named set ("tabletop-20", "procedural", "pybullet-random"), a folder of meshes (obj/stl/ply/glb) or a
    comma-separated list of set names, catalog names and mesh files (paths made absolute). ValueError, listing what is
    valid, for an unknown name or a missing file."""
    spec = spec.strip()
    if spec in NAMED_SETS:
        return _set_names(spec)
    folder = Path(spec).expanduser()
    if spec and folder.is_dir():
        return _meshes_in(folder)
    names: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item in NAMED_SETS:
            names.extend(_set_names(item))
        elif Path(item).expanduser().is_dir():
            names.extend(_meshes_in(Path(item).expanduser()))
        elif Path(item).suffix:
            path = Path(item).expanduser().resolve()
            object_spec(str(path))
            names.append(str(path))
        else:
            object_spec(item)
            names.append(item)
    if not names:
        raise ValueError(f"no objects given; {_object_help()}")
    return tuple(names)


def _object_help() -> str:
    return (f"objects are a named set ({', '.join(NAMED_SETS)}), a folder of meshes, mesh files "
            f"({' '.join(MESH_FILE_SUFFIXES)}) or catalog names (tabletop20/<name>, procedural/<family>_<NNNN>, "
            "pybullet/<NNN>)")


def _unknown_object(name: str) -> ValueError:
    """Why `name` is no object, with what it could have been."""
    import difflib

    from getagrip_ros.objects.catalog import PROCEDURAL_PER_FAMILY
    from getagrip_ros.objects.procedural import FAMILIES

    prefix = name.split("/", 1)[0]
    if prefix == "tabletop20":
        valid = f"tabletop-20 objects: {', '.join(_set_names('tabletop-20'))}"
    elif prefix == "procedural":
        valid = (f"procedural objects are procedural/<family>_<0000-{PROCEDURAL_PER_FAMILY - 1:04d}>, families: "
                 f"{', '.join(FAMILIES)}")
    elif prefix == "pybullet":
        valid = "pybullet objects are pybullet/000 ... pybullet/999"
    else:
        valid = _object_help()
        tabletop = _set_names("tabletop-20")
        close = [n for n in tabletop if n.split("/")[-1] == name] or \
            difflib.get_close_matches(name, [*NAMED_SETS, *tabletop], n=2, cutoff=0.8)
        if close:
            valid = f"did you mean {' or '.join(close)}? {valid}"
    return ValueError(f"unknown object or object set {name!r}; {valid}")


def object_spec(name: str):
    """The `objects.mesh_object.ObjectSpec` a protocol's object name stands for, resolved as the simulation resets to
    it (an existing mesh file, else a catalog name); ValueError naming what is valid when there is none."""
    from getagrip_ros.objects.catalog import object_by_name, user_object

    path = Path(name)
    if path.suffix:
        if path.suffix.lower() not in MESH_FILE_SUFFIXES:
            raise ValueError(f"object {name!r}: unsupported mesh file type {path.suffix!r} "
                             f"(supported: {' '.join(MESH_FILE_SUFFIXES)})")
        if not path.is_file():
            raise ValueError(f"object {name!r}: no such mesh file")
        return user_object(path)
    try:
        return object_by_name(name)
    except (ValueError, FileNotFoundError):
        raise _unknown_object(name) from None


def check_protocol(protocol: BenchmarkProtocol) -> None:
    """Everything a run needs that can be checked before anything starts: every object exists (catalog name or mesh
    file) and names its own trials, every method's models are configured, every demonstration a method needs loads,
    the settings are in range. ValueError with
    a one-line reason listing what is valid."""
    from getagrip_ros.models.shipped import resolve_model_file
    from getagrip_ros.task.robot_stages import PLANNERS

    slugs: dict[str, str] = {}
    for obj in protocol.objects:
        object_spec(obj)
        other = slugs.setdefault(_slug(obj), obj)
        if other != obj:
            raise ValueError(f"objects {other!r} and {obj!r} would both name trials {_slug(obj)!r}; rename one file")
    models = protocol.stack.planner.models
    for method in protocol.methods:
        for part in method.split("+", 1):
            for setting in MODEL_SETTINGS.get(part, ()):
                value = getattr(models, setting)
                try:
                    path = resolve_model_file(setting, value) if value else ""
                except ValueError as exc:
                    raise ValueError(f"method {method!r}: {exc}") from None
                if not path or not Path(path).expanduser().is_file():
                    raise ValueError(f"method {method!r} needs a {setting.replace('_', ' ')} file and "
                                     f"{'none is configured' if not value else f'{path} is missing'} "
                                     f"(stack.planner.models.{setting})")
    if any(m.split("+", 1)[0] in DEMONSTRATION_SAMPLERS for m in protocol.methods):
        from getagrip_ros.human_demo.demonstration import DemonstrationError, load_demonstration

        for obj in protocol.objects:
            path = demonstration_path(protocol, obj)
            try:
                demo = load_demonstration(path)
            except (OSError, DemonstrationError) as exc:
                raise ValueError(f"object {obj!r} has no usable demonstration at {path}: {exc}") from None
            if demo.frame_id != "world":
                raise ValueError(f"{path}: a benchmark demonstration is in the world frame, not {demo.frame_id!r}")
    task = protocol.task
    if task.planner not in PLANNERS:
        raise ValueError(f"unknown motion planner {task.planner!r}; known: {', '.join(PLANNERS)}")
    if not isinstance(task.seed, int) or isinstance(task.seed, bool) or task.seed < 0:
        raise ValueError(f"task.seed must be a whole number >= 0, got {task.seed!r}")
    for f in dataclasses.fields(task.timeouts):
        value = getattr(task.timeouts, f.name)
        if not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"task.timeouts.{f.name} must be > 0 seconds, got {value!r}")
    if not protocol.stack.planner.num_samples >= 1:
        raise ValueError(f"stack.planner.num_samples must be >= 1, got {protocol.stack.planner.num_samples!r}")
    protocol.stack.sim.validate()


def prepare_objects(protocol: BenchmarkProtocol, log: Callable[[str], None] = lambda line: None) -> dict[str, str]:
    """Prepare every object as the simulation will (repair, size check, convex decomposition, into the same cache);
    returns {object: reason} for those that cannot be prepared, which the run skips."""
    from getagrip_ros.objects.errors import ObjectRejected
    from getagrip_ros.objects.mesh_object import PrepareConfig, prepare_object

    config = PrepareConfig(cache_dir=protocol.stack.sim.object_cache_dir or None)
    skipped = {}
    for i, obj in enumerate(protocol.objects):
        try:
            prepare_object(object_spec(obj), config)
        except ObjectRejected as exc:
            skipped[obj] = " ".join(str(exc).split())
            log(f"[benchmark] skipping {obj}: {skipped[obj]}")
        except Exception as exc:  # noqa: BLE001 - a mesh library failing on one file must not end the run
            skipped[obj] = f"cannot prepare: {type(exc).__name__}: {' '.join(str(exc).split())}"
            log(f"[benchmark] skipping {obj}: {skipped[obj]}")
    return skipped


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


def _pending(protocol: BenchmarkProtocol, trials: Path, skip: frozenset[str] = frozenset()):
    """(object, method, k, trial name) of every trial still to run (none of the objects in `skip`); a crashed attempt
    (a bag without an outcome) is kept under a new name and run again."""
    from getagrip_ros.trials.bag import read_bag

    for obj in protocol.objects:
        if obj in skip:
            continue
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


def demonstration_path(protocol: BenchmarkProtocol, obj: str) -> Path:
    """Where the protocol's demonstration of `obj` is: ``<human_demos>/<object>[__<kind>].json``, the object named as
    its trials are (``tabletop20_apple``)."""
    kind = f"__{protocol.human_demo_kind}" if protocol.human_demo_kind else ""
    return Path(protocol.human_demos).expanduser() / f"{_slug(obj)}{kind}.json"


def _demonstration(protocol: BenchmarkProtocol, obj: str, method: str):
    """The demonstration a trial of `method` on `obj` uses (None for the other samplers)."""
    from getagrip_ros.human_demo.demonstration import load_demonstration

    return load_demonstration(demonstration_path(protocol, obj)) \
        if method.split("+", 1)[0] in DEMONSTRATION_SAMPLERS else None


def _trial_config(protocol: BenchmarkProtocol, method: str, k: int, out: Path) -> GraspTaskConfig:
    sampler, evaluator = method.split("+", 1)
    return replace(protocol.task, sampler=sampler, evaluator=evaluator, seed=protocol.task.seed + k,
                   trials_dir=str(out / "trials"), work_dir=str(out / "work"))


def run_benchmark(protocol: BenchmarkProtocol, out_dir: str | Path,
                  on_trial: Callable[[str, Any], None] = lambda name, result: None, mode: str = "in_process",
                  log: Callable[[str], None] = lambda line: None,
                  on_skip: Callable[[str, str], None] = lambda obj, reason: None) -> dict[str, Any]:
    """Run (or resume) every trial of the protocol in `mode`; returns the results (also written to results.json).

    Before anything starts (no stack, no bring-up) the protocol is checked (`check_protocol`: ValueError for an
    unknown object, method or setting) and every object prepared; one that cannot be (a mesh that no repair closes,
    a wrong size) is skipped with its reason (on_skip(object, reason); "skipped" in the results and the summary) and
    the others run. on_trial(name, result) gets each trial's `TaskResult` (in_process) or GraspObject result (ros)."""
    from getagrip_ros.trials.summary import plot_summary, summarize, summarize_folder

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {list(MODES)}")
    check_protocol(protocol)
    out = Path(out_dir).resolve()
    freeze(protocol, out)
    trials = out / "trials"
    trials.mkdir(exist_ok=True)
    skipped = prepare_objects(protocol, log)
    for obj, reason in skipped.items():
        on_skip(obj, reason)
    pending = list(_pending(protocol, trials, frozenset(skipped)))
    position = np.array([*protocol.stack.sim.object_xy_m, 0.0])
    if pending and mode == "in_process":
        from getagrip_ros.task.grasp_task import GraspTask, TrialObject
        from getagrip_ros.task.in_process import InProcessStack

        stack = InProcessStack(protocol.stack)
        try:
            for obj, method, k, name in pending:
                config = _trial_config(protocol, method, k, out)
                on_trial(name, GraspTask(stack, config).run(position, name, obj=TrialObject(obj),
                                                             human_demo=_demonstration(protocol, obj, method)))
        finally:
            stack.close()
    elif pending:
        from getagrip_ros.ros.benchmark_client import BenchmarkStack

        with BenchmarkStack(protocol.stack, _trial_config(protocol, protocol.methods[0], 0, out), out, log) as stack:
            for obj, method, k, name in pending:
                config = _trial_config(protocol, method, k, out)
                on_trial(name, stack.run_trial(position, name, obj, config, _demonstration(protocol, obj, method)))
    if any(trials.rglob("*.mcap")):
        rows, summary, plot = summarize_folder(trials, out)
    else:  # every object skipped: no trial ran
        import warnings

        rows, summary = [], summarize([])
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "No artists with labels")  # an empty plot has no legend
            plot = plot_summary(rows, summary, out / "summary.png")
    skipped_list = [{"object": obj, "reason": reason} for obj, reason in skipped.items()]
    summary["skipped_objects"] = skipped_list
    (out / "summary.json").write_text(json.dumps({"summary": summary, "trials": rows}, indent=1))
    from getagrip_ros.task.machine import machine

    results = {"protocol_hash": protocol.hash(), "mode": mode, "machine": machine(), "summary": summary, "plot": str(plot),
               "skipped": skipped_list,
               "trials": [{k: r[k] for k in ("trial", "object", "method", "success", "scored_success", "status", "stage",
                                             "reason", "timings_s")} for r in rows]}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    return results
