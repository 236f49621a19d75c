"""nerfstudio datasets: layout and keys nerfstudio reads, the OpenGL pose convention, round trip, validation,
and incomplete datasets."""

import json

import numpy as np
import pytest
from PIL import Image

from getagrip_ros.perception.capture_trajectory import look_at
from getagrip_ros.perception.nerf_dataset import (
    NerfDatasetWriter,
    nerfstudio_transform_from_optical,
    optical_from_nerfstudio_transform,
    read_nerf_dataset,
    write_nerf_dataset,
)

H, W = 24, 32
K = np.array([[30.0, 0.0, 16.5], [0.0, 31.0, 11.5], [0.0, 0.0, 1.0]])


def _data(n=4, seed=0):
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (n, H, W, 3), dtype=np.uint8)
    depth = rng.uniform(0.2, 3.0, (n, H, W)).astype(np.float32)
    depth[:, 0, 0] = 0.0
    target = np.array([0.6, 0.0, 0.05])
    poses = np.stack([look_at(target + [0.3 * np.cos(a), 0.3 * np.sin(a), 0.25], target)
                      for a in np.linspace(0, 2 * np.pi, n, endpoint=False)])
    return rgb, depth, poses


def test_round_trip_with_depth_and_nerfstudio_keys(tmp_path):
    rgb, depth, poses = _data()
    path = write_nerf_dataset(tmp_path / "ds", rgb, K, poses, depth, metadata={"object_position_m": [0.6, 0.0, 0.0]})
    meta = json.loads(path.read_text())
    assert meta["camera_model"] == "OPENCV" and (meta["w"], meta["h"]) == (W, H)
    assert (meta["fl_x"], meta["fl_y"], meta["cx"], meta["cy"]) == (30.0, 31.0, 16.5, 11.5)
    assert all(meta[k] == 0.0 for k in ("k1", "k2", "p1", "p2")) and meta["depth_unit_scale_factor"] == 0.001
    assert meta["frames"][2] == {"file_path": "images/frame_00002.png",
                                 "transform_matrix": (poses[2] @ np.diag([1, -1, -1, 1])).tolist(),
                                 "depth_file_path": "depth/frame_00002.png"}
    assert meta["getagrip"]["frame"] == "world" and meta["getagrip"]["object_position_m"] == [0.6, 0.0, 0.0]
    with Image.open(tmp_path / "ds" / "depth" / "frame_00000.png") as im:  # 16-bit millimetres
        assert im.mode == "I;16" and np.array(im)[1, 1] == round(1000 * float(depth[0, 1, 1]))

    ds = read_nerf_dataset(tmp_path / "ds")
    assert len(ds) == 4 and np.array_equal(ds.rgb, rgb) and np.allclose(ds.K, K)
    assert np.allclose(ds.T_world_camera_optical, poses, atol=1e-12)
    assert np.abs(ds.depth_m - depth).max() <= 0.0005 + 1e-6 and ds.depth_m[0, 0, 0] == 0.0
    assert ds.metadata["num_images"] == 4 and ds.metadata["with_depth"]


def test_without_depth_no_depth_keys(tmp_path):
    rgb, _, poses = _data(2)
    meta = json.loads(write_nerf_dataset(tmp_path, rgb, K, poses).read_text())
    assert "depth_unit_scale_factor" not in meta and all("depth_file_path" not in f for f in meta["frames"])
    assert not (tmp_path / "depth").exists() and read_nerf_dataset(tmp_path).depth_m is None


def test_opengl_convention_projects_like_the_optical_frame():
    """A point in front of the camera: optical projection (z forward, y down) == OpenGL projection (z back, y up)."""
    T = look_at(np.array([0.3, -0.2, 0.4]), np.array([0.6, 0.1, 0.0]))
    G = nerfstudio_transform_from_optical(T)
    assert np.allclose(G[:3, 0], T[:3, 0]) and np.allclose(G[:3, 1], -T[:3, 1]) and np.allclose(G[:3, 2], -T[:3, 2])
    assert np.allclose(optical_from_nerfstudio_transform(G), T)
    p = np.array([0.62, 0.13, 0.02, 1.0])
    x, y, z = (np.linalg.inv(T) @ p)[:3]
    xg, yg, zg = (np.linalg.inv(G) @ p)[:3]
    assert z > 0 and zg < 0
    assert np.allclose([K[0, 0] * x / z + K[0, 2], K[1, 1] * y / z + K[1, 2]],
                       [K[0, 0] * xg / -zg + K[0, 2], K[1, 2] - K[1, 1] * yg / -zg])


