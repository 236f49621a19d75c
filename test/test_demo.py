"""`make demo` end to end: a real plan_grasp node process, called over ROS 2, writes its results."""

import numpy as np

from getagrip_ros import demo


def test_demo_plans_grasps_over_ros_and_writes_picture_and_grasps(tmp_path, capsys):
    assert demo.main(["--out", str(tmp_path), "--num-grasps", "5"]) == 0
    out = capsys.readouterr().out
    assert "5 grasps" in out and "NOT yet in this build" in out
    data = np.load(tmp_path / "grasps.npz")
    assert data["vectors_37d"].shape == (5, 37) and str(data["frame_id"]) == "world"
    png = (tmp_path / "grasps.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
