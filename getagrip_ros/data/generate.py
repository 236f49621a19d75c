"""The data engine: a labelled BPS grasp dataset over catalog objects, one resumable shard per object.

Per object (:func:`generate_object`, a pure function of the object and the settings): prepare it (drop test
included), rest it on the table of the floating-hand world at a seeded yaw, render noisy depth views of it
along the capture spirals and clean them into the cloud the robot would see (its centroid sets the object
frame Oy, its BPS is the model input), make pre-grasps on the true surface (generator "energy": "open"
heuristic grasps refined on the hand-object energy; "graspd": contact-rich synthesis), label them with the paper's protocol, then perturb every good grasp (y_PGS >= 0.9)
with the label noise and label the perturbed copies too. Grasps are stored as 37-D vectors in Oy.

A run folder holds ``config.json`` (the settings; a rerun must use the same), ``shards/<object name>.npz``
(one per finished object, written atomically), ``skipped.json`` (objects rejected, with the reason: not
retried) and ``failed.json`` (unexpected errors: retried by the next run). Rerunning does only the objects
without a shard. :func:`merge_shards` writes the public BPS HDF5 layout. One run per folder at a time.
Frames: world z up, table top at z = 0; metres, radians.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import multiprocessing
import os
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal, Sequence

import numpy as np
import torch
from scipy.spatial.transform import Rotation

from getagrip_ros.data.grasp_generation import GraspOptimizationConfig, ObjectSurface, optimize_pregrasps
from getagrip_ros.data.labels import LabelConfig, label_grasps
from getagrip_ros.grasp.frames import invert_transform
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.grasp.perturb import LABEL_NOISE, PerturbationConfig, perturb_grasps
from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.errors import ObjectRejected
from getagrip_ros.objects.mesh_object import ObjectSpec, PrepareConfig, prepare_object
from getagrip_ros.objects.settle import SettleConfig
from getagrip_ros.perception.bps import encode_bps_turned, public_basis_points_By
from getagrip_ros.perception.capture_trajectory import SpiralConfig, spiral_poses
from getagrip_ros.perception.depth_cloud import backproject_object
from getagrip_ros.perception.point_cloud import CloudCleaningConfig, clean_object_cloud
from getagrip_ros.planning.heuristic_sampler import HeuristicSamplerConfig, sample_heuristic_grasps
from getagrip_ros.planning.object_input import object_from_points
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.sim.scene import CameraConfig, SceneConfig
from getagrip_ros.sim.world import ObjectPlacement, SimWorld
from getagrip_ros.synthesis.hand_model import AllegroModelConfig, HandModel, allegro_hand_model
from getagrip_ros.synthesis.object_sdf import ObjectSDF, SDFConfig
from getagrip_ros.synthesis.optimizer import SynthesisConfig, SynthesisOptions, synthesize_grasps
from getagrip_ros.training.datasets import write_bps_dataset

log = logging.getLogger(__name__)

SHARDS_DIR = "shards"
MINED_DIR = "mined"
"""Planner-proposed grasps labelled on the run's objects (:mod:`getagrip_ros.data.mining`)."""
MINING_FILE = "mining.json"
"""The mining's settings and the hashes of the models that proposed the mined grasps."""
CONFIG_FILE = "config.json"
SKIPPED_FILE = "skipped.json"
FAILED_FILE = "failed.json"
_HAND_AWAY_M = (0.0, 0.0, 2.0)
"""Where the floating hand waits (palm position, world) while the object is photographed."""
_NOT_COMPARED = ("prepare.cache_dir",)
"""Settings that do not change the data: a rerun may differ in them."""


@dataclass(frozen=True)
class CloudConfig:
    """The object's cloud as the robot sees it: depth views from the capture spirals, with depth noise.

    The views are the spiral poses themselves (not checked for the arm's reach); pixels showing the object
    (the simulator's mask) are back-projected, then cropped and cleaned as perception cleans its clouds.
    """

    spiral: SpiralConfig = field(default_factory=lambda: SpiralConfig(num_images=12))
    camera: CameraConfig = field(default_factory=lambda: CameraConfig(320, 180, 133.25))
    """ZED 2i HD720 / 4."""
    depth_noise_std_m: float = 0.001
    """Std of the Gaussian noise added to every depth pixel."""
    cleaning: CloudCleaningConfig = field(default_factory=lambda: CloudCleaningConfig(component_link_m=0.01))


