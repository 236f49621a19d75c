"""The BPS basis is the public one, bit for bit; encoding gives nearest-point distances."""

import numpy as np
import pytest

from getagrip_ros.perception.bps import basis_points_B, encode_bps, public_basis_points_By


def test_public_basis_matches_the_published_check_values():
    b = public_basis_points_By()
    assert b.shape == (4096, 3)
    np.testing.assert_allclose(b[0], [-0.1429788642, 0.3012830901, -0.0089318964], atol=1e-10)
    np.testing.assert_allclose(b[1], [0.0847361457, 0.4022700788, 0.0998384882], atol=1e-10)
    np.testing.assert_allclose(b[2], [0.1003680351, 0.2140193068, 0.1099200948], atol=1e-10)
    np.testing.assert_allclose(b[4095], [0.1990908551, 0.0095951464, 0.0135269597], atol=1e-10)
    np.testing.assert_allclose(b.sum(axis=0), [10.195899171, 620.4913364848, 6.852483079], atol=1e-6)
    assert np.linalg.norm(b - [0.0, 0.15, 0.0], axis=1).max() == pytest.approx(0.29995, abs=1e-5)
    state = np.random.get_state()[1][:5].copy()
    public_basis_points_By.cache_clear()
    public_basis_points_By()
    assert np.array_equal(np.random.get_state()[1][:5], state)  # the global RNG is left alone


def test_z_up_basis_is_the_same_points_rotated():
    By, B = public_basis_points_By(), basis_points_B()
    assert np.allclose(B.mean(axis=0), [By.mean(0)[0], -By.mean(0)[2], By.mean(0)[1]])
    assert np.allclose(np.linalg.norm(B - [0, 0, 0.15], axis=1), np.linalg.norm(By - [0, 0.15, 0], axis=1))
    with pytest.raises(ValueError):
        B[0, 0] = 1.0  # read-only


def test_encoding_is_the_nearest_point_distance_in_the_table_frame_below_the_centroid():
    rng = np.random.default_rng(0)
    cloud = rng.uniform([0.60, -0.03, 0.0], [0.70, 0.03, 0.12], size=(500, 3))
    enc = encode_bps(cloud)
    assert enc.origin_world_m[2] == 0.0 and np.allclose(enc.origin_world_m[:2], cloud.mean(0)[:2])
    basis_world = basis_points_B() + enc.origin_world_m
    brute = np.linalg.norm(basis_world[:50, None] - cloud[None], axis=-1).min(axis=1)
    np.testing.assert_allclose(enc.distances_m[:50], brute, rtol=1e-6)
    assert enc.distances_m.shape == (4096,) and enc.distances_m.dtype == np.float32
    moved = encode_bps(cloud + [0.1, 0.2, 0.0])  # translation along the table does not change the BPS
    np.testing.assert_allclose(moved.distances_m, enc.distances_m, atol=1e-6)


@pytest.mark.parametrize("cloud, error", [(np.zeros((0, 3)), "empty"), (np.zeros((5, 2)), "shape"),
                                          (np.full((5, 3), np.nan), "NaN")])
def test_bad_clouds_are_refused(cloud, error):
    with pytest.raises(ValueError, match=error):
        encode_bps(cloud)