@pytest.mark.parametrize("change, message", [
    (lambda rgb, K, T, d: (list(rgb[:2]) + [rgb[2][:10]], K, T, None), "differ in size"),
    (lambda rgb, K, T, d: (rgb.astype(np.float32), K, T, None), "uint8"),
    (lambda rgb, K, T, d: (rgb[..., :2], K, T, None), "(H, W, 3)"),
    (lambda rgb, K, T, d: (rgb, K, T[:3], None), "(4, 4, 4) poses"),
    (lambda rgb, K, T, d: (rgb, K * [[-1], [1], [1]], T, None), "focal lengths"),
    (lambda rgb, K, T, d: (rgb, K + [[0, 1, 0], [0, 0, 0], [0, 0, 0]], T, None), "no skew"),
    (lambda rgb, K, T, d: (rgb, K + [[0, 0, 100], [0, 0, 0], [0, 0, 0]], T, None), "outside"),
    (lambda rgb, K, T, d: (rgb, np.full((3, 3), np.nan), T, None), "NaN"),
    (lambda rgb, K, T, d: (rgb, K, T @ np.diag([2.0, 1.0, 1.0, 1.0]), None), "not rigid"),
    (lambda rgb, K, T, d: (rgb, K, np.where(np.eye(4, dtype=bool), np.nan, T), None), "NaN"),
    (lambda rgb, K, T, d: (rgb, K, T, d[:2]), "4 images but 2 depth"),
    (lambda rgb, K, T, d: (rgb, K, T, d[:, :5]), "depth 0 has shape"),
    (lambda rgb, K, T, d: (rgb, K, T, -d), "negative"),
])
def test_invalid_inputs_are_refused_before_writing(tmp_path, change, message):
    rgb, depth, poses = _data()
    with pytest.raises(ValueError) as info:
        write_nerf_dataset(tmp_path / "ds", *change(rgb, K, poses, depth))
    assert message in str(info.value)
    assert not (tmp_path / "ds").exists()


def test_incomplete_and_existing_datasets_are_recognised(tmp_path):
    rgb, depth, poses = _data(3)
    writer = NerfDatasetWriter(tmp_path / "ds")
    writer.add(rgb[0], poses[0], depth[0])
    with pytest.raises(ValueError, match="lacks depth"):
        writer.add(rgb[1], poses[1])
    with pytest.raises(FileNotFoundError, match="incomplete dataset"):  # frames, no transforms.json
        read_nerf_dataset(tmp_path / "ds")
    with pytest.raises(FileExistsError, match="incomplete dataset"):
        NerfDatasetWriter(tmp_path / "ds")
    writer.discard()
    assert not (tmp_path / "ds").exists()
    with pytest.raises(FileNotFoundError, match="not a dataset"):
        read_nerf_dataset(tmp_path)

    write_nerf_dataset(tmp_path / "ds", rgb, K, poses, depth)
    with pytest.raises(FileExistsError, match="already holds a dataset"):
        write_nerf_dataset(tmp_path / "ds", rgb, K, poses)
    write_nerf_dataset(tmp_path / "ds", rgb[:2], K, poses[:2], overwrite=True)  # stale frames and depth go
    assert sorted(p.name for p in (tmp_path / "ds").rglob("*.png")) == ["frame_00000.png", "frame_00001.png"]
    assert len(read_nerf_dataset(tmp_path / "ds")) == 2
    assert not list((tmp_path / "ds").glob(".*tmp"))


def test_malformed_transforms_are_refused(tmp_path):
    rgb, _, poses = _data(2)
    path = write_nerf_dataset(tmp_path, rgb, K, poses)
    meta = json.loads(path.read_text())
    meta["frames"][1]["transform_matrix"][0][0] = 3.0
    path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="frame 1 transform_matrix is not rigid"):
        read_nerf_dataset(tmp_path)
    del meta["fl_x"]
    path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="malformed"):
        read_nerf_dataset(tmp_path)
    write_nerf_dataset(tmp_path / "b", rgb, K, poses)
    (tmp_path / "b" / "images" / "frame_00001.png").unlink()
    with pytest.raises(FileNotFoundError, match="image of frame 1 listed in transforms.json is missing"):
        read_nerf_dataset(tmp_path / "b")