@dataclass(frozen=True)
class GraspdGenerationConfig:
    """The "graspd" generator: the planner's synthesis core on the object's true mesh (world frame)."""

    synthesis: SynthesisConfig = field(default_factory=SynthesisConfig)
    sdf: SDFConfig = field(default_factory=SDFConfig)
    hand: AllegroModelConfig = field(default_factory=lambda: AllegroModelConfig(contact_links="distal"))
    """Distal contact: Get a Grip's labels count palm and proximal contact as failure."""


@dataclass(frozen=True)
class GenerationConfig:
    grasps_per_object: int = 64
    """Starts per object (energy: fewer when the heuristic sampler drops some, palm too close to the table)."""
    generator: Literal["energy", "graspd"] = "energy"
    """How the pre-grasps are made from the true mesh: "energy", heuristic open-hand starts refined by the small
    hand-object energy (:mod:`getagrip_ros.data.grasp_generation`); "graspd", contact-rich synthesis through the
    differentiable contact model (:mod:`getagrip_ros.synthesis`)."""
    graspd: "GraspdGenerationConfig" = field(default_factory=lambda: GraspdGenerationConfig())
    """Settings of the "graspd" generator."""
    sampler: HeuristicSamplerConfig = field(default_factory=lambda: HeuristicSamplerConfig(style="open"))
    optimization: GraspOptimizationConfig = field(default_factory=GraspOptimizationConfig)
    labels: LabelConfig = field(default_factory=LabelConfig)
    good_y_pgs: float = 0.9
    """Grasps with y_PGS at least this are augmented."""
    augmentations_per_good_grasp: int = 5
    augmentation_noise: PerturbationConfig = LABEL_NOISE
    """Wrist perturbation of the augmented copies (the paper's label noise)."""
    cloud: CloudConfig = field(default_factory=CloudConfig)
    prepare: PrepareConfig = field(default_factory=lambda: PrepareConfig(settle=SettleConfig()))
    """Object acceptance: the paper's size range and drop test."""
    placement: ObjectPlacement = field(default_factory=ObjectPlacement)
    """Where the object rests (x, y = 0.65, 0 m); its yaw is drawn per object when random_yaw."""
    random_yaw: bool = True
    scene: SceneConfig = field(default_factory=lambda: SceneConfig(robot="floating_hand", timestep_s=0.004,
                                                                   jacobian="sparse"))
    """The floating-hand world. 4 ms steps label 1.7x faster than the default 2 ms; on 384 grasps x 5 trials of
    the first run the per-trial y_PGS agreed 98.9% with 2 ms (y_coll 100%), grasp y_PGS correlation 0.985. The
    sparse constraint Jacobian is faster still with the same labels (``benchmarks/bench_labels.py``)."""
    seed: int = 0
    """Run seed; each object's seed is derived from it and the object's name."""


@dataclass(frozen=True, eq=False)
class ObjectShard:
    """Everything generated for one object."""

    object_name: str
    grasps_Oy: np.ndarray
    """(n, 37) float32 grasp vectors in the object frame Oy (y up, origin at the observed cloud's centroid)."""
    y_pick: np.ndarray
    """(n,) float32 labels in [0, 1]."""
    y_coll: np.ndarray
    y_PGS: np.ndarray
    augmented_from: np.ndarray
    """(n,) int32 row of the grasp each augmented grasp perturbs; -1 for the optimised grasps (the first rows)."""
    bps_m: np.ndarray
    """(4096,) float32 distances from the public basis (By: below the centroid on the table) to the cloud."""
    cloud_world_m: np.ndarray
    """(N, 3) float32 cleaned observed cloud, world frame."""
    T_world_Oy: np.ndarray
    """(4, 4) float64."""
    T_world_object: np.ndarray
    """(4, 4) float64 pose of the object (its mesh frame) while it was photographed and grasped."""
    settings: dict
    """The generation settings, the physics settings and the object's seed."""
    timings_s: dict
    counts: dict
    """Grasps and trials, label tallies of the optimised and augmented grasps, cloud cleaning counts."""

    def save(self, path: str | Path) -> Path:
        """Write the shard as .npz atomically (a temporary file renamed into place)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        arrays = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("settings", "timings_s", "counts"):
            arrays[key] = np.array(json.dumps(arrays[key], default=str))
        arrays["object_name"] = np.array(self.object_name)
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
        return path


def load_shard(path: str | Path) -> ObjectShard:
    """A run's shard, or a training pack's compact one (:mod:`getagrip_ros.data.pack`), as the run wrote it."""
    with np.load(path) as f:
        if "cloud_Oy_m" in f.files:
            from getagrip_ros.data.pack import read_compact_shard

            return ObjectShard(**read_compact_shard(f))
        values = {k: f[k] for k in f.files}
    values["object_name"] = str(values["object_name"])
    for key in ("settings", "timings_s", "counts"):
        values[key] = json.loads(str(values[key]))
    return ObjectShard(**values)


def object_seed(name: str, run_seed: int) -> int:
    """63-bit seed of one object: a fixed function of the run seed and the object's name."""
    return int.from_bytes(hashlib.sha256(f"{run_seed}/{name}".encode()).digest()[:8], "big") >> 1


