"""Image capture: in the simulated world (the arm moves, the wrist camera sees the object, the stored poses
project it where it is), and against fakes for failures, cancellation and bad requests."""

import json

import numpy as np
import pytest
import torch

from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import PrepareConfig, prepare_object
from getagrip_ros.perception.cameras import Camera, CameraImage, CameraUnavailable, SimCamera
from getagrip_ros.perception.capture import (
    CaptureConfig,
    CaptureRequest,
    ForwardKinematicsCameraPose,
    capture_images,
    run_capture,
    spiral_for_request,
)
from getagrip_ros.perception.capture_trajectory import CaptureTrajectory, SpiralConfig, plan_capture
from getagrip_ros.perception.nerf_dataset import read_nerf_dataset
from getagrip_ros.robot.allegro import STOW_HAND_JOINT_ANGLES_RAD
from getagrip_ros.robot.arm import RobotKinematics
from getagrip_ros.robot.description import ARM_JOINT_NAMES, FR3_Q_READY_RAD
from getagrip_ros.robot.interfaces import Arm, JointState, MotionResult
from getagrip_ros.sim.robots import SimArm, SimHand
from getagrip_ros.sim.scene import CameraConfig, SceneConfig
from getagrip_ros.sim.world import ObjectPlacement, SimWorld
from getagrip_ros.status import StatusCode

OBJECT_XY = (0.55, 0.0)
SMALL_CAMERA = CameraConfig(160, 120, 266.5 / 4)  # the ZED-like field of view at a quarter of the resolution


@pytest.fixture
def world(tmp_path):
    obj = prepare_object(object_by_name("tabletop20/green_tea"), PrepareConfig(cache_dir=str(tmp_path / "cache")))
    with SimWorld(SceneConfig(camera=SMALL_CAMERA), obj, ObjectPlacement(xy_m=OBJECT_XY)) as w:
        yield w


def test_sim_capture_writes_a_dataset_whose_poses_project_the_object_to_the_image_centre(world, tmp_path):
    trajectory = plan_capture(np.array([*OBJECT_XY, 0.0]), SpiralConfig(num_images=12))
    assert len(trajectory.T_world_camera) >= 8
    seen = []

    def on_image(index, total, image, T_world_camera):
        frame = world.render()  # ground truth at the moment of the image
        # FK of the measured joints (MuJoCo's body poses lag its joints by the last 2 ms step)
        assert np.allclose(T_world_camera, frame.T_world_camera, atol=5e-4)
        seen.append((index, total, int(frame.object_mask.sum())))

    result = capture_images(SimArm(world), SimCamera(world), trajectory, tmp_path / "ds", CaptureConfig(min_images=5),
                            on_image=on_image, object_position_m=[*OBJECT_XY, 0.0], hand=SimHand(world),
                            metadata={"object": world.object.name})
    n = len(trajectory.T_world_camera)
    assert result.success, result.reason
    # poses the workspace check refuses (the IK sees neither table nor object) are skipped without moving
    assert all(why.startswith("not attempted") for _, why in result.skipped)
    assert result.num_captured == n - len(result.skipped) >= 7
    hand_error = np.abs(world.joint_state(world.hand_joints).positions_rad - STOW_HAND_JOINT_ANGLES_RAD)
    assert hand_error.max() < 0.2, hand_error  # the curled capture posture (soft Allegro PD gains)
    assert result.num_planned == 12 and result.num_unreachable == 12 - n and result.num_reachable == n
    assert [s[:2] for s in seen] == [(i, n) for i in range(result.num_captured)]
    assert min(s[2] for s in seen) > 100  # the object fills part of every image
    assert {"validation", "motion", "grab", "writing"} <= set(result.timings_s)
    # the capture did not knock the object over
    T_object = world.object_pose()
    assert np.linalg.norm(T_object[:2, 3] - OBJECT_XY) < 0.005 and T_object[2, 2] > 0.999

    ds = read_nerf_dataset(tmp_path / "ds")
    n = result.num_captured
    assert len(ds) == n and ds.rgb.shape == (n, 120, 160, 3) and ds.depth_m.shape == (n, 120, 160)
    assert all(im.reshape(-1, 3).std(axis=0).max() > 10 for im in ds.rgb)
    assert np.allclose(ds.T_world_camera_optical, result.T_world_camera)
    assert ds.metadata["complete"] and ds.metadata["object_position_m"] == [*OBJECT_XY, 0.0]
    assert ds.metadata["object"] == "tabletop20/green_tea"
    assert ds.metadata["unreachable"] == trajectory.unreachable and ds.metadata["camera_frame"] == "zed2i_left_optical"
    assert max(f["position_error_m"] for f in ds.metadata["frames"]) < 0.03  # measured ~ planned (PD tracking error)

    # the object's true centre, projected with transforms.json alone and the OpenGL camera model
    meta = json.loads((tmp_path / "ds" / "transforms.json").read_text())
    centre = T_object @ np.array([0.0, 0.0, world.object.extents_m[2] / 2, 1.0])
    for frame, depth in zip(meta["frames"], ds.depth_m):
        x, y, z = (np.linalg.inv(np.array(frame["transform_matrix"])) @ centre)[:3]
        assert z < 0  # in front of an OpenGL camera
        u, v = meta["cx"] + meta["fl_x"] * x / -z, meta["cy"] - meta["fl_y"] * y / -z
        assert abs(u - meta["w"] / 2) < 0.1 * meta["w"] and abs(v - meta["h"] / 2) < 0.1 * meta["h"], (u, v)
        surface = depth[round(v), round(u)]  # the object's near side, in front of its centre
        assert -z - 0.1 < surface < -z


