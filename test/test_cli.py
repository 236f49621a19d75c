"""The planning and perception CLIs: files in, files out; bad input gives an error, not a traceback."""

import json

import numpy as np
import pytest

from getagrip_ros.cli import perception
from getagrip_ros.cli.plan_grasps import main
from getagrip_ros.objects.primitives import box_surface_points


def test_cli_plans_from_a_file(tmp_path, capsys):
    np.save(tmp_path / "cloud.npy", box_surface_points())
    out = tmp_path / "g.npz"
    code = main([str(tmp_path / "cloud.npy"), "--num-grasps", "4", "--num-samples", "300", "--out", str(out),
                 "--image", str(tmp_path / "g.png")])
    err = capsys.readouterr().err
    assert code == 0, err
    data = np.load(out)
    assert data["vectors_37d"].shape == (4, 37) and data["closed_joints_rad"].shape == (4, 16)
    assert (tmp_path / "g.png").stat().st_size > 10_000
    # not a terminal (captured): one line per stage, no carriage-return progress bar
    assert "[planning] sampling\n" in err and "[planning] evaluation\n" in err and "\r" not in err, err


def test_cli_plans_with_learned_models(tmp_path, capsys, tiny_models):
    np.save(tmp_path / "cloud.npy", box_surface_points())
    out = tmp_path / "g.npz"
    code = main([str(tmp_path / "cloud.npy"), "--num-grasps", "5", "--num-samples", "200", "--out", str(out),
                 "--sampler", "diffusion", "--diffusion-steps", "4", "--bps-sampler", tiny_models.bps_sampler,
                 "--evaluator", "bps", "--bps-evaluator", tiny_models.bps_evaluator, "--iterations", "3",
                 "--image", str(tmp_path / "g.png")])
    assert code == 0, capsys.readouterr().err
    y_pgs = np.load(out)["y_pgs"]
    assert y_pgs.shape == (5,) and (np.diff(y_pgs) <= 0).all() and "ranked by the bps evaluator" in capsys.readouterr().out
    assert main([str(tmp_path / "cloud.npy"), "--evaluator", "bps", "--bps-evaluator", "", "--out", str(out)]) == 1
    assert "NOT_IMPLEMENTED: no checkpoint configured for the BPS evaluator" in capsys.readouterr().err


def test_cli_reports_bad_input(tmp_path, capsys):
    np.savetxt(tmp_path / "few.xyz", np.zeros((3, 3)))
    assert main([str(tmp_path / "few.xyz")]) == 1
    assert "INVALID_GOAL" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.npy")]) == 2
    assert main([str(tmp_path / "few.ply")]) == 2


def test_perception_cli_extracts_the_object_from_depth_images(mug_datasets, tmp_path, capsys):
    out = tmp_path / "obj"
    code = perception.main(["extract", "--backend", "depth", "--dataset", str(mug_datasets / "mug"), "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    cloud, bps = np.load(out / "object_cloud.npy"), np.load(out / "bps.npy")
    assert cloud.ndim == 2 and cloud.shape[1] == 3 and len(cloud) > 100 and np.isfinite(cloud).all()
    assert bps.shape == (4096,) and (bps >= 0).all()
    summary = json.loads((out / "object.json").read_text())
    assert summary["backend"] == "depth" and summary["num_points"] == len(cloud)
    assert (out / "object_mesh.obj").is_file() and summary["mesh_path"] == str(out / "object_mesh.obj")
    out_text = capsys.readouterr().out
    assert json.loads(out_text[:out_text.rindex("}") + 1]) == summary
    png = (out / "object.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000 and f"wrote {out / 'object.png'}" in out_text


@pytest.mark.parametrize("dataset, reason", [
    ("missing", "INVALID_GOAL: cannot read the capture dataset"),
    ("mug_rgb_only", "INVALID_GOAL: the depth backend needs depth images"),
])
def test_perception_cli_reports_bad_input(mug_datasets, tmp_path, capsys, dataset, reason):
    code = perception.main(["extract", "--backend", "depth", "--dataset", str(mug_datasets / dataset),
                            "--out", str(tmp_path / "obj")])
    err = capsys.readouterr().err
    assert code != 0 and f"error: {reason}" in err, err
    assert "Traceback" not in err and not (tmp_path / "obj" / "object.json").exists()


def test_perception_cli_captures_with_the_simulated_robot_and_trains_a_nerf(tmp_path, capsys):
    from getagrip_ros.perception.nerf_dataset import read_nerf_dataset

    code = perception.main(["capture", "--object", "tabletop20/cube", "--num-images", "30", "--width", "96",
                            "--height", "54", "--focal-px", "40", "--depth", "--out", str(tmp_path / "ds")])
    assert code == 0, capsys.readouterr()
    ds = read_nerf_dataset(tmp_path / "ds")
    assert 10 <= len(ds) <= 30 and ds.depth_m is not None and ds.rgb.shape[1:] == (54, 96, 3)
    code = perception.main(["train-nerf", str(tmp_path / "ds"), str(tmp_path / "runs"), "--iterations", "3"])
    out = capsys.readouterr().out
    assert code == 0 and "config:" in out and "held-out PSNR" in out
    assert len(list((tmp_path / "runs").rglob("config.yml"))) == 1


def test_cli_refuses_a_pickled_grasp_set_without_running_it(tmp_path, capsys):
    import os

    class Marker:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    np.save(tmp_path / "cloud.npy", box_surface_points())
    np.save(tmp_path / "evil.npy", {"trans": Marker()}, allow_pickle=True)
    code = main([str(tmp_path / "cloud.npy"), "--sampler", "fixed", "--fixed-grasps", str(tmp_path / "evil.npy"),
                 "--out", str(tmp_path / "g.npz")])
    err = capsys.readouterr().err
    assert code == 1 and "evil.npy" in err and "is not allowed" in err, err
    assert not (tmp_path / "ran").exists() and not (tmp_path / "g.npz").exists()
