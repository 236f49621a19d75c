"""The grasp task end to end in this process (`InProcessStack`: the nodes' stage code called directly): the world is
reset and the simulated FR3 + Allegro capture, perceive, plan, move and lift the cube, trial after trial; every trial -
also failed, timed-out and cancelled ones - ends with a closed, scored trial bag."""

from dataclasses import replace

import matplotlib.pyplot
import numpy as np
import pytest
import trimesh

from getagrip_ros.planning.planner import GraspPlannerConfig
from getagrip_ros.status import StatusCode
from getagrip_ros.task.config import GraspTaskConfig, StageTimeouts
from getagrip_ros.sim.robot_backend import SimRobotConfig
from getagrip_ros.task.grasp_task import GraspTask, TrialObject
from getagrip_ros.task.in_process import InProcessStack, StackConfig
from getagrip_ros.trials.bag import read_bag
from getagrip_ros.trials.report import write_report
from getagrip_ros.trials.video import VideoConfig, video_info, write_trial_video

CUBE_AT = np.array([0.65, 0.0, 0.0])


@pytest.fixture(scope="module")
def stages():
    s = InProcessStack(StackConfig(sim=SimRobotConfig(object_name="tabletop20/cube", real_time_factor=0.0),
                                   planner=GraspPlannerConfig(num_samples=512)))
    yield s
    s.close()


@pytest.fixture
def config(tmp_path):
    """The quick method (fixed+geometry, ~1 s a plan): these tests are about the task; cube_trial runs the default."""
    return GraspTaskConfig(trials_dir=str(tmp_path), work_dir=str(tmp_path / "work"), num_images=24, num_grasps=20,
                           sampler="fixed", evaluator="geometry", plan_with_mesh=False)


@pytest.fixture(scope="module")
def cube_trial(stages, tmp_path_factory):
    """One whole trial with the default method that lifts the cube: (result, feedback seen, config, trials folder)."""
    tmp_path = tmp_path_factory.mktemp("cube")
    config = GraspTaskConfig(trials_dir=str(tmp_path), work_dir=str(tmp_path / "work"), num_images=24, num_grasps=20)
    seen = []
    result = GraspTask(stages, config).run(CUBE_AT, "cube_01", feedback=lambda stage, p, d: seen.append((stage, p)))
    return result, seen, config, tmp_path


def test_the_cube_is_lifted_and_the_whole_trial_is_in_its_bag(cube_trial):
    result, seen, config, tmp_path = cube_trial
    assert result.status == StatusCode.SUCCEEDED and result.success, result.reason
    assert result.scored_success is True and result.scorer_agrees, result.score_reason
    assert [s for s, _ in dict.fromkeys(seen)] and [s for s in dict.fromkeys(s for s, _ in seen)] == [
        "reset", "capture", "perception", "grasp_planning", "motion_planning", "execution", "scoring"]
    progress = [p for _, p in seen]
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert set(result.timings_s) == {"reset", "capture", "perception", "grasp_planning", "motion_planning", "execution"}

    bag = read_bag(tmp_path / "cube_01")
    assert bag.complete and bag.outcome["success"] and bag.outcome["scorer_agrees"]
    meta = bag.metadata
    assert meta["object"] == "tabletop20/cube" and meta["method"]["sampler"] == "fixed_graspd" == config.sampler
    assert meta["config_hash"] == config.hash() and "mujoco" in meta["versions"] and meta["seed"] == config.seed
    assert meta["machine"]["cores"] >= 1 and meta["machine"]["torch_cpu_capability"] and meta["machine"]["cpu"]
    counts = {t: len(bag.topic(t)) for t in ("/camera/image_raw", "/camera/camera_info", "/tf", "/object/points", "/object/bps",
                                             "/grasps/candidates", "/grasps/chosen", "/motion/approach", "/motion/lift",
                                             "/joint_states", "/sim/object_state")}
    assert counts["/camera/image_raw"] == counts["/tf"] == counts["/camera/camera_info"] >= 10, counts
    assert counts["/grasps/candidates"] == 20 and counts["/grasps/chosen"] == 1 and counts["/sim/object_state"] > 50, counts
    chosen = bag.topic("/grasps/chosen")[0].msg
    np.testing.assert_allclose(np.asarray(chosen.vector), result.chosen_grasp, atol=1e-5)
    z = [s.msg.pose.position.z for s in bag.topic("/sim/object_state")]
    assert z[-1] - z[0] > 0.15  # the recorded ground truth shows the lift
    assert write_report(tmp_path / "cube_01", tmp_path / "report.png").stat().st_size > 10_000


