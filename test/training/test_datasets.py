"""HDF5 grasp datasets: round trips, public-layout files, and clear errors naming the bad key."""

import h5py
import numpy as np
import pytest
import torch

from getagrip_ros.models.bps_evaluator import LABEL_NAMES
from getagrip_ros.perception.density import FingerGridConfig, GlobalGridConfig
from getagrip_ros.training.datasets import (
    DatasetError,
    finger_grid_inputs,
    global_grid_inputs,
    read_bps_dataset,
    read_nerf_grasp_dataset,
    write_bps_dataset,
    write_nerf_grasp_dataset,
)

from .conftest import GRID, NUM_OBJECTS, bps_arrays, nerf_arrays


def test_bps_dataset_round_trip(tmp_path):
    arrays = bps_arrays(grasps_per_object=4)
    path = write_bps_dataset(tmp_path / "bps.h5", **arrays)
    data = read_bps_dataset(path)
    np.testing.assert_allclose(data.bpss_m, arrays["bpss_m"], rtol=1e-6)
    np.testing.assert_allclose(data.grasps, arrays["grasps"], rtol=1e-6)
    np.testing.assert_allclose(data.labels, np.stack([arrays[n] for n in LABEL_NAMES], 1), rtol=1e-6)
    assert data.grasp_object_codes.tolist() == np.repeat(arrays["object_codes"], 4).tolist()
    assert data.grasp_idx.tolist() == [0, 1, 2, 3] * NUM_OBJECTS
    with h5py.File(path) as f:  # the public layout
        assert f.attrs["num_grasps"] == 4 * NUM_OBJECTS
        assert f["/object_state"].shape == (4 * NUM_OBJECTS, 13) and f["/point_cloud_filepath"].shape == (NUM_OBJECTS,)
    assert not list(tmp_path.glob(".*tmp"))
    assert data.bpss_turned_m is None
    turned = np.stack([arrays["bpss_m"], 2 * arrays["bpss_m"]], axis=1)
    data = read_bps_dataset(write_bps_dataset(tmp_path / "turned.h5", **arrays, bpss_turned_m=turned))
    np.testing.assert_allclose(data.bpss_turned_m, turned, rtol=1e-6)


def test_bps_reader_accepts_a_public_style_file(tmp_path):
    """Fixed-length byte strings and no optional keys, as h5py writes numpy bytes arrays."""
    arrays = bps_arrays(grasps_per_object=3)
    path = tmp_path / "public.h5"
    with h5py.File(path, "w") as f:
        f["/basis_points"], f["/bpss"], f["/grasps"] = arrays["basis_points_m"], arrays["bpss_m"], arrays["grasps"]
        f["/object_code"] = np.array(arrays["object_codes"], dtype="S")
        f["/grasp_bps_idx"] = arrays["grasp_bps_idx"].astype(np.int32)
        for name in LABEL_NAMES:
            f[f"/{name}"] = arrays[name]
    data = read_bps_dataset(path)
    assert data.object_codes.tolist() == arrays["object_codes"] and data.num_grasps == 3 * NUM_OBJECTS
    assert (data.object_states[:, 6] == 1).all() and (data.object_scales == 1).all()


def _edit(path, key, value=None):
    with h5py.File(path, "r+") as f:
        if key.startswith("attr:"):
            f.attrs[key[5:]] = value
            return
        if key in f:
            del f[key]
        if value is not None:
            f[key] = value


