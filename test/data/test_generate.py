"""The data engine: per-object shards, resumable runs, skipped and failed objects, parallel determinism, HDF5 merge."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from getagrip_ros.cli.generate import main, resolve_objects
from getagrip_ros.data.generate import CloudConfig, GenerationConfig, generate_dataset, load_shard, merge_shards, shard_path
from getagrip_ros.data.grasp_generation import GraspOptimizationConfig
from getagrip_ros.data.labels import LabelConfig
from getagrip_ros.data.stats import dataset_stats
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.objects.catalog import object_by_name, user_object
from getagrip_ros.objects.mesh_object import ObjectSpec, PrepareConfig, prepare_object
from getagrip_ros.objects.settle import SettleConfig
from getagrip_ros.perception.bps import encode_bps_turned, public_basis_points_By
from getagrip_ros.perception.capture_trajectory import SpiralConfig
from getagrip_ros.planning.object_input import object_from_points
from getagrip_ros.sim.scene import CameraConfig
from getagrip_ros.training.datasets import read_bps_dataset

OBJECTS = ("procedural/box_0000", "procedural/cylinder_0000")
ARRAYS = ("grasps_Oy", "y_pick", "y_coll", "y_PGS", "augmented_from", "bps_m", "cloud_world_m", "T_world_Oy")


@dataclasses.dataclass(frozen=True)
class BrokenShape:
    """A procedural shape whose mesh raises an unexpected error."""

    def mesh(self):
        raise RuntimeError("broken shape")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One run over the two test objects (8 starts, 2 trials per grasp, 2 copies per good grasp), a missing mesh
    file, an unknown name and a broken object; returns (run folder, config, summary, progress calls)."""
    root = tmp_path_factory.mktemp("generate")
    config = GenerationConfig(
        grasps_per_object=8, optimization=GraspOptimizationConfig(num_steps=40, num_surface_points=800),
        labels=LabelConfig(num_perturbations=2), augmentations_per_good_grasp=2,
        cloud=CloudConfig(spiral=SpiralConfig(num_images=8), camera=CameraConfig(160, 90, 66.6)),
        prepare=PrepareConfig(settle=SettleConfig(), cache_dir=str(root / "cache")), seed=7)
    objects = [*OBJECTS, user_object(root / "missing.obj"), "procedural/no_such_object",
               ObjectSpec("test/broken", "procedural", BrokenShape())]
    calls = []
    summary = generate_dataset(objects, root / "run", config, progress=lambda outcome, total: calls.append((outcome, total)))
    return root / "run", config, summary, calls


def test_shards_hold_labelled_grasps_in_the_observed_object_frame(run):
    run_dir, config, summary, calls = run
    assert summary.generated == OBJECTS and summary.already_done == ()
    assert [(o.name, o.status) for o, _ in calls][:2] == [(n, "done") for n in OBJECTS] and {t for _, t in calls} == {5}
    for name in OBJECTS:
        shard = load_shard(shard_path(run_dir, name))
        n = len(shard.grasps_Oy)
        assert shard.object_name == name and shard.grasps_Oy.shape == (n, 37) and shard.bps_m.shape == (4096,)
        c = shard.counts
        assert n == c["grasps"] == c["starts"] + c["augmented"] and 0 < c["starts"] <= 8
        assert c["trials"] == 2 * n and c["augmented"] == 2 * c["starts_good"]
        for y in (shard.y_pick, shard.y_coll, shard.y_PGS):
            assert y.shape == (n,) and y.min() >= 0 and y.max() <= 1
        assert np.all(shard.y_PGS <= np.minimum(shard.y_pick, shard.y_coll))
        # the optimised grasps come first; each augmented copy points at a good one
        parents = shard.augmented_from[c["starts"]:]
        assert np.all(shard.augmented_from[: c["starts"]] == -1) and np.all(shard.y_PGS[parents] >= config.good_y_pgs)
        assert shard.settings["generation"]["grasps_per_object"] == 8 and shard.timings_s["total"] > 0
        # Oy: y up, origin at the centroid of the observed cloud, whose BPS the shard holds
        observed = object_from_points(shard.cloud_world_m, "world")
        np.testing.assert_allclose(shard.T_world_Oy, observed.T_frame_Oy.numpy(), atol=1e-6)
        np.testing.assert_allclose(shard.T_world_Oy[:3, 1], [0.0, 0.0, 1.0], atol=1e-12)
        np.testing.assert_allclose(shard.bps_m, observed.bps_m, atol=1e-5)
        # the cloud lies on the true surface (1 mm depth noise); the grasps, back in the world, around the object
        mesh = prepare_object(object_by_name(name), config.prepare).mesh
        mesh.apply_transform(shard.T_world_object)
        _, distance, _ = mesh.nearest.on_surface(shard.cloud_world_m[::10])
        assert np.median(distance) < 0.002 and len(shard.cloud_world_m) > 200
        world = Grasp.from_vector(torch.from_numpy(shard.grasps_Oy).double(), "Oy").transformed(shard.T_world_Oy, "world")
        to_object = (world.palm_position_m.numpy() - mesh.centroid)
        assert np.linalg.norm(to_object, axis=1).max() < 0.2 and world.palm_position_m[:, 2].min() > 0
        assert np.all((world.palm_normal.numpy() * to_object).sum(1) < 0)  # the palm faces the object