def test_the_trial_video_shows_the_capture_and_the_execution(cube_trial):
    """`trials video`: every recorded state of the capture (sped up) and of the execution, frame by frame."""
    result, _, _, tmp_path = cube_trial
    assert result.success, result.reason
    bag = read_bag(tmp_path / "cube_01")
    config = VideoConfig()
    events = bag.json("/trial/events")
    window = {e["stage"]: [e["time_ns"]] for e in events if e.get("event") == "stage_start"}
    for e in events:
        if e.get("event") == "stage_end" and e.get("stage") in window:
            window[e["stage"]].append(e["time_ns"])
    stamps = [m.stamp_ns for m in bag.topic("/joint_states")]
    counts = {stage: sum(window[stage][0] <= t <= window[stage][1] for t in stamps) for stage in ("capture", "execution")}
    assert counts["capture"] > 20 and counts["execution"] > 50, counts  # the capture's motion is recorded too
    sample_s = {"capture": 0.25, "execution": 0.05}  # the robot reports every 250 / 50 ms of robot time
    speeds = {"capture": max(1.0, (counts["capture"] - 1) * 0.25 / config.capture_s), "execution": 1.0}
    expected = {k: int(np.floor((n - 1) * sample_s[k] * config.fps / speeds[k] + 1e-9)) + 1 for k, n in counts.items()}

    video = write_trial_video(tmp_path / "cube_01", tmp_path / "cube.mp4", config)
    assert video.segments == expected
    frames, duration_s, size = video_info(tmp_path / "cube.mp4")  # decoded back
    assert frames == video.num_frames == sum(expected.values())
    assert duration_s == pytest.approx(frames / config.fps) and size == (config.width_px, config.height_px)
    sheet = matplotlib.pyplot.imread(video.sheet_path)
    assert sheet.shape[:2] == (2 * config.height_px // 2, 4 * config.width_px // 2)  # 8 frames at half size


def test_a_stage_that_fails_still_leaves_a_closed_bag_with_the_reason(stages, config, tmp_path):
    far = np.array([2.5, 0.0, 0.0])  # nothing of the spiral around it is reachable
    result = GraspTask(stages, config).run(far, "unreachable")
    assert not result.success and result.status == StatusCode.NO_RESULT and result.stage == "capture", result.reason
    bag = read_bag(tmp_path / "unreachable")
    assert bag.complete and bag.outcome["status"] == "NO_RESULT" and bag.outcome["stage"] == "capture"
    assert bag.outcome["scored_success"] is None


def test_cancel_stops_the_trial_and_is_recorded(stages, config, tmp_path):
    calls = []

    def cancel_after_capture() -> bool:
        calls.append(1)
        return any(s == "perception" for s in seen)

    seen = []
    result = GraspTask(stages, config).run(CUBE_AT, "cancelled", cancelled=cancel_after_capture,
                                           feedback=lambda stage, p, d: seen.append(stage))
    assert result.status == StatusCode.CANCELED and result.stage in ("perception", "grasp_planning"), result.reason
    assert read_bag(tmp_path / "cancelled").outcome["status"] == "CANCELED"


def test_a_stage_over_its_budget_times_out(stages, config, tmp_path):
    tight = replace(config, timeouts=StageTimeouts(capture_s=0.5))
    result = GraspTask(stages, tight).run(CUBE_AT, "timeout")
    assert result.status == StatusCode.TIMEOUT and result.stage == "capture", (result.status, result.reason)
    assert read_bag(tmp_path / "timeout").outcome["status"] == "TIMEOUT"


def test_bad_trial_names_are_refused_before_anything_runs(stages, config, tmp_path):
    task = GraspTask(stages, config)
    for name, words in (("x" * 300, "300 bytes long; at most 128"), ("a/b", "not a plain name"), (".hidden", "not a plain")):
        with pytest.raises(ValueError, match=words):
            task.run(CUBE_AT, name)
    assert not any(tmp_path.iterdir())  # no bag, no work folder


def test_a_failure_outside_the_stages_still_ends_recorded(stages, config, tmp_path, monkeypatch):
    """The work folder cannot be made and the stages cannot describe themselves: the trial still ends with a real
    code and the reason, and its bag is closed with the outcome."""
    import getagrip_ros.task.grasp_task as grasp_task

    def no_folder(path):
        raise OSError(36, "File name too long", str(path))

    def no_description():
        raise RuntimeError("describe failed")

    monkeypatch.setattr(grasp_task, "_fresh_folder", no_folder)
    monkeypatch.setattr(stages, "describe", no_description)
    result = GraspTask(stages, config).run(CUBE_AT, "no_work_dir")
    assert result.status == StatusCode.INTERNAL_ERROR and "File name too long" in result.reason, result.reason
    bag = read_bag(tmp_path / "no_work_dir")
    assert bag.complete and bag.outcome["status"] == "INTERNAL_ERROR" and bag.outcome["reason"] == result.reason
    assert bag.metadata["describe_error"] == "RuntimeError: describe failed"


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="perception"):
        GraspTaskConfig(perception="lidar")
    with pytest.raises(ValueError):
        GraspTaskConfig(num_grasps=0)