def test_sim_cancel_stops_the_arm_mid_move_and_keeps_no_small_dataset(world, tmp_path):
    class SpyArm(SimArm):
        stops = 0

        def stop(self):
            SpyArm.stops += 1
            super().stop()

    trajectory = plan_capture(np.array([*OBJECT_XY, 0.0]), SpiralConfig(num_images=12))
    images, polls = [], []

    def should_stop():
        if len(images) >= 2:
            polls.append(1)
        return len(polls) > 30  # 0.3 s into the move after the second image

    arm = SpyArm(world)
    result = capture_images(arm, SimCamera(world), trajectory, tmp_path / "ds", CaptureConfig(min_images=5),
                            on_image=lambda *a: images.append(a), should_stop=should_stop, hand=SimHand(world))
    assert result.status == StatusCode.CANCELED and result.num_captured == 2
    assert "cancelled after 2 of" in result.reason and "arm stopped" in result.reason and "nothing kept" in result.reason
    assert SpyArm.stops >= 1 and result.dataset_dir is None and not (tmp_path / "ds").exists()
    q = arm.state().positions_rad  # stopped between poses, holding there
    assert np.abs(q - trajectory.arm_joints_rad[len(images):]).max(axis=1).min() > 0.05
    assert np.allclose(world.data.ctrl[:7], q)


# -- fakes -----------------------------------------------------------------------------------------
class FakeArm(Arm):
    """Jumps to the end of each trajectory, or fails it when the goal is in `fail_goals`; stops on request halfway."""

    joint_names = ARM_JOINT_NAMES

    def __init__(self, fail_goals=()):
        self.q = np.array(FR3_Q_READY_RAD)
        self.fail_goals = [np.asarray(g) for g in fail_goals]
        self.moves, self.stops = 0, 0

    def move(self, trajectory, should_stop=None):
        self.moves += 1
        goal = trajectory.positions_rad[-1]
        zero = np.zeros(7)
        if should_stop is not None and should_stop():
            self.q = 0.5 * (self.q + goal)
            return MotionResult(False, "stopped on request", 0.0, zero, zero)
        if any(np.allclose(goal, g) for g in self.fail_goals):
            return MotionResult(False, "joint limit reflex", 0.1, zero, zero)
        self.q = goal.copy()
        return MotionResult(True, "reached", trajectory.duration_s, zero, zero)

    def state(self):
        return JointState(self.joint_names, self.q.copy(), np.zeros(7))

    def stop(self):
        self.stops += 1


class FakeCamera(Camera):
    def __init__(self, fail=False):
        self.fail, self.rng = fail, np.random.default_rng(0)

    def grab(self):
        if self.fail:
            raise CameraUnavailable("ZED grab failed: CAMERA_NOT_DETECTED")
        K = np.array([[20.0, 0, 8], [0, 20.0, 6], [0, 0, 1]])
        return CameraImage(self.rng.integers(0, 255, (12, 16, 3), dtype=np.uint8), None, K, 0.0)


def _trajectory(n=6):
    rng = np.random.default_rng(1)
    q = np.array(FR3_Q_READY_RAD) + rng.uniform(-0.2, 0.2, (n, 7))
    T = RobotKinematics(dtype=torch.float64).frames(torch.cat([torch.from_numpy(q), torch.zeros(n, 16, dtype=torch.float64)], 1))
    return CaptureTrajectory(T["zed2i_left_optical"].numpy(), q, n + 2, [3, 7])


