"""NeRF backend: nerfstudio imports offline beside CPU torch, the Get a Grip settings reach nerfstudio, a real
(short) nerfacto training on simulated images runs, saves, reloads and is queried in the world frame."""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from getagrip_ros.perception.nerf.config import METADATA_FILE, NERF_PROFILES, NerfTrainConfig, nerf_profile, trainer_config
from getagrip_ros.perception.nerf.train import check_dataset, nerf_frame
from getagrip_ros.perception.nerf_dataset import write_nerf_dataset
from getagrip_ros.status import StageError, StatusCode


def test_nerfstudio_imports_offline_with_torchvision_beside_cpu_torch():
    from getagrip_ros.perception.nerf.compat import OfflineLpips, import_nerfstudio

    import_nerfstudio()
    import torchvision.utils  # noqa: F401  (nerfstudio's pipeline imports it)

    assert math.isnan(float(OfflineLpips()(torch.zeros(1, 3, 8, 8), torch.zeros(1, 3, 8, 8))))


def test_profiles_and_the_get_a_grip_settings_reach_nerfstudio(tmp_path):
    assert NERF_PROFILES["paper"].num_iterations == NERF_PROFILES["cpu"].num_iterations == 400
    assert NERF_PROFILES["paper"].train_rays_per_batch == 4096  # nerfacto's default, as published
    with pytest.raises(ValueError, match="unknown NeRF profile"):
        nerf_profile("fast")
    with pytest.raises(ValueError, match="num_iterations"):
        NerfTrainConfig(num_iterations=0)
    config = trainer_config(tmp_path, tmp_path / "out", nerf_profile("paper"))
    model, parser = config.pipeline.model, config.pipeline.datamanager.dataparser
    assert model.disable_scene_contraction and model.implementation == "torch"
    assert (parser.auto_scale_poses, parser.center_method, parser.orientation_method, parser.scale_factor) == \
        (False, "none", "none", 1.0)
    assert config.max_num_iterations == 400 and config.pipeline.datamanager.train_num_rays_per_batch == 4096
    assert type(model).__name__ == "OfflineNerfactoModelConfig"


def _dataset(tmp_path, n=6, rgb_value=None, same_position=False):
    rng = np.random.default_rng(0)
    K = np.array([[40.0, 0, 32], [0, 40.0, 24], [0, 0, 1]])
    poses = np.repeat(np.eye(4)[None], n, 0)
    for i in range(n):
        poses[i, :3, 3] = [0.5, 0.0, 0.3] if same_position else [0.5 + 0.3 * np.cos(i), 0.3 * np.sin(i), 0.3]
    rgb = rng.integers(0, 255, (n, 48, 64, 3), dtype=np.uint8) if rgb_value is None else np.full((n, 48, 64, 3), rgb_value, np.uint8)
    write_nerf_dataset(tmp_path / "ds", rgb, K, poses, metadata={"object_position_m": [0.5, 0.0, 0.0]})
    return tmp_path / "ds"


def test_bad_datasets_are_refused_with_reasons(tmp_path):
    with pytest.raises(StageError, match="transforms.json is missing") as err:
        check_dataset(tmp_path)
    assert err.value.code == StatusCode.INVALID_GOAL
    with pytest.raises(StageError, match="too few images"):
        check_dataset(_dataset(tmp_path / "a", n=3))
    with pytest.raises(StageError, match="same position"):
        check_dataset(_dataset(tmp_path / "b", same_position=True))
    meta = check_dataset(_dataset(tmp_path / "c"))
    assert np.allclose(nerf_frame(meta)[:3, 3], [0.5, 0.0, 0.0])  # NeRF origin on the table below the object


@pytest.fixture(scope="module")
def sim_dataset(mug_datasets):
    return mug_datasets / "mug"


@pytest.fixture(scope="module")
def trained(sim_dataset, tmp_path_factory):
    from getagrip_ros.perception.nerf.train import train_nerf

    progress = []
    config = nerf_profile("cpu", num_iterations=12, train_rays_per_batch=256, eval_rays_per_batch=256)
    result = train_nerf(sim_dataset, tmp_path_factory.mktemp("runs"), config, progress.append)
    return result, progress


