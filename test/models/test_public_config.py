"""The public NeRF evaluator named by its config.yaml (tyro's YAML, read as plain data): the checkpoint beside it,
the network it describes checked against the weights, its finger grid used; anything else refused with the reason."""

import os
import time

import pytest
import torch

from getagrip_ros.models.checkpoints import CheckpointError, load_checkpoint
from getagrip_ros.models.nerf_evaluator import NerfEvaluator, NerfEvaluatorConfig
from getagrip_ros.planning.evaluators import NerfGraspEvaluator
from getagrip_ros.robot.allegro import AllegroHand

SMALL = NerfEvaluatorConfig(conv_channels=(4, 8), global_conv_channels=(4, 6), mlp_hidden=(16,))


def tyro_yaml(model: str = "CnnXyzGlobalCnnModelConfig", conv: str = "[4, 8]", spacing_mm: float = 4.0,
              width_mm: float = 60.0, fingers: int = 4) -> str:
    """A config.yaml as the public training code writes it with tyro (the tags it uses, a shared anchor)."""
    global_conv = "  global_conv_channels: !!python/tuple\n  - 4\n  - 6\n" if "Global" in model else ""
    conv_items = "".join(f"  - {c}\n" for c in conv.strip("[]").split(", "))
    return f"""# tyro YAML.
!dataclass:NerfEvaluatorModelConfig
checkpoint_workspace: !dataclass:CheckpointWorkspaceConfig
  input_dir: null
  output_dir: !!python/object/apply:pathlib.PosixPath
  - /
  - data
  - models
  - nerf_evaluator_model
  - '2024-05-01'
model_config: !dataclass:{model}
  conv_channels: !!python/tuple
{conv_items}{global_conv}  mlp_hidden_layers: &id001 !!python/tuple
  - 16
  n_fingers: {fingers}
nerf_grasp_dataset_config: !dataclass:NerfGraspDatasetConfig
  fingertip_config: !dataclass:EvenlySpacedFingertipConfig
    distance_between_pts_mm: {spacing_mm}
    finger_height_mm: 60.0
    finger_width_mm: {width_mm}
    grasp_depth_mm: 80.0
    n_fingers: {fingers}
  output_filepath: null
random_seed: 42
task_type: !enum:TaskType 'Y_PICK_AND_Y_COLL_AND_Y_PGS'
training: !dataclass:TrainingConfig
  betas: !!python/tuple
  - 0.9
  - 0.999
  lr: 0.0001
"""


def public_run(folder, config: NerfEvaluatorConfig = SMALL, name: str = "ckpt_0010.pth", **yaml_options):
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"epoch": 10, "nerf_evaluator_model": NerfEvaluator(config).state_dict(), "optimizer": {}},
               folder / name)
    (folder / "config.yaml").write_text(tyro_yaml(**yaml_options))
    return folder / "config.yaml"


def test_the_config_yaml_loads_its_checkpoint_with_its_finger_grid(tmp_path):
    loaded = load_checkpoint(public_run(tmp_path / "run"), "nerf_evaluator")
    assert loaded.source == "public" and loaded.config.conv_channels == (4, 8) and loaded.config.use_global
    assert loaded.metadata["checkpoint"].endswith("ckpt_0010.pth")
    evaluator = NerfGraspEvaluator(loaded, AllegroHand())
    grid = evaluator.finger_grid  # 4 mm apart over 60 x 60 x 80 mm: 16 x 16 x 21 points (the default is 31 x 31 x 41)
    assert (grid.num_x, grid.num_y, grid.num_z) == (16, 16, 21)
    assert (grid.width_m, grid.height_m, grid.depth_m) == pytest.approx((0.06, 0.06, 0.08))
    # the public code's grid (2 mm) gives the default one
    assert NerfGraspEvaluator(load_checkpoint(public_run(tmp_path / "two", spacing_mm=2.0)), AllegroHand()).finger_grid \
        == NerfGraspEvaluator(load_checkpoint(tmp_path / "two" / "ckpt_0010.pth"), AllegroHand()).finger_grid


def test_the_newest_checkpoint_beside_the_yaml_is_the_one(tmp_path):
    path = public_run(tmp_path / "run", NerfEvaluatorConfig(conv_channels=(2, 2), global_conv_channels=(4, 6),
                                                            mlp_hidden=(16,)), name="ckpt_0005.pth")
    old = time.time() - 100
    os.utime(tmp_path / "run" / "ckpt_0005.pth", (old, old))
    public_run(tmp_path / "run", name="ckpt_0010.pth")
    assert load_checkpoint(path).metadata["checkpoint"].endswith("ckpt_0010.pth")


@pytest.mark.parametrize("options,words", [
    ({"conv": "[16, 32]"}, "describes the network"),
    ({"model": "CnnXyzModelConfig"}, "describes the network"),  # no global grid in the yaml; the weights have one
    ({"width_mm": 61.0}, "not whole multiples"),
    ({"fingers": 3}, "4 fingers"),
    ({"model": "SomeOtherModelConfig"}, "not one of the public NeRF evaluators"),
])
def test_a_yaml_that_does_not_match_or_cannot_be_run_is_refused(tmp_path, options, words):
    with pytest.raises(CheckpointError, match=words):
        load_checkpoint(public_run(tmp_path / "run", **options), "nerf_evaluator")


def test_the_yaml_is_read_as_data_only(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "run").mkdir()
    torch.save({"nerf_evaluator_model": NerfEvaluator(SMALL).state_dict()}, tmp_path / "run" / "ckpt.pth")
    evil = tmp_path / "run" / "config.yaml"
    evil.write_text(tyro_yaml() + f"hook: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(CheckpointError, match="not plain YAML data"):
        load_checkpoint(evil)
    assert not marker.exists()
    with pytest.raises(CheckpointError, match="not a bps_evaluator"):
        load_checkpoint(public_run(tmp_path / "ok"), "bps_evaluator")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.yml").write_text(tyro_yaml())
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "empty" / "config.yml")
