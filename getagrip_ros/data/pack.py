"""A compact, versioned copy of a data-engine run, small enough to keep with the project.

A pack is itself a run folder that every reader of runs accepts (``getagrip-generate --out PACK --merge``,
``--fixed-grasps``, :func:`~getagrip_ros.data.generate.load_shard`), written smaller:

- ``shards/<set>/<id>.npz`` compressed; the grasps (37-D, Oy), the labels, the poses and ``augmented_from`` are kept
  exactly; the observed cloud is stored in the object frame Oy as float16 (``cloud_Oy_m``: a step of at most
  0.12 mm within 0.25 m of the centroid, against the simulated camera's 1 mm depth noise) and the BPS as float16
  (a step of at most 0.25 mm); the settings, timings and counts as UTF-8 JSON;
- ``config.json``, ``skipped.json`` and ``failed.json`` of the run, copied;
- ``mined/<set>/<id>.npz``, where the run was mined (:mod:`getagrip_ros.data.mining`): the mined grasps and labels
  exactly, with the BPS (float16, as in the generated shard) and the frames they are matched by on merging, without
  the cloud (the generated shard holds it); ``mining.json`` (the mining settings and the hashes of the models that proposed them) and the
  mining's ``skipped.json`` / ``failed.json``, copied;
- ``pack.json``: the format and its version, the command that rebuilds the run, the objects, the summed counts
  and the SHA-256 of every shard, and the same for the mined shards under ``"mined"`` (:func:`verify_pack` checks
  them).

Frames: Oy (y up, origin at the cloud's centroid); metres.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from getagrip_ros.data.generate import (CONFIG_FILE, FAILED_FILE, MINED_DIR, MINING_FILE, SHARDS_DIR, SKIPPED_FILE, load_shard,
                                       shard_path)

PACK_FILE = "pack.json"
PACK_FORMAT = "getagrip_ros training pack"
PACK_VERSION = 1
_EXACT_KEYS = ("grasps_Oy", "y_pick", "y_coll", "y_PGS", "augmented_from", "T_world_Oy", "T_world_object")
_JSON_KEYS = ("settings", "timings_s", "counts")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_compact_shard(source: Path, target: Path) -> None:
    shard = load_shard(source)
    T_world_Oy = np.asarray(shard.T_world_Oy, np.float64)
    cloud_Oy = (np.asarray(shard.cloud_world_m, np.float64) - T_world_Oy[:3, 3]) @ T_world_Oy[:3, :3]
    arrays = {k: getattr(shard, k) for k in _EXACT_KEYS}
    arrays |= {k: np.frombuffer(json.dumps(getattr(shard, k), sort_keys=True).encode(), np.uint8) for k in _JSON_KEYS}
    arrays |= {"object_name": np.frombuffer(shard.object_name.encode(), np.uint8),
               "bps_m": shard.bps_m.astype(np.float16), "cloud_Oy_m": cloud_Oy.astype(np.float16)}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)
    os.replace(tmp, target)


def read_compact_shard(f) -> dict:
    """The fields of an :class:`~getagrip_ros.data.generate.ObjectShard` from an open compact shard (np.load's
    NpzFile): float32 cloud in the world frame and float32 BPS, as a run's shard holds them."""
    values = {k: f[k] for k in _EXACT_KEYS}
    values |= {k: json.loads(f[k].tobytes().decode()) for k in _JSON_KEYS}
    T_world_Oy = values["T_world_Oy"]
    cloud_world = f["cloud_Oy_m"].astype(np.float64) @ T_world_Oy[:3, :3].T + T_world_Oy[:3, 3]
    values |= {"object_name": f["object_name"].tobytes().decode(), "bps_m": f["bps_m"].astype(np.float32),
               "cloud_world_m": cloud_world.astype(np.float32)}
    return values


def _write_compact_mined(source: Path, target: Path) -> None:
    with np.load(source) as f:
        arrays = {k: f[k] for k in f.files if k != "cloud_world_m"}
    arrays["bps_m"] = arrays["bps_m"].astype(np.float16)  # as in the generated shard it is matched with
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)
    os.replace(tmp, target)


