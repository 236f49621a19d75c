import math

import numpy as np
import pytest
import torch

from getagrip_ros.grasp.filters import CableFilterConfig, cable_filter_mask
from getagrip_ros.grasp.grasp import Grasp, GraspValidationError
from getagrip_ros.grasp.perturb import LABEL_NOISE, PerturbationConfig, perturb_grasps
from getagrip_ros.grasp.rotations import rotation_angle
from getagrip_ros.grasp.validate import GraspValidationConfig, validate_grasp

from .test_grasp import random_grasps

LOWER = torch.full((16,), -0.2, dtype=torch.float64)
UPPER = torch.full((16,), 1.5, dtype=torch.float64)


def grasp_with_axes(palm_normal, finger_axis) -> Grasp:
    x = np.asarray(palm_normal, float)
    z = np.asarray(finger_axis, float)
    R = np.stack([x, np.cross(z, x), z], axis=1)
    return Grasp(np.zeros((1, 3)), R[None], np.zeros((1, 16)), np.tile(x, (1, 4, 1)))


@pytest.mark.parametrize(
    "palm_normal_elevation_deg, finger_yaw_deg, keep",
    [
        (-90, 0, True),     # palm down, fingers forward: the typical top grasp
        (0, 0, True),       # palm facing sideways
        (25, 0, True),      # palm tilted up by 25 deg: 65 deg from up
        (35, 0, False),     # 55 deg from up: within 60 deg of up
        (-90, 55, True),    # fingers 55 deg off forward
        (-90, 65, False),   # fingers 65 deg off forward
        (-90, 180, False),  # fingers pointing back at the robot
    ],
)
def test_cable_filter_angles(palm_normal_elevation_deg, finger_yaw_deg, keep):
    yaw = math.radians(finger_yaw_deg)
    finger_axis = [math.cos(yaw), math.sin(yaw), 0.0]
    # palm normal perpendicular to the finger axis, tilted by the elevation
    side = [-math.sin(yaw), math.cos(yaw), 0.0]
    el = math.radians(palm_normal_elevation_deg)
    palm_normal = [math.cos(el) * side[0], math.cos(el) * side[1], math.sin(el)]
    assert bool(cable_filter_mask(grasp_with_axes(palm_normal, finger_axis))[0]) is keep


def test_cable_filter_configurable_and_batched():
    tilted = [0.0, math.sin(math.radians(30)), math.cos(math.radians(30))]  # 30 deg from up
    g = Grasp.cat([grasp_with_axes([0, 1, 0], [1, 0, 0]), grasp_with_axes(tilted, [1, 0, 0])])
    assert cable_filter_mask(g).tolist() == [True, False]
    assert cable_filter_mask(g, CableFilterConfig(min_palm_normal_angle_from_up_deg=20.0)).tolist() == [True, True]
    assert cable_filter_mask(g, CableFilterConfig(forward=(0.0, 1.0, 0.0))).tolist() == [False, False]


def test_refinement_perturbation_statistics_and_reproducibility():
    g = random_grasps(1)[[0] * 4000]
    cfg = PerturbationConfig(translation_m=0.005, rotation_rad=0.05, joint_rad=0.01, direction_rad=0.05)
    p = perturb_grasps(g, cfg, torch.Generator().manual_seed(3))
    dp = p.palm_position_m - g.palm_position_m
    assert torch.allclose(dp.std(0), torch.full((3,), 0.005, dtype=torch.float64), rtol=0.1)
    angles = rotation_angle(g.palm_rotation, p.palm_rotation)
    # |w| of a 3-D Gaussian with std s has mean s * 2 * sqrt(2 / pi)
    assert math.isclose(float(angles.mean()), 0.05 * 2 * math.sqrt(2 / math.pi), rel_tol=0.05)
    assert torch.allclose((p.joint_angles_rad - g.joint_angles_rad).std(0).mean(), torch.tensor(0.01, dtype=torch.float64), rtol=0.1)
    assert torch.allclose(p.fingertip_directions.norm(dim=-1), torch.ones(4000, 4, dtype=torch.float64))
    assert (p.fingertip_directions - g.fingertip_directions).abs().max() > 0.01
    again = perturb_grasps(g, cfg, torch.Generator().manual_seed(3))
    assert torch.equal(again.to_vector(), p.to_vector())


def test_label_noise_is_bounded_and_joint_limits_clamp():
    g = random_grasps(1)[[0] * 2000]
    p = perturb_grasps(g, LABEL_NOISE, torch.Generator().manual_seed(0))
    dp = (p.palm_position_m - g.palm_position_m).abs()
    assert dp.max() <= 0.005 + 1e-12 and dp.max() > 0.0049
    assert rotation_angle(g.palm_rotation, p.palm_rotation).max() <= math.radians(2.5) * math.sqrt(3) + 1e-9
    assert torch.equal(p.joint_angles_rad, g.joint_angles_rad) and torch.equal(p.fingertip_directions, g.fingertip_directions)
    wide = perturb_grasps(g, PerturbationConfig(joint_rad=2.0), torch.Generator().manual_seed(0), (LOWER, UPPER))
    assert wide.joint_angles_rad.min() >= -0.2 and wide.joint_angles_rad.max() <= 1.5


def test_validation_accepts_good_and_names_each_problem():
    g = random_grasps(3)
    assert validate_grasp(g, (LOWER, UPPER)) is not None
    bad = random_grasps(3)
    bad.palm_position_m[1, 0] = float("nan")
    with pytest.raises(GraspValidationError, match=r"palm_position_m has NaN or inf in 1 of 3 grasps \(indices \[1\]\)"):
        validate_grasp(bad)
    bad = random_grasps(3)
    bad.fingertip_directions[2, 3] = 0.0
    with pytest.raises(GraspValidationError, match="direction is zero"):
        validate_grasp(bad)
    bad = random_grasps(3)
    bad.fingertip_directions[0, 1] *= 1.5
    with pytest.raises(GraspValidationError, match="not a unit vector"):
        validate_grasp(bad)
    bad = random_grasps(3)
    bad.palm_rotation[0] *= 2.0
    with pytest.raises(GraspValidationError, match="not a rotation matrix"):
        validate_grasp(bad)
    with pytest.raises(GraspValidationError, match="empty"):
        validate_grasp(random_grasps(3)[0:0])


def test_joint_limit_policy_reject_or_clamp():
    g = random_grasps(2)
    g.joint_angles_rad[1, 5] = 2.0
    with pytest.raises(GraspValidationError, match=r"grasp 1 joint 5: 2.0000 not in \[-0.2000, 1.5000\]"):
        validate_grasp(g, (LOWER, UPPER))
    clamped = validate_grasp(g, (LOWER, UPPER), GraspValidationConfig(joint_limit_policy="clamp"))
    assert float(clamped.joint_angles_rad[1, 5]) == 1.5
    assert torch.equal(clamped.joint_angles_rad[0], g.joint_angles_rad[0])
