"""A compact, versioned copy of a data-engine run, small enough to keep with the project.

A pack is itself a run folder that every reader of runs accepts (``getagrip-generate --out PACK --merge``,
``--fixed-grasps``, :func:`~getagrip_ros.data.generate.load_shard`), written smaller:

- ``shards/<set>/<id>.npz`` compressed; the grasps (37-D, Oy), the labels, the poses and ``augmented_from`` are kept
  exactly; the observed cloud is stored in the object frame Oy as float16 (``cloud_Oy_m``: a step of at most
  0.12 mm within 0.25 m of the centroid, against the simulated camera's 1 mm depth noise) and the BPS as float16
  (a step of at most 0.25 mm); the settings, timings and counts as UTF-8 JSON;
- ``config.json``, ``skipped.json`` and ``failed.json`` of the run, copied;
- ``pack.json``: the format and its version, the command that rebuilds the run, the objects, the summed counts
  and the SHA-256 of every shard (:func:`verify_pack` checks them).

The mined shards of a run (``mined/``) are not packed. Frames: Oy (y up, origin at the cloud's centroid); metres.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from getagrip_ros.data.generate import CONFIG_FILE, FAILED_FILE, SHARDS_DIR, SKIPPED_FILE, load_shard, shard_path

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


def pack_run(run_dir: str | Path, pack_dir: str | Path, rebuild_command: str = "") -> dict:
    """Write the compact copy of a run's generated shards into pack_dir (made or replaced); returns the manifest.

    Args:
        rebuild_command: the getagrip-generate command that made the run (recorded in the manifest).

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
    (pack_dir / PACK_FILE).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


def verify_pack(pack_dir: str | Path) -> dict:
    """Check a pack against its manifest: format, version, and every listed shard present with its SHA-256, and no
    other shard. Returns the manifest.

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
    listed = manifest["objects"]
    found = {p.relative_to(pack_dir / SHARDS_DIR).with_suffix("").as_posix()
             for p in (pack_dir / SHARDS_DIR).rglob("*.npz")}
    problems = [f"{name}: missing" for name in sorted(set(listed) - found)]
    problems += [f"{name}: not in the manifest" for name in sorted(found - set(listed))]
    problems += [f"{name}: SHA-256 differs" for name in sorted(set(listed) & found)
                 if _sha256(shard_path(pack_dir, name)) != listed[name]["sha256"]]
    if problems:
        raise ValueError(f"{pack_dir}: " + "; ".join(problems))
    return manifest