def test_a_failed_move_skips_its_pose_and_is_reported(tmp_path):
    trajectory = _trajectory()
    arm = FakeArm(fail_goals=[trajectory.arm_joints_rad[2]])
    result = capture_images(arm, FakeCamera(), trajectory, tmp_path / "ds", CaptureConfig(min_images=3))
    assert result.success and result.num_captured == 5, result.reason
    assert result.skipped == [(2, "move failed: joint limit reflex")] and "1 skipped" in result.reason
    meta = read_nerf_dataset(tmp_path / "ds").metadata
    assert meta["skipped"] == [{"trajectory_index": 2, "reason": "move failed: joint limit reflex"}]
    assert [f["trajectory_index"] for f in meta["frames"]] == [0, 1, 3, 4, 5] and meta["unreachable"] == [3, 7]
    # camera poses come from the measured joints
    assert np.allclose(result.T_world_camera, np.delete(trajectory.T_world_camera, 2, axis=0), atol=1e-9)


@pytest.mark.parametrize("min_images, kept", [(4, False), (2, True)])
def test_consecutive_failures_abort_and_keep_a_dataset_only_when_useful(tmp_path, min_images, kept):
    trajectory = _trajectory()
    arm = FakeArm(fail_goals=trajectory.arm_joints_rad[2:5])
    result = capture_images(arm, FakeCamera(), trajectory, tmp_path / "ds",
                            CaptureConfig(min_images=min_images, max_consecutive_failures=3))
    assert result.status == StatusCode.HARDWARE_ERROR and "3 capture poses in a row failed" in result.reason
    assert result.num_captured == 2 and arm.stops >= 1
    if kept:
        assert result.dataset_dir == tmp_path / "ds" and "kept the 2 images" in result.reason
        meta = read_nerf_dataset(tmp_path / "ds").metadata
        assert meta["complete"] is False and meta["ended"].startswith("HARDWARE_ERROR")
    else:
        assert result.dataset_dir is None and not (tmp_path / "ds").exists() and "nothing kept" in result.reason


def test_poses_below_the_table_are_skipped_without_moving_and_do_not_abort(tmp_path):
    trajectory = _trajectory()
    low = np.array(FR3_Q_READY_RAD) + [0.0, 1.2, 0.0, 0.0, 0.0, 0.0, 0.0]  # the curled hand reaches below the table
    trajectory.arm_joints_rad[1:4] = low
    arm = FakeArm()
    result = capture_images(arm, FakeCamera(), trajectory, tmp_path / "ds", CaptureConfig(min_images=3))
    assert result.success and result.num_captured == 3, result.reason
    assert [i for i, _ in result.skipped] == [1, 2, 3]
    assert "not attempted: link_6.0 would be at z = -0.033 m, below the table clearance" in result.skipped[0][1]
    assert arm.moves == 3 * 2 + 2  # a move and a settle per captured pose, none for the skipped ones; then home
    assert np.allclose(arm.state().positions_rad, FR3_Q_READY_RAD)  # where the grasp's motion starts


def test_the_arm_stays_at_the_last_pose_without_return_home(tmp_path):
    trajectory = _trajectory()
    arm = FakeArm()
    assert capture_images(arm, FakeCamera(), trajectory, tmp_path / "ds", CaptureConfig(min_images=3, return_home=False)).success
    assert np.allclose(arm.state().positions_rad, trajectory.arm_joints_rad[-1])


def test_poses_into_the_object_keep_out_are_skipped(tmp_path):
    trajectory = _trajectory()
    palm = RobotKinematics(dtype=torch.float64).frames(torch.cat(
        [torch.tensor([FR3_Q_READY_RAD], dtype=torch.float64), torch.zeros(1, 16, dtype=torch.float64)], 1))["palm_link"][0]
    object_position = palm[:3, 3].numpy() - [0.0, 0.0, 0.1]  # under the hand of every pose near the ready pose
    arm = FakeArm()
    result = capture_images(arm, FakeCamera(), trajectory, tmp_path / "ds", CaptureConfig(min_images=3),
                            object_position_m=object_position)
    assert result.status == StatusCode.NO_RESULT and arm.moves == 0
    assert len(result.skipped) == 6 and all("of the object (keep-out radius 0.12 m)" in why for _, why in result.skipped)
    assert capture_images(FakeArm(), FakeCamera(), trajectory, tmp_path / "ds", CaptureConfig(min_images=3),
                          object_position_m=object_position + [0.5, 0.0, 0.0]).success


