"""The simulated world with an object: drop and settle, camera ground truth, a scripted floating-hand grasp."""

import numpy as np
import pytest
import torch
from matplotlib.path import Path as Polygon
from scipy.spatial import ConvexHull

from getagrip_ros.objects.mesh_object import ObjectSpec, PrepareConfig, prepare_object
from getagrip_ros.objects.procedural import BoxShape
from getagrip_ros.robot.allegro import OPEN_HAND_JOINT_ANGLES_RAD, AllegroHand, FingertipIKConfig, solve_fingertip_ik
from getagrip_ros.perception.depth_cloud import backproject_object
from getagrip_ros.sim.grasp_trial import GraspTrialConfig, run_grasp_trial
from getagrip_ros.sim.scene import CameraConfig, SceneConfig
from getagrip_ros.sim.world import ObjectPlacement, SimWorld


@pytest.fixture(scope="module")
def box5(tmp_path_factory):
    spec = ObjectSpec("test/box_5cm", "procedural", BoxShape((0.05, 0.05, 0.05)))
    return prepare_object(spec, PrepareConfig(cache_dir=str(tmp_path_factory.mktemp("convex"))))


def test_object_dropped_2cm_settles_upright_on_the_table(box5):
    placement = ObjectPlacement(xy_m=(0.6, 0.1), yaw_rad=0.4, drop_height_m=0.02)
    with SimWorld(SceneConfig(), box5, placement) as world:
        assert world.object_pose()[2, 3] == pytest.approx(0.02)
        world.step(200)  # 0.4 s
        T = world.object_pose()
        assert T[2, 3] == pytest.approx(0.0, abs=1e-3)  # resting on the table top (z = 0)
        assert T[2, 2] > np.cos(np.radians(1.0))  # still upright
        assert np.allclose(T[:2, 3], [0.6, 0.1], atol=2e-3)
        linear, angular = world.object_speed()
        assert linear < 0.01 and angular < 0.1
        contacts = world.object_contacts()
        assert set(contacts) == {"world"} and contacts["world"] == pytest.approx(0.05**3 * 500 * 9.81, rel=0.05)
        assert world.physics_settings()["object_placement"]["density_kg_m3"] == 500.0


def test_explicit_mass_overrides_density(box5):
    with SimWorld(SceneConfig(), box5, ObjectPlacement(mass_kg=0.3)) as world:
        world.step(100)
        assert world.object_contacts()["world"] == pytest.approx(0.3 * 9.81, rel=0.05)


def test_wrist_camera_mask_and_depth_match_the_projected_object(box5):
    # At the ready pose the wrist camera looks straight down from (0.236, -0.06, 0.588).
    camera = CameraConfig(width_px=320, height_px=240, fy_px=400.0)
    with SimWorld(SceneConfig(camera=camera), box5, ObjectPlacement(xy_m=(0.25, -0.04), yaw_rad=0.3)) as world:
        frame = world.render()
        assert frame.rgb.shape == (240, 320, 3) and frame.depth_m.shape == (240, 320)
        # project the box corners with the camera's intrinsics and pose
        lo, hi = box5.mesh.bounds
        corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
        T_world_object = world.object_pose()
        p_world = corners @ T_world_object[:3, :3].T + T_world_object[:3, 3]
        T_cam_world = np.linalg.inv(frame.T_world_camera)
        p_cam = p_world @ T_cam_world[:3, :3].T + T_cam_world[:3, 3]
        uv = (p_cam @ frame.K.T)[:, :2] / p_cam[:, 2:]
        hull = uv[ConvexHull(uv).vertices]
        v, u = np.mgrid[0:240, 0:320]
        projected = Polygon(hull).contains_points(np.stack([u.ravel() + 0.5, v.ravel() + 0.5], 1)).reshape(240, 320)
        rendered = frame.object_mask
        iou = (projected & rendered).sum() / (projected | rendered).sum()
        assert rendered.sum() > 500 and iou > 0.95, iou
        # depth on the top face = camera height above the box top
        top_depth = frame.T_world_camera[2, 3] - 0.05
        assert np.median(frame.depth_m[rendered]) == pytest.approx(top_depth, abs=3e-3)
        assert frame.depth_m[~rendered & (frame.depth_m > 0)].min() > top_depth  # the table is further away
        # back-projected object pixels lie on the box's top face
        cloud = backproject_object(frame)
        p_object = (cloud - T_world_object[:3, 3]) @ T_world_object[:3, :3]
        assert len(cloud) == rendered.sum() and np.abs(p_object[:, 2] - 0.05).max() < 3e-3
        assert np.abs(p_object[:, :2]).max() < 0.025 + 2e-3


