"""getagrip-train: end to end through the installed console script, and clear errors for bad input."""

import subprocess
import sys
from pathlib import Path

import torch

from getagrip_ros.cli.train import main
from getagrip_ros.models.checkpoints import load_checkpoint

SCRIPT = Path(sys.executable).parent / "getagrip-train"


def test_console_script_trains_and_resumes_the_bps_evaluator(bps_dataset, tmp_path):
    args = [str(SCRIPT), "bps-evaluator", "--dataset", str(bps_dataset), "--output-dir", str(tmp_path), "--epochs", "2",
            "--batch-size", "64", "--lr", "3e-3", "--seed", "1", "--val-fraction", "0.34", "--hidden-width", "32",
            "--block-neurons", "16", "--device", "cpu", "--quiet"]
    run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "bps_evaluator: 2 epochs trained now, 2 in total" in run.stdout and f"wrote {tmp_path / 'best.pt'}" in run.stdout
    loaded = load_checkpoint(tmp_path / "last.pt", "bps_evaluator")
    assert loaded.config.hidden_width == 32 and loaded.config.block_neurons == 16
    assert (tmp_path / "loss_curves.png").is_file() and (tmp_path / "history.json").is_file()
    args[args.index("--epochs") + 1] = "3"
    assert main(args[1:]) == 0
    assert load_checkpoint(tmp_path / "last.pt").training_state["epoch"] == 3
    fewer = args[1:] + ["--train-object-fraction", "0.5"]
    fewer[fewer.index("--output-dir") + 1] = str(tmp_path / "half")
    assert main(fewer) == 0
    full, half = loaded.metadata, load_checkpoint(tmp_path / "half" / "last.pt").metadata
    assert len(full["train_objects"]) == 4 and len(half["train_objects"]) == 2
    assert set(half["train_objects"]) < set(full["train_objects"]) and half["val_objects"] == full["val_objects"]


def test_cli_trains_the_sampler_and_the_nerf_evaluator(bps_dataset, nerf_dataset, tmp_path, capsys):
    assert main(["bps-sampler", "--dataset", str(bps_dataset), "--output-dir", str(tmp_path / "sampler"), "--epochs", "1",
                 "--batch-size", "64", "--val-fraction", "0.34", "--d-model", "16", "--num-tokens", "2", "--num-heads", "2",
                 "--block-neurons", "16", "--num-timesteps", "50", "--y-pgs-threshold", "0.8", "--quiet"]) == 0
    sampler = load_checkpoint(tmp_path / "sampler" / "last.pt", "bps_sampler")
    assert sampler.config.d_model == 16 and sampler.metadata["y_PGS_threshold"] == 0.8
    assert main(["nerf-evaluator", "--dataset", str(nerf_dataset), "--output-dir", str(tmp_path / "nerf"), "--epochs", "1",
                 "--batch-size", "16", "--val-fraction", "0.34", "--conv-channels", "4,8", "--global-conv-channels", "4",
                 "--mlp-hidden", "16", "--quiet"]) == 0
    nerf = load_checkpoint(tmp_path / "nerf" / "last.pt", "nerf_evaluator")
    assert nerf.config.conv_channels == (4, 8) and nerf.config.mlp_hidden == (16,) and nerf.config.use_global
    assert "nerf_evaluator: 1 epochs trained now" in capsys.readouterr().out


def test_cli_reports_bad_input_without_a_traceback(bps_dataset, tmp_path, capsys):
    assert main(["bps-evaluator", "--dataset", str(tmp_path / "missing.h5"), "--output-dir", str(tmp_path)]) == 2
    assert "error: grasp dataset not found" in capsys.readouterr().err
    assert main(["nerf-evaluator", "--dataset", str(bps_dataset), "--output-dir", str(tmp_path)]) == 2
    assert "missing key /nerf_densities" in capsys.readouterr().err
    assert main(["bps-evaluator", "--dataset", str(bps_dataset), "--output-dir", str(tmp_path), "--batch-size", "1"]) == 2
    err = capsys.readouterr().err
    assert "batch_size >= 2" in err and "Traceback" not in err
    assert main(["bps-evaluator", "--dataset", str(bps_dataset), "--output-dir", str(tmp_path / "t"), "--turn-objects"]) == 2
    err = capsys.readouterr().err
    assert "needs /bpss_turned" in err and "--headings" in err and "Traceback" not in err


def test_export_keeps_the_model_and_drops_the_training_state(bps_dataset, tmp_path, capsys):
    assert main(["bps-evaluator", "--dataset", str(bps_dataset), "--output-dir", str(tmp_path / "run"), "--epochs", "1",
                 "--batch-size", "64", "--val-fraction", "0.34", "--hidden-width", "32", "--block-neurons", "16", "--quiet"]) == 0
    trained = tmp_path / "run" / "best.pt"
    assert main(["export", str(trained), str(tmp_path / "shipped.pt")]) == 0
    assert f"wrote {tmp_path / 'shipped.pt'}" in capsys.readouterr().out
    a, b = load_checkpoint(trained), load_checkpoint(tmp_path / "shipped.pt", "bps_evaluator")
    assert a.training_state is not None and b.training_state is None
    assert b.config == a.config and (b.bps_basis == a.bps_basis).all() and b.metadata["exported_from"] == "best.pt"
    assert b.metadata["train_objects"] == a.metadata["train_objects"]
    for (name, wa), (_, wb) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert (wa == wb).all(), name
    assert main(["export", str(tmp_path / "run" / "last.pt"), str(tmp_path / "from_last.pt")]) == 0
    last = tmp_path / "run" / "last.pt"
    assert load_checkpoint(last).training_state["optimizer"] and load_checkpoint(tmp_path / "from_last.pt").training_state is None
    assert (tmp_path / "from_last.pt").stat().st_size < last.stat().st_size
    assert main(["export", str(trained), str(tmp_path / "half.pt"), "--half"]) == 0
    h = load_checkpoint(tmp_path / "half.pt", "bps_evaluator")
    assert h.metadata["float16_weights"] and next(h.model.parameters()).dtype == torch.float32
    bps, grasps = torch.rand(4, a.config.num_basis_points) * 0.1, torch.randn(4, 37)
    with torch.no_grad():
        full, halved = a.model(bps, grasps), h.model(bps, grasps)
    torch.testing.assert_close(halved, full, atol=2e-2, rtol=0)
    assert not torch.equal(halved, full)  # rounded, not copied
    assert main(["export", str(tmp_path / "missing.pt"), str(tmp_path / "x.pt")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err
