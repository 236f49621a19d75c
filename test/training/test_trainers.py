"""Trainers on tiny synthetic datasets: learning, checkpoints, resume, history, loss curves, bad input."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from getagrip_ros.models.checkpoints import load_checkpoint
from getagrip_ros.training import loop as loop_module
from getagrip_ros.training.datasets import (
    finger_grid_inputs,
    global_grid_inputs,
    read_bps_dataset,
    read_nerf_grasp_dataset,
    write_bps_dataset,
    write_nerf_grasp_dataset,
)
from getagrip_ros.training.split import split_by_object
from getagrip_ros.training.trainers import train_bps_evaluator, train_bps_sampler, train_nerf_evaluator

from .conftest import bps_arrays, nerf_arrays, tiny_evaluator, tiny_nerf, tiny_sampler

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _bps_val_loss(model, data, val):
    with torch.no_grad():
        pred = model(torch.from_numpy(data.bpss_m[data.grasp_bps_idx[val]]), torch.from_numpy(data.grasps[val]))
    return float(torch.nn.functional.mse_loss(pred, torch.from_numpy(data.labels[val])))


def test_bps_evaluator_learns_and_its_checkpoint_reloads(bps_dataset, tmp_path):
    result = train_bps_evaluator(bps_dataset, tmp_path, tiny_evaluator(epochs=8), progress=False)
    history = json.loads(result.history_path.read_text())
    assert history["epoch"] == list(range(1, 9)) and result.epochs_run == result.epochs_completed == 8
    assert history["val_loss"][-1] < 0.5 * history["val_loss"][0]
    assert history["train_loss"][-1] < 0.5 * history["train_loss"][0]

    data = read_bps_dataset(bps_dataset)
    last = load_checkpoint(result.last_checkpoint, "bps_evaluator")
    assert last.config.num_basis_points == 32 and last.config.hidden_width == 32
    np.testing.assert_array_equal(last.bps_basis, data.basis_points_m)
    split = split_by_object(data.grasp_object_codes, 0.34, 0.0, seed=0)
    assert last.metadata["val_objects"] == list(split.val_objects) and last.metadata["epoch"] == 8
    assert not set(last.metadata["val_objects"]) & set(last.metadata["train_objects"])
    # the reloaded weights give exactly the validation loss recorded during training
    assert _bps_val_loss(last.model, data, split.val) == pytest.approx(history["val_loss"][-1], rel=1e-5)
    best = load_checkpoint(result.best_checkpoint, "bps_evaluator")
    assert best.metadata["val_loss"] == pytest.approx(min(history["val_loss"])) == pytest.approx(result.best_val_loss)
    assert set(last.training_state) >= {"optimizer", "epoch", "history", "run_config"}

    png = result.loss_curves_path.read_bytes()
    assert result.loss_curves_path.name == "loss_curves.png" and png[:8] == PNG_SIGNATURE and len(png) > 5000


def test_loss_curves_are_drawn_after_the_first_and_last_epoch_and_at_most_every_interval(bps_dataset, tmp_path,
                                                                                        monkeypatch):
    drawn = []
    draw = loop_module.write_loss_curves
    monkeypatch.setattr(loop_module, "write_loss_curves",
                        lambda history, *a: drawn.append(history["epoch"][-1]) or draw(history, *a))
    monkeypatch.setattr(loop_module, "LOSS_CURVES_EVERY_S", 1e6)
    result = train_bps_evaluator(bps_dataset, tmp_path / "rare", tiny_evaluator(epochs=5), progress=False)
    assert drawn == [1, 5] and result.loss_curves_path.read_bytes()[:8] == PNG_SIGNATURE
    monkeypatch.setattr(loop_module, "LOSS_CURVES_EVERY_S", 0.0)
    drawn.clear()
    train_bps_evaluator(bps_dataset, tmp_path / "every", tiny_evaluator(epochs=3), progress=False)
    assert drawn == [1, 2, 3]


def test_resume_continues_from_last_checkpoint_and_equals_an_uninterrupted_run(bps_dataset, tmp_path):
    first = train_bps_evaluator(bps_dataset, tmp_path / "resumed", tiny_evaluator(epochs=2), progress=False)
    two = json.loads(first.history_path.read_text())
    resumed = train_bps_evaluator(bps_dataset, tmp_path / "resumed", tiny_evaluator(epochs=4), progress=False)
    four = json.loads(resumed.history_path.read_text())
    assert resumed.epochs_run == 2 and resumed.epochs_completed == 4 and four["epoch"] == [1, 2, 3, 4]
    assert four["train_loss"][:2] == two["train_loss"] and four["val_loss"][:2] == two["val_loss"]
    straight = train_bps_evaluator(bps_dataset, tmp_path / "straight", tiny_evaluator(epochs=4), progress=False)
    np.testing.assert_allclose(json.loads(straight.history_path.read_text())["val_loss"], four["val_loss"], rtol=1e-5)

    again = train_bps_evaluator(bps_dataset, tmp_path / "resumed", tiny_evaluator(epochs=4), progress=False)
    assert again.epochs_run == 0 and again.epochs_completed == 4
    assert load_checkpoint(tmp_path / "resumed" / "last.pt").training_state["epoch"] == 4


def test_resume_with_other_settings_fails_clearly(bps_dataset, tmp_path):
    train_bps_evaluator(bps_dataset, tmp_path, tiny_evaluator(epochs=1), progress=False)
    with pytest.raises(ValueError, match=r"other settings \(loop.lr: 0.003 in the checkpoint, 0.01 now\)"):
        train_bps_evaluator(bps_dataset, tmp_path, tiny_evaluator(epochs=2, lr=1e-2), progress=False)
    with pytest.raises(ValueError, match="holds a bps_evaluator, not a bps_sampler"):
        train_bps_sampler(bps_dataset, tmp_path, tiny_sampler(epochs=2), progress=False)
    # epochs and device may change
    assert train_bps_evaluator(bps_dataset, tmp_path, tiny_evaluator(epochs=2), progress=False).epochs_run == 1


def test_turn_augmentation_shows_training_objects_at_other_headings_and_validates_unturned(tmp_path):
    arrays = bps_arrays()
    one = write_bps_dataset(tmp_path / "one.h5", **arrays, bpss_turned_m=arrays["bpss_m"][:, None])
    turned = np.stack([arrays["bpss_m"], arrays["bpss_m"][::-1], arrays["bpss_m"][:, ::-1]], axis=1)
    three = write_bps_dataset(tmp_path / "three.h5", **arrays, bpss_turned_m=turned)
    config = dataclasses.replace(tiny_evaluator(epochs=2), turn_objects=True)

    def history(dataset, cfg, name):
        return json.loads(train_bps_evaluator(dataset, tmp_path / name, cfg, progress=False).history_path.read_text())

    plain = history(one, tiny_evaluator(epochs=2), "plain")
    # one heading = the observed one: the same training as without turns
    assert history(one, config, "one")["train_loss"] == pytest.approx(plain["train_loss"], rel=1e-6)
    result = train_bps_evaluator(three, tmp_path / "three", config, progress=False)
    three_history = json.loads(result.history_path.read_text())
    assert three_history["train_loss"] != pytest.approx(plain["train_loss"], rel=1e-3)
    data = read_bps_dataset(three)
    split = split_by_object(data.grasp_object_codes, 0.34, 0.0, seed=0)
    last = load_checkpoint(result.last_checkpoint, "bps_evaluator")  # validation saw the observed heading
    assert _bps_val_loss(last.model, data, split.val) == pytest.approx(three_history["val_loss"][-1], rel=1e-5)
    with pytest.raises(ValueError, match="headings"):
        train_bps_evaluator(write_bps_dataset(tmp_path / "none.h5", **arrays), tmp_path / "none", config, progress=False)


def test_bps_sampler_trains_on_normalised_good_grasps(bps_dataset, tmp_path):
    result = train_bps_sampler(bps_dataset, tmp_path, tiny_sampler(epochs=3), progress=False)
    history = json.loads(result.history_path.read_text())
    assert len(history["val_loss"]) == 3 and np.isfinite(history["val_loss"]).all()
    loaded = load_checkpoint(result.last_checkpoint, "bps_sampler")
    data = read_bps_dataset(bps_dataset)
    split = split_by_object(data.grasp_object_codes, 0.34, 0.0, seed=0)
    good_train = split.train[data.labels[split.train, 2] >= 0.9]
    assert loaded.metadata["num_train_grasps"] == len(good_train) and loaded.metadata["y_PGS_threshold"] == 0.9
    np.testing.assert_allclose(loaded.grasp_mean.numpy(), data.grasps[good_train].mean(0), atol=1e-5)
    np.testing.assert_allclose(loaded.grasp_std.numpy(), data.grasps[good_train].std(0, ddof=1), rtol=1e-4)
    assert loaded.metadata["diffusion"]["num_timesteps"] == 100
    eps = loaded.model(torch.zeros(5, 37), torch.full((5,), 10.0), torch.from_numpy(data.bpss_m[:5]))
    assert eps.shape == (5, 37) and torch.isfinite(eps).all()


def test_bps_sampler_rejects_a_dataset_without_good_grasps(tmp_path):
    arrays = bps_arrays(grasps_per_object=10)
    arrays["y_PGS"] = np.minimum(arrays["y_PGS"], 0.5)
    path = write_bps_dataset(tmp_path / "bad.h5", **arrays)
    with pytest.raises(ValueError, match=r"no grasps with y_PGS >= 0.9 to train the sampler on \(max y_PGS 0.500\)"):
        train_bps_sampler(path, tmp_path / "out", tiny_sampler(), progress=False)
    assert not (tmp_path / "out" / "last.pt").exists()


def test_trainers_reject_missing_files_and_empty_splits(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.h5"):
        train_bps_evaluator(tmp_path / "nothing.h5", tmp_path / "out", tiny_evaluator(), progress=False)
    one_object = write_bps_dataset(tmp_path / "one.h5", **bps_arrays(grasps_per_object=20, num_objects=1))
    with pytest.raises(ValueError, match="1 object.*cannot give a non-empty train split plus 1 validation"):
        train_bps_evaluator(one_object, tmp_path / "out", tiny_evaluator(), progress=False)


def test_nerf_evaluator_learns_and_its_checkpoint_reloads(nerf_dataset, tmp_path):
    result = train_nerf_evaluator(nerf_dataset, tmp_path, tiny_nerf(epochs=8), progress=False)
    history = json.loads(result.history_path.read_text())
    assert history["val_loss"][-1] < 0.6 * history["val_loss"][0]
    loaded = load_checkpoint(result.last_checkpoint, "nerf_evaluator")
    assert loaded.metadata["finger_grid"]["num_x"] == 8 and loaded.metadata["global_grid"]["size_m"] == 0.3
    data = read_nerf_grasp_dataset(nerf_dataset)
    val = np.sort(split_by_object(data.object_codes, 0.34, 0.0, seed=0).val)
    fingers = finger_grid_inputs(torch.from_numpy(data.read_nerf_densities(val)), torch.from_numpy(data.T_object_finger[val]),
                                 data.finger_grid)
    glob = global_grid_inputs(torch.from_numpy(data.nerf_densities_global), data.global_grid)[data.nerf_densities_global_idx[val]]
    with torch.no_grad():
        pred = loaded.model(fingers, glob)
    mse = float(torch.nn.functional.mse_loss(pred, torch.from_numpy(data.labels[val])))
    assert mse == pytest.approx(history["val_loss"][-1], rel=1e-4)


def test_nerf_evaluator_without_global_grids(tmp_path):
    path = write_nerf_grasp_dataset(tmp_path / "local.h5", **nerf_arrays(grasps_per_object=6, with_global=False))
    with pytest.raises(ValueError, match="no /nerf_densities_global"):
        train_nerf_evaluator(path, tmp_path / "global", tiny_nerf(epochs=1), progress=False)
    result = train_nerf_evaluator(path, tmp_path / "local", tiny_nerf(use_global=False, epochs=1), progress=False)
    assert load_checkpoint(result.last_checkpoint).config.use_global is False
    config = tiny_nerf(use_global=False, epochs=1)
    deep = dataclasses.replace(config, model=dataclasses.replace(config.model, conv_channels=(2, 2, 2, 2)))
    with pytest.raises(ValueError, match=r"finger grid of size \(8, 8, 8\) is too small for 4 conv layers"):
        train_nerf_evaluator(path, tmp_path / "deep", deep, progress=False)