def test_short_training_reports_progress_and_writes_a_nerfstudio_run(trained, sim_dataset):
    result, progress = trained
    assert [p.iteration for p in progress] == list(range(1, 13))
    assert all(p.num_iterations == 12 and math.isfinite(p.loss) for p in progress)
    assert progress[-1].loss < progress[0].loss
    run = result.config_path.parent
    assert result.config_path.is_file() and result.checkpoint_path.is_file()
    assert (run / "dataparser_transforms.json").is_file()
    meta = json.loads((run / METADATA_FILE).read_text())
    assert np.allclose(np.array(meta["T_world_nerf"])[:3, 3], [0.55, 0.0, 0.0])
    assert meta["dataset_dir"] == str(sim_dataset.resolve())
    assert math.isfinite(result.eval_psnr_db)  # 10% of the images were held out


def test_loaded_nerf_is_queried_in_the_world_frame(trained):
    from getagrip_ros.perception.nerf.model import load_nerf

    nerf = load_nerf(trained[0].config_path)
    assert np.allclose(nerf.T_world_nerf[:3, 3].numpy(), [0.55, 0.0, 0.0])
    half = NERF_PROFILES["cpu"].scene_half_extent_m
    inside = torch.tensor([[0.55, 0.0, 0.05], [0.55 + half - 0.05, 0.0, 0.1]])
    outside = torch.tensor([[0.55 + half + 0.05, 0.0, 0.1], [0.55, 0.0, half + 0.05]])
    assert (nerf.density(inside) > 0).all()
    assert (nerf.density(outside) == 0).all()  # no density outside the scene box (no contraction)
    K = np.array([[20.0, 0, 8], [0, 20.0, 6], [0, 0, 1]])
    T = np.eye(4)
    T[:3, 3] = [0.55, 0.0, 0.5]
    T[:3, :3] = np.diag([1.0, -1.0, -1.0])  # looking straight down
    render = nerf.render_image(T, K, 16, 12)
    assert render.rgb.shape == (192, 3) and render.depth_m.shape == (192,)
    assert ((render.accumulation >= 0) & (render.accumulation <= 1 + 1e-5)).all()
    # points lie on their rays: straight below the camera, at the rendered depth
    assert torch.allclose(render.points_world_m[:, 2], 0.5 - render.depth_m * 1.0 /
                          torch.sqrt(1 + ((torch.arange(192) % 16 + 0.5 - 8) / 20) ** 2
                                     + ((torch.arange(192) // 16 + 0.5 - 6) / 20) ** 2), atol=1e-4)


def test_training_stops_on_cancel_and_saves_nothing(sim_dataset, tmp_path):
    from getagrip_ros.perception.nerf.train import train_nerf

    seen = []
    with pytest.raises(StageError, match="cancelled after 3 of 50") as err:
        train_nerf(sim_dataset, tmp_path, nerf_profile("cpu", num_iterations=50, train_rays_per_batch=64),
                   seen.append, should_stop=lambda: len(seen) >= 3)
    assert err.value.code == StatusCode.CANCELED
    assert not list(tmp_path.rglob("*.ckpt"))


def test_missing_or_broken_nerf_configs_are_refused(tmp_path):
    from getagrip_ros.perception.nerf.model import load_nerf

    with pytest.raises(StageError, match="no NeRF config"):
        load_nerf(tmp_path / "config.yml")
    (tmp_path / "config.yml").write_text("{not yaml: [")
    with pytest.raises(StageError, match="config.yml is not a NeRF config this stack reads: ParserError"):
        load_nerf(tmp_path / "config.yml")


def test_profiles_differ_only_where_documented():
    paper, cpu = dataclasses.asdict(NERF_PROFILES["paper"]), dataclasses.asdict(NERF_PROFILES["cpu"])
    changed = {k for k in paper if paper[k] != cpu[k]}
    assert changed <= {"train_rays_per_batch", "eval_rays_per_batch", "log2_hashmap_size", "num_proposal_samples_per_ray",
                       "num_nerf_samples_per_ray", "far_plane_m", "near_plane_m", "scene_half_extent_m",
                       "eval_num_rays_per_chunk", "camera_optimizer"}
