"""`getagrip trials ...` on paths that hold no trial bag: refused with exit code 2 and one line naming the file."""

import numpy as np
import pytest
from mcap.writer import Writer

from getagrip_ros.cli.getagrip import main
from getagrip_ros.trials import messages as m
from getagrip_ros.trials.bag import TrialBagWriter


def not_bags(root):
    """(path, what the refusal must say) for files and folders that are not trial bags."""
    root.mkdir()
    text = root / "passwd"
    text.write_text("root:x:0:0:root:/root:/bin/bash\n")
    noise = root / "noise" / "x.mcap"
    noise.parent.mkdir()
    noise.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    empty_file = root / "empty" / "e.mcap"
    empty_file.parent.mkdir()
    empty_file.write_bytes(b"")
    other = root / "other" / "o.mcap"  # a valid MCAP file, but not a ROS 2 bag
    other.parent.mkdir()
    with open(other, "wb") as f:
        writer = Writer(f)
        writer.start(profile="", library="test")
        writer.finish()
    empty_dir = root / "empty_dir"
    empty_dir.mkdir()
    return [(text, "not an MCAP file"), (noise, "not an MCAP file"), (noise.parent, "not an MCAP file"),
            (empty_file, "the file is empty"), (other, "not a ROS 2"), (empty_dir, "no .mcap file"),
            (root / "missing", "no such file")]


def refused(capsys, argv, why):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"getagrip trials {argv[1]}: "), err
    assert why in lines[0]
    return lines[0]


@pytest.mark.parametrize("command", ["report", "recover", "video"])
def test_report_recover_and_video_refuse_what_is_not_a_bag(tmp_path, capsys, command):
    for path, why in not_bags(tmp_path / "not_bags"):
        before = sorted(p.name for p in tmp_path.rglob("*"))
        line = refused(capsys, ["trials", command, str(path)], why)
        shown = path / "x.mcap" if path.name == "noise" else path  # a folder is refused by naming its .mcap file
        assert str(shown) in line
        assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written (no empty report)
    with pytest.raises(SystemExit):
        main(["trials", command])


def test_video_refuses_a_trial_that_recorded_no_robot_states(tmp_path, capsys):
    with TrialBagWriter(tmp_path / "t0", {"object": "tabletop20/cube", "trial": "t0"}) as bag:
        bag.write_json("/trial/events", {"event": "stage_start", "stage": "capture", "time_ns": 1}, 1)
        bag.write_json("/trial/outcome", {"success": False, "status": "NO_RESULT", "stage": "capture", "reason": "x"})
    refused(capsys, ["trials", "video", str(tmp_path / "t0")], "no robot states recorded")
    assert not list(tmp_path.rglob("*.mp4"))


def test_summarize_and_compare_refuse_folders_without_good_bags(tmp_path, capsys):
    good = tmp_path / "good"
    with TrialBagWriter(good / "t0", {"object": "x", "method": {"sampler": "fixed", "evaluator": "none"}}) as bag:
        bag.write_json("/trial/outcome", {"success": True, "status": "SUCCEEDED", "stage": "done", "reason": "ok"})
    roots = not_bags(tmp_path / "not_bags")
    empty_dir = next(p for p, _ in roots if p.name == "empty_dir")
    noise = next(p for p, _ in roots if p.name == "x.mcap")
    text = next(p for p, _ in roots if p.name == "passwd")
    assert "no trial bags" in refused(capsys, ["trials", "summarize", str(empty_dir)], str(empty_dir))
    assert "not a folder" in refused(capsys, ["trials", "summarize", str(text)], str(text))
    assert str(noise) in refused(capsys, ["trials", "summarize", str(noise.parent)], "not an MCAP file")
    assert str(empty_dir) in refused(capsys, ["trials", "compare", str(good), str(empty_dir)], "no trial bags")
    (good / "t1").mkdir()
    (good / "t1" / "t1_0.mcap").write_bytes(noise.read_bytes())
    line = refused(capsys, ["trials", "compare", str(good), str(good)], "not an MCAP file")
    assert str(good / "t1" / "t1_0.mcap") in line


def test_report_and_recover_take_real_bags(tmp_path, capsys):
    bag_dir = tmp_path / "trial"
    with TrialBagWriter(bag_dir, {"object": "x"}) as bag:
        bag.write("/joint_states", m.joint_state(("a",), np.zeros(1), np.zeros(1), 5), 5)
    assert main(["trials", "report", str(bag_dir)]) == 0
    assert (bag_dir / "report.png").stat().st_size > 10_000
    assert main(["trials", "report", str(bag_dir / "trial_0.mcap"), "--out", str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "r.png").is_file()
    capsys.readouterr()
    assert main(["trials", "recover", str(bag_dir)]) == 0
    assert "nothing to do" in capsys.readouterr().out
