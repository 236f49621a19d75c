"""Capture posed images for a NeRF: drive the wrist camera along a capture trajectory, write a nerfstudio dataset.

Pure Python (no rclpy). The robot and the camera are the shared interfaces (`robot/interfaces.py` Arm,
`perception/cameras.py` Camera), so the same code runs in simulation and, later, on the robot.

The hand is first curled into its capture posture. Then, for each reachable pose of a
:class:`CaptureTrajectory`, the arm moves there in a straight joint-space line (timed from a maximum
joint speed; large joint jumps go through a home configuration first, since IK solutions of
neighbouring poses can lie on different branches), holds still for a moment, the camera grabs an
image, and the camera pose is computed by forward kinematics from the *measured* joint state (not the
planned pose). Images are written as they come; the dataset's transforms.json is written at the end
(see nerf_dataset.py).

Neither the capture IK nor the straight moves see the table or the object, so a coarse workspace check
(points of the wrist, camera, palm and fingers by forward kinematics) refuses poses and moves that
would take the robot below the table top or into a cylinder around the object; such poses are skipped
without moving (reported like any other skipped pose, not counted as robot failures). This is a
stand-in until the motion-planning stage exists.

Frames: world = robot base (z up), camera poses are T_world_camera of the ROS optical frame. Metres,
radians, seconds.

Ending early (cancelled, or aborted after too many failed poses in a row): the arm is stopped, and the
images taken so far are kept as a dataset (with "complete": false and the reason in its metadata) only
when there are at least ``min_images`` of them, enough for a NeRF of the part that was seen; otherwise
every file written is deleted and the result has no dataset_dir.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from getagrip_ros.perception.cameras import Camera, CameraImage, CameraUnavailable
from getagrip_ros.perception.capture_trajectory import CaptureTrajectory, SpiralConfig, plan_capture
from getagrip_ros.perception.nerf_dataset import NerfDatasetWriter, validate_intrinsics
from getagrip_ros.robot.allegro import STOW_HAND_JOINT_ANGLES_RAD
from getagrip_ros.robot.arm_ik import ArmIK, ArmIKConfig
from getagrip_ros.robot.description import (
    ARM_JOINT_NAMES,
    BASE_LINK,
    FR3_Q_READY_RAD,
    HAND_JOINT_NAMES,
    LEFT_OPTICAL_FRAME,
)
from getagrip_ros.robot.interfaces import Arm, Hand, JointState, JointTrajectory
from getagrip_ros.status import StageError, StageTimer, StatusCode

#: Names accepted for the world frame (the robot base is the world frame of this stack).
WORLD_FRAMES: tuple[str, ...] = ("world", BASE_LINK)
MAX_IMAGES = 1000

CameraPoseFn = Callable[[JointState], np.ndarray]
"""Measured arm joint state -> (4, 4) T_world_camera (ROS optical frame)."""
OnImageFn = Callable[[int, int, CameraImage, np.ndarray], None]
"""on_image(image index in the dataset, poses to visit, image, T_world_camera) after each image."""
StopFn = Callable[[], bool]


@dataclass(frozen=True)
class CaptureConfig:
    """How the arm moves between capture poses and when a capture counts as failed."""

    max_joint_speed_rad_s: float = 0.5
    """Fastest joint in a move; sets the duration of each straight joint-space move."""
    min_move_duration_s: float = 1.0
    """Shortest move (small joint changes still take this long)."""
    settle_s: float = 0.3
    """Hold still at each pose this long before grabbing (lets the arm stop swinging)."""
    via_home_above_rad: float = 1.0
    """A move whose largest joint change exceeds this goes through home_arm_rad first (IK solutions of
    neighbouring poses can lie on different branches; the straight line between them may sweep the
    object). Use a large value to always move directly."""
    home_arm_rad: tuple[float, ...] = FR3_Q_READY_RAD
    """Arm configuration (fr3_joint1..7) used as the via point, high above the table."""
    return_home: bool = True
    """After the last image move the arm to home_arm_rad (where the grasp's motion then starts: the last capture
    pose may leave no room for the hand to open)."""
    max_joint_error_rad: float = 0.05
    """A pose counts as reached when, after settling, every joint is this close to its target."""
    min_table_clearance_m: float = 0.01
    """Poses, and straight moves, that would take the wrist, camera, palm or a finger link lower than this
    above the table top (z = 0) are skipped without moving (the capture IK does not see the table). A large
    negative value turns the check off."""
    object_keep_out_radius_m: float = 0.12
    """Same for coming closer than this to the vertical axis through the object position (when given),
    below object_keep_out_height_m above it; 0 turns the check off. Objects are 5-30 cm."""
    object_keep_out_height_m: float = 0.25
    """Height of that keep-out cylinder above the object position."""
    hand_rad: tuple[float, ...] = STOW_HAND_JOINT_ANGLES_RAD
    """Hand posture (joint_0.0..joint_15.0) during the capture: the curled hand Get a Grip carries during arm
    motions. The capture puts the hand there first when it is given a Hand; the checks above assume it."""
    max_consecutive_failures: int = 3
    """Abort the capture after this many poses in a row whose move or image failed."""
    min_images: int = 10
    """Fewest images that make a dataset; fewer is a failed capture (NO_RESULT)."""
    overwrite: bool = False
    """Replace a dataset already in the output folder (else such a folder is refused)."""

    def __post_init__(self) -> None:
        if not math.isfinite(self.min_table_clearance_m):
            raise ValueError("CaptureConfig.min_table_clearance_m must be finite")
        if not (self.object_keep_out_radius_m >= 0 and self.object_keep_out_height_m >= 0):
            raise ValueError("CaptureConfig.object_keep_out_radius_m and object_keep_out_height_m must be >= 0")
        positive = ("max_joint_speed_rad_s", "min_move_duration_s", "via_home_above_rad", "max_joint_error_rad")
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"CaptureConfig.{name} must be finite and > 0, got {value}")
        if not (math.isfinite(self.settle_s) and self.settle_s >= 0):
            raise ValueError(f"CaptureConfig.settle_s must be finite and >= 0, got {self.settle_s}")
        if len(self.home_arm_rad) != len(ARM_JOINT_NAMES) or not np.isfinite(self.home_arm_rad).all():
            raise ValueError(f"CaptureConfig.home_arm_rad needs {len(ARM_JOINT_NAMES)} finite joint angles")
        if len(self.hand_rad) != len(HAND_JOINT_NAMES) or not np.isfinite(self.hand_rad).all():
            raise ValueError(f"CaptureConfig.hand_rad needs {len(HAND_JOINT_NAMES)} finite joint angles")
        if self.max_consecutive_failures < 1 or self.min_images < 1:
            raise ValueError("CaptureConfig.max_consecutive_failures and min_images must be >= 1")


@dataclass
class CaptureResult:
    """How a capture ended, and what it wrote."""

    status: StatusCode
    reason: str
    dataset_dir: Path | None
    """The dataset folder when a dataset was written (always on success), else None."""
    num_captured: int = 0
    """Images taken (and written, when dataset_dir is set)."""
    num_planned: int = 0
    """Poses of the spiral before reachability (trajectory.num_planned)."""
    num_reachable: int = 0
    """Poses the capture set out to visit."""
    num_unreachable: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)
    """(trajectory index, why) of reachable poses that gave no image: refused by the workspace check
    ("not attempted: ..."), or a failed move, settle or grab."""
    T_world_camera: np.ndarray = field(default_factory=lambda: np.zeros((0, 4, 4)))
    """(num_captured, 4, 4) measured camera poses (ROS optical frame) of the images."""
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.status == StatusCode.SUCCEEDED


class ForwardKinematicsCameraPose:
    """T_world_camera from the measured arm joints by forward kinematics of the robot model.

    The hand joints do not move the wrist camera; they are set to zero.

    Args:
        frame: the camera frame (default: the frame the arm IK of the capture trajectory places).
    """

    def __init__(self, frame: str = ArmIKConfig().frame) -> None:
        from getagrip_ros.robot.arm import ROBOT_FRAMES, RobotKinematics

        if frame not in ROBOT_FRAMES:
            raise ValueError(f"no forward kinematics for frame {frame!r}; known: {ROBOT_FRAMES}")
        self.frame = frame
        self.kinematics = RobotKinematics(dtype=torch.float64)

    def __call__(self, state: JointState) -> np.ndarray:
        q_arm = _positions(state, ARM_JOINT_NAMES)
        q = torch.cat([torch.from_numpy(q_arm), torch.zeros(len(HAND_JOINT_NAMES), dtype=torch.float64)])
        return self.kinematics.frames(q[None])[self.frame][0].numpy()


def _positions(state: JointState, names: Sequence[str]) -> np.ndarray:
    index = {n: i for i, n in enumerate(state.joint_names)}
    missing = [n for n in names if n not in index]
    if missing:
        raise ValueError(f"joint state lacks joints {missing}")
    return np.asarray(state.positions_rad, dtype=np.float64)[[index[n] for n in names]]


class _Stopped(Exception):
    """should_stop() returned True."""


#: Robot links whose origins the workspace check keeps above the table and away from the object: the
#: wrist, the camera, the palm and every finger link down to the fingertips.
CHECKED_LINKS: tuple[str, ...] = (
    "fr3_link6", "fr3_link7", "fr3_flange", "zed2i", LEFT_OPTICAL_FRAME, "palm_link",
    *(f"link_{i}.0" for i in range(16)), "link_3.0_tip", "link_7.0_tip", "link_11.0_tip", "link_15.0_tip",
)


class WorkspaceCheck:
    """Is the robot clear of the table and of the object? A coarse check on points of the robot (origins of
    CHECKED_LINKS, forward kinematics with the hand at a fixed posture), for the capture IK and the straight
    joint-space moves, which see neither.

    Args:
        config: clearances and the hand posture.
        object_position_m: (3,) the object (on the table); None = no object keep-out.
    """

    def __init__(self, config: CaptureConfig, object_position_m: Sequence[float] | None = None) -> None:
        from getagrip_ros.paths import urdf_path
        from getagrip_ros.robot.description import FULL_URDF_NAME
        from getagrip_ros.robot.urdf_chain import KinematicTree

        self.config = config
        self.tree = KinematicTree(urdf_path(FULL_URDF_NAME), BASE_LINK, list(CHECKED_LINKS),
                                  list(ARM_JOINT_NAMES + HAND_JOINT_NAMES))
        self.hand_rad = torch.tensor(config.hand_rad, dtype=torch.float64)
        self.object = None if object_position_m is None else np.asarray(object_position_m, dtype=float)

    def points(self, q_arm_rad: np.ndarray) -> np.ndarray:
        """(N, 7) arm joints (fr3_joint1..7) -> (N, L, 3) world positions of CHECKED_LINKS."""
        q = torch.from_numpy(np.atleast_2d(np.asarray(q_arm_rad, dtype=np.float64)))
        q = torch.cat([q, self.hand_rad.expand(len(q), len(HAND_JOINT_NAMES))], dim=1)
        return self.tree(q)[..., :3, 3].numpy()

    def violation(self, q_arm_rad: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """(N, 7) -> ((N,) worst intrusion in metres (0 = clear), what it is, per configuration)."""
        cfg = self.config
        p = self.points(q_arm_rad)
        table = np.maximum(cfg.min_table_clearance_m - p[..., 2], 0.0)
        worst = table.max(axis=1)
        what = [f"{CHECKED_LINKS[j]} would be at z = {p[i, j, 2]:.3f} m, below the table clearance "
                f"{cfg.min_table_clearance_m} m" for i, j in enumerate(table.argmax(axis=1))]
        if self.object is not None and cfg.object_keep_out_radius_m > 0:
            radial = np.linalg.norm(p[..., :2] - self.object[:2], axis=-1)
            inside = p[..., 2] < self.object[2] + cfg.object_keep_out_height_m
            near = np.where(inside, np.maximum(cfg.object_keep_out_radius_m - radial, 0.0), 0.0)
            for i, j in enumerate(near.argmax(axis=1)):
                if near[i, j] > worst[i]:
                    worst[i] = near[i, j]
                    what[i] = (f"{CHECKED_LINKS[j]} would come within {radial[i, j]:.3f} m of the object "
                               f"(keep-out radius {cfg.object_keep_out_radius_m} m)")
        return worst, what


class _Skip(Exception):
    """This pose gives no image; attempted = the arm tried (and failed) to get there."""

    def __init__(self, reason: str, attempted: bool) -> None:
        super().__init__(reason)
        self.reason, self.attempted = reason, attempted


class _ArmMover:
    """Straight joint-space moves through the Arm interface: workspace check along the path (direct, or
    via home for large jumps), settling, and a reach check."""

    PATH_SAMPLES = 30

    def __init__(self, arm: Arm, config: CaptureConfig, should_stop: StopFn, workspace: WorkspaceCheck) -> None:
        self.arm, self.config, self.should_stop, self.workspace = arm, config, should_stop, workspace
        self.names = tuple(arm.joint_names)
        self.to_model = [self.names.index(n) for n in ARM_JOINT_NAMES]  # arm order -> fr3_joint1..7
        self.home = np.asarray(config.home_arm_rad, float)[[ARM_JOINT_NAMES.index(n) for n in self.names]]

    def current(self) -> np.ndarray:
        return _positions(self.arm.state(), self.names)

    def _path_clear(self, start: np.ndarray, goal: np.ndarray) -> tuple[bool, str]:
        """Is the straight line start -> goal clear? A path may start in a violation (e.g. after a failed
        move, or a start pose too close to the object) as long as it does not go deeper."""
        s = np.linspace(0.0, 1.0, self.PATH_SAMPLES + 1)[:, None]
        depth, what = self.workspace.violation(((1 - s) * start + s * goal)[:, self.to_model])
        k = int(np.argmax(depth[1:])) + 1
        return bool(depth[k] <= depth[0] + 1e-3), what[k]

    def _route(self, goal: np.ndarray) -> list[np.ndarray]:
        """Waypoints to the goal: direct, or via home for large jumps (whichever is clear, that first)."""
        current = self.current()
        direct_ok, direct_why = self._path_clear(current, goal)
        big_jump = np.abs(goal - current).max() > self.config.via_home_above_rad
        at_home = np.abs(self.home - current).max() < 1e-3
        routes = []
        if not at_home:
            ok_1, why_1 = self._path_clear(current, self.home)
            ok_2, why_2 = self._path_clear(self.home, goal)
            routes.append(([self.home, goal], ok_1 and ok_2, why_2 if ok_1 else why_1))
        routes.insert(0 if not big_jump or at_home else len(routes), ([goal], direct_ok, direct_why))
        for waypoints, ok, _ in routes:
            if ok:
                return waypoints
        raise _Skip("not attempted: no straight joint-space path is clear (" +
                    "; ".join(f"{'via home' if len(w) == 2 else 'direct'}: {why}" for w, _, why in routes) + ")",
                    attempted=False)

    def _line(self, goal: np.ndarray) -> None:
        start = self.current()
        duration = max(self.config.min_move_duration_s, float(np.abs(goal - start).max()) / self.config.max_joint_speed_rad_s)
        result = self.arm.move(JointTrajectory.linear(self.names, start, goal, duration), self.should_stop)
        if self.should_stop():
            raise _Stopped
        if not result.success:
            self.arm.stop()
            raise _Skip(f"move failed: {result.reason}", attempted=True)

    def move_to(self, goal: np.ndarray) -> None:
        """Move to `goal` (arm.joint_names order) and settle; raises _Skip when the pose cannot be used."""
        cfg = self.config
        depth, what = self.workspace.violation(goal[self.to_model][None])
        if depth[0] > 0:
            raise _Skip(f"not attempted: {what[0]}", attempted=False)
        for waypoint in self._route(goal):
            self._line(waypoint)
        if cfg.settle_s > 0:
            hold = JointTrajectory(self.names, np.array([0.0, cfg.settle_s]), np.stack([goal, goal]))
            result = self.arm.move(hold, self.should_stop)
            if self.should_stop():
                raise _Stopped
            if not result.success:
                self.arm.stop()
                raise _Skip(f"settling failed: {result.reason}", attempted=True)
        error = float(np.abs(goal - self.current()).max())
        if error > cfg.max_joint_error_rad:
            raise _Skip(f"pose not reached: a joint is {error:.3f} rad from its target (max {cfg.max_joint_error_rad}; "
                        "blocked by a contact?)", attempted=True)


def _validate_trajectory(trajectory: CaptureTrajectory) -> None:
    T = np.asarray(trajectory.T_world_camera)
    q = np.asarray(trajectory.arm_joints_rad)
    if T.ndim != 3 or T.shape[1:] != (4, 4) or q.shape != (len(T), len(ARM_JOINT_NAMES)):
        raise StageError(StatusCode.INVALID_GOAL, f"capture trajectory needs (K, 4, 4) poses and (K, 7) joints, "
                         f"got {T.shape} and {q.shape}")
    if not (np.isfinite(T).all() and np.isfinite(q).all()):
        raise StageError(StatusCode.INVALID_GOAL, "capture trajectory has NaN or inf")


def capture_images(arm: Arm, camera: Camera, trajectory: CaptureTrajectory, dataset_dir: str | Path,
                   config: CaptureConfig = CaptureConfig(), camera_pose_fn: CameraPoseFn | None = None,
                   on_image: OnImageFn | None = None, should_stop: StopFn | None = None,
                   object_position_m: Sequence[float] | None = None, hand: Hand | None = None,
                   metadata: dict[str, Any] | None = None) -> CaptureResult:
    """Visit every pose of `trajectory`, grab an image at each, and write a nerfstudio dataset to `dataset_dir`.

    Never raises for failures of the robot, the camera, bad inputs or cancellation: see the result's
    status (SUCCEEDED, INVALID_GOAL, CANCELED, NO_RESULT for too few images, HARDWARE_ERROR after
    ``max_consecutive_failures`` failed poses in a row, INTERNAL_ERROR) and reason. A failed move or
    grab skips that pose and is reported in ``skipped``.

    Args:
        arm: the arm the wrist camera is mounted on.
        camera: grabs the images (with depth when the camera has depth enabled).
        trajectory: reachable camera poses and their IK joints, in capture order.
        dataset_dir: the dataset folder (see nerf_dataset.py for the layout).
        config: motion and failure settings.
        camera_pose_fn: measured joint state -> T_world_camera; default: forward kinematics of the
            frame the arm IK places (the left optical frame of the ZED 2i).
        on_image: called after each image with (index in the dataset, poses to visit, image, T_world_camera).
        should_stop: polled between poses and during moves; True stops the arm and cancels.
        object_position_m: (3,) world position of the object (on the table); moves keep the robot out of a
            cylinder around it (config.object_keep_out_*) and the dataset records it. None = no keep-out.
        hand: when given, it is first put in config.hand_rad (the posture the workspace checks assume),
            and stopped too when the capture ends early.
        metadata: extras for the dataset's "getagrip" metadata.
    """
    timer = StageTimer()
    stopped = False

    def stop_requested() -> bool:
        nonlocal stopped
        if not stopped and should_stop is not None and should_stop():
            stopped = True
        return stopped

    total = len(trajectory.T_world_camera)
    result = CaptureResult(StatusCode.INTERNAL_ERROR, "", None, num_planned=int(trajectory.num_planned),
                           num_reachable=total, num_unreachable=len(trajectory.unreachable))
    writer: NerfDatasetWriter | None = None
    poses: list[np.ndarray] = []
    frames: list[dict[str, Any]] = []
    K: np.ndarray | None = None
    pose_fn: CameraPoseFn | None = None
    started = False

    def dataset_metadata(complete: bool, ended: str) -> dict[str, Any]:
        return {"complete": complete, "ended": ended, "num_planned": result.num_planned,
                "num_reachable": total, "unreachable": [int(i) for i in trajectory.unreachable],
                "skipped": [{"trajectory_index": i, "reason": why} for i, why in result.skipped],
                "camera_frame": getattr(pose_fn, "frame", None),
                "object_position_m": None if object_position_m is None else np.asarray(object_position_m).tolist(),
                "frames": frames, **(metadata or {})}

    try:
        with timer.stage("validation"):
            _validate_trajectory(trajectory)
            if total < config.min_images:
                raise StageError(StatusCode.NO_RESULT, f"only {total} reachable capture poses ({trajectory.report}), "
                                 f"need at least min_images = {config.min_images}")
            if set(arm.joint_names) != set(ARM_JOINT_NAMES):
                raise StageError(StatusCode.INVALID_GOAL, f"the arm's joints {arm.joint_names} are not {ARM_JOINT_NAMES}")
            if object_position_m is not None:
                object_position_m = np.asarray(object_position_m, dtype=float)
                if object_position_m.shape != (3,) or not np.isfinite(object_position_m).all():
                    raise StageError(StatusCode.INVALID_GOAL, "object_position_m must be 3 finite numbers")
            pose_fn = camera_pose_fn or ForwardKinematicsCameraPose()
            workspace = WorkspaceCheck(config, object_position_m)
            try:
                writer = NerfDatasetWriter(dataset_dir, overwrite=config.overwrite)
            except OSError as err:  # FileExistsError included
                raise StageError(StatusCode.INVALID_GOAL, f"cannot write the dataset: {err}") from err
        mover = _ArmMover(arm, config, stop_requested, workspace)
        started = True
        if hand is not None:
            with timer.stage("motion"):
                _hand_to_capture_posture(hand, config, stop_requested)
        consecutive: list[str] = []
        for i in range(total):
            if stop_requested():
                raise _Stopped
            goal = np.asarray(trajectory.arm_joints_rad[i], float)[[ARM_JOINT_NAMES.index(n) for n in mover.names]]
            try:
                with timer.stage("motion"):
                    mover.move_to(goal)
                with timer.stage("grab"):
                    try:
                        image = camera.grab()
                    except CameraUnavailable as err:
                        raise _Skip(f"camera: {err}", attempted=True) from err
            except _Skip as skip:
                result.skipped.append((i, skip.reason))
                if skip.attempted:  # poses refused before moving do not count as robot or camera failures
                    consecutive.append(skip.reason)
                    if len(consecutive) >= config.max_consecutive_failures:
                        raise StageError(StatusCode.HARDWARE_ERROR, f"{len(consecutive)} capture poses in a row failed "
                                         f"(last: {skip.reason})") from skip
                continue
            consecutive.clear()
            T_world_camera = pose_fn(arm.state())
            with timer.stage("writing"):
                height, width = image.rgb.shape[:2]
                try:
                    if K is None:
                        K = validate_intrinsics(image.K, width, height)
                    elif not np.allclose(image.K, K):
                        raise ValueError(f"intrinsics changed during the capture: {np.asarray(image.K).tolist()}")
                    writer.add(image.rgb, T_world_camera, image.depth_m)
                except ValueError as err:
                    raise StageError(StatusCode.HARDWARE_ERROR, f"camera image {len(poses)}: {err}") from err
            poses.append(T_world_camera)
            planned = trajectory.T_world_camera[i]
            frames.append({"trajectory_index": i, "stamp_s": float(image.stamp_s),
                           "planned_T_world_camera_optical": np.asarray(planned).tolist(),
                           "position_error_m": float(np.linalg.norm(T_world_camera[:3, 3] - planned[:3, 3]))})
            result.num_captured = len(poses)
            if on_image is not None:
                on_image(len(poses) - 1, total, image, T_world_camera)
        if len(poses) < config.min_images:
            failed = f" ({len(result.skipped)} poses failed; first: {result.skipped[0][1]})" if result.skipped else ""
            raise StageError(StatusCode.NO_RESULT, f"captured {len(poses)} images, need at least min_images = "
                             f"{config.min_images}{failed}")
        with timer.stage("writing"):
            writer.finish(K, dataset_metadata(True, "succeeded"))
        result.status, result.dataset_dir = StatusCode.SUCCEEDED, writer.dataset_dir
        result.reason = (f"captured {len(poses)} images at {total} reachable poses of {result.num_planned} planned"
                         + (f"; {len(result.skipped)} skipped" if result.skipped else ""))
        if config.return_home:
            home = np.asarray(config.home_arm_rad, float)[[ARM_JOINT_NAMES.index(n) for n in mover.names]]
            try:
                with timer.stage("motion"):
                    mover.move_to(home)
            except _Skip as skip:
                result.reason += f"; the arm did not return home: {skip.reason}"
    except _Stopped:
        result.status, result.reason = StatusCode.CANCELED, f"cancelled after {len(poses)} of {total} images; arm stopped"
    except StageError as err:
        result.status, result.reason = err.code, err.reason
    except Exception as err:  # noqa: BLE001 - a bug or a callback must not leave the arm moving
        result.status, result.reason = StatusCode.INTERNAL_ERROR, f"{type(err).__name__}: {err}"

    if not result.success:
        if started:
            _stop(arm, result)
            if hand is not None:
                _stop(hand, result)
        if writer is not None and not writer.finished:
            _keep_or_discard(writer, K, config, result, dataset_metadata)
    result.num_captured = len(poses)
    result.T_world_camera = np.stack(poses) if poses else np.zeros((0, 4, 4))
    result.timings_s = timer.durations_s
    return result


def _hand_to_capture_posture(hand: Hand, config: CaptureConfig, should_stop: StopFn) -> None:
    names = tuple(hand.joint_names)
    goal = np.asarray(config.hand_rad, float)[[HAND_JOINT_NAMES.index(n) for n in names]]
    start = _positions(hand.state(), names)
    result = hand.move(JointTrajectory.linear(names, start, goal, config.min_move_duration_s), should_stop)
    if should_stop():
        raise _Stopped
    if not result.success:
        raise StageError(StatusCode.HARDWARE_ERROR, f"the hand did not reach its capture posture: {result.reason}")


def _stop(group: Arm | Hand, result: CaptureResult) -> None:
    try:
        group.stop()
    except Exception as err:  # noqa: BLE001 - report, do not mask the original outcome
        result.reason += f"; stopping the {type(group).__name__} failed: {type(err).__name__}: {err}"


def _keep_or_discard(writer: NerfDatasetWriter, K: np.ndarray | None, config: CaptureConfig, result: CaptureResult,
                     dataset_metadata: Callable[[bool, str], dict[str, Any]]) -> None:
    """A capture that ended early keeps its images as a dataset only when there are at least min_images."""
    try:
        if writer.num_frames >= config.min_images and K is not None:
            writer.finish(K, dataset_metadata(False, f"{result.status.name}: {result.reason}"))
            result.dataset_dir = writer.dataset_dir
            result.reason += f"; kept the {writer.num_frames} images as a dataset (complete: false)"
        else:
            writer.discard()
            if writer.num_frames or result.num_captured:
                result.reason += f"; fewer than min_images = {config.min_images} images, nothing kept"
    except OSError as err:
        result.reason += f"; cleaning up the dataset failed: {err}"


# -- request -> trajectory -> capture ---------------------------------------------------------------
@dataclass
class CaptureRequest:
    """One capture request (what a CaptureImages goal asks for)."""

    look_at_m: Sequence[float]
    """(3,) object position (spiral centre) in frame_id, metres."""
    output_dir: str
    """Dataset folder; must be an absolute path (a leading ~ is expanded)."""
    frame_id: str = "world"
    """Frame of look_at_m: the world frame ("world" or the robot base "fr3_link0")."""
    num_images: int = 100
    """Poses planned on the spirals (unreachable ones are dropped)."""
    radius_m: float = 0.0
    """Radius of the widest spiral; the others are scaled alike. 0 = the configured spiral."""


def spiral_for_request(spiral: SpiralConfig, num_images: int, radius_m: float = 0.0) -> SpiralConfig:
    """The spiral with num_images poses; radius_m > 0 scales every radius so that the widest equals it."""
    radii = spiral.radii_m
    if radius_m > 0:
        radii = tuple(float(r) * radius_m / max(spiral.radii_m) for r in spiral.radii_m)
    return SpiralConfig(num_images=num_images, radii_m=radii, heights_m=spiral.heights_m, turns=spiral.turns,
                        look_at_height_m=spiral.look_at_height_m)


def validate_capture_request(request: CaptureRequest, spiral: SpiralConfig, config: CaptureConfig) -> tuple[np.ndarray, Path, SpiralConfig]:
    """(look_at (3,), dataset folder, spiral) of a valid request; StageError(INVALID_GOAL) naming what is wrong."""
    look_at = np.asarray(request.look_at_m, dtype=float)
    if look_at.shape != (3,) or not np.isfinite(look_at).all():
        raise StageError(StatusCode.INVALID_GOAL, f"look_at must be 3 finite numbers, got {np.asarray(request.look_at_m).tolist()}")
    if request.frame_id not in WORLD_FRAMES:
        raise StageError(StatusCode.INVALID_GOAL, f"look_at frame {request.frame_id!r} is not supported; use one of "
                         f"{list(WORLD_FRAMES)} (the robot base = world frame)")
    if not 1 <= request.num_images <= MAX_IMAGES:
        raise StageError(StatusCode.INVALID_GOAL, f"num_images must be in [1, {MAX_IMAGES}], got {request.num_images}")
    if request.num_images < config.min_images:
        raise StageError(StatusCode.INVALID_GOAL, f"num_images {request.num_images} is below min_images = "
                         f"{config.min_images}; the capture could never succeed")
    if not (math.isfinite(request.radius_m) and 0 <= request.radius_m <= 1.5):
        raise StageError(StatusCode.INVALID_GOAL, f"radius_m must be in [0, 1.5] m (0 = default), got {request.radius_m}")
    if not request.output_dir.strip():
        raise StageError(StatusCode.INVALID_GOAL, "output_dir is empty; give the dataset folder as an absolute path")
    folder = Path(request.output_dir).expanduser()
    if not folder.is_absolute():
        raise StageError(StatusCode.INVALID_GOAL, f"output_dir must be an absolute path, got {request.output_dir!r}")
    try:
        spiral = spiral_for_request(spiral, request.num_images, request.radius_m)
    except ValueError as err:
        raise StageError(StatusCode.INVALID_GOAL, str(err)) from err
    return look_at, folder, spiral


def run_capture(arm: Arm, camera: Camera, request: CaptureRequest, spiral: SpiralConfig | None = None,
                config: CaptureConfig = CaptureConfig(), ik: ArmIK | None = None,
                camera_pose_fn: CameraPoseFn | None = None, on_image: OnImageFn | None = None,
                should_stop: StopFn | None = None, hand: Hand | None = None) -> CaptureResult:
    """Validate a request, plan the spiral with arm reachability, and capture (see :func:`capture_images`).

    Never raises for bad requests (INVALID_GOAL), an object out of reach (NO_RESULT) or anything the
    capture reports.
    """
    timer = StageTimer()
    try:
        with timer.stage("validation"):
            look_at, folder, spiral = validate_capture_request(request, spiral or SpiralConfig(), config)
        with timer.stage("planning"):
            try:
                trajectory = plan_capture(look_at, spiral, ik)
            except ValueError as err:  # no pose reachable
                raise StageError(StatusCode.NO_RESULT, str(err)) from err
    except StageError as err:
        return CaptureResult(err.code, err.reason, None, timings_s=timer.durations_s)
    except Exception as err:  # noqa: BLE001
        return CaptureResult(StatusCode.INTERNAL_ERROR, f"{type(err).__name__}: {err}", None, timings_s=timer.durations_s)
    metadata = {"look_at_frame": request.frame_id,
                "spiral": {"num_images": spiral.num_images, "radii_m": list(spiral.radii_m),
                           "heights_m": [list(h) for h in spiral.heights_m], "turns": spiral.turns,
                           "look_at_height_m": spiral.look_at_height_m}}
    result = capture_images(arm, camera, trajectory, folder, config, camera_pose_fn, on_image, should_stop,
                            object_position_m=look_at, hand=hand, metadata=metadata)
    timings = dict(timer.durations_s)  # validation, planning, then the capture's stages
    for stage, seconds in result.timings_s.items():
        timings[stage] = timings.get(stage, 0.0) + seconds
    result.timings_s = timings
    return result
