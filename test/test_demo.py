"""`make demo` end to end: the single-process stack, a grasp_object goal over ROS 2, the trial bag, its report and its
video."""

from pathlib import Path

from getagrip_ros import demo
from getagrip_ros.trials.bag import read_bag
from getagrip_ros.trials.video import video_info


def test_demo_runs_the_whole_task_and_writes_the_bag_and_the_report(tmp_path, capsys):
    args = ["--out", str(tmp_path), "--object", "tabletop20/cube", "--num-images", "24", "--num-samples", "512",
            "--real-time-factor", "4"]
    assert demo.main(args) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "\r" not in out + captured.err  # not a terminal: one line per stage, no progress bar
    for stage in ("capture", "perception", "grasp_planning", "motion_planning", "execution", "scoring"):
        assert f"stage {stage}" in out
    assert "LIFTED the object" in out and "agrees with the executor" in out
    bags = list((tmp_path / "trials").iterdir())
    assert len(bags) == 1 and read_bag(bags[0]).outcome["success"]
    method = read_bag(bags[0]).metadata["method"]  # the default: what a user's make demo and launch run
    assert (method["sampler"], method["evaluator"]) == ("fixed_graspd", "geometry>sim"), method
    png = Path(tmp_path / "report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
    video = bags[0] / f"{bags[0].name}.mp4"  # the trial's video beside its bag, by default
    frames, duration_s, _ = video_info(video)
    assert f"[demo] video {video} ({frames} frames" in out and duration_s > 5
