"""GPU backend: cuRobo's `MotionGen` (v1 API, v0.7.x; Get a Grip's choice) behind the `MotionBackend` interface.

cuRobo is imported only when this backend is built; without it (or without a CUDA device) the constructor
raises `CuroboUnavailableError` saying what is missing. It plans the whole robot (23 joints: the arm and the
hand) from this package's robot config (config/fr3_algr_zed2i_curobo.yml): all goals of a ranked batch in
one `plan_batch` call with the graph planner (Get a Grip: enable_graph, no trajectory optimisation, one graph
seed), each goal the palm pose plus the poses of the four distal finger links at the pre-grasp hand joints
(`link_poses`), so the hand stays at its pre-grasp shape. The world becomes a cuboid per box and a mesh per
object (a point cloud becomes its convex hull); every `set_world` names its meshes anew (cuRobo ignores a
mesh update under a known name). Paths are returned as the arm's 7 columns, like the CPU backend's.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

from getagrip_ros.grasp.rotations import quat_wxyz_from_matrix
from getagrip_ros.motion.backend import GoalPlan, MotionBackend, PalmGoals, PlanOptions, PlanStatus
from getagrip_ros.motion.world import ObjectMesh, ObjectPointCloud, PlanningWorld
from getagrip_ros.paths import urdf_path
from getagrip_ros.robot.description import ARM_JOINT_NAMES, HAND_JOINT_NAMES, HAND_URDF_NAME, PALM_LINK, load_curobo_config
from getagrip_ros.robot.urdf_chain import KinematicTree

#: Links cuRobo places besides the palm (the distal links listed as link_names in the robot config).
FINGER_LINKS = ("link_3.0", "link_7.0", "link_11.0", "link_15.0")
#: A far-away box and mesh in the first world: cuRobo sizes its collision caches from the world it starts with.
_PLACEHOLDER_POSE = [10.0, 10.0, 10.0, 1.0, 0.0, 0.0, 0.0]


class CuroboUnavailableError(ImportError):
    """cuRobo (v1 API) or a CUDA device is missing."""


def import_curobo() -> dict[str, Any]:
    """The cuRobo v1 classes this backend uses; CuroboUnavailableError names what is missing."""
    try:
        from curobo.geom.types import WorldConfig
        from curobo.types.base import TensorDeviceType
        from curobo.types.math import Pose
        from curobo.types.robot import RobotConfig
        from curobo.types.state import JointState
        from curobo.wrap.reacher.motion_gen import MotionGen, MotionGenConfig, MotionGenPlanConfig
    except ImportError as err:
        raise CuroboUnavailableError(
            f"the cuRobo backend needs cuRobo's v1 API (v0.7.x; 'curobo.wrap.reacher.motion_gen'), which is not importable "
            f"here ({err}). Install it from https://github.com/NVlabs/curobo at tag v0.7.8 (CUDA build), or use the "
            "ompl backend.") from err
    return {"WorldConfig": WorldConfig, "TensorDeviceType": TensorDeviceType, "Pose": Pose, "RobotConfig": RobotConfig,
            "JointState": JointState, "MotionGen": MotionGen, "MotionGenConfig": MotionGenConfig,
            "MotionGenPlanConfig": MotionGenPlanConfig}


@dataclass(frozen=True)
class CuroboBackendConfig:
    """Build-time settings of the cuRobo backend (Get a Grip's values)."""

    robot_config: str = ""
    """cuRobo robot YAML; "" = this package's config/fr3_algr_zed2i_curobo.yml."""
    device: str = "cuda:0"
    collision_sphere_buffer_m: float = 0.001
    """Inflation of the robot's collision spheres: the 1 mm buffer of the planning world."""
    num_graph_seeds: int = 1
    """Get a Grip: "must be 1 for plan_batch"."""
    enable_graph: bool = True
    enable_opt: bool = False
    """Trajectory optimisation off: the graph planner's path, timed later by `time_parameterize`."""
    mesh_cache: int = 4
    """Meshes the collision cache holds."""
    cuboid_cache: int = 16
    use_cuda_graph: bool = False
    """Off: CUDA graphs captured at warm-up break plan_batch with other batch sizes (cuRobo issues #94, #113), and the
    number of ranked grasps varies."""


def _pose_list(T: np.ndarray) -> list[float]:
    """(4, 4) -> cuRobo's [x, y, z, qw, qx, qy, qz]."""
    q = quat_wxyz_from_matrix(torch.as_tensor(T[:3, :3], dtype=torch.float64)).tolist()
    return [float(v) for v in T[:3, 3]] + [float(v) for v in q]


def world_config_dict(world: PlanningWorld, mesh_suffix: str = "") -> dict:
    """A planning world as cuRobo's WorldConfig.from_dict input (cuboid dims = full side lengths)."""
    import trimesh

    cuboids = {b.name: {"dims": list(b.size_m), "pose": _pose_list(b.T_world_box)} for b in world.boxes}
    meshes = {}
    for obj in world.objects:
        if isinstance(obj, ObjectMesh):
            vertices, faces, pose = obj.vertices_m, obj.faces, obj.T_world_object
        elif isinstance(obj, ObjectPointCloud):
            hull = trimesh.convex.convex_hull(obj.points_m)
            vertices, faces, pose = hull.vertices, hull.faces, np.eye(4)
        else:
            raise ValueError(f"cannot give {type(obj).__name__} to cuRobo")
        meshes[f"{obj.name}{mesh_suffix}"] = {"pose": _pose_list(pose), "vertices": np.asarray(vertices).tolist(),
                                              "faces": np.asarray(faces).tolist()}
    return {"cuboid": cuboids, "mesh": meshes}


def _status(status: Any) -> tuple[PlanStatus, str]:
    """MotionGenStatus (enum or str) -> ours and its text."""
    text = str(getattr(status, "value", status) or "failed")
    upper = text.upper().replace(" ", "_")
    if "INVALID_START" in upper:
        return PlanStatus.START_INVALID, f"cuRobo: {text}"
    if "IK" in upper:
        return PlanStatus.IK_FAILED, f"cuRobo: {text} (no collision-free IK for the palm and finger poses)"
    return PlanStatus.NO_PATH, f"cuRobo: {text}"


class CuroboBackend(MotionBackend):
    """cuRobo MotionGen with the graph planner, batched over the ranked goals."""

    def __init__(self, config: CuroboBackendConfig = CuroboBackendConfig()) -> None:
        self.config = config
        self.cu = import_curobo()
        if not (torch.device(config.device).type == "cuda" and torch.cuda.is_available()):
            raise CuroboUnavailableError(f"the cuRobo backend needs a CUDA device; device {config.device!r} is not "
                                         f"available (torch.cuda.is_available() = {torch.cuda.is_available()})")
        cu = self.cu
        self.tensor_args = cu["TensorDeviceType"](device=torch.device(config.device))
        robot = load_curobo_config(config.robot_config or None)["robot_cfg"]
        robot["kinematics"]["collision_sphere_buffer"] = config.collision_sphere_buffer_m
        self.joint_names = tuple(robot["kinematics"]["cspace"]["joint_names"])
        missing = [n for n in ARM_JOINT_NAMES + HAND_JOINT_NAMES if n not in self.joint_names]
        if missing:
            raise ValueError(f"the cuRobo robot config lacks the joints {missing}")
        self._arm_cols = [self.joint_names.index(n) for n in ARM_JOINT_NAMES]
        self._hand_cols = [self.joint_names.index(n) for n in HAND_JOINT_NAMES]
        robot_cfg = cu["RobotConfig"].from_dict(robot, tensor_args=self.tensor_args)
        placeholder = {"cuboid": {"placeholder_box": {"dims": [0.1, 0.1, 0.1], "pose": _PLACEHOLDER_POSE}},
                       "mesh": {"placeholder_mesh": {"pose": _PLACEHOLDER_POSE, "vertices": _TETRAHEDRON_M,
                                                     "faces": [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]}}}
        motion_config = cu["MotionGenConfig"].load_from_robot_config(
            robot_cfg, cu["WorldConfig"].from_dict(placeholder), tensor_args=self.tensor_args,
            use_cuda_graph=config.use_cuda_graph, num_graph_seeds=config.num_graph_seeds,
            collision_cache={"obb": config.cuboid_cache, "mesh": config.mesh_cache})
        self.motion_gen = cu["MotionGen"](motion_config)
        self.motion_gen.warmup(enable_graph=config.enable_graph, warmup_js_trajopt=False)
        self._finger_links = KinematicTree(urdf_path(HAND_URDF_NAME), PALM_LINK, list(FINGER_LINKS), list(HAND_JOINT_NAMES))
        self._names = itertools.count()
        self.world: Optional[PlanningWorld] = None

    # -- conversions -------------------------------------------------------------------------------------
    def _tensor(self, values) -> torch.Tensor:
        return torch.as_tensor(np.asarray(values, dtype=np.float32), device=self.tensor_args.device)

    def _joint_state(self, q_arm: np.ndarray, q_hand: np.ndarray):
        """(B, 7), (B, 16) -> cuRobo JointState (B, 23) in its joint order."""
        q = np.zeros((len(q_arm), len(self.joint_names)))
        q[:, self._arm_cols], q[:, self._hand_cols] = q_arm, q_hand
        return self.cu["JointState"].from_position(self._tensor(q), joint_names=list(self.joint_names))

    def _poses(self, T: np.ndarray):
        """(B, 4, 4) -> cuRobo Pose (position (B, 3), quaternion wxyz (B, 4))."""
        q = quat_wxyz_from_matrix(torch.as_tensor(T[:, :3, :3], dtype=torch.float64)).numpy()
        return self.cu["Pose"](position=self._tensor(T[:, :3, 3]), quaternion=self._tensor(q))

    def _plan_config(self, options: PlanOptions):
        cfg = self.config
        return self.cu["MotionGenPlanConfig"](enable_graph=cfg.enable_graph, enable_opt=cfg.enable_opt,
                                              num_graph_seeds=cfg.num_graph_seeds, timeout=options.time_limit_s)

    def _arm_path(self, path) -> np.ndarray:
        positions = path.position.detach().cpu().numpy().reshape(-1, len(self.joint_names))
        return positions[:, self._arm_cols].astype(float)

    # -- MotionBackend -----------------------------------------------------------------------------------
    def set_world(self, world: PlanningWorld) -> None:
        if world is self.world:
            return
        self.motion_gen.update_world(self.cu["WorldConfig"].from_dict(world_config_dict(world, f"_{next(self._names)}")))
        self.world = world

    def plan_to_joints(self, q_start_arm_rad: np.ndarray, q_goal_arm_rad: np.ndarray, hand_rad: np.ndarray,
                       options: PlanOptions) -> GoalPlan:
        start = time.perf_counter()
        result = self.motion_gen.plan_single_js(self._joint_state(q_start_arm_rad[None], hand_rad[None]),
                                                self._joint_state(q_goal_arm_rad[None], hand_rad[None]),
                                                self._plan_config(options))
        elapsed = time.perf_counter() - start
        if not bool(result.success.reshape(-1)[0]):
            status, reason = _status(result.status)
            return GoalPlan(status, reason, planning_time_s=elapsed)
        path = self._arm_path(result.get_paths()[0])
        return GoalPlan(PlanStatus.SUCCESS, "", np.asarray(q_goal_arm_rad, float), path, elapsed)

    def plan_to_palm_poses(self, q_start_arm_rad: np.ndarray, goals: PalmGoals, options: PlanOptions) -> list[GoalPlan]:
        start = time.perf_counter()
        B = len(goals)
        T_palm_link = self._finger_links(torch.as_tensor(goals.hand_rad, dtype=torch.float64)).numpy()  # (B, 4, 4, 4)
        link_poses = {link: self._poses(goals.T_world_palm @ T_palm_link[:, f]) for f, link in enumerate(FINGER_LINKS)}
        result = self.motion_gen.plan_batch(self._joint_state(np.tile(q_start_arm_rad, (B, 1)), goals.hand_rad),
                                            self._poses(goals.T_world_palm), self._plan_config(options),
                                            link_poses=link_poses)
        elapsed = time.perf_counter() - start
        success = result.success.reshape(-1).detach().cpu().numpy().astype(bool)
        paths = result.get_paths()
        statuses = result.status if isinstance(result.status, (list, tuple)) else [result.status] * B
        plans, done = [], False
        for i in range(B):
            if done:
                plans.append(GoalPlan(PlanStatus.NOT_TRIED, "a better-ranked grasp succeeded first"))
            elif success[i]:
                path = self._arm_path(paths[i])
                plans.append(GoalPlan(PlanStatus.SUCCESS, "", path[-1], path, elapsed / B))
                done = options.stop_at_first_success
            else:
                status, reason = _status(statuses[i])
                plans.append(GoalPlan(status, reason, planning_time_s=elapsed / B))
        return plans


_TETRAHEDRON_M = [[0.0, 0.0, 0.0], [0.05, 0.0, 0.0], [0.0, 0.05, 0.0], [0.0, 0.0, 0.05]]
