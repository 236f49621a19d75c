"""The planning CLI: file in, grasps (and a picture) out; bad files give an error, not a traceback."""

import numpy as np

from getagrip_ros.cli.plan_grasps import main
from getagrip_ros.objects.primitives import box_surface_points


def test_cli_plans_from_a_file(tmp_path, capsys):
    np.save(tmp_path / "cloud.npy", box_surface_points())
    out = tmp_path / "g.npz"
    code = main([str(tmp_path / "cloud.npy"), "--num-grasps", "4", "--num-samples", "300", "--out", str(out),
                 "--image", str(tmp_path / "g.png")])
    assert code == 0, capsys.readouterr().err
    data = np.load(out)
    assert data["vectors_37d"].shape == (4, 37) and data["closed_joints_rad"].shape == (4, 16)
    assert (tmp_path / "g.png").stat().st_size > 10_000


def test_cli_reports_bad_input(tmp_path, capsys):
    np.savetxt(tmp_path / "few.xyz", np.zeros((3, 3)))
    assert main([str(tmp_path / "few.xyz")]) == 1
    assert "INVALID_GOAL" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.npy")]) == 2
    assert main([str(tmp_path / "few.ply")]) == 2
