"""The BPS basis is the public one, bit for bit; encoding gives nearest-point distances."""

import numpy as np
import pytest

import torch

from getagrip_ros.grasp.frames import T_zup_yup, turn_grasp_vectors_about_up_Oy
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.perception.bps import basis_points_B, encode_bps, encode_bps_turned, public_basis_points_By


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


def _turned_world(points: np.ndarray, centre: np.ndarray, yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return (points - centre) @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]).T + centre


def test_turned_bps_is_the_bps_of_the_object_turned_about_its_vertical():
    rng = np.random.default_rng(1)
    cloud = rng.uniform([0.60, -0.05, 0.0], [0.66, 0.05, 0.2], size=(800, 3))  # a slab: not symmetric under turns
    turned = encode_bps_turned(cloud, [0.0, 0.7, np.pi])
    assert turned.shape == (3, 4096) and turned.dtype == np.float32
    np.testing.assert_allclose(turned[0], encode_bps(cloud).distances_m, atol=1e-6)
    centre = np.array([*cloud.mean(0)[:2], 0.0])
    np.testing.assert_allclose(turned[1], encode_bps(_turned_world(cloud, centre, 0.7)).distances_m, atol=1e-6)
    assert np.abs(turned[1] - turned[0]).max() > 0.02  # the heading changes the BPS


def test_a_grasp_turned_with_its_object_keeps_its_distances_to_the_object():
    """turn_grasp_vectors_about_up_Oy in Oy is the world turn of encode_bps_turned (same sign, same axis)."""
    rng = np.random.default_rng(2)
    cloud = rng.uniform([0.60, -0.05, 0.0], [0.66, 0.05, 0.2], size=(800, 3))
    centroid = cloud.mean(0)
    T_world_Oy = T_zup_yup()
    T_world_Oy[:3, 3] = torch.as_tensor(centroid)
    grasp_Oy = Grasp(torch.tensor([[0.08, 0.03, 0.01]]), torch.eye(3)[None], torch.zeros(1, 16),
                     torch.tensor([[[-1.0, 0.0, 0.0]] * 4]), frame_id="Oy").to(dtype=torch.float64)
    yaw = 1.1
    palm = grasp_Oy.transformed(T_world_Oy, "world").palm_position_m[0].numpy()
    turned_Oy = Grasp.from_vector(turn_grasp_vectors_about_up_Oy(grasp_Oy.to_vector(), torch.tensor([yaw])), "Oy")
    turned_world = turned_Oy.transformed(T_world_Oy, "world")
    world = grasp_Oy.transformed(T_world_Oy, "world")
    turned_palm = turned_world.palm_position_m[0]
    centre = np.array([*centroid[:2], 0.0])
    np.testing.assert_allclose(turned_palm.numpy(), _turned_world(palm[None], centre, yaw)[0], atol=1e-12)
    turned_cloud = _turned_world(cloud, centre, yaw)
    distance = np.linalg.norm(cloud - palm, axis=1)
    np.testing.assert_allclose(np.linalg.norm(turned_cloud - turned_palm.numpy(), axis=1), distance, atol=1e-12)
    assert np.abs(np.linalg.norm(cloud - turned_palm.numpy(), axis=1) - distance).max() > 0.01
    Rz = torch.as_tensor(_turned_world(np.eye(3), np.zeros(3), yaw)).T  # columns: the turned unit vectors
    np.testing.assert_allclose(turned_world.palm_rotation[0], Rz @ world.palm_rotation[0], atol=1e-12)
    np.testing.assert_allclose(turned_world.fingertip_directions[0], world.fingertip_directions[0] @ Rz.T, atol=1e-12)
    vectors = torch.randn(5, 37, dtype=torch.float64)
    turned_vectors = turn_grasp_vectors_about_up_Oy(vectors, torch.full((5,), yaw))
    np.testing.assert_array_equal(turned_vectors[:, 9:25], vectors[:, 9:25])  # joints
    assert turned_vectors[:, 3:9].norm() == pytest.approx(vectors[:, 3:9].norm())  # not re-orthonormalised