def test_rejected_objects_are_skipped_with_their_reason_and_errors_recorded(run):
    run_dir, _, summary, _ = run
    assert set(summary.skipped) == {"user/missing", "procedural/no_such_object"}
    assert "does not exist" in summary.skipped["user/missing"]
    assert "no catalog object named" in summary.skipped["procedural/no_such_object"]
    assert json.loads((run_dir / "skipped.json").read_text()) == summary.skipped
    assert list(summary.failed) == ["test/broken"] and "RuntimeError: broken shape" in summary.failed["test/broken"]
    assert "test/broken" in json.loads((run_dir / "failed.json").read_text())
    assert sorted(p.name for p in (run_dir / "shards").rglob("*")) == ["box_0000.npz", "cylinder_0000.npz", "procedural"]


def test_rerun_keeps_finished_shards_redoes_a_lost_one_and_retries_failures(run):
    run_dir, config, _, _ = run
    objects = [*OBJECTS, "procedural/no_such_object", ObjectSpec("test/broken", "procedural", BrokenShape())]
    paths = [shard_path(run_dir, name) for name in OBJECTS]
    mtimes = [p.stat().st_mtime_ns for p in paths]
    calls = []
    again = generate_dataset(objects, run_dir, config, progress=lambda outcome, total: calls.append(outcome.name))
    assert again.generated == () and again.already_done == OBJECTS and [p.stat().st_mtime_ns for p in paths] == mtimes
    assert calls == ["test/broken"] and "procedural/no_such_object" in again.skipped  # failures retried, skips not
    before = load_shard(paths[0])
    paths[0].unlink()
    stale = paths[0].with_name(".box_0000.npz.123.tmp")  # an interrupted write
    stale.write_bytes(b"partial")
    redo = generate_dataset(objects[:2], run_dir, config)
    assert redo.generated == OBJECTS[:1] and redo.already_done == OBJECTS[1:] and not stale.exists()
    assert paths[1].stat().st_mtime_ns == mtimes[1]
    after = load_shard(paths[0])
    for key in ARRAYS:
        np.testing.assert_array_equal(getattr(after, key), getattr(before, key), err_msg=key)


def test_other_settings_are_refused_in_a_run_folder(run):
    run_dir, config, _, _ = run
    with pytest.raises(ValueError, match="grasps_per_object: 8 in the run folder, 9 now"):
        generate_dataset(OBJECTS, run_dir, dataclasses.replace(config, grasps_per_object=9))
    elsewhere = dataclasses.replace(config, prepare=dataclasses.replace(config.prepare, cache_dir="/tmp/elsewhere"))
    assert generate_dataset(OBJECTS, run_dir, elsewhere).already_done == OBJECTS  # the cache does not change data
    with pytest.raises(ValueError, match="num_workers"):
        generate_dataset(OBJECTS, run_dir, config, num_workers=0)


def test_two_worker_processes_give_the_same_shards(run, tmp_path):
    run_dir, config, _, _ = run
    summary = generate_dataset(OBJECTS, tmp_path / "parallel", config, num_workers=2)
    assert sorted(summary.generated) == sorted(OBJECTS) and summary.num_workers == 2
    assert summary.counts["trials"] > 0 and summary.trials_per_s_per_core > 0 and summary.grasps_per_s > 0
    for name in OBJECTS:
        a, b = load_shard(shard_path(run_dir, name)), load_shard(shard_path(tmp_path / "parallel", name))
        for key in ARRAYS:
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=f"{name} {key}")


