"""Files users and clients name are read without running anything in them: crafted NeRF configs and checkpoints,
pickled grasp sets, and paths outside the configured roots are refused with reasons; real files still load."""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from getagrip_ros.safe_files import UnsafeFile, check_under_roots, load_npy_arrays
from getagrip_ros.status import StageError, StatusCode


class Marker:
    """Unpickling or constructing this runs code: it writes the marker file named in its argument."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _nerf_run(tmp_path: Path) -> Path:
    """A genuine nerfstudio config.yml (as train_nerf writes it), without training."""
    from getagrip_ros.perception.nerf import offline_nerfacto  # noqa: F401 - nerfstudio, imported offline
    from getagrip_ros.perception.nerf.config import nerf_profile, trainer_config

    config = trainer_config(tmp_path / "dataset", tmp_path / "runs", nerf_profile("cpu"))
    path = tmp_path / "runs" / "object" / "nerfacto" / "stamp" / "config.yml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.dump(config), "utf8")
    return path


def test_a_genuine_nerfstudio_config_loads_and_crafted_ones_run_nothing(tmp_path):
    from getagrip_ros.perception.nerf.model import load_nerf
    from getagrip_ros.perception.nerf.safe_config import load_nerf_config

    genuine = _nerf_run(tmp_path)
    config = load_nerf_config(genuine)
    assert type(config).__name__ == "TrainerConfig" and config.pipeline.model._target.__name__ == "OfflineNerfactoModel"
    with pytest.raises(StageError, match="no checkpoint next to") as err:
        load_nerf(genuine)  # the config is fine; the run has no checkpoint
    assert err.value.code == StatusCode.INVALID_GOAL

    marker = tmp_path / "ran"
    text = genuine.read_text()
    crafted = {
        "os.system": f'!!python/object/apply:os.system ["touch {marker}"]\n',
        "a module": "!!python/module:os\n",
        "a function by name": "_target: !!python/name:nerfstudio.utils.writer.put_scalar ''\n",
        "object/new": f'!!python/object/new:os.system ["touch {marker}"]\n',
        "an allowed-module call": '!!python/object/apply:nerfstudio.utils.install_checks.check_ffmpeg_installed []\n',
        "another model": re.sub(r"_target: !!python/name:getagrip_ros\.perception\.nerf\.offline_nerfacto\.OfflineNerfactoModel",
                                "_target: !!python/name:nerfstudio.viewer.viewer.Viewer", text, count=1),
        "passwd": "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n",
    }
    assert crafted["another model"] != text
    for what, content in crafted.items():
        path = tmp_path / f"{what.replace(' ', '_').replace('/', '_')}.yml"
        path.write_text(content)
        with pytest.raises(StageError) as err:
            load_nerf(path)
        assert err.value.code == StatusCode.INVALID_GOAL and str(path) in err.value.reason, (what, err.value.reason)
    assert not marker.exists()


def test_nerf_checkpoints_load_weights_only(tmp_path):
    from getagrip_ros.perception.nerf.safe_config import load_nerf_checkpoint

    good = tmp_path / "good.ckpt"
    torch.save({"step": 3, "pipeline": {"w": torch.ones(2)}, "scalars": np.float64(1.5)}, good)
    assert load_nerf_checkpoint(good)["step"] == 3
    evil = tmp_path / "evil.ckpt"
    torch.save({"step": Marker(str(tmp_path / "ran"))}, evil)
    with pytest.raises(pickle.UnpicklingError):
        load_nerf_checkpoint(evil)
    assert not (tmp_path / "ran").exists()


def test_pickled_grasp_sets_build_arrays_only(tmp_path, tiny_models):
    from getagrip_ros.planning.samplers import load_grasp_set

    public = {"trans": np.zeros((3, 3)), "rot": np.tile(np.eye(3), (3, 1, 1)), "joint_angles": np.zeros((3, 16)),
              "grasp_orientations": np.tile(np.eye(3), (3, 4, 1, 1)), "y_PGS": np.ones(3, np.float32)}
    np.save(tmp_path / "public.npy", public, allow_pickle=True)
    assert len(load_grasp_set(tmp_path / "public.npy")) == 3
    assert set(load_npy_arrays(tmp_path / "public.npy")) == set(public)
    np.save(tmp_path / "plain.npy", np.arange(4.0))
    assert load_npy_arrays(tmp_path / "plain.npy").tolist() == [0.0, 1.0, 2.0, 3.0]

    marker = tmp_path / "ran"
    np.save(tmp_path / "evil.npy", {"trans": Marker(str(marker))}, allow_pickle=True)
    with pytest.raises(UnsafeFile, match="posix.system is not allowed|os.system is not allowed"):
        load_npy_arrays(tmp_path / "evil.npy")
    with pytest.raises(StageError, match="evil.npy") as err:
        load_grasp_set(tmp_path / "evil.npy")
    assert err.value.code == StatusCode.INTERNAL_ERROR and not marker.exists()
    (tmp_path / "set.pkl").write_bytes(pickle.dumps(Marker(str(marker))))
    with pytest.raises(StageError, match="cannot read the fixed grasp set .*set.pkl: expected our .npz or the public .npy"):
        load_grasp_set(tmp_path / "set.pkl")
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY junk")
    with pytest.raises(StageError, match="junk.npy"):
        load_grasp_set(tmp_path / "junk.npy")
    assert not marker.exists()
    assert len(load_grasp_set(tiny_models.fixed_grasps)) > 0  # ours (.npz) as before
    public["trans"][1] = np.nan  # a set that describes no grasp
    np.save(tmp_path / "nan.npy", public, allow_pickle=True)
    with pytest.raises(StageError, match="nan.npy has 1 of 3 grasps with NaN or inf"):
        load_grasp_set(tmp_path / "nan.npy")


def test_paths_from_goals_must_lie_under_the_configured_roots(tmp_path):
    root = tmp_path / "runs"
    (root / "a").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    assert check_under_roots(root / "a" / "config.yml", [str(root)], "the NeRF run") == (root / "a" / "config.yml").resolve()
    with pytest.raises(UnsafeFile, match="the NeRF run .* is outside the configured roots"):
        check_under_roots(tmp_path / "outside" / "config.yml", [str(root)], "the NeRF run")
    with pytest.raises(UnsafeFile):
        check_under_roots(root / ".." / "outside" / "config.yml", [str(root)], "the NeRF run")
    (root / "link").symlink_to(tmp_path / "outside")
    with pytest.raises(UnsafeFile):  # a link inside the root that leads out of it
        check_under_roots(root / "link" / "config.yml", [str(root)], "the NeRF run")
    with pytest.raises(UnsafeFile):
        check_under_roots(root / "a", [], "the NeRF run")