def _resolve(obj: ObjectSpec | str) -> ObjectSpec:
    if isinstance(obj, ObjectSpec):
        return obj
    try:
        return object_by_name(obj)
    except ValueError as exc:
        raise ObjectRejected(str(exc)) from exc


def shard_world(shard: ObjectShard, config: GenerationConfig, tolerance_m: float) -> SimWorld:
    """The floating-hand world `shard` was labelled in, open (use it in a ``with``): its object prepared again by
    `config` and placed at the shard's yaw, checked to rest where the shard says (position in metres and rotation-matrix
    entries within `tolerance_m`).

    Raises:
        ObjectRejected: the object is not in the catalog or cannot be prepared, or it rests elsewhere (the shard was
            made with other settings than `config`).
    """
    try:
        spec = _resolve(shard.object_name)
    except ObjectRejected as exc:
        raise ObjectRejected(f"{shard.object_name}: cannot rebuild its world: {exc}") from exc
    prepared = prepare_object(spec, config.prepare)
    placement = dataclasses.replace(config.placement, yaw_rad=float(shard.settings["yaw_rad"]))
    world = SimWorld(config.scene, prepared, placement)
    T_world_object = world.object_pose()
    moved_m = float(np.abs(T_world_object[:3, 3] - shard.T_world_object[:3, 3]).max())
    turned = float(np.abs(T_world_object[:3, :3] - shard.T_world_object[:3, :3]).max())
    if moved_m > tolerance_m or turned > tolerance_m:
        world.close()
        raise ObjectRejected(f"{shard.object_name}: the rebuilt world puts the object {moved_m * 1e3:.3f} mm (rotation "
                             f"entries {turned:.1e}) away from where it was labelled: the shard was made with other "
                             "settings")
    return world


def _name(obj: ObjectSpec | str) -> str:
    return obj.name if isinstance(obj, ObjectSpec) else obj


def observe_views(world: SimWorld, config: CloudConfig, rng: np.random.Generator) -> tuple[list, np.ndarray]:
    """Noisy depth views of the world's object along the capture spirals (camera frames with the depth noise added)
    and the capture centre (3,) on the table below the object, world frame."""
    T_hand = np.eye(4)
    T_hand[:3, 3] = _HAND_AWAY_M
    world.reset(T_world_palm=T_hand)
    position = np.array([*world.object_pose()[:2, 3], 0.0])
    frames = []
    for T_world_camera in spiral_poses(position, config.spiral):
        world.set_camera_pose(T_world_camera)
        frame = world.render(config.camera)
        noisy = frame.depth_m + rng.normal(0.0, config.depth_noise_std_m, frame.depth_m.shape).astype(np.float32)
        frames.append(dataclasses.replace(frame, depth_m=np.where(frame.depth_m > 0, noisy, 0.0)))
    return frames, position


def observe_object(world: SimWorld, config: CloudConfig, rng: np.random.Generator) -> np.ndarray:
    """(N, 3) cleaned world-frame cloud of the world's object from noisy depth views along the capture spirals."""
    frames, position = observe_views(world, config, rng)
    points = [backproject_object(frame) for frame in frames]
    try:
        return clean_object_cloud(np.concatenate(points), position, config.cleaning).points_m
    except ValueError as exc:
        raise ObjectRejected(f"{world.object.name}: {exc}") from exc


