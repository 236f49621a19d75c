"""The benchmark: a frozen protocol, every attempt kept, resumable, results per object and method."""

import json
import shutil
from dataclasses import replace

import pytest
import trimesh

from getagrip_ros.cli.getagrip import main as getagrip
from getagrip_ros.planning.planner import GraspPlannerConfig
from getagrip_ros.task.benchmark import BenchmarkProtocol, freeze, load_protocol, resolve_objects, run_benchmark
from getagrip_ros.task.config import GraspTaskConfig
from getagrip_ros.sim.robot_backend import SimRobotConfig
from getagrip_ros.task.in_process import StackConfig



def _protocol(**kwargs) -> BenchmarkProtocol:
    return BenchmarkProtocol(objects=("tabletop20/cube",), methods=("fixed+bps",), trials_per_object=1,
                             task=GraspTaskConfig(num_images=40, num_grasps=10),
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


def test_objects_from_a_named_set_a_folder_or_names(tmp_path):
    assert len(resolve_objects("tabletop-20")) == 20
    assert resolve_objects("tabletop20/cube, tabletop20/apple") == ("tabletop20/cube", "tabletop20/apple")
    trimesh.creation.box((0.05, 0.05, 0.05)).export(tmp_path / "box.stl")
    shutil.copy(tmp_path / "box.stl", tmp_path / "box2.stl")
    assert [p.rsplit("/", 1)[-1] for p in resolve_objects(str(tmp_path))] == ["box.stl", "box2.stl"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no meshes"):
        resolve_objects(str(tmp_path / "empty"))


def test_a_benchmark_runs_resumes_and_keeps_crashed_attempts(tmp_path):
    protocol = _protocol()
    results = run_benchmark(protocol, tmp_path)
    assert results["protocol_hash"] == protocol.hash()
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
    assert report["trials"][0]["first_difference"] == ""  # the same images, cloud, grasps and lift, bit for bit
    assert "| cube | lifted | lifted | yes |" in (tmp_path / "agreement" / "agreement.md").read_text()
    with pytest.raises(ValueError, match="unknown mode"):
        run_benchmark(protocol, tmp_path / "other", mode="launch")
