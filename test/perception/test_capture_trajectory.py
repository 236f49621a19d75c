"""Capture spirals: poses look at the object, unreachable ones are dropped and reported, and the
reachable ones put the simulated wrist camera where planned, with the object in view."""

import numpy as np
import pytest
import torch

from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import PrepareConfig, prepare_object
from getagrip_ros.perception.capture_trajectory import SpiralConfig, plan_capture, spiral_poses
from getagrip_ros.robot.arm import RobotKinematics
from getagrip_ros.robot.arm_ik import ArmIK, ArmIKConfig
from getagrip_ros.sim.world import ObjectPlacement, SimWorld


def test_arm_ik_reaches_poses_of_known_configurations():
    ik = ArmIK(ArmIKConfig(free_z_rotation=False))
    robot = RobotKinematics(dtype=torch.float64)
    gen = torch.Generator().manual_seed(3)
    q = ik.lower + (ik.upper - ik.lower) * (0.2 + 0.6 * torch.rand(20, 7, generator=gen, dtype=torch.float64))
    T = robot.frames(torch.cat([q, torch.zeros(20, 16, dtype=torch.float64)], 1))["zed2i_left_optical"]
    result = ik.solve(T)
    assert bool(result.success.all()) and float(result.position_error_m.max()) < 1e-4
    assert bool(((result.joint_angles_rad >= ik.lower - 1e-9) & (result.joint_angles_rad <= ik.upper + 1e-9)).all())


def test_arm_ik_stops_once_every_target_is_reached():
    """Seeded with its answer (a path point seeded with its neighbour's solution), a solve stops at once and returns
    it; without the early stop it runs every iteration to the same answer."""
    robot = RobotKinematics(dtype=torch.float64)
    q = torch.tensor([[0.1, -0.5, 0.2, -2.0, 0.1, 1.6, 0.7], [-0.3, 0.2, -0.1, -1.5, 0.3, 1.9, 0.2]], dtype=torch.float64)
    T = robot.frames(torch.cat([q, torch.zeros(2, 16, dtype=torch.float64)], 1))["zed2i_left_optical"]
    counts = []
    for scale in (0.1, 0.0):
        ik = ArmIK(ArmIKConfig(free_z_rotation=False, num_seeds=2, stop_tolerance_scale=scale))
        jacobian, calls = ik.tree.frame_jacobian, []
        ik.tree.frame_jacobian = lambda *args: calls.append(1) or jacobian(*args)
        result = ik.solve(T, initial_rad=q)
        assert bool(result.success.all())
        torch.testing.assert_close(result.joint_angles_rad, q, atol=1e-6, rtol=0)
        counts.append(len(calls))
    assert counts == [2, ik.config.num_iterations + 1]  # (one more evaluation for the returned errors)


def test_spiral_poses_look_at_the_object():
    centre = np.array([0.6, 0.05, 0.0])
    config = SpiralConfig(num_images=30)
    poses = spiral_poses(centre, config)
    assert poses.shape == (30, 4, 4)
    target = centre + [0, 0, config.look_at_height_m]
    to_target = target - poses[:, :3, 3]
    assert np.allclose(np.einsum("ki,ki->k", poses[:, :3, 2], to_target / np.linalg.norm(to_target, axis=1, keepdims=True)), 1.0)
    heights = poses[:, 2, 3]
    assert heights[:10].max() < heights[10:20].min() and heights[10:20].max() < heights[20:].min()  # three rising spirals
    horizontal = np.linalg.norm(poses[:, :2, 3] - centre[:2], axis=1)
    assert np.allclose(np.sort(np.unique(horizontal.round(6))), sorted(config.radii_m))


def test_unreachable_poses_are_dropped_and_reported_or_refused():
    trajectory = plan_capture(np.array([0.65, 0.0, 0.0]), SpiralConfig(num_images=40))
    assert 0 < len(trajectory.T_world_camera) < 40 and trajectory.unreachable
    assert len(trajectory.T_world_camera) + len(trajectory.unreachable) == 40
    assert "unreachable" in trajectory.report
    with pytest.raises(ValueError, match="none of the 20 capture poses"):
        plan_capture(np.array([2.0, 0.0, 0.0]), SpiralConfig(num_images=20))


def test_reached_poses_put_the_sim_camera_there_with_the_object_in_view(tmp_path):
    obj = prepare_object(object_by_name("tabletop20/cube"), PrepareConfig(cache_dir=str(tmp_path)))
    trajectory = plan_capture(np.array([0.55, 0.0, 0.0]), SpiralConfig(num_images=12))
    with SimWorld(obj=obj, placement=ObjectPlacement(xy_m=(0.55, 0.0))) as world:
        for q, T in list(zip(trajectory.arm_joints_rad, trajectory.T_world_camera))[:4]:
            world.reset(arm_rad=q, hand_rad=np.zeros(16))
            assert np.allclose(world.camera_pose(), T, atol=1e-6)
            frame = world.render()
            ys, xs = np.nonzero(frame.object_mask)
            assert len(xs) > 200  # the object is in view, near the image centre
            assert abs(xs.mean() - frame.K[0, 2]) < 60 and abs(ys.mean() - frame.K[1, 2]) < 60
