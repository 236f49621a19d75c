"""The benchmark: a frozen protocol, every attempt kept, resumable, results per object and method."""

import json
import re
import shutil
from pathlib import Path
from dataclasses import replace

import numpy as np
import pytest
import trimesh

from getagrip_ros.cli.getagrip import main as getagrip
from getagrip_ros.planning.planner import GraspPlannerConfig
from getagrip_ros.task.benchmark import (BenchmarkProtocol, check_protocol, freeze, load_protocol, resolve_objects,
                                         run_benchmark)
from getagrip_ros.task.config import GraspTaskConfig
from getagrip_ros.sim.robot_backend import SimRobotConfig
from getagrip_ros.task.in_process import StackConfig



def _protocol(**kwargs) -> BenchmarkProtocol:
    return BenchmarkProtocol(objects=("tabletop20/cube",), methods=("fixed+bps",), trials_per_object=1,
                             task=GraspTaskConfig(num_images=24, num_grasps=10),
                             stack=StackConfig(sim=SimRobotConfig(real_time_factor=0.0, camera_width_px=320,
                                                                  camera_height_px=180, camera_fy_px=133.25),
                                               planner=GraspPlannerConfig(num_samples=256)), **kwargs)


def test_protocol_is_frozen_before_the_run_and_round_trips(tmp_path):
    protocol = _protocol()
    freeze(protocol, tmp_path)
    assert load_protocol(tmp_path / "protocol.yaml") == protocol
    freeze(protocol, tmp_path)  # the same protocol again: fine (resume)
    with pytest.raises(ValueError, match="another protocol"):
        freeze(replace(protocol, trials_per_object=2), tmp_path)
    for bad in ("fixed", "+bps", "fixed+"):
        with pytest.raises(ValueError, match="sampler\\+evaluator"):
            BenchmarkProtocol(objects=("x",), methods=(bad,))
    assert BenchmarkProtocol(objects=("x",), methods=("fixed+bps+geometry",)).methods == ("fixed+bps+geometry",)
    for bad, message in ((dict(methods=("foo+bar",)), "unknown sampler 'foo' in method 'foo\\+bar'.*samplers: heuristic, "
                                                      "fixed, diffusion, graspd, nerf_diffusion, fixed_graspd; "
                                                      "evaluators: none, bps, nerf, geometry"),
                         (dict(methods=("fixed+bar",)), "unknown evaluator 'bar'"),
                         (dict(methods=()), "no methods"),
                         (dict(methods=("fixed+bps", "fixed+bps")), "'fixed\\+bps' is listed twice"),
                         (dict(trials_per_object=0), "whole number >= 1, got 0"),
                         (dict(trials_per_object=1.5), "whole number >= 1, got 1.5")):
        with pytest.raises(ValueError, match=message):
            BenchmarkProtocol(objects=("x",), **bad)