@pytest.mark.slow  # Ray is an optional extra; starting a local instance takes ~15 s
def test_a_ray_cluster_gives_the_same_shards(run, tmp_path, monkeypatch):
    import ray  # installed by the set-up (requirements/ray.txt); optional for users
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    run_dir, config, _, _ = run
    objects = [*OBJECTS, "procedural/no_such_object"]
    summary = generate_dataset(objects, tmp_path / "ray", config, ray_address="local")
    assert not ray.is_initialized()  # the instance this run started is shut down
    assert sorted(summary.generated) == sorted(OBJECTS) and summary.num_workers >= 1
    assert "no catalog object named" in summary.skipped["procedural/no_such_object"]
    for name in OBJECTS:
        a, b = load_shard(shard_path(run_dir, name)), load_shard(shard_path(tmp_path / "ray", name))
        for key in ARRAYS:
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=f"{name} {key}")


def test_the_ray_path_without_ray_says_how_to_install_it(run, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    _, config, _, _ = run
    with pytest.raises(ImportError, match=r"getagrip_ros\[ray\]"):
        generate_dataset(OBJECTS, tmp_path / "no_ray", config, ray_address="auto")
    assert main(["--objects", OBJECTS[0], "--out", str(tmp_path / "no_ray_cli"), "--ray", "auto", "--quiet"]) == 2


def test_merge_writes_the_public_bps_layout(run, tmp_path):
    run_dir, _, _, _ = run
    data = read_bps_dataset(merge_shards(run_dir, tmp_path / "data.h5"))
    shards = [load_shard(shard_path(run_dir, name)) for name in OBJECTS]
    assert data.object_codes.tolist() == list(OBJECTS) and data.num_grasps == sum(len(s.grasps_Oy) for s in shards)
    np.testing.assert_array_equal(data.basis_points_m, public_basis_points_By().astype(np.float32))
    np.testing.assert_array_equal(data.bpss_m, np.stack([s.bps_m for s in shards]))
    np.testing.assert_array_equal(data.grasps, np.concatenate([s.grasps_Oy for s in shards]))
    np.testing.assert_array_equal(data.labels[:, 2], np.concatenate([s.y_PGS for s in shards]))
    assert data.labels.min() >= 0 and data.labels.max() <= 1
    assert np.bincount(data.grasp_bps_idx).tolist() == [len(s.grasps_Oy) for s in shards]
    assert data.point_cloud_filepaths.tolist() == [f"shards/{name}.npz" for name in OBJECTS]
    # the object's pose in Oy: its mesh frame origin (on the table, yawed) below the centroid, y up
    for i, shard in enumerate(shards):
        state = data.object_states[data.grasp_bps_idx == i][0]
        assert state[1] == pytest.approx(-shard.T_world_Oy[2, 3], abs=1e-5) and abs(state[0]) < 0.02
        np.testing.assert_allclose(Rotation.from_quat(state[3:7]).as_matrix()[:, 2], [0.0, 1.0, 0.0], atol=1e-6)
    with pytest.raises(ValueError, match="no shards"):
        merge_shards(tmp_path / "empty", tmp_path / "empty.h5")
    assert data.bpss_turned_m is None
    for i, shard in enumerate(shards):  # the observed clouds in Oy: centred on the origin, the table below at y < 0
        cloud_Oy = data.object_cloud_Oy_m(i)
        T = shard.T_world_Oy
        np.testing.assert_allclose(cloud_Oy @ T[:3, :3].T + T[:3, 3], shard.cloud_world_m, atol=1e-5)
        np.testing.assert_allclose(cloud_Oy.mean(axis=0), 0.0, atol=1e-4)
        assert data.table_y_m[i] == pytest.approx(-T[2, 3]) and cloud_Oy[:, 1].min() > data.table_y_m[i] - 0.005


def test_merge_with_headings_stores_every_objects_bps_turned_about_the_vertical(run, tmp_path):
    run_dir, _, _, _ = run
    data = read_bps_dataset(merge_shards(run_dir, tmp_path / "data.h5", headings=4))
    assert data.bpss_turned_m.shape == (len(OBJECTS), 4, 4096)
    np.testing.assert_allclose(data.bpss_turned_m[:, 0], data.bpss_m, atol=1e-6)
    shard = load_shard(shard_path(run_dir, OBJECTS[0]))
    np.testing.assert_allclose(data.bpss_turned_m[0, 2], encode_bps_turned(shard.cloud_world_m, [np.pi])[0])
    assert np.abs(data.bpss_turned_m[:, 1] - data.bpss_m).max() > 1e-3  # nearly round test objects: small but real
    with pytest.raises(ValueError, match="headings"):
        merge_shards(run_dir, tmp_path / "bad.h5", headings=0)
    assert main(["--out", str(run_dir), "--merge", str(tmp_path / "cli.h5"), "--headings", "2", "--quiet"]) == 0
    assert read_bps_dataset(tmp_path / "cli.h5").bpss_turned_m.shape == (len(OBJECTS), 2, 4096)
    assert main(["--out", str(run_dir), "--headings", "2"]) == 2


def test_a_pack_is_a_smaller_run_that_merges_to_the_same_dataset(run, tmp_path, capsys):
    """The compact copy keeps grasps, labels and poses exactly, the cloud and the BPS to float16 (sub-millimetre), is
    read by load_shard and the merge like the run, and is checked against its manifest."""
    from getagrip_ros.data.pack import PACK_FILE, pack_run, verify_pack

    run_dir, _, _, _ = run
    manifest = pack_run(run_dir, tmp_path / "pack", "getagrip-generate --objects x")
    assert manifest["num_objects"] == len(OBJECTS) and manifest["rebuild_command"] == "getagrip-generate --objects x"
    assert verify_pack(tmp_path / "pack") == manifest and (tmp_path / "pack" / "config.json").is_file()
    size = {d: sum(p.stat().st_size for p in (d / "shards").rglob("*.npz")) for d in (run_dir, tmp_path / "pack")}
    assert size[tmp_path / "pack"] < 0.5 * size[run_dir], size
    for name in OBJECTS:
        original, packed = load_shard(shard_path(run_dir, name)), load_shard(shard_path(tmp_path / "pack", name))
        assert packed.object_name == name and packed.settings == original.settings and packed.counts == original.counts
        for key in ("grasps_Oy", "y_pick", "y_coll", "y_PGS", "augmented_from", "T_world_Oy", "T_world_object"):
            np.testing.assert_array_equal(getattr(packed, key), getattr(original, key))
        assert packed.cloud_world_m.dtype == np.float32 and packed.bps_m.dtype == np.float32
        np.testing.assert_allclose(packed.cloud_world_m, original.cloud_world_m, atol=2e-4)
        np.testing.assert_allclose(packed.bps_m, original.bps_m, atol=3e-4)
    from_run, from_pack = (read_bps_dataset(merge_shards(d, tmp_path / f"{d.name}.h5")) for d in (run_dir, tmp_path / "pack"))
    np.testing.assert_array_equal(from_pack.grasps, from_run.grasps)
    np.testing.assert_array_equal(from_pack.labels, from_run.labels)
    np.testing.assert_allclose(from_pack.object_points_Oy_m, from_run.object_points_Oy_m, atol=2e-4)
    # the CLI packs, then verifies a pack before reading it; a changed or stray shard is named
    assert main(["--out", str(run_dir), "--pack", str(tmp_path / "cli_pack")]) == 0
    assert f"packed {len(OBJECTS)} objects" in capsys.readouterr().out
    assert main(["--out", str(tmp_path / "cli_pack"), "--merge", str(tmp_path / "cli.h5"), "--quiet"]) == 0
    assert "training pack version 1, every shard as listed" in capsys.readouterr().out
    shard_path(tmp_path / "cli_pack", OBJECTS[0]).write_bytes(b"changed")
    shard_path(tmp_path / "cli_pack", "procedural/stray").write_bytes(b"")
    with pytest.raises(ValueError, match=f"procedural/stray: not in the manifest; {OBJECTS[0]}: SHA-256 differs"):
        verify_pack(tmp_path / "cli_pack")
    assert main(["--out", str(tmp_path / "cli_pack"), "--merge", str(tmp_path / "bad.h5")]) == 2
    with pytest.raises(ValueError, match="no pack.json"):
        verify_pack(run_dir)
    with pytest.raises(ValueError, match="another folder"):
        pack_run(run_dir, run_dir)
    assert json.loads((tmp_path / "pack" / PACK_FILE).read_text())["version"] == 1


def test_cli_resolves_objects_merges_and_reports(run, tmp_path, capsys):
    run_dir, _, _, _ = run
    objects = resolve_objects("tabletop-20:test, procedural/box_0000,meshes/bunny.obj")
    assert len(objects) == 22 and objects[20] == "procedural/box_0000" and objects[21].name == "user/bunny"
    assert main(["--out", str(run_dir), "--merge", str(tmp_path / "cli.h5"), "--histograms", str(tmp_path / "labels.png")]) == 0
    out = capsys.readouterr().out
    data = read_bps_dataset(tmp_path / "cli.h5")
    stats = dataset_stats(data)
    assert f"wrote {tmp_path / 'cli.h5'}" in out and f"{data.num_grasps} grasps over 2 objects" in out
    assert stats.num_grasps == data.num_grasps and stats.num_objects == 2 and sum(stats.grasps_per_object) > 0
    assert stats.label_means["y_PGS"] == pytest.approx(float(data.labels[:, 2].mean()))
    assert stats.good_fraction == pytest.approx(float((data.labels[:, 2] >= 0.9).mean()))
    assert (tmp_path / "labels.png").stat().st_size > 10_000 and f"wrote {tmp_path / 'labels.png'}" in out
    assert main(["--out", str(run_dir), "--histograms", str(tmp_path / "x.png")]) == 2
    assert main(["--objects", "procedural/no_such_object", "--out", str(tmp_path / "cli_run"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "generated 0 objects" in out and "skipped procedural/no_such_object: no catalog object named" in out
    assert main(["--out", str(tmp_path / "cli_run")]) == 2


def test_cli_shuffle_visits_the_objects_in_a_seeded_order(tmp_path, capsys):
    names = [f"procedural/no_such_object_{i}" for i in range(6)]

    def first_two(seed: int, *flags: str) -> list[str]:
        out_dir = tmp_path / f"run_{seed}_{len(flags)}_{len(list(tmp_path.iterdir()))}"
        args = ["--objects", ",".join(names), "--out", str(out_dir), "--limit", "2", "--quiet", "--seed", str(seed)]
        assert main([*args, *flags]) == 0
        lines = capsys.readouterr().out.splitlines()
        return sorted(line.split()[1].rstrip(":") for line in lines if "skipped" in line and ":" in line)

    assert first_two(0) == names[:2]
    shuffled = [first_two(seed, "--shuffle") for seed in range(4)]
    assert shuffled[0] == first_two(0, "--shuffle")  # seeded: the same order again
    assert any(s != names[:2] for s in shuffled) and len({tuple(s) for s in shuffled}) > 1


def test_fixed_grasp_set_keeps_the_best_good_grasp_per_object(run, tmp_path):
    from getagrip_ros.data.generate import write_fixed_grasp_set
    from getagrip_ros.planning.samplers import load_grasp_set

    run_dir = run[0]
    shards = [load_shard(f) for f in sorted((run_dir / "shards").rglob("*.npz"))]
    best = [float(s.y_PGS[s.augmented_from < 0].max()) for s in shards]  # optimised grasps, not augmented copies
    threshold = min(best)  # every object has a grasp this good
    path = write_fixed_grasp_set(run_dir, tmp_path / "fixed.npz", min_y_pgs=threshold)
    grasps = load_grasp_set(path)
    assert len(grasps) == len(shards) and grasps.frame_id == "Oy"
    np.testing.assert_allclose(np.sort(np.load(path)["y_PGS"]), np.sort(best), atol=1e-6)
    several = load_grasp_set(write_fixed_grasp_set(run_dir, tmp_path / "three.npz", min_y_pgs=0.0, per_object=3))
    optimised = [s.grasps_Oy[s.augmented_from < 0] for s in shards]
    assert len(several) == sum(min(3, len(g)) for g in optimised)
    rows = several.to_vector().numpy()
    assert all(np.isclose(np.abs(np.concatenate(optimised) - row).max(axis=1), 0, atol=1e-5).any() for row in rows)
    with pytest.raises(ValueError, match="no grasp with y_PGS"):
        write_fixed_grasp_set(run_dir, tmp_path / "none.npz", min_y_pgs=1.01)
    good_objects = sum(b >= 0.9 for b in best)  # the CLI uses the paper's threshold
    code = main(["--out", str(run_dir), "--fixed-grasps", str(tmp_path / "cli.npz")])
    assert code == (0 if good_objects else 2)
    if good_objects:
        assert len(load_grasp_set(tmp_path / "cli.npz")) == good_objects


def test_mining_labels_the_planners_proposals_beside_the_generated_grasps(run, tmp_path, tiny_models, capsys):
    import shutil

    from getagrip_ros.data.mining import MiningConfig, mine_dataset, mined_path, mining_settings

    run_dir = tmp_path / "run"
    shutil.copytree(run[0], run_dir)
    config = MiningConfig(tiny_models, top_k=2, random_k=1, num_samples=64, generation=run[1])
    calls = []
    summary = mine_dataset(run_dir, config, progress=lambda outcome, total: calls.append((outcome.status, total)))
    assert sorted(summary.mined) == sorted(OBJECTS) and calls == [("done", 2)] * 2 and not summary.failed
    kinds = ["fixed_ranked"] * 2 + ["fixed_random"] + ["diffusion_ranked"] * 2 + ["diffusion_random"]
    for name in OBJECTS:
        generated, mined = load_shard(shard_path(run_dir, name)), load_shard(mined_path(run_dir, name))
        assert mined.grasps_Oy.shape == (6, 37) and mined.settings["kinds"] == kinds
        assert mined.counts["trials"] == 12 and mined.counts["fixed_ranked"] == 2
        assert np.all((0 <= mined.y_PGS) & (mined.y_PGS <= np.minimum(mined.y_pick, mined.y_coll)))
        for key in ("bps_m", "T_world_Oy", "T_world_object", "cloud_world_m"):  # the same observation and frame
            np.testing.assert_array_equal(getattr(mined, key), getattr(generated, key))
        # in Oy, the fixed set's grasps lie around the object (the untrained diffusion sampler's anywhere)
        assert np.linalg.norm(mined.grasps_Oy[:3, :3], axis=1).max() < 0.25
    # the merge appends each object's mined grasps to its generated ones; one BPS row per object
    data = read_bps_dataset(merge_shards(run_dir, tmp_path / "data.h5"))
    generated = [load_shard(shard_path(run_dir, name)) for name in OBJECTS]
    assert data.object_codes.tolist() == list(OBJECTS)
    assert np.bincount(data.grasp_bps_idx).tolist() == [len(s.grasps_Oy) + 6 for s in generated]
    np.testing.assert_array_equal(data.grasps[len(generated[0].grasps_Oy): len(generated[0].grasps_Oy) + 6],
                                  load_shard(mined_path(run_dir, OBJECTS[0])).grasps_Oy)
    assert main(["--out", str(run_dir), "--merge", str(tmp_path / "generated.h5"), "--generated-only"]) == 0
    assert read_bps_dataset(tmp_path / "generated.h5").num_grasps == sum(len(s.grasps_Oy) for s in generated)
    # a rerun continues (nothing left to do); other models or settings are refused
    again = mine_dataset(run_dir, config)
    assert again.mined == () and again.already_done == 2
    with pytest.raises(ValueError, match="top_k: 2 in the run folder, 3 now"):
        mine_dataset(run_dir, dataclasses.replace(config, top_k=3))
    other = dataclasses.replace(tiny_models, bps_evaluator=tiny_models.bps_sampler)
    with pytest.raises(ValueError, match="model_hashes.bps_evaluator"):
        mine_dataset(run_dir, dataclasses.replace(config, models=other))
    # a pack keeps the mined shards (without their clouds): it merges to the same dataset, verifies them, and a rerun
    # of the mining on it has nothing left to do
    from getagrip_ros.data.pack import pack_run, verify_pack

    manifest = pack_run(run_dir, tmp_path / "pack", "", "getagrip-generate --mine")
    assert manifest["mined"]["grasps"] == 12 and sorted(manifest["mined"]["objects"]) == sorted(OBJECTS)
    assert verify_pack(tmp_path / "pack") == manifest and (tmp_path / "pack" / "mining.json").is_file()
    packed = read_bps_dataset(merge_shards(tmp_path / "pack", tmp_path / "packed.h5"))
    np.testing.assert_array_equal(packed.grasps, data.grasps)
    np.testing.assert_array_equal(packed.labels, data.labels)
    assert mine_dataset(tmp_path / "pack", config).already_done == 2
    # a pack packed before its run was mined can be mined afterwards (the documented way to rebuild mined shards)
    pack_run(run_dir, tmp_path / "unmined")
    shutil.rmtree(tmp_path / "unmined" / "mined")
    (tmp_path / "unmined" / "pack.json").write_text(json.dumps(
        {k: v for k, v in json.loads((tmp_path / "unmined" / "pack.json").read_text()).items() if k != "mined"}))
    assert len(mine_dataset(tmp_path / "unmined", config).mined) == 2 and "mined" not in verify_pack(tmp_path / "unmined")
    # a copy of a pack that lists its mined shards, mined again in another round (its mined/ and mining.json removed):
    # the CLI checks the generated shards against the manifest, not this round's mined ones
    shutil.copytree(tmp_path / "pack", tmp_path / "round2")
    shutil.rmtree(tmp_path / "round2" / "mined")
    (tmp_path / "round2" / "mining.json").unlink()
    models = ["--mine-evaluator", str(tiny_models.bps_evaluator), "--mine-sampler", str(tiny_models.bps_sampler),
              "--mine-fixed-grasps", str(tiny_models.fixed_grasps)]
    capsys.readouterr()
    assert main(["--out", str(tmp_path / "round2"), "--mine", "--mine-samplers", "fixed", "--mine-top-k", "1",
                 "--mine-random-k", "1", "--mine-refinement-iterations", "2", "--limit", "1", "--quiet", *models]) == 0
    assert "every generated shard as listed (mined/ holds this run's mining)" in capsys.readouterr().out
    assert json.loads((tmp_path / "round2" / "mining.json").read_text())["refinement_iterations"] == 2
    with pytest.raises(ValueError, match="mined .*missing"):  # the listed round is gone: the whole pack does not verify
        verify_pack(tmp_path / "round2")
    (tmp_path / "pack" / "mined" / f"{OBJECTS[0]}.npz").write_bytes(b"changed")
    with pytest.raises(ValueError, match=f"mined {OBJECTS[0]}: SHA-256 differs"):
        verify_pack(tmp_path / "pack")
    # the geometry evaluator can rank instead (its own mistakes are mined); an unknown evaluator is refused
    geometry_dir = tmp_path / "run_geometry"
    shutil.copytree(run[0], geometry_dir)
    geometry = dataclasses.replace(config, evaluator="geometry")
    assert set(mining_settings(geometry)["model_hashes"]) == {"geometry_evaluator", "bps_sampler", "fixed_grasps"}
    assert len(mine_dataset(geometry_dir, geometry, limit=1).mined) == 1
    mined = load_shard(next((geometry_dir / "mined").rglob("*.npz")))
    assert mined.settings["kinds"] == kinds and mined.settings["mining"]["evaluator"] == "geometry"
    with pytest.raises(ValueError, match="mining ranks with one of"):
        MiningConfig(tiny_models, evaluator="nerf")
    # graspd's synthesis on the observed cloud is mined whole: every synthesised grasp labelled, its settings recorded
    from getagrip_ros.planning.graspd_sampler import GraspdSamplerConfig
    from getagrip_ros.synthesis.object_sdf import SDFConfig
    from getagrip_ros.synthesis.optimizer import SynthesisConfig

    graspd_dir = tmp_path / "run_graspd"
    shutil.copytree(run[0], graspd_dir)
    quick = GraspdSamplerConfig(synthesis=SynthesisConfig(num_steps=40, chunk_steps=20), sdf=SDFConfig(resolution=32))
    graspd = dataclasses.replace(config, samplers=("graspd",), graspd=quick)
    assert len(mine_dataset(graspd_dir, graspd, limit=1).mined) == 1
    mined = load_shard(next((graspd_dir / "mined").rglob("*.npz")))
    assert 1 <= len(mined.grasps_Oy) <= 3 and set(mined.settings["kinds"]) == {"graspd_synthesised"}
    assert mined.settings["mining"]["graspd"]["synthesis"]["num_steps"] == 40
    assert np.linalg.norm(mined.grasps_Oy[:, :3], axis=1).max() < 0.25  # synthesised on the object
    with pytest.raises(ValueError, match="graspd.synthesis.num_steps: 40 in the run folder, 60 now"):
        mine_dataset(graspd_dir, dataclasses.replace(graspd, graspd=dataclasses.replace(
            quick, synthesis=SynthesisConfig(num_steps=60, chunk_steps=20))))
    with pytest.raises(ValueError, match="mining labels the proposals of one or more of"):
        MiningConfig(tiny_models, samplers=("heuristic",))
    # a mined shard whose observation does not match its object's generated one is refused by the merge
    bad = load_shard(mined_path(run_dir, OBJECTS[0]))
    dataclasses.replace(bad, bps_m=bad.bps_m + 0.01).save(mined_path(run_dir, OBJECTS[0]))
    with pytest.raises(ValueError, match="without a matching generated shard"):
        merge_shards(run_dir, tmp_path / "bad.h5")
    # the CLI mines with the given models (a run folder without generated shards is an error)
    assert main(["--out", str(tmp_path / "empty"), "--mine", "--quiet"]) == 2
    assert "no generated shards" in capsys.readouterr().err


def test_the_graspd_generator_labels_synthesised_grasps_in_the_public_layout(tmp_path):
    """--generator graspd: contact-rich synthesis on the true mesh, then the same labels, augmentation and shard."""
    from getagrip_ros.data.generate import GraspdGenerationConfig
    from getagrip_ros.synthesis.object_sdf import SDFConfig
    from getagrip_ros.synthesis.optimizer import SynthesisConfig

    config = GenerationConfig(
        grasps_per_object=4, generator="graspd",
        graspd=GraspdGenerationConfig(synthesis=SynthesisConfig(num_steps=100, chunk_steps=50), sdf=SDFConfig(resolution=48)),
        labels=LabelConfig(num_perturbations=2), augmentations_per_good_grasp=1,
        cloud=CloudConfig(spiral=SpiralConfig(num_images=8), camera=CameraConfig(160, 90, 66.6)),
        prepare=PrepareConfig(settle=SettleConfig(), cache_dir=str(tmp_path / "cache")), seed=7)
    summary = generate_dataset(["procedural/box_0000"], tmp_path / "run", config)
    assert summary.generated == ("procedural/box_0000",)
    shard = load_shard(shard_path(tmp_path / "run", "procedural/box_0000"))
    c = shard.counts
    assert c["starts"] == 4 and c["grasps"] == 4 + c["starts_good"] and shard.grasps_Oy.shape == (c["grasps"], 37)
    assert shard.settings["generation"]["generator"] == "graspd"
    assert shard.settings["generation"]["graspd"]["synthesis"]["num_steps"] == 100
    world = Grasp.from_vector(torch.from_numpy(shard.grasps_Oy).double(), "Oy").transformed(shard.T_world_Oy, "world")
    mesh = prepare_object(object_by_name("procedural/box_0000"), config.prepare).mesh
    mesh.apply_transform(shard.T_world_object)
    assert np.linalg.norm(world.palm_position_m.numpy() - mesh.centroid, axis=1).max() < 0.2
    # the synthesised pre-grasps clear the object: most are free of contact under the label noise (the closing
    # directions' geometry is tested with the synthesis core)
    assert float(np.mean(shard.y_coll[: c["starts"]])) >= 0.5, shard.y_coll
    # a rerun with the other generator is refused in the same folder
    with pytest.raises(ValueError, match="generator"):
        generate_dataset(["procedural/box_0000"], tmp_path / "run", dataclasses.replace(config, generator="energy"))


def test_the_kept_training_pack_is_intact_and_merges_into_a_training_dataset(tmp_path):
    """data/training_v1, the project's kept training data: every shard as its manifest lists it, and the merge gives the
    dataset the geometry evaluator is retrained on (README "The kept training data")."""
    from pathlib import Path

    from getagrip_ros.data.pack import verify_pack

    pack = Path(__file__).resolve().parents[2] / "data" / "training_v1"
    manifest = verify_pack(pack)
    assert manifest["num_objects"] == 144 and manifest["counts"]["grasps"] == 7917
    assert "--grasps-per-object 48 --shuffle --limit 150" in manifest["rebuild_command"]
    data = read_bps_dataset(merge_shards(pack, tmp_path / "v1.h5", include_mined=False))
    assert data.num_grasps == 7917 and len(data.object_codes) == 144 and data.has_clouds
    assert 0.15 < float(data.labels[:, 2].mean()) < 0.25
    # with the grasps mined on the same objects (the geometry evaluator's own proposals, 32 an object)
    assert manifest["mined"]["grasps"] == 4608 and manifest["mined"]["num_objects"] == 144
    assert read_bps_dataset(merge_shards(pack, tmp_path / "mined.h5")).num_grasps == 7917 + 4608
