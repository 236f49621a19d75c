import math

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from getagrip_ros.grasp.frames import T_zup_yup, grasp_yup_to_zup, grasp_zup_to_yup, invert_transform, make_transform
from getagrip_ros.grasp.grasp import GRASP_DIM, Grasp, GraspValidationError


def random_grasps(n: int, seed: int = 0, frame_id: str = "world") -> Grasp:
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 4, 3))
    return Grasp(
        palm_position_m=rng.uniform(-0.2, 0.2, size=(n, 3)),
        palm_rotation=Rotation.random(n, random_state=seed).as_matrix(),
        joint_angles_rad=rng.uniform(-0.1, 1.0, size=(n, 16)),
        fingertip_directions=d / np.linalg.norm(d, axis=-1, keepdims=True),
        frame_id=frame_id,
    )


def test_vector_layout_and_round_trip_numpy_and_torch():
    g = random_grasps(7)
    v = g.to_numpy_vector()
    assert v.shape == (7, GRASP_DIM)
    assert np.allclose(v[:, 0:3], g.palm_position_m.numpy())
    R = g.palm_rotation.numpy()
    assert np.allclose(v[:, 3:9], np.stack([R[:, 0, 0], R[:, 0, 1], R[:, 1, 0], R[:, 1, 1], R[:, 2, 0], R[:, 2, 1]], 1))
    assert np.allclose(v[:, 9:25], g.joint_angles_rad.numpy())
    assert np.allclose(v[:, 28:31], g.fingertip_directions[:, 1].numpy())  # middle finger
    for back in (Grasp.from_vector(v), Grasp.from_vector(torch.from_numpy(v))):
        assert torch.allclose(back.palm_rotation, g.palm_rotation, atol=1e-9)
        assert torch.allclose(back.to_vector(), g.to_vector(), atol=1e-9)
    single = Grasp.from_vector(v[3])
    assert len(single) == 1 and torch.allclose(single.to_vector()[0], g.to_vector()[3])


def test_shape_errors_are_clear():
    with pytest.raises(GraspValidationError, match=r"expected shape \(B, 37\)"):
        Grasp.from_vector(np.zeros((2, 36)))
    g = random_grasps(2)
    with pytest.raises(GraspValidationError, match="joint_angles_rad: expected shape"):
        Grasp(g.palm_position_m, g.palm_rotation, torch.zeros(2, 15), g.fingertip_directions)
    with pytest.raises(GraspValidationError, match="expected a numpy array"):
        Grasp.from_vector([0.0] * 37)


def test_indexing_concatenation_and_pose():
    g = random_grasps(5)
    assert len(g[2]) == 1 and len(g[-1]) == 1 and len(g[1:4]) == 3
    assert torch.equal(g[[4, 0]].palm_position_m, g.palm_position_m[[4, 0]])
    assert torch.equal(g[np.array([True, False, True, False, False])].joint_angles_rad, g.joint_angles_rad[[0, 2]])
    assert len(Grasp.cat([g, g[0]])) == 6
    with pytest.raises(GraspValidationError, match="different frames"):
        Grasp.cat([g, random_grasps(1, frame_id="table")])
    T = g.T_frame_palm
    assert torch.equal(T[:, :3, 3], g.palm_position_m) and torch.equal(T[:, 3], torch.tensor([0, 0, 0, 1.0]).expand(5, 4))


def test_transform_moves_pose_and_directions_but_not_joints():
    g = random_grasps(4, frame_id="object")
    T_world_object = make_transform(Rotation.from_euler("z", 90, degrees=True).as_matrix(), (0.65, 0.0, 0.0))
    w = g.transformed(T_world_object, "world")
    assert w.frame_id == "world"
    p = g.palm_position_m[0]
    assert torch.allclose(w.palm_position_m[0], torch.stack([0.65 - p[1], p[0], p[2]]), atol=1e-12)
    assert torch.allclose(w.fingertip_directions[:, :, 0], -g.fingertip_directions[:, :, 1], atol=1e-12)
    assert torch.equal(w.joint_angles_rad, g.joint_angles_rad)
    back = w.transformed(invert_transform(T_world_object), "object")
    assert torch.allclose(back.to_vector(), g.to_vector(), atol=1e-12)


def test_yup_zup_conversion_matches_the_public_convention():
    # Oy axes in the z-up object frame: x_Oy = x, y_Oy = z (up), z_Oy = -y.
    T = T_zup_yup()
    assert torch.allclose(T[:3, :3] @ torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))
    assert torch.allclose(T[:3, :3] @ torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64), torch.tensor([0.0, -1.0, 0.0], dtype=torch.float64))
    g_Oy = random_grasps(3, frame_id="Oy")
    g_O = grasp_yup_to_zup(g_Oy)
    y = g_Oy.palm_position_m
    assert torch.allclose(g_O.palm_position_m, torch.stack([y[:, 0], -y[:, 2], y[:, 1]], 1), atol=1e-12)
    assert torch.allclose(grasp_zup_to_yup(g_O).to_vector(), g_Oy.to_vector(), atol=1e-12)
    # A palm that faces down in y-up (palm x = -y_Oy) faces down in z-up too.
    down = torch.tensor([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    g = Grasp(torch.zeros(1, 3, dtype=torch.float64), down[None], torch.zeros(1, 16), torch.tensor([[[0.0, -1.0, 0.0]] * 4]), "Oy")
    assert torch.allclose(grasp_yup_to_zup(g).palm_normal[0], torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64), atol=1e-12)
    assert math.isclose(float(grasp_yup_to_zup(g).fingertip_directions[0, 0, 2]), -1.0, abs_tol=1e-12)