def test_objects_from_a_named_set_a_folder_or_names(tmp_path):
    assert len(resolve_objects("tabletop-20")) == 20
    assert resolve_objects("tabletop20/cube, tabletop20/apple") == ("tabletop20/cube", "tabletop20/apple")
    trimesh.creation.box((0.05, 0.05, 0.05)).export(tmp_path / "box.stl")
    shutil.copy(tmp_path / "box.stl", tmp_path / "box2.stl")
    assert [p.rsplit("/", 1)[-1] for p in resolve_objects(str(tmp_path))] == ["box.stl", "box2.stl"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no meshes"):
        resolve_objects(str(tmp_path / "empty"))
    mixed = resolve_objects(f"tabletop20/cube,{tmp_path / 'box.stl'}")  # names and files; files made absolute
    assert mixed == ("tabletop20/cube", str((tmp_path / "box.stl").resolve()))
    assert len(resolve_objects("procedural")) == 800
    for bad, message in (("tabletop-21", "unknown object or object set 'tabletop-21'; did you mean tabletop-20\\?"),
                         ("tabletop20/cube,tabletop20/cub", "tabletop20/cub'; tabletop-20 objects: tabletop20/apple, "
                                                            "tabletop20/cube"),
                         ("cube", "did you mean tabletop20/cube\\?"),
                         ("procedural/mug_0080", "procedural/<family>_<0000-0079>, families: box"),
                         (str(tmp_path / "nowhere.obj"), "no such mesh file"),
                         (str(tmp_path / "box.xyz"), "unsupported mesh file type '.xyz'"),
                         (" , ", "no objects given")):
        with pytest.raises(ValueError, match=message):
            resolve_objects(bad)


def test_objects_models_and_settings_are_checked_before_a_run(tmp_path):
    check_protocol(_protocol())
    for bad, message in ((dict(objects=("tabletop20/cube", "tabletop20/nope")), "unknown object or object set"),
                         (dict(objects=("tabletop20/cube", str(tmp_path / "tabletop20_cube.obj"))), "no such mesh file"),
                         (dict(methods=("fixed+nerf",)), "needs a nerf evaluator file and none is configured"),
                         (dict(task=GraspTaskConfig(planner="rrt")), "unknown motion planner 'rrt'; known: ompl, curobo"),
                         (dict(task=GraspTaskConfig(seed=-1)), "seed must be a whole number >= 0"),
                         (dict(stack=StackConfig(planner=GraspPlannerConfig(num_samples=0))), "num_samples must be >= 1")):
        with pytest.raises(ValueError, match=message):
            check_protocol(replace(_protocol(), **bad))
    trimesh.creation.box((0.05, 0.05, 0.05)).export(tmp_path / "tabletop20_cube.obj")
    with pytest.raises(ValueError, match="would both name trials 'tabletop20_cube'"):
        check_protocol(replace(_protocol(), objects=("tabletop20/cube", str(tmp_path / "tabletop20_cube.obj"))))


@pytest.fixture
def nothing_may_start(monkeypatch):
    """Every way a run starts (preparing objects, the in-process stack, the ROS bring-up) fails the test if used."""
    import getagrip_ros.ros.benchmark_client as benchmark_client
    import getagrip_ros.task.benchmark as benchmark
    import getagrip_ros.task.in_process as in_process

    started = []

    def refuse(what):
        def start(*args, **kwargs):
            started.append(what)
            raise AssertionError(f"{what} started although the benchmark's arguments are bad")
        return start

    monkeypatch.setattr(benchmark, "prepare_objects", refuse("object preparation"))
    monkeypatch.setattr(in_process.InProcessStack, "__init__", refuse("the in-process stack"))
    monkeypatch.setattr(benchmark_client.BenchmarkStack, "__init__", refuse("the ROS bring-up"))
    return started


@pytest.mark.parametrize("mode", ["in_process", "ros"])
@pytest.mark.parametrize("arguments, message", [
    (["--methods", "foo+bar"], "unknown sampler 'foo' in method 'foo+bar'; a method is sampler+evaluator, e.g. "
                               "fixed+geometry; samplers: heuristic, fixed, diffusion, graspd, nerf_diffusion, "
                               "fixed_graspd; evaluators: none, bps, nerf, geometry, bps+geometry"),
    (["--methods", "fixed+bps,fixed+nope"], "unknown evaluator 'nope' in method 'fixed+nope'"),
    (["--methods", "fixed"], "method 'fixed' is not sampler+evaluator"),
    (["--methods", " , "], "--methods is empty"),
    (["--objects", "tabletop-21"], "unknown object or object set 'tabletop-21'; did you mean tabletop-20?"),
    (["--objects", "tabletop20/cube,tabletop20/teapot"], "unknown object or object set 'tabletop20/teapot'; tabletop-20 "
                                                         "objects: tabletop20/apple"),
    (["--trials", "0"], "--trials must be >= 1, got 0"),
    (["--num-grasps", "-5"], "--num-grasps must be >= 1, got -5"),
    (["--num-images", "0"], "--num-images must be >= 1, got 0"),
    (["--perception", "lidar"], "unknown --perception 'lidar'; known: depth, nerf"),
    (["--methods", "fixed+nerf"], "method 'fixed+nerf' needs a nerf evaluator file"),
])
def test_bad_names_and_options_exit_2_with_what_is_valid_before_anything_starts(tmp_path, capsys, nothing_may_start,
                                                                                mode, arguments, message):
    options = {"--objects": "tabletop20/cube", "--methods": "fixed+bps"}
    options.update(dict(zip(arguments[::2], arguments[1::2])))
    out = tmp_path / "bench"
    argv = ["benchmark", *[x for kv in options.items() for x in kv], "--mode", mode, "--out", str(out)]
    assert getagrip(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("getagrip benchmark: ") and message in err and "\n" not in err, err
    assert not nothing_may_start and not out.exists()  # nothing prepared, started or written


def test_a_bad_protocol_file_exits_2_before_anything_starts(tmp_path, capsys, nothing_may_start):
    good = _protocol().to_yaml()
    cases = {"typo.yaml": (good.replace("trials_per_object:", "trial_per_object:"),
                           "unknown BenchmarkProtocol field 'trial_per_object'; fields: objects, methods"),
             "method.yaml": (good.replace("- fixed+bps", "- fixed+bsp"), "unknown evaluator 'bsp'"),
             "object.yaml": (good.replace("tabletop20/cube", "tabletop20/cubes"), "unknown object or object set"),
             "nested.yaml": (good.replace("  num_samples:", "  num_sample:"),
                             "unknown GraspPlannerConfig field 'num_sample'"),
             "zero.yaml": (good.replace("trials_per_object: 1", "trials_per_object: 0"), "got 0"),
             "text.yaml": ("just: [text", "not valid YAML")}
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        for mode in ("in_process", "ros"):
            assert getagrip(["benchmark", "--protocol", str(tmp_path / name), "--mode", mode,
                             "--out", str(tmp_path / "out")]) == 2, name
            err = capsys.readouterr().err
            assert message in err and err.count("\n") == 1, (name, err)
    assert not nothing_may_start and not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="unknown object or object set 'tabletop20/nope'"):  # run_benchmark alike
        run_benchmark(replace(_protocol(), objects=("tabletop20/cube", "tabletop20/nope")), tmp_path / "out", mode="ros")
    assert not nothing_may_start and not (tmp_path / "out").exists()


def _box_with_holes() -> trimesh.Trimesh:
    """A 6 cm cube with 3 holes of 8 or more edges each (trimesh's own filling closes only 3- and 4-edge holes)."""
    box = trimesh.creation.box((0.06, 0.06, 0.06)).subdivide().subdivide()
    centres = box.triangles_center
    holes = [(centres[:, 2] > 0.029) & (np.abs(centres[:, 0]) < 0.015) & (np.abs(centres[:, 1]) < 0.015),
             (centres[:, 0] > 0.029) & (np.abs(centres[:, 1]) < 0.015) & (np.abs(centres[:, 2]) < 0.015),
             (centres[:, 1] < -0.029) & (np.abs(centres[:, 0] - 0.01) < 0.012) & (np.abs(centres[:, 2]) < 0.015)]
    box.update_faces(~np.any(holes, axis=0))
    return box


def test_a_run_whose_every_object_is_skipped_ends_with_its_reasons_and_no_trial(tmp_path, capsys, monkeypatch):
    import getagrip_ros.task.in_process as in_process

    monkeypatch.setattr(in_process.InProcessStack, "__init__", lambda *a, **k: pytest.fail("no trial to run"))
    empty = tmp_path / "empty.stl"
    empty.write_bytes(b"")
    assert getagrip(["benchmark", "--objects", str(empty), "--methods", "fixed+bps", "--out", str(tmp_path / "b")]) == 0
    printed = capsys.readouterr().out
    reason = f"user/empty: {empty.resolve()}: mesh file is empty"
    assert f"skipped            {empty.resolve()}: {reason}" in printed, printed
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    assert results["trials"] == [] and results["summary"]["num_trials"] == 0
    assert results["skipped"] == [{"object": str(empty.resolve()), "reason": reason}]
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["summary"]["skipped_objects"] == results["skipped"]


def test_an_object_that_cannot_be_prepared_is_skipped_with_its_reason_and_the_run_goes_on(tmp_path, capsys):
    """A folder of meshes: a flat sheet no repair can close (listed first) is skipped, with its reason in the results,
    the summary and the printed table; the box with 3 holes is repaired and its trial runs."""
    from getagrip_ros.objects.mesh_object import _defects

    meshes = tmp_path / "meshes"
    meshes.mkdir()
    x, y = np.meshgrid(np.linspace(0.0, 0.1, 6), np.linspace(0.0, 0.1, 6))
    cells = [a for a in range(30) if a % 6 < 5]
    trimesh.Trimesh(np.c_[x.ravel(), y.ravel(), np.zeros(36)],
                    [[a, a + 1, a + 7] for a in cells] + [[a, a + 7, a + 6] for a in cells]).export(meshes / "a_flat.obj")
    holey = _box_with_holes()
    assert _defects(holey).startswith("3 holes")
    holey.export(meshes / "b_holey_box.obj")
    objects = resolve_objects(str(meshes))
    protocol = replace(_protocol(), objects=objects, stack=replace(_protocol().stack, sim=replace(
        _protocol().stack.sim, object_cache_dir=str(tmp_path / "cache"))))
    freeze(protocol, tmp_path / "bench")
    assert getagrip(["benchmark", "--protocol", str(tmp_path / "bench" / "protocol.yaml"),
                     "--out", str(tmp_path / "bench")]) == 0
    printed = capsys.readouterr().out
    results = json.loads((tmp_path / "bench" / "results.json").read_text())
    (skipped,) = results["skipped"]
    assert skipped["object"] == objects[0] and re.fullmatch(
        r"user/a_flat: mesh is not watertight \(1 holes, 0 non-manifold edges\) and flat \(0 m thick, [\d.]+ m across\): "
        r"no repair can make it a solid", skipped["reason"]), skipped
    assert f"skipped            {objects[0]}: {skipped['reason']}" in printed, printed
    summary = json.loads((tmp_path / "bench" / "summary.json").read_text())["summary"]
    assert summary["skipped_objects"] == results["skipped"] == results["summary"]["skipped_objects"]
    (trial,) = results["trials"]
    assert trial["trial"] == "b_holey_box__fixed+bps__00" and trial["object"] == objects[1]
    assert trial["stage"] != "reset" and trial["status"] in ("SUCCEEDED", "NO_RESULT"), trial
    assert summary["methods"]["fixed+bps"]["trials"] == 1


def test_a_benchmark_runs_resumes_and_keeps_crashed_attempts(tmp_path):
    protocol = _protocol()
    results = run_benchmark(protocol, tmp_path)
    assert results["protocol_hash"] == protocol.hash() and results["skipped"] == []
    method = results["summary"]["methods"]["fixed+bps"]
    assert method["trials"] == 1 and method["per_object"]["tabletop20/cube"]["trials"] == 1
    assert len(results["trials"]) == 1 and results["trials"][0]["status"] in ("SUCCEEDED", "NO_RESULT")
    assert json.loads((tmp_path / "results.json").read_text())["protocol_hash"] == protocol.hash()
    assert (tmp_path / "summary.png").is_file()

    # a crashed attempt (no outcome) is kept under a new name and run again; finished trials are not rerun
    bag = tmp_path / "trials" / "tabletop20_cube__fixed+bps__00"
    (bag / "metadata.yaml").unlink()
    mcap = next(bag.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[: len(mcap.read_bytes()) // 2])
    again = run_benchmark(protocol, tmp_path)
    assert (tmp_path / "trials" / "tabletop20_cube__fixed+bps__00__crashed_1").is_dir()
    assert again["summary"]["methods"]["fixed+bps"]["trials"] == 1
    rerun = next(t for t in again["trials"] if t["trial"] == "tabletop20_cube__fixed+bps__00")
    assert rerun["stage"] != "capture" and rerun["status"] in ("SUCCEEDED", "NO_RESULT"), rerun  # a fresh work folder
    assert again["summary"]["incomplete_bags"] == ["tabletop20_cube__fixed+bps__00__crashed_1"]

    stamp = bag.stat().st_mtime
    run_benchmark(protocol, tmp_path)
    assert bag.stat().st_mtime == stamp  # nothing to do

    assert getagrip(["trials", "summarize", str(tmp_path / "trials"), "--out", str(tmp_path / "s")]) == 0
    assert (tmp_path / "s" / "summary.json").is_file()
    assert getagrip(["benchmark", "--out", str(tmp_path)]) == 2  # neither objects nor a protocol


def test_the_ros_mode_runs_the_same_protocol_through_the_launched_stack_and_agrees(tmp_path):
    """The same protocol in both modes: in-process, and as grasp_object goals to a bring-up with a process per node that
    the benchmark starts itself with the protocol's settings. The cube is lifted both ways with the same grasp, and the
    trials record the same task configuration."""
    import numpy as np

    from getagrip_ros.trials.bag import read_bag

    protocol = _protocol()
    local = run_benchmark(protocol, tmp_path / "local")
    ros = run_benchmark(protocol, tmp_path / "ros", mode="ros")
    assert ros["mode"] == "ros" and ros["protocol_hash"] == local["protocol_hash"] == protocol.hash()
    assert ros["machine"] == local["machine"] and local["machine"]["cores"] >= 1
    (a,), (b,) = local["trials"], ros["trials"]
    assert a["trial"] == b["trial"] and a["status"] == b["status"] == "SUCCEEDED", (a["reason"], b["reason"])
    bags = [read_bag(tmp_path / mode / "trials" / a["trial"]) for mode in ("local", "ros")]
    assert bags[0].metadata["config_hash"] == bags[1].metadata["config_hash"]
    assert bags[0].metadata["backend"] == "in_process" and bags[1].metadata["backend"] == "ros"
    chosen = [np.asarray(bag.topic("/grasps/chosen")[0].msg.vector) for bag in bags]
    np.testing.assert_allclose(chosen[0], chosen[1], atol=1e-4)
    assert (tmp_path / "ros" / "bringup.log").is_file()
    from getagrip_ros.trials.compare import write_comparison

    report = write_comparison(tmp_path / "local" / "trials", tmp_path / "ros" / "trials", tmp_path / "agreement")
    assert report["agree"] == report["compared"] == 1 and report["trials"][0]["same_settings"]
    assert report["trials"][0]["machines"] == ""  # both on this CPU
    assert report["trials"][0]["first_difference"] == ""  # the same images, cloud, grasps and lift, bit for bit
    assert "| cube | lifted | lifted | yes |" in (tmp_path / "agreement" / "agreement.md").read_text()
    with pytest.raises(ValueError, match="unknown mode"):
        run_benchmark(protocol, tmp_path / "other", mode="launch")


def test_a_benchmark_with_demonstrations_gives_each_object_its_own(tmp_path):
    """human_demo+none: each trial's goal carries the object's demonstration from the protocol's folder, the plan is
    the transferred grasp, and the bag records the demonstration."""
    from getagrip_ros.config_tree import flatten, rebuild
    from getagrip_ros.human_demo.demonstration import load_demonstration
    from getagrip_ros.trials.bag import read_bag

    from ..human_demo.demos import SHORT_TRANSFER

    demos = Path(__file__).resolve().parents[2] / "docs" / "human_demo" / "demos_fr3"  # ones the wrist allows
    protocol = replace(_protocol(), methods=("human_demo+none",), human_demos=str(demos), human_demo_kind="tripod")
    planner = rebuild(protocol.stack.planner, {**flatten(protocol.stack.planner), **SHORT_TRANSFER})
    protocol = replace(protocol, stack=replace(protocol.stack, planner=planner))
    results = run_benchmark(protocol, tmp_path)
    (trial,) = results["trials"]
    assert trial["status"] in ("SUCCEEDED", "NO_RESULT") and trial["stage"] in ("execution", "done"), trial["reason"]
    bag = read_bag(tmp_path / "trials" / trial["trial"])
    assert bag.metadata["method"]["sampler"] == "human_demo"
    np.testing.assert_allclose(bag.metadata["method"]["human_demo"]["keypoints_m"],
                               load_demonstration(demos / "tabletop20_cube__tripod.json").keypoints_m)
