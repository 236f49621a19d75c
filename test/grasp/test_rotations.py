import math

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from getagrip_ros.grasp.rotations import (
    euler_xyz_to_matrix, matrix_from_quat_wxyz, matrix_from_rot6d, quat_wxyz_from_matrix, rot6d_from_matrix,
    rotation_angle, skew, so3_exp, so3_log,
)


@pytest.fixture
def rotations():
    return torch.from_numpy(Rotation.random(500, random_state=0).as_matrix())


def test_rot6d_layout_is_first_two_columns_row_major():
    R = torch.arange(9, dtype=torch.float64).reshape(3, 3)
    # [R00, R01, R10, R11, R20, R21]
    assert rot6d_from_matrix(R).tolist() == [0, 1, 3, 4, 6, 7]


def test_rot6d_round_trip(rotations):
    assert torch.allclose(matrix_from_rot6d(rot6d_from_matrix(rotations)), rotations, atol=1e-9)


def test_rot6d_gram_schmidt_of_noisy_input_is_a_rotation(rotations):
    noisy = rot6d_from_matrix(rotations) * 3.0 + 0.1 * torch.randn(500, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    R = matrix_from_rot6d(noisy)
    assert torch.allclose(R.transpose(-1, -2) @ R, torch.eye(3, dtype=R.dtype).expand_as(R), atol=1e-6)
    assert torch.allclose(torch.linalg.det(R), torch.ones(500, dtype=R.dtype), atol=1e-6)
    # first column keeps the direction of the first stored column
    a = noisy.reshape(-1, 3, 2)[..., 0]
    assert torch.allclose(R[..., 0], a / a.norm(dim=-1, keepdim=True), atol=1e-6)


def test_exp_log_match_scipy(rotations):
    rotvec = torch.from_numpy(Rotation.from_matrix(rotations.numpy()).as_rotvec())
    assert torch.allclose(so3_exp(rotvec), rotations, atol=1e-9)
    assert torch.allclose(so3_exp(so3_log(rotations)), rotations, atol=1e-7)
    small = torch.tensor([[1e-9, -2e-9, 0.0]], dtype=torch.float64)
    assert torch.allclose(so3_exp(small), torch.eye(3, dtype=torch.float64) + skew(small), atol=1e-16)


def test_quaternion_matches_scipy(rotations):
    q = quat_wxyz_from_matrix(rotations)
    q_scipy = Rotation.from_matrix(rotations.numpy()).as_quat()  # x, y, z, w
    q_scipy = np.where(q_scipy[:, 3:] < 0, -q_scipy, q_scipy)
    assert np.allclose(q.numpy(), q_scipy[:, [3, 0, 1, 2]], atol=1e-9)
    assert torch.allclose(matrix_from_quat_wxyz(q), rotations, atol=1e-9)


def test_euler_is_urdf_rpy_and_angle():
    rpy = torch.tensor([0.3, -0.7, 1.1], dtype=torch.float64)
    expected = Rotation.from_euler("xyz", rpy.numpy()).as_matrix()  # extrinsic x, y, z = Rz Ry Rx
    assert np.allclose(euler_xyz_to_matrix(rpy).numpy(), expected)
    R = so3_exp(torch.tensor([0.0, 0.0, 0.4], dtype=torch.float64))
    assert math.isclose(float(rotation_angle(torch.eye(3, dtype=torch.float64), R)), 0.4, rel_tol=1e-9)


def test_rot6d_gives_rotations_orthonormal_to_the_precision_and_quaternion_trips_keep_them():
    """A grasp's rotation must not change beyond rounding when it travels as a quaternion (ROS messages): before the
    Gram-Schmidt divided by norm + 1e-9, its columns were 1e-9 short and the trip moved R by 2e-9, enough to change a
    motion plan over ROS against the same plan in-process."""
    from getagrip_ros.grasp.rotations import matrix_from_quat_wxyz, matrix_from_rot6d, quat_wxyz_from_matrix

    g = torch.Generator().manual_seed(0)
    R = matrix_from_rot6d(torch.randn(500, 6, generator=g, dtype=torch.float64))
    assert (R @ R.transpose(1, 2) - torch.eye(3, dtype=torch.float64)).abs().max() < 1e-14
    assert (matrix_from_quat_wxyz(quat_wxyz_from_matrix(R)) - R).abs().max() < 1e-14