def _tally(prefix: str, y_pgs: np.ndarray, good: float) -> dict[str, int]:
    """How many grasps, how many with y_PGS > 0 and how many good ones."""
    return {prefix: len(y_pgs), f"{prefix}_positive": int((y_pgs > 0).sum()), f"{prefix}_good": int((y_pgs >= good).sum())}


def generate_object(obj: ObjectSpec | str, config: GenerationConfig = GenerationConfig()) -> ObjectShard:
    """Generate and label the grasps of one object (a catalog name or a spec); see the module docstring.

    Raises:
        ObjectRejected: unknown name, the object cannot be prepared or does not settle, too few cloud
            points survive cleaning, or no grasp can be sampled.
    """
    timings: dict[str, float] = {}
    start = last = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal last
        now = time.perf_counter()
        timings[stage] = round(now - last, 4)
        last = now

    spec = _resolve(obj)
    seed = object_seed(spec.name, config.seed)
    yaw_seed, noise_seed, surface_seed, sample_seed, label_seed, augment_seed, augment_label_seed = (
        int(s) for s in np.random.SeedSequence(seed).generate_state(7, dtype=np.uint32))
    prepared = prepare_object(spec, config.prepare)
    yaw = float(np.random.default_rng(yaw_seed).uniform(0.0, 2 * np.pi)) if config.random_yaw else config.placement.yaw_rad
    placement = dataclasses.replace(config.placement, yaw_rad=yaw)
    hand = AllegroHand()
    lap("prepare")
    with SimWorld(config.scene, prepared, placement) as world:
        cloud = observe_object(world, config.cloud, np.random.default_rng(noise_seed))
        observed = object_from_points(cloud, "world")
        T_world_object = world.object_pose()
        lap("perception")

        mesh_world = prepared.mesh.copy()
        mesh_world.apply_transform(T_world_object)
        grasps, _ = pregrasps_on_mesh(spec.name, mesh_world, config, hand, surface_seed, sample_seed)
        lap("optimize")
        labels = label_grasps(world, grasps, hand, config.labels, torch.Generator().manual_seed(label_seed))
        y = np.array([[label.y_pick, label.y_coll, label.y_pgs] for label in labels])
        augmented_from = np.full(len(grasps), -1)
        lap("label")
        good = np.flatnonzero(y[:, 2] >= config.good_y_pgs)
        if len(good) and config.augmentations_per_good_grasp > 0:
            parents = np.repeat(good, config.augmentations_per_good_grasp)
            copies = perturb_grasps(grasps[torch.as_tensor(parents)], config.augmentation_noise,
                                    torch.Generator().manual_seed(augment_seed), (hand.lower_limits_rad, hand.upper_limits_rad))
            copy_labels = label_grasps(world, copies, hand, config.labels, torch.Generator().manual_seed(augment_label_seed))
            y = np.concatenate([y, [[label.y_pick, label.y_coll, label.y_pgs] for label in copy_labels]])
            augmented_from = np.concatenate([augmented_from, parents])
            grasps = Grasp.cat([grasps, copies])
        lap("augment")
        physics = world.physics_settings()

    T_world_Oy = observed.T_frame_Oy
    grasps_Oy = grasps.transformed(invert_transform(T_world_Oy), "Oy")
    is_start = augmented_from < 0
    counts = {"grasps": len(grasps), "trials": len(grasps) * config.labels.num_perturbations,
              **_tally("starts", y[is_start, 2], config.good_y_pgs), **_tally("augmented", y[~is_start, 2], config.good_y_pgs),
              "cloud_points": len(cloud)}
    timings["total"] = round(time.perf_counter() - start, 4)
    settings = {"generation": dataclasses.asdict(config), "physics": physics, "object_seed": seed, "yaw_rad": yaw}
    return ObjectShard(spec.name, grasps_Oy.to_numpy_vector().astype(np.float32), *(y[:, i].astype(np.float32) for i in range(3)),
                       augmented_from.astype(np.int32), observed.bps_m.astype(np.float32), cloud.astype(np.float32),
                       T_world_Oy.numpy(), T_world_object, settings, timings, counts)