N = 4 * NUM_OBJECTS
BAD_BPS = [
    ("/grasps", None, "missing key /grasps"),
    ("/bpss", None, "missing key /bpss"),
    ("/y_PGS", None, "missing key /y_PGS"),
    ("/grasps", np.zeros((N, 36)), "/grasps: axis 1 must have size 37"),
    ("/y_coll", np.zeros(N - 1), "/y_coll: shape"),
    ("/bpss", np.zeros((NUM_OBJECTS, 31)), "/bpss: shape"),
    ("/object_code", np.array(["a", "b"], dtype="S"), "/object_code: shape"),
    ("/grasp_bps_idx", np.full(N, NUM_OBJECTS), "/grasp_bps_idx: index out of range"),
    ("/grasp_bps_idx", np.full(N, 0.5), "/grasp_bps_idx: must hold integers"),
    ("/y_pick", np.full(N, np.nan), "/y_pick: 24 NaN"),
    ("/y_PGS", np.full(N, 1.5), "/y_PGS: labels must lie in [0, 1]"),
    ("/grasps", np.full((N, 37), np.inf), "/grasps: 888 NaN or infinite"),
    ("attr:num_grasps", N + 1, "num_grasps"),
    ("/bpss_turned", np.zeros((NUM_OBJECTS, 2, 31)), "/bpss_turned: shape"),
    ("/bpss_turned", np.zeros((NUM_OBJECTS - 1, 2, 32)), "/bpss_turned: shape"),
]