@pytest.mark.slow  # consecutive trials run over ROS in test_grasp_object_bringup
def test_consecutive_trials_start_from_a_reset_world(stages, config, tmp_path):
    """Trial after trial on one world: each is reset first (recorded), gets past motion planning and lifts the cube;
    a trial may name another object and place it, and the next one without a name is back to the configured object."""
    from getagrip_ros.trials.bag import read_bag

    for k in range(2):
        result = GraspTask(stages, config).run(CUBE_AT, f"again_{k}")
        assert result.success and result.stage == "done", result.reason
        resets = [e for e in read_bag(tmp_path / f"again_{k}").json("/trial/events") if e.get("event") == "reset"]
        assert len(resets) == 1 and resets[0]["done"] and resets[0]["object"] == "tabletop20/cube"
        assert abs(resets[0]["T_world_object"][0][3] - 0.65) < 1e-6  # the cube back on its spot
    moved = GraspTask(stages, replace(config, num_images=12)).run(
        np.array([0.6, 0.05, 0.0]), "apple", obj=TrialObject("tabletop20/apple", place=True, yaw_rad=0.3))
    bag = read_bag(tmp_path / "apple")
    reset = next(e for e in bag.json("/trial/events") if e.get("event") == "reset")
    assert bag.metadata["object"] == "tabletop20/apple" and reset["object"] == "tabletop20/apple", moved.reason
    assert np.allclose(np.asarray(reset["T_world_object"])[:2, 3], [0.6, 0.05], atol=1e-6)
    back = GraspTask(stages, replace(config, num_images=12)).run(CUBE_AT, "cube_again")
    assert read_bag(tmp_path / "cube_again").metadata["object"] == "tabletop20/cube", back.reason
    with pytest.raises(ValueError, match="exists already"):
        GraspTask(stages, config).run(CUBE_AT, "apple")


@pytest.mark.slow  # planning from the mesh is tested in test/planning/test_plan_from_mesh.py
def test_plan_with_mesh_hands_perceptions_mesh_to_grasp_planning(stages, config, tmp_path, monkeypatch):
    from getagrip_ros.status import StageError

    requests = []

    def spy(request, budget):  # record what the task asks, then end the trial there
        requests.append(request)
        raise StageError(StatusCode.NO_RESULT, "spy: planning skipped")

    monkeypatch.setattr(stages, "plan_grasp", spy)
    for name, setting in (("with_mesh", True), ("cloud_only", False)):
        result = GraspTask(stages, replace(config, plan_with_mesh=setting)).run(CUBE_AT, name)
        assert result.stage == "grasp_planning" and "spy" in result.reason, result.reason
    with_mesh, cloud_only = requests
    assert with_mesh.mesh_path and with_mesh.mesh_path.endswith(".obj") and len(with_mesh.points_m) > 100
    assert str(tmp_path / "work" / "with_mesh") in with_mesh.mesh_path
    assert len(trimesh.load(with_mesh.mesh_path, force="mesh").faces) > 100  # the fused mesh, written before planning
    assert cloud_only.mesh_path is None and len(cloud_only.points_m) > 100