def pregrasps_on_mesh(name: str, mesh_world, config: GenerationConfig, hand: AllegroHand, surface_seed: int,
                      sample_seed: int) -> tuple[Grasp, torch.Tensor | None]:
    """Up to `grasps_per_object` world-frame pre-grasps of an object's true mesh (world frame, table top z = 0) by
    the configured generator, with the synthesis's physics score (lower is better; None for "energy").

    Raises:
        ObjectRejected: no start could be sampled, the SDF cannot be built, or every synthesised grasp failed.
    """
    if config.generator == "graspd":
        return _synthesize(name, mesh_world, config, sample_seed)
    surface = ObjectSurface.from_mesh(mesh_world, config.optimization.num_surface_points, seed=surface_seed)
    # the sampler drops palms too close to the table: draw twice as many, keep the first grasps_per_object
    starts = sample_heuristic_grasps(surface.points_m.numpy(), 2 * config.grasps_per_object, hand, "world",
                                     config.sampler, torch.Generator().manual_seed(sample_seed))
    starts = starts[: config.grasps_per_object]
    if len(starts) == 0:
        raise ObjectRejected(f"{name}: the heuristic sampler found no grasp start")
    return optimize_pregrasps(starts, surface, hand, config.optimization)[0], None


_GRASPD_HANDS: dict[AllegroModelConfig, HandModel] = {}


def _synthesize(name: str, mesh_world, config: GenerationConfig, seed: int) -> tuple[Grasp, torch.Tensor]:
    """`grasps_per_object` world-frame pre-grasps by contact-rich synthesis on the true mesh (the table top is
    world z = 0) and their physics scores; grasps stopped by a non-finite loss are left out."""
    settings = config.graspd
    if settings.hand not in _GRASPD_HANDS:  # the hand model takes ~1 s to build: once per process and setting
        _GRASPD_HANDS[settings.hand] = allegro_hand_model(settings.hand)
    try:
        sdf = ObjectSDF.from_mesh(mesh_world, settings.sdf, frame_id="world", name=name)
    except ValueError as exc:
        raise ObjectRejected(f"{name}: cannot build the SDF: {exc}") from exc
    result = synthesize_grasps(_GRASPD_HANDS[settings.hand], sdf, settings.synthesis,
                               SynthesisOptions(num_grasps=config.grasps_per_object, seed=seed))
    kept = torch.nonzero(~result.failed).flatten()
    if len(kept) == 0:
        raise ObjectRejected(f"{name}: every synthesised grasp failed ({next(iter(result.failure_reasons.values()))})")
    return result.grasp[kept], result.physics_score()[kept]


@dataclass(frozen=True)
class ObjectOutcome:
    """What became of one object in a run."""

    name: str
    status: Literal["done", "skipped", "failed"]
    reason: str = ""
    """Why it was skipped (ObjectRejected) or the traceback of an unexpected error."""
    counts: dict = field(default_factory=dict)
    timings_s: dict = field(default_factory=dict)


def shard_path(run_dir: str | Path, name: str) -> Path:
    """Where the shard of object `name` ("<set>/<id>") lives in a run folder."""
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"object name {name!r} cannot name a shard file")
    return Path(run_dir, SHARDS_DIR, *parts[:-1], f"{parts[-1]}.npz")


def _init_worker() -> None:
    torch.set_num_threads(1)


def _generate_one(obj: ObjectSpec | str, config: GenerationConfig) -> tuple[ObjectOutcome, ObjectShard | None]:
    """One object's outcome and, when done, its shard (torch on one thread)."""
    _init_worker()
    name = _name(obj)
    try:
        shard = generate_object(obj, config)
    except ObjectRejected as exc:
        return ObjectOutcome(name, "skipped", str(exc)), None
    except Exception:  # one object's bug must not stop a long run: recorded in failed.json, retried next run
        return ObjectOutcome(name, "failed", traceback.format_exc()), None
    return ObjectOutcome(name, "done", "", shard.counts, shard.timings_s), shard


def _generate_to_shard(obj: ObjectSpec | str, config: GenerationConfig, path: Path) -> ObjectOutcome:
    outcome, shard = _generate_one(obj, config)
    if shard is not None:
        shard.save(path)
    return outcome