def test_floating_hand_scripted_grasp_lifts_a_5cm_box_20cm_and_holds_it(box5):
    hand = AllegroHand(dtype=torch.float64)
    centre_palm = np.array([0.07, 0.0, 0.035])  # box centre in the palm frame: in front of the palm, between fingers and thumb
    half = 0.025

    def pads(gap_m: float) -> torch.Tensor:
        """Fingertip pad targets: index/middle/ring on the far face, thumb on the near face (palm frame)."""
        far, near = centre_palm[2] + half + gap_m, centre_palm[2] - half - gap_m
        return torch.tensor([[[0.07, 0.03, far], [0.07, 0.0, far], [0.07, -0.03, far], [0.07, 0.0, near]]], dtype=torch.float64)

    ik = FingertipIKConfig(num_iterations=200)
    pre = solve_fingertip_ik(hand, hand.tensor([OPEN_HAND_JOINT_ANGLES_RAD]), pads(0.02), ik)
    closed = solve_fingertip_ik(hand, pre.joint_angles_rad, pads(-0.015), ik)  # squeeze 1.5 cm into the box
    assert bool(pre.converged.all())
    q_pre, q_closed = pre.joint_angles_rad[0].numpy(), closed.joint_angles_rad[0].numpy()

    R_world_palm = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # palm down, fingers forward
    T_grasp = np.eye(4)
    T_grasp[:3, :3], T_grasp[:3, 3] = R_world_palm, np.array([0.65, 0.0, 0.025]) - R_world_palm @ centre_palm

    with SimWorld(SceneConfig(robot="floating_hand"), box5) as world:
        result = run_grasp_trial(world, T_grasp, q_pre, q_closed, GraspTrialConfig(lift_m=0.20, hold_lifted_s=1.0))
        assert result.success, result
        assert result.object_lift_m > 0.17  # the hand rose 0.20 m; the box followed
        assert len(result.hand_links_touching) >= 3 and result.tilt_deg < 45
        # the same motion 10 cm to the side grasps nothing, and says so
        T_miss = T_grasp.copy()
        T_miss[1, 3] += 0.10
        miss = run_grasp_trial(world, T_miss, q_pre, q_closed)
        assert not miss.success and "still on the table" in miss.reason and miss.object_lift_m < 0.01


@pytest.mark.parametrize("textured", [True, False])
def test_table_is_speckled_so_image_based_reconstruction_can_place_it(box5, textured):
    # at the ready pose the wrist camera looks down at the table; the box sits out of view
    scene = SceneConfig(camera=CameraConfig(160, 120, 100.0), table_texture=textured)
    with SimWorld(scene, box5, ObjectPlacement(xy_m=(0.9, 0.5))) as world:
        frame = world.render()
    grey = frame.rgb.astype(float).mean(axis=2)
    table = (frame.depth_m > 0) & ~frame.object_mask
    pairs = table[:, 1:] & table[:, :-1]
    contrast = np.abs(np.diff(grey, axis=1))[pairs].mean()  # pixel-to-pixel change: texture, not shading
    assert (contrast > 1.8) if textured else (contrast < 0.8), contrast