@pytest.mark.parametrize("key, value, message", BAD_BPS, ids=[f"{k}-{m[:20]}" for k, _, m in BAD_BPS])
def test_bps_reader_names_the_bad_key(tmp_path, key, value, message):
    path = write_bps_dataset(tmp_path / "bps.h5", **bps_arrays(grasps_per_object=4))
    _edit(path, key, value)
    with pytest.raises(DatasetError) as err:
        read_bps_dataset(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_bps_reader_and_writer_reject_bad_files_and_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.h5"):
        read_bps_dataset(tmp_path / "missing.h5")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(DatasetError, match="not a readable HDF5 file"):
        read_bps_dataset(tmp_path / "text.h5")
    arrays = bps_arrays(grasps_per_object=2)
    arrays["y_coll"][3] = np.nan
    with pytest.raises(DatasetError, match="/y_coll"):
        write_bps_dataset(tmp_path / "bad.h5", **arrays)
    assert not (tmp_path / "bad.h5").exists()


def test_nerf_dataset_round_trip_reads_finger_grids_by_batch(tmp_path):
    arrays = nerf_arrays(grasps_per_object=3)
    path = write_nerf_grasp_dataset(tmp_path / "nerf.h5", **arrays)
    data = read_nerf_grasp_dataset(path)
    assert data.num_grasps == 3 * NUM_OBJECTS and data.finger_grid == FingerGridConfig(*GRID, 0.06, 0.06, 0.08)
    assert data.global_grid == GlobalGridConfig(resolution=8, size_m=0.3)
    indices = np.array([7, 2, 11, 0])  # unsorted on purpose
    np.testing.assert_allclose(data.read_nerf_densities(indices), arrays["nerf_densities"][indices], rtol=1e-6)
    np.testing.assert_allclose(data.T_object_finger, arrays["T_object_finger"], rtol=1e-6, atol=1e-7)
    assert data.object_codes.tolist() == arrays["object_codes"].tolist()
    assert data.nerf_densities_global_idx.tolist() == arrays["nerf_densities_global_idx"].tolist()
    with h5py.File(path) as f:  # the public layout
        assert f.attrs["num_data_points"] == data.num_grasps
        assert {"/nerf_config", "/object_state", "/object_scale", "/grasp_idx"} <= {f"/{k}" for k in f}


def test_nerf_reader_uses_only_the_filled_rows_of_a_public_file(tmp_path):
    path = write_nerf_grasp_dataset(tmp_path / "nerf.h5", **nerf_arrays(grasps_per_object=3))
    _edit(path, "attr:num_data_points", 10)
    data = read_nerf_grasp_dataset(path)
    assert data.num_grasps == 10 and data.T_object_finger.shape[0] == 10
    _edit(path, "attr:num_data_points", 100)
    with pytest.raises(DatasetError, match="num_data_points = 100"):
        read_nerf_grasp_dataset(path)


NG = 3 * NUM_OBJECTS
BAD_NERF = [
    ("/grasp_transforms", None, "missing key /grasp_transforms"),
    ("/nerf_densities", None, "missing key /nerf_densities"),
    ("/nerf_densities_global_idx", None, "missing key /nerf_densities_global_idx"),
    ("/nerf_densities", np.zeros((NG, 3, *GRID)), "/nerf_densities: axis 1 must have size 4"),
    ("/y_pick", np.zeros(NG - 2), "/y_pick: 16 rows but attribute num_data_points = 18"),
    ("/nerf_densities_global", np.zeros((NUM_OBJECTS, 8, 8, 9)), "/nerf_densities_global: shape"),
    ("/nerf_densities_global_idx", np.full(NG, -1), "/nerf_densities_global_idx: index out of range"),
    ("/y_coll", np.full(NG, np.nan), "/y_coll: 18 NaN"),
    ("/nerf_densities", np.zeros((NG, 4, 1, 8, 8)), "grid geometry"),
]


@pytest.mark.parametrize("key, value, message", BAD_NERF, ids=[f"{k}-{m[:20]}" for k, _, m in BAD_NERF])
def test_nerf_reader_names_the_bad_key(tmp_path, key, value, message):
    path = write_nerf_grasp_dataset(tmp_path / "nerf.h5", **nerf_arrays(grasps_per_object=3))
    _edit(path, key, value)
    with pytest.raises(DatasetError, match=message.replace("[", r"\[").replace("(", r"\(")):
        read_nerf_grasp_dataset(path)


def test_nan_finger_grids_are_reported_when_read(tmp_path):
    path = write_nerf_grasp_dataset(tmp_path / "nerf.h5", **nerf_arrays(grasps_per_object=3))
    with h5py.File(path, "r+") as f:
        f["/nerf_densities"][5, 0, 0, 0, 0] = np.nan
    data = read_nerf_grasp_dataset(path)
    data.read_nerf_densities(np.array([1, 2]))
    with pytest.raises(DatasetError, match=r"/nerf_densities: non-finite values in grasps \[5\]"):
        data.read_nerf_densities(np.array([4, 5]))


def test_finger_grid_inputs_are_opacity_and_object_frame_points():
    config = FingerGridConfig(num_x=3, num_y=3, num_z=5, width_m=0.06, height_m=0.04, depth_m=0.08)
    T = torch.eye(4).repeat(1, 4, 1, 1)
    T[0, 1, :3, :3] = torch.tensor([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])  # finger 1 closes along object +x
    T[0, :, :3, 3] = torch.tensor([0.1, 0.2, 0.3])
    sigma = torch.full((1, 4, 3, 3, 5), 50.0)
    grids = finger_grid_inputs(sigma, T, config)
    assert grids.shape == (1, 4, 4, 3, 3, 5)
    torch.testing.assert_close(grids[0, :, 0], torch.full((4, 3, 3, 5), 1 - np.exp(-0.02 * 50)))
    torch.testing.assert_close(grids[0, 0, 1:, 0, 0, 0], torch.tensor([0.1 - 0.03, 0.2 - 0.02, 0.3]))
    torch.testing.assert_close(grids[0, 0, 1:, 1, 1, 4], torch.tensor([0.1, 0.2, 0.3 + 0.08]))
    torch.testing.assert_close(grids[0, 1, 1:, 1, 1, 4], torch.tensor([0.1 + 0.08, 0.2, 0.3]))


def test_global_grid_inputs_span_the_cube_around_the_object_origin():
    grids = global_grid_inputs(torch.full((2, 30, 30, 30), 10.0), GlobalGridConfig(resolution=30, size_m=0.3))
    assert grids.shape == (2, 4, 30, 30, 30)
    torch.testing.assert_close(grids[1, 0], torch.full((30, 30, 30), 1 - np.exp(-0.01 * 10)))  # public delta 0.01 m
    torch.testing.assert_close(grids[0, 1:, 0, 0, 0], torch.full((3,), -0.15))
    torch.testing.assert_close(grids[0, 1:, 29, 0, 29], torch.tensor([0.15, -0.15, 0.15]))
