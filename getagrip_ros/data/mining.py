"""Planner-proposed grasps labelled on the training objects: the evaluator's own mistakes as training data.

At test time the BPS evaluator ranks grasps unlike the data engine's optimised ones: the fixed set's grasps
moved onto a new object and the diffusion sampler's samples. Where they leave its training distribution it
ranks confidently wrong grasps first (measured: predicted y_PGS 0.9 for diffusion grasps that never lift the
cup). Mining closes the loop: for every object of a finished run, plan with the samplers and the evaluator
on the object's stored observed cloud, label the evaluator's top grasps and an unranked draw of each
sampler with the paper's protocol in the same floating-hand world (same object, yaw and settled pose), and
write them as shards under ``<run>/mined/`` in the same object frame Oy, beside the same BPS.
:func:`getagrip_ros.data.generate.merge_shards` joins them to the object's generated grasps; the fixed set
is still drawn from the generated grasps only.

``mining.json`` in the run folder holds the settings and the model files' hashes: a rerun continues with
the same ones and refuses others (mined labels depend on the models that chose the grasps).

The graspd sampler can be mined too (``samplers`` with "graspd"): its synthesis on the observed cloud is the
expensive part, so every grasp it synthesises is labelled (top_k + random_k of them, in its physics-score order)
rather than a ranked and an unranked draw made apart.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from getagrip_ros.data.generate import (
    MINED_DIR,
    MINING_FILE,
    SHARDS_DIR,
    GenerationConfig,
    ObjectOutcome,
    ObjectShard,
    OutcomeLog,
    _compared_settings,
    _differences,
    _read_json,
    _tally,
    _write_json,
    load_shard,
    object_seed,
    shard_world,
)
from getagrip_ros.data.labels import label_grasps
from getagrip_ros.grasp.frames import invert_transform
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.models.shipped import resolve_model_file
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.planning.graspd_sampler import GraspdSamplerConfig
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest
from getagrip_ros.status import StatusCode

MINING_EVALUATORS = ("bps", "geometry")
MINING_SAMPLERS = ("fixed", "diffusion", "graspd")
SETTLE_TOLERANCE_M = 1e-3
"""How far the re-settled object may lie from the pose stored in the source shard."""


@dataclass(frozen=True)
class MiningConfig:
    models: ModelFiles
    """The evaluator that ranks and the samplers' files (the fixed set, the diffusion checkpoint)."""
    evaluator: str = "bps"
    """The planner's evaluator that ranks the proposals ("bps" or "geometry"): its own mistakes are mined."""
    samplers: tuple[str, ...] = ("fixed", "diffusion")
    """The planner's samplers whose proposals are labelled (of MINING_SAMPLERS)."""
    top_k: int = 12
    """The evaluator's best grasps labelled per sampler and object (graspd: see random_k)."""
    random_k: int = 4
    """Unranked draws labelled per sampler and object (graspd synthesises top_k + random_k and all are labelled)."""
    num_samples: int = 3200
    """Grasps each sampler proposes before ranking (the planner's default)."""
    refinement_iterations: int = 0
    graspd: GraspdSamplerConfig = field(default_factory=GraspdSamplerConfig)
    """The graspd sampler's settings (its num_grasps is replaced by top_k + random_k)."""
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    """The source run's settings: object preparation, scene, placement and the label protocol."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.evaluator not in MINING_EVALUATORS:
            raise ValueError(f"mining ranks with one of {MINING_EVALUATORS}, not {self.evaluator!r}")
        if not self.samplers or any(s not in MINING_SAMPLERS for s in self.samplers):
            raise ValueError(f"mining labels the proposals of one or more of {MINING_SAMPLERS}, not {list(self.samplers)}")


def _file_hash(setting: str, value: str) -> str:
    """Short sha256 of the file a ModelFiles setting names ("" when not configured).

    Raises:
        ValueError: the file does not exist.
    """
    if not value:
        return ""
    path = Path(resolve_model_file(setting, value))
    if not path.is_file():
        raise ValueError(f"{setting}: {path} not found")
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def mining_settings(config: MiningConfig) -> dict:
    """What a mined folder must agree on: the settings (JSON types) and the hashes of the model files."""
    settings = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
                if f.name not in ("models", "generation", "graspd")}
    if "graspd" in config.samplers:  # older runs (fixed and diffusion only) record no graspd settings
        settings["graspd"] = json.loads(json.dumps(dataclasses.asdict(config.graspd), default=str))  # dtypes as text
    settings = json.loads(json.dumps(settings))  # tuples -> lists, as read back from mining.json
    settings["generation"] = _compared_settings(config.generation)
    settings["model_hashes"] = {k: _file_hash(k, v) for k, v in dataclasses.asdict(config.models).items()
                                if k in (f"{config.evaluator}_evaluator", "bps_sampler", "fixed_grasps")}
    return settings


def mined_path(run_dir: str | Path, name: str) -> Path:
    """Where the mined shard of object `name` ("<set>/<id>") lives in a run folder."""
    *folders, stem = name.split("/")
    return Path(run_dir, MINED_DIR, *folders, f"{stem}.npz")


_PLANNERS: dict[tuple[ModelFiles, int, GraspdSamplerConfig], GraspPlanner] = {}


def _planner(models: ModelFiles, num_samples: int, graspd: GraspdSamplerConfig) -> GraspPlanner:
    """One planner per process, model set, sample count and graspd setting (models load once; an unranked draw of
    k grasps samples only k)."""
    key = (models, num_samples, graspd)
    if key not in _PLANNERS:
        _PLANNERS[key] = GraspPlanner(GraspPlannerConfig(num_samples=num_samples, models=models, graspd=graspd))
    return _PLANNERS[key]


def _draws(config: MiningConfig, sampler: str) -> list[tuple[str, int, str]]:
    """(evaluator, grasps to label, kind) of each plan made with `sampler` for one object."""
    if sampler == "graspd":  # one synthesis, every grasp labelled
        return [("none", config.top_k + config.random_k, "graspd_synthesised")]
    return [(config.evaluator, config.top_k, f"{sampler}_ranked"), ("none", config.random_k, f"{sampler}_random")]


def mine_object(source: ObjectShard, config: MiningConfig) -> ObjectShard:
    """Label the planner's proposals for the object of one generated shard; returns a shard of them.

    Raises:
        ObjectRejected: the object cannot be prepared or settles elsewhere than in the source run.
        RuntimeError: a plan fails (a model file missing or unreadable: the whole run is misconfigured).
    """
    timings: dict[str, float] = {}
    start = time.perf_counter()
    seed = object_seed(source.object_name, config.seed)
    gen = config.generation
    parts, kinds = [], []
    with shard_world(source, gen, SETTLE_TOLERANCE_M) as world:
        timings["prepare"] = round(time.perf_counter() - start, 4)
        graspd = dataclasses.replace(config.graspd, num_grasps=config.top_k + config.random_k)
        for sampler in config.samplers:
            for evaluator, k, kind in _draws(config, sampler):
                if k == 0:
                    continue
                # an unranked draw samples a few more than k: the planner's filters drop some
                planner = _planner(config.models, config.num_samples if evaluator != "none" else 8 * k, graspd)
                plan = planner.plan(PlanRequest(points_m=source.cloud_world_m.astype(np.float64), frame_id="world",
                                                num_grasps=k, sampler=sampler, evaluator=evaluator,
                                                refinement_iterations=config.refinement_iterations, seed=seed))
                if plan.status == StatusCode.NO_RESULT:  # no proposal passed the filters: nothing to label
                    continue
                if not plan.success:
                    raise RuntimeError(f"{source.object_name}: {sampler} + {evaluator} plan failed: "
                                       f"{plan.status.name}: {plan.reason}")
                parts.append(plan.planned.grasps)
                kinds += [kind] * len(plan.planned.grasps)
        timings["plan"] = round(time.perf_counter() - start - timings["prepare"], 4)
        if not parts:
            raise ObjectRejected(f"{source.object_name}: no proposal of {list(config.samplers)} passed the planner's filters")
        grasps = Grasp.cat(parts)
        labels = label_grasps(world, grasps, planner.hand, gen.labels, torch.Generator().manual_seed(seed))
        physics = world.physics_settings()
    y = np.array([[label.y_pick, label.y_coll, label.y_pgs] for label in labels], dtype=np.float32)
    grasps_Oy = grasps.transformed(invert_transform(torch.as_tensor(source.T_world_Oy)), "Oy")
    kinds_array = np.array(kinds)
    counts = {"grasps": len(grasps), "trials": len(grasps) * gen.labels.num_perturbations}
    for kind in dict.fromkeys(kinds):
        counts.update(_tally(kind, y[kinds_array == kind, 2], gen.good_y_pgs))
    timings["total"] = round(time.perf_counter() - start, 4)
    settings = {"mining": mining_settings(config), "physics": physics, "object_seed": seed, "kinds": kinds}
    return ObjectShard(source.object_name, grasps_Oy.to_numpy_vector().astype(np.float32), y[:, 0], y[:, 1], y[:, 2],
                       np.full(len(grasps), -1, np.int32), source.bps_m, source.cloud_world_m, source.T_world_Oy,
                       source.T_world_object, settings, timings, counts)




def _mine_to_shard(source_path: Path, config: MiningConfig, out_path: Path) -> ObjectOutcome:
    torch.set_num_threads(1)
    source = load_shard(source_path)
    try:
        shard = mine_object(source, config)
    except ObjectRejected as exc:
        return ObjectOutcome(source.object_name, "skipped", str(exc))
    except Exception:  # one object's bug must not stop a long run: recorded, retried by the next run
        return ObjectOutcome(source.object_name, "failed", traceback.format_exc())
    shard.save(out_path)
    return ObjectOutcome(source.object_name, "done", "", shard.counts, shard.timings_s)


@dataclass(frozen=True)
class MiningSummary:
    mined: tuple[str, ...]
    already_done: int
    skipped: dict[str, str]
    failed: dict[str, str]
    counts: dict[str, int]
    wall_s: float
    num_workers: int


def mine_dataset(run_dir: str | Path, config: MiningConfig, num_workers: int = 1, limit: int | None = None,
                 progress: Callable[[ObjectOutcome, int], None] | None = None) -> MiningSummary:
    """Mine every generated shard of run_dir that has no mined shard yet (in seeded random order; ``limit``:
    at most that many this run). Workers are spawned processes with torch on one thread each.

    Raises:
        ValueError: run_dir holds no generated shards, was mined with other settings or models, or num_workers < 1.
    """
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    run_dir = Path(run_dir)
    sources = sorted((run_dir / SHARDS_DIR).rglob("*.npz"))
    if not sources:
        raise ValueError(f"{run_dir}: no generated shards to mine (in {run_dir / SHARDS_DIR})")
    settings = mining_settings(config)
    stored = _read_json(run_dir / MINING_FILE)
    if stored and (diffs := _differences(stored, settings)):
        raise ValueError(f"{run_dir} was mined with other settings or models (" + "; ".join(diffs) + ")")
    (run_dir / MINED_DIR).mkdir(exist_ok=True)
    _write_json(run_dir / MINING_FILE, settings)
    for stale in (run_dir / MINED_DIR).rglob("*.tmp"):
        stale.unlink()
    names = {path: str(path.relative_to(run_dir / SHARDS_DIR).with_suffix("")) for path in sources}
    outcomes = OutcomeLog(run_dir / MINED_DIR / "skipped.json", run_dir / MINED_DIR / "failed.json")
    todo = [p for p in sources if not mined_path(run_dir, names[p]).is_file() and names[p] not in outcomes.skipped]
    done_before = len(sources) - len(todo) - sum(names[p] in outcomes.skipped for p in sources)
    todo = [todo[i] for i in np.random.default_rng(config.seed).permutation(len(todo))][:limit]

    def record(outcome: ObjectOutcome) -> None:
        outcomes.record(outcome)
        if progress is not None:
            progress(outcome, len(todo))

    start = time.perf_counter()
    if num_workers == 1:
        threads = torch.get_num_threads()
        try:
            for path in todo:
                record(_mine_to_shard(path, config, mined_path(run_dir, names[path])))
        finally:
            torch.set_num_threads(threads)
    elif todo:
        with ProcessPoolExecutor(min(num_workers, len(todo)), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_mine_to_shard, path, config, mined_path(run_dir, names[path])) for path in todo]
            for future in as_completed(futures):
                record(future.result())
    return MiningSummary(tuple(outcomes.done), done_before, outcomes.skipped, outcomes.failed, outcomes.counts,
                         time.perf_counter() - start, num_workers)