def _run_on_ray(todo: list[tuple[str, ObjectSpec | str]], config: GenerationConfig, paths: dict[str, Path],
                address: str, record: Callable[[ObjectOutcome], None]) -> int:
    """One Ray task (1 CPU) per object; the shards come back to this process, which writes them (the cluster
    needs getagrip_ros installed, not a shared file system). Returns the cluster's CPU count."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError("the Ray path needs Ray: pip install 'getagrip_ros[ray]' (the local path does not)") from exc
    started = not ray.is_initialized()
    if started:
        ray.init(address=None if address == "local" else address, log_to_driver=False, include_dashboard=False)
    try:
        task = ray.remote(num_cpus=1)(_generate_one)
        pending = {task.remote(obj, config): name for name, obj in todo}
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            name = pending.pop(ref)
            try:
                outcome, shard = ray.get(ref)
            except Exception as exc:  # a worker or node died: the object is retried by the next run
                outcome, shard = ObjectOutcome(name, "failed", f"Ray task failed: {exc}"), None
            if shard is not None:
                shard.save(paths[name])
            record(outcome)
        return int(ray.cluster_resources().get("CPU", 1))
    finally:
        if started:
            ray.shutdown()


@dataclass(frozen=True)
class GenerationSummary:
    run_dir: Path
    generated: tuple[str, ...]
    """Objects finished by this run."""
    already_done: tuple[str, ...]
    """Requested objects that had a shard before this run."""
    skipped: dict[str, str]
    """Requested objects that were rejected (this run or before), with the reason."""
    failed: dict[str, str]
    """Requested objects whose generation raised an unexpected error in this run."""
    counts: dict[str, int]
    """Sums of the shard counts over the objects generated by this run."""
    wall_s: float
    num_workers: int

    @property
    def trials_per_s_per_core(self) -> float:
        """Labelled trials per second of wall time per busy worker (everything included: prepare, render, optimise)."""
        busy = min(self.num_workers, max(1, len(self.generated)))
        return self.counts.get("trials", 0) / max(self.wall_s, 1e-9) / busy

    @property
    def grasps_per_s(self) -> float:
        return self.counts.get("grasps", 0) / max(self.wall_s, 1e-9)


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _write_json(path: Path, values: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(values, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _compared_settings(config: GenerationConfig) -> dict:
    settings = json.loads(json.dumps(dataclasses.asdict(config), default=str))  # tuples -> lists, dtypes -> names, as in config.json
    for dotted in _NOT_COMPARED:
        *parents, key = dotted.split(".")
        node = settings
        for parent in parents:
            node = node[parent]
        node.pop(key, None)
    return settings


def _differences(stored, current, prefix: str = "") -> list[str]:
    if isinstance(stored, dict) and isinstance(current, dict):
        return [d for k in sorted(set(stored) | set(current))
                for d in _differences(stored.get(k), current.get(k), f"{prefix}{k}.")]
    return [] if stored == current else [f"{prefix[:-1]}: {stored!r} in the run folder, {current!r} now"]


class OutcomeLog:
    """The outcomes of one run: the finished objects, their summed counts, and the skipped and failed objects
    with their reasons, kept current in two JSON files (rewritten atomically after every object)."""

    def __init__(self, skipped_file: Path, failed_file: Path) -> None:
        self.skipped_file, self.failed_file = skipped_file, failed_file
        self.skipped: dict[str, str] = _read_json(skipped_file)
        self.failed: dict[str, str] = _read_json(failed_file)
        self.done: list[str] = []
        self.counts: dict[str, int] = {}

    def record(self, outcome: ObjectOutcome) -> None:
        self.failed.pop(outcome.name, None)
        self.skipped.pop(outcome.name, None)
        if outcome.status == "done":
            self.done.append(outcome.name)
            for key, value in outcome.counts.items():
                self.counts[key] = self.counts.get(key, 0) + value
        elif outcome.status == "skipped":
            self.skipped[outcome.name] = outcome.reason
            log.warning("skipped %s: %s", outcome.name, outcome.reason)
        else:
            self.failed[outcome.name] = outcome.reason
            log.error("failed %s:\n%s", outcome.name, outcome.reason)
        _write_json(self.skipped_file, self.skipped)
        _write_json(self.failed_file, self.failed)


def generate_dataset(objects: Sequence[ObjectSpec | str], run_dir: str | Path,
                     config: GenerationConfig = GenerationConfig(), num_workers: int = 1, retry_skipped: bool = False,
                     progress: Callable[[ObjectOutcome, int], None] | None = None,
                     ray_address: str | None = None) -> GenerationSummary:
    """Generate the shards of the objects (specs or catalog names) that have none in run_dir yet.

    num_workers > 1 runs objects in that many spawned processes (torch on one thread each); 1 runs them here
    (torch on one thread meanwhile). ray_address runs them as tasks of a Ray cluster instead ("auto": the
    cluster this machine belongs to, "ray://head:10001": a remote one, "local": a new one on this machine;
    an already initialised Ray is used as it is); num_workers is then ignored. The shards are the same
    whichever way they are made. progress(outcome, number of objects this run does) is called after each object.

    Raises:
        ValueError: run_dir was made with other settings, num_workers < 1, or an object name cannot name a file.
        ImportError: ray_address given but Ray is not installed.
        concurrent.futures.process.BrokenProcessPool: a worker died (finished shards stay; rerun to continue).
    """
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    run_dir = Path(run_dir)
    (run_dir / SHARDS_DIR).mkdir(parents=True, exist_ok=True)
    settings = _compared_settings(config)
    stored = _read_json(run_dir / CONFIG_FILE)
    if stored:
        diffs = _differences(stored, settings)
        if diffs:
            raise ValueError(f"{run_dir} was generated with other settings (" + "; ".join(diffs)
                             + "); use another run folder or the same settings")
    else:
        _write_json(run_dir / CONFIG_FILE, settings)
    for stale in (run_dir / SHARDS_DIR).rglob("*.tmp"):  # left by an interrupted run
        stale.unlink()

    outcomes = OutcomeLog(run_dir / SKIPPED_FILE, run_dir / FAILED_FILE)
    skipped, failed = outcomes.skipped, outcomes.failed
    unique: dict[str, ObjectSpec | str] = {}
    for obj in objects:
        unique.setdefault(_name(obj), obj)
    paths = {name: shard_path(run_dir, name) for name in unique}
    done = tuple(name for name in unique if paths[name].is_file())
    todo = [(name, obj) for name, obj in unique.items()
            if not paths[name].is_file() and (retry_skipped or name not in skipped)]

    def record(outcome: ObjectOutcome) -> None:
        outcomes.record(outcome)
        if progress is not None:
            progress(outcome, len(todo))

    start = time.perf_counter()
    if ray_address is not None:
        num_workers = _run_on_ray(todo, config, paths, ray_address, record) if todo else 1
    elif num_workers == 1:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for name, obj in todo:
                record(_generate_to_shard(obj, config, paths[name]))
        finally:
            torch.set_num_threads(threads)
    elif todo:
        with ProcessPoolExecutor(min(num_workers, len(todo)), mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_init_worker) as pool:
            futures = [pool.submit(_generate_to_shard, obj, config, paths[name]) for name, obj in todo]
            for future in as_completed(futures):
                record(future.result())
    wall_s = time.perf_counter() - start
    requested = set(paths)
    return GenerationSummary(run_dir, tuple(outcomes.done), done, {k: v for k, v in skipped.items() if k in requested},
                             {k: v for k, v in failed.items() if k in requested}, outcomes.counts, wall_s, num_workers)


def merge_shards(run_dir: str | Path, out_h5: str | Path, include_mined: bool = True, headings: int = 1) -> Path:
    """Write every shard of run_dir into one BPS grasp dataset (public layout), objects ordered by name.

    One /bpss row per object, object codes = object names, point-cloud paths = the shard files (they hold
    the clouds), /object_state = the object's pose in Oy (at rest). An object's mined grasps
    (``mined/``, :mod:`getagrip_ros.data.mining`) follow its generated ones unless include_mined is False.
    Every object's observed cloud goes in too, in its Oy (/object_points, /table_y: the geometry evaluator's input).
    With headings K > 1 the dataset also holds /bpss_turned: every object's BPS at K headings about the vertical
    (the evaluator's turn augmentation; the labels do not depend on the heading of an object on a flat table).

    Raises:
        ValueError: run_dir holds no shard, or a mined shard does not match its object's generated shard.
    """
    run_dir = Path(run_dir)
    keys = ("object_name", "grasps_Oy", "y_pick", "y_coll", "y_PGS", "bps_m", "T_world_Oy", "T_world_object")
    rows = []
    for path in (run_dir / SHARDS_DIR).rglob("*.npz"):
        shard = load_shard(path)
        rows.append({k: getattr(shard, k) for k in (*keys, "cloud_world_m")} | {"path": path})
    if not rows:
        raise ValueError(f"{run_dir}: no shards to merge (in {run_dir / SHARDS_DIR})")
    by_name = {str(r["object_name"]): r for r in rows}
    for path in sorted((run_dir / MINED_DIR).rglob("*.npz")) if include_mined else ():
        with np.load(path) as f:
            mined = {k: f[k] for k in keys}
        row = by_name.get(str(mined["object_name"]))
        same = row is not None and all(np.array_equal(row[k], mined[k]) for k in ("bps_m", "T_world_Oy"))
        if not same:
            raise ValueError(f"{path}: mined shard without a matching generated shard (same object, BPS and frame)")
        for k in ("grasps_Oy", "y_pick", "y_coll", "y_PGS"):
            row[k] = np.concatenate([row[k], mined[k]])
    rows.sort(key=lambda r: str(r["object_name"]))
    if headings < 1:
        raise ValueError(f"headings must be >= 1, got {headings}")
    turned = None
    if headings > 1:
        yaw_rad = 2 * np.pi * np.arange(headings) / headings
        turned = np.stack([encode_bps_turned(r["cloud_world_m"], yaw_rad) for r in rows])
    states = []
    for r in rows:
        T_Oy_object = np.linalg.inv(r["T_world_Oy"]) @ r["T_world_object"]
        state = np.concatenate([T_Oy_object[:3, 3], Rotation.from_matrix(T_Oy_object[:3, :3]).as_quat(), np.zeros(6)])
        states.append(np.tile(state, (len(r["grasps_Oy"]), 1)))
    return write_bps_dataset(
        out_h5, basis_points_m=public_basis_points_By(), bpss_m=np.stack([r["bps_m"] for r in rows]),
        object_codes=[str(r["object_name"]) for r in rows], grasps=np.concatenate([r["grasps_Oy"] for r in rows]),
        grasp_bps_idx=np.concatenate([np.full(len(r["grasps_Oy"]), i) for i, r in enumerate(rows)]),
        **{y: np.concatenate([r[y] for r in rows]) for y in ("y_pick", "y_coll", "y_PGS")},
        point_cloud_filepaths=[str(r["path"].relative_to(run_dir)) for r in rows], object_states=np.concatenate(states),
        bpss_turned_m=turned, object_clouds_Oy_m=[_points_in_Oy(r["cloud_world_m"], r["T_world_Oy"]) for r in rows],
        table_y_m=np.array([-r["T_world_Oy"][2, 3] for r in rows]))


def _points_in_Oy(points_world_m: np.ndarray, T_world_Oy: np.ndarray) -> np.ndarray:
    """Points of the world frame in Oy (whose y axis is the world's up, so the table z = 0 is y = -T_world_Oy[2, 3])."""
    return (np.asarray(points_world_m, np.float64) - T_world_Oy[:3, 3]) @ T_world_Oy[:3, :3]


def write_fixed_grasp_set(run_dir: str | Path, path: str | Path, min_y_pgs: float = 0.9, per_object: int = 1) -> Path:
    """The fixed sampler's grasp set from a run: the best ``per_object`` optimised grasps of every object with
    y_PGS >= min_y_pgs (the paper: one good grasp per training object), in Oy, as .npz.

    Raises:
        ValueError: no shard holds such a grasp.
    """
    from getagrip_ros.grasp.grasp import Grasp
    from getagrip_ros.planning.samplers import save_grasp_set

    rows, labels = [], []
    for shard_file in sorted((Path(run_dir) / SHARDS_DIR).rglob("*.npz")):
        shard = load_shard(shard_file)
        order = np.argsort(-shard.y_PGS, kind="stable")
        good = [i for i in order if shard.y_PGS[i] >= min_y_pgs and shard.augmented_from[i] < 0][:per_object]
        rows += [shard.grasps_Oy[i] for i in good]
        labels += [shard.y_PGS[i] for i in good]
    if not rows:
        raise ValueError(f"no grasp with y_PGS >= {min_y_pgs} in {run_dir}")
    return save_grasp_set(path, Grasp.from_vector(np.stack(rows), "Oy"), y_PGS=np.asarray(labels, np.float32))