def test_too_few_images_is_a_clear_error_and_leaves_nothing(tmp_path):
    trajectory = _trajectory()
    arm = FakeArm(fail_goals=trajectory.arm_joints_rad[[1, 3, 5]])
    result = capture_images(arm, FakeCamera(), trajectory, tmp_path / "ds", CaptureConfig(min_images=4))
    assert result.status == StatusCode.NO_RESULT and result.dataset_dir is None
    assert "captured 3 images, need at least min_images = 4" in result.reason and not (tmp_path / "ds").exists()
    # too few reachable poses: refused before moving
    result = capture_images(arm := FakeArm(), FakeCamera(), trajectory, tmp_path / "ds", CaptureConfig())
    assert result.status == StatusCode.NO_RESULT and "only 6 reachable capture poses" in result.reason
    assert arm.moves == 0


def test_camera_failures_callback_errors_and_existing_datasets(tmp_path):
    trajectory = _trajectory()
    result = capture_images(FakeArm(), FakeCamera(fail=True), trajectory, tmp_path / "a", CaptureConfig(min_images=2))
    assert result.status == StatusCode.HARDWARE_ERROR and "CAMERA_NOT_DETECTED" in result.reason

    def broken(*args):
        raise RuntimeError("viewer crashed")

    arm = FakeArm()
    result = capture_images(arm, FakeCamera(), trajectory, tmp_path / "b", CaptureConfig(min_images=2), on_image=broken)
    assert result.status == StatusCode.INTERNAL_ERROR and "viewer crashed" in result.reason and arm.stops == 1

    assert capture_images(FakeArm(), FakeCamera(), trajectory, tmp_path / "c", CaptureConfig(min_images=2)).success
    arm = FakeArm()
    result = capture_images(arm, FakeCamera(), trajectory, tmp_path / "c", CaptureConfig(min_images=2))
    assert result.status == StatusCode.INVALID_GOAL and "already holds a dataset" in result.reason and arm.moves == 0
    assert capture_images(FakeArm(), FakeCamera(), trajectory, tmp_path / "c", CaptureConfig(min_images=2, overwrite=True)).success


def test_cancel_with_enough_images_keeps_an_incomplete_dataset(tmp_path):
    images = []
    result = capture_images(FakeArm(), FakeCamera(), _trajectory(), tmp_path / "ds", CaptureConfig(min_images=3),
                            on_image=lambda *a: images.append(a), should_stop=lambda: len(images) >= 4)
    assert result.status == StatusCode.CANCELED and result.num_captured == 4 and result.dataset_dir == tmp_path / "ds"
    ds = read_nerf_dataset(tmp_path / "ds")
    assert len(ds) == 4 and ds.metadata["complete"] is False and ds.metadata["ended"].startswith("CANCELED")


def test_camera_pose_from_forward_kinematics_matches_the_sim(world):
    world.reset(arm_rad=np.array(FR3_Q_READY_RAD) + 0.1)
    assert np.allclose(ForwardKinematicsCameraPose()(world.joint_state()), world.camera_pose(), atol=1e-6)
    with pytest.raises(ValueError, match="no forward kinematics"):
        ForwardKinematicsCameraPose("fr3_link3")


@pytest.mark.parametrize("change, code, reason", [
    ({"look_at_m": [np.nan, 0.0, 0.0]}, StatusCode.INVALID_GOAL, "3 finite numbers"),
    ({"frame_id": "map"}, StatusCode.INVALID_GOAL, "frame 'map' is not supported"),
    ({"num_images": 0}, StatusCode.INVALID_GOAL, "num_images must be in"),
    ({"num_images": 5}, StatusCode.INVALID_GOAL, "below min_images"),
    ({"radius_m": -0.1}, StatusCode.INVALID_GOAL, "radius_m"),
    ({"output_dir": ""}, StatusCode.INVALID_GOAL, "output_dir is empty"),
    ({"output_dir": "relative/ds"}, StatusCode.INVALID_GOAL, "absolute path"),
    ({"look_at_m": [2.0, 0.0, 0.0]}, StatusCode.NO_RESULT, "none of the 12 capture poses"),
])
def test_bad_requests_end_with_a_reason_before_the_arm_moves(tmp_path, change, code, reason):
    request = CaptureRequest(**({"look_at_m": [0.55, 0.0, 0.0], "output_dir": str(tmp_path / "ds"), "num_images": 12}
                                | change))
    arm = FakeArm()
    result = run_capture(arm, FakeCamera(), request)
    assert result.status == code and reason in result.reason, result.reason
    assert arm.moves == 0 and not (tmp_path / "ds").exists()


def test_request_radius_scales_the_spirals():
    spiral = spiral_for_request(SpiralConfig(), 30, radius_m=0.4)
    assert spiral.num_images == 30 and max(spiral.radii_m) == pytest.approx(0.4)
    assert np.allclose(np.array(spiral.radii_m) / 0.4, np.array(SpiralConfig().radii_m) / 0.32)
    assert spiral_for_request(SpiralConfig(), 30).radii_m == SpiralConfig().radii_m
