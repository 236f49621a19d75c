"""Calibrated evaluator outputs: the Platt fit, its checkpoint field, the calibrate command, and the planner using it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from getagrip_ros.cli.train import main
from getagrip_ros.models.bps_evaluator import BpsEvaluator, BpsEvaluatorConfig
from getagrip_ros.models.bps_sampler import BpsSampler, BpsSamplerConfig
from getagrip_ros.models.calibration import (
    PlattCalibration, expected_calibration_error, fit_platt, platt, predict_pool, read_pool,
)
from getagrip_ros.models.checkpoints import CheckpointError, load_checkpoint, save_checkpoint
from getagrip_ros.models.shipped import SHIPPED_FILES, WEIGHTS_DIR
from getagrip_ros.robot.allegro import AllegroHand

DIAGNOSTIC = Path(__file__).resolve().parents[2] / "docs" / "data" / "ranking_diagnostic"  # the frozen diagnostic


def overconfident(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(n, 3) predictions and labels drawn so that the true rate is sigmoid(0.5 logit(p) - 1) for every label."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, size=(n, 3))
    truth = platt(p, 0.5, -1.0)
    return p, (rng.uniform(size=(n, 3)) < truth).astype(float)


def test_the_fit_recovers_a_known_miscalibration_and_keeps_the_order():
    p, y = overconfident(20_000)
    calibration = fit_platt(p, y, "synthetic")
    np.testing.assert_allclose(calibration.scale, 0.5, atol=0.05)
    np.testing.assert_allclose(calibration.offset, -1.0, atol=0.08)
    fixed = calibration(torch.from_numpy(p)).numpy()
    for i in range(3):
        assert expected_calibration_error(p[:, i], y[:, i]) > 0.15  # badly calibrated before
        assert expected_calibration_error(fixed[:, i], y[:, i]) < 0.02
        assert (np.diff(fixed[np.argsort(p[:, i]), i]) > 0).all()  # strictly monotone: the same ranking
    # float32 in, float32 out, as the evaluators produce them
    assert calibration(torch.from_numpy(p).float()).dtype == torch.float32


def test_bad_calibrations_and_fits_are_refused():
    with pytest.raises(ValueError, match="> 0"):
        PlattCalibration((1.0, -0.5, 1.0), (0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="finite"):
        PlattCalibration((1.0, 1.0, 1.0), (0.0, float("nan"), 0.0))
    with pytest.raises(ValueError, match="3 scales"):
        PlattCalibration((1.0, 1.0), (0.0, 0.0))
    for bad in ({"method": "isotonic", "scale": [1, 1, 1], "offset": [0, 0, 0], "fitted_on": ""},
                {"method": "platt", "scale": [1, 1, 1], "offset": [0, 0, 0], "fitted_on": "", "code": "x"},
                {"method": "platt", "scale": "abc", "offset": [0, 0, 0], "fitted_on": ""}, [1, 2]):
        with pytest.raises(ValueError):
            PlattCalibration.from_dict(bad)
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        fit_platt(np.zeros((4, 2)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="finite"):
        fit_platt(np.full((4, 3), np.nan), np.zeros((4, 3)))


def test_a_checkpoint_keeps_its_calibration_and_refuses_a_bad_one(tmp_path):
    config = BpsEvaluatorConfig(hidden_width=16, block_neurons=8)
    calibration = PlattCalibration((0.5, 1.2, 0.6), (-1.0, 0.1, -1.3), "test")
    path = save_checkpoint(tmp_path / "e.pt", "bps_evaluator", BpsEvaluator(config), config, calibration=calibration)
    loaded = load_checkpoint(path)
    assert loaded.calibration == calibration
    raw = torch.tensor([[0.1, 0.5, 0.9]])
    torch.testing.assert_close(loaded.calibrated(raw), calibration(raw))
    plain = load_checkpoint(save_checkpoint(tmp_path / "p.pt", "bps_evaluator", BpsEvaluator(config), config))
    assert plain.calibration is None and plain.calibrated(raw) is raw
    data = torch.load(path, weights_only=True)
    data["calibration"]["scale"] = [0.5, -1.0, 0.6]
    torch.save(data, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="bad calibration"):
        load_checkpoint(tmp_path / "bad.pt")
    sampler_config = BpsSamplerConfig(d_model=16, num_tokens=2, num_heads=2, block_neurons=8)
    with pytest.raises(CheckpointError, match="only evaluators"):
        save_checkpoint(tmp_path / "s.pt", "bps_sampler", BpsSampler(sampler_config), sampler_config, calibration=calibration)


def test_the_shipped_geometry_evaluator_is_calibrated_on_the_frozen_diagnostic():
    loaded = load_checkpoint(WEIGHTS_DIR / SHIPPED_FILES["geometry_evaluator"], "geometry_evaluator")
    assert loaded.calibration is not None and "59 objects" in loaded.calibration.fitted_on
    hand, pools = AllegroHand(), [read_pool(p) for p in sorted(DIAGNOSTIC.glob("*.npz"))[:12]]
    raw = np.concatenate([predict_pool(loaded, hand, pool) for pool in pools])
    labelled = np.concatenate([pool["y_PGS"] for pool in pools])
    calibrated = loaded.calibrated(torch.from_numpy(raw)).numpy()
    assert expected_calibration_error(calibrated[:, 2], labelled) < expected_calibration_error(raw[:, 2], labelled)
    assert calibrated[:, 2].mean() < raw[:, 2].mean()  # the raw model is overconfident


def test_calibrate_command_writes_a_calibrated_copy_and_reports(tmp_path, capsys):
    pools = tmp_path / "pools"
    pools.mkdir()
    for path in sorted(DIAGNOSTIC.glob("*.npz"))[:6]:
        shutil.copy(path, pools / path.name)
    source = load_checkpoint(WEIGHTS_DIR / SHIPPED_FILES["geometry_evaluator"])
    assert main(["calibrate", str(WEIGHTS_DIR / SHIPPED_FILES["geometry_evaluator"]), str(pools), str(tmp_path / "c.pt"),
                 "--report", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "6 objects" in out and "y_PGS" in out and "wrote" in out
    made = load_checkpoint(tmp_path / "c.pt", "geometry_evaluator")
    assert made.calibration is not None and made.calibration != source.calibration  # refitted on 6 objects
    assert "6 objects" in made.calibration.fitted_on and made.metadata["calibration_ece"]["y_PGS"]["raw"] > 0
    for (name, a), (_, b) in zip(source.model.state_dict().items(), made.model.state_dict().items()):
        assert torch.equal(a, b), name
    (pools / "junk.npz").write_bytes(b"not a pool")
    assert main(["calibrate", str(WEIGHTS_DIR / SHIPPED_FILES["geometry_evaluator"]), str(pools), str(tmp_path / "d.pt")]) == 2
    assert "Traceback" not in capsys.readouterr().err and not (tmp_path / "d.pt").exists()
    assert main(["calibrate", str(WEIGHTS_DIR / SHIPPED_FILES["geometry_evaluator"]), str(tmp_path), str(tmp_path / "e.pt")]) == 2
    assert "no labelled pools" in capsys.readouterr().err


def test_the_planners_evaluator_gives_calibrated_predictions_in_the_raw_order():
    import dataclasses

    from getagrip_ros.objects.primitives import box_surface_points
    from getagrip_ros.planning.evaluators import GeometryGraspEvaluator, MeanGraspEvaluator
    from getagrip_ros.planning.object_input import object_from_points
    from getagrip_ros.planning.samplers import load_grasp_set

    hand = AllegroHand()
    loaded = load_checkpoint(WEIGHTS_DIR / SHIPPED_FILES["geometry_evaluator"], "geometry_evaluator")
    obj = object_from_points(box_surface_points(), "world")
    grasps = load_grasp_set(WEIGHTS_DIR / SHIPPED_FILES["fixed_grasps"])[:64].transformed(obj.T_frame_Oy, "world")
    calibrated = GeometryGraspEvaluator(loaded, hand).prepare(obj)(grasps)
    raw = GeometryGraspEvaluator(dataclasses.replace(loaded, calibration=None), hand).prepare(obj)(grasps)
    torch.testing.assert_close(calibrated, loaded.calibration(raw))
    assert not torch.allclose(calibrated, raw, atol=1e-3)
    in_raw_order = calibrated[raw[:, 2].argsort(descending=True), 2]
    assert (in_raw_order[:-1] >= in_raw_order[1:]).all()  # monotone: the ranking is the raw one
    # an ensemble averages its members' raw predictions, as it was measured (calibrating one member would reweigh it)
    torch.testing.assert_close(MeanGraspEvaluator([GeometryGraspEvaluator(loaded, hand)]).prepare(obj)(grasps), raw)