def _pack_mined(run_dir: Path, pack_dir: Path, rebuild_command: str) -> dict | None:
    """Pack the run's mined shards (see the module docstring); their manifest entry, None where the run was not mined."""
    if (pack_dir / MINED_DIR).exists():
        shutil.rmtree(pack_dir / MINED_DIR)
    sources = sorted((run_dir / MINED_DIR).rglob("*.npz"))
    if not sources:
        return None
    for name in (SKIPPED_FILE, FAILED_FILE):
        if (run_dir / MINED_DIR / name).is_file():
            (pack_dir / MINED_DIR).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / MINED_DIR / name, pack_dir / MINED_DIR / name)
    shutil.copyfile(run_dir / MINING_FILE, pack_dir / MINING_FILE)
    objects, grasps = {}, 0
    for source in sources:
        name = source.relative_to(run_dir / MINED_DIR).with_suffix("").as_posix()
        target = pack_dir / MINED_DIR / source.relative_to(run_dir / MINED_DIR)
        _write_compact_mined(source, target)
        with np.load(target) as f:
            count = len(f["grasps_Oy"])
        objects[name] = {"sha256": _sha256(target), "grasps": count}
        grasps += count
    return {"rebuild_command": rebuild_command, "num_objects": len(objects), "grasps": grasps, "objects": objects}


def pack_run(run_dir: str | Path, pack_dir: str | Path, rebuild_command: str = "",
             mined_rebuild_command: str = "") -> dict:
    """Write the compact copy of a run's generated shards, and of its mined shards where it was mined, into pack_dir
    (made or replaced); returns the manifest.

    Args:
        rebuild_command: the getagrip-generate command that made the run (recorded in the manifest).
        mined_rebuild_command: the getagrip-generate --mine command that mined it (recorded with the mined shards).

    Raises:
        ValueError: run_dir holds no shard, or pack_dir is run_dir.
    """
    run_dir, pack_dir = Path(run_dir), Path(pack_dir)
    if pack_dir.resolve() == run_dir.resolve():
        raise ValueError("the pack must go to another folder than the run")
    sources = sorted((run_dir / SHARDS_DIR).rglob("*.npz"))
    if not sources:
        raise ValueError(f"{run_dir}: no shards to pack (in {run_dir / SHARDS_DIR})")
    if (pack_dir / SHARDS_DIR).exists():
        shutil.rmtree(pack_dir / SHARDS_DIR)
    pack_dir.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG_FILE, SKIPPED_FILE, FAILED_FILE):
        if (run_dir / name).is_file():
            shutil.copyfile(run_dir / name, pack_dir / name)
    objects, totals = {}, {}
    for source in sources:
        name = source.relative_to(run_dir / SHARDS_DIR).with_suffix("").as_posix()
        target = shard_path(pack_dir, name)
        _write_compact_shard(source, target)
        counts = load_shard(target).counts
        for key, value in counts.items():
            totals[key] = totals.get(key, 0) + value
        objects[name] = {"sha256": _sha256(target), "grasps": counts["grasps"]}
    manifest = {"format": PACK_FORMAT, "version": PACK_VERSION, "rebuild_command": rebuild_command,
                "num_objects": len(objects), "counts": totals, "objects": objects}
    if (mined := _pack_mined(run_dir, pack_dir, mined_rebuild_command)) is not None:
        manifest["mined"] = mined
    (pack_dir / PACK_FILE).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


def verify_pack(pack_dir: str | Path, check_mined: bool = True) -> dict:
    """Check a pack against its manifest: format, version, and every listed shard present with its SHA-256, and no
    other shard. Returns the manifest.

    Args:
        check_mined: also the mined shards; False where ``mined/`` holds a later mining of a copy of the pack
            (a round of its own, not the pack's listed one).

    Raises:
        ValueError: naming what does not match.
    """
    pack_dir = Path(pack_dir)
    manifest_path = pack_dir / PACK_FILE
    if not manifest_path.is_file():
        raise ValueError(f"{pack_dir}: no {PACK_FILE}; not a training pack")
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("format") != PACK_FORMAT or manifest.get("version") != PACK_VERSION:
        raise ValueError(f"{manifest_path}: format {manifest.get('format')!r} version {manifest.get('version')!r}, "
                         f"this reader knows {PACK_FORMAT!r} version {PACK_VERSION}")
    problems = []
    checked = [(SHARDS_DIR, manifest["objects"], "")]
    if "mined" in manifest and check_mined:  # a pack without mined shards may be mined afterwards: not checked
        checked.append((MINED_DIR, manifest["mined"]["objects"], "mined "))
    for folder, listed, prefix in checked:
        found = {p.relative_to(pack_dir / folder).with_suffix("").as_posix() for p in (pack_dir / folder).rglob("*.npz")}
        problems += [f"{prefix}{name}: missing" for name in sorted(set(listed) - found)]
        problems += [f"{prefix}{name}: not in the manifest" for name in sorted(found - set(listed))]
        problems += [f"{prefix}{name}: SHA-256 differs" for name in sorted(set(listed) & found)
                     if _sha256(pack_dir / folder / f"{name}.npz") != listed[name]["sha256"]]
    if problems:
        raise ValueError(f"{pack_dir}: " + "; ".join(problems))
    return manifest
