"""The stage requests of the grasp task as action goals and back: one pair of functions per action, used by the
clients (`grasp_task_node.RosStageCalls`) and by the servers (the nodes), so both ends translate alike.

Goal -> request functions raise ValueError (or TypeError) naming what is malformed.
"""

from __future__ import annotations

import math

import numpy as np
from sensor_msgs.msg import JointState as JointStateMsg

from geometry_msgs.msg import Point

from getagrip_interfaces.action import CaptureImages, ExecuteGrasp, ExtractObject, PlanGrasp, PlanMotion, ResetWorld, TrainNerf
from getagrip_interfaces.msg import HumanDemonstration as HumanDemonstrationMsg
from getagrip_ros.human_demo.demonstration import HumanDemonstration, demonstration_from_dict
from getagrip_ros.motion.planner import GraspStages
from getagrip_ros.perception.capture import CaptureRequest
from getagrip_ros.planning.planner import PlanRequest
from getagrip_ros.robot.allegro import reorder_by_name
from getagrip_ros.robot.backend import WorldReset
from getagrip_ros.robot.description import ARM_JOINT_NAMES, HAND_JOINT_NAMES
from getagrip_ros.ros.conversions import (
    grasp_msgs_to_core, grasps_to_msgs, joint_trajectory_from_msg, joint_trajectory_to_msg, numpy_to_point_cloud2,
    point_cloud2_to_numpy,
)
from getagrip_ros.task.robot_stages import ExecuteRequest, MotionRequest
from getagrip_ros.task.stages import ExtractRequest, NerfRequest

STAGE_NAMES = ("hand_shape", "approach", "close", "lift")


# -- reset_world ------------------------------------------------------------------------------------------
def reset_goal(request: WorldReset) -> ResetWorld.Goal:
    goal = ResetWorld.Goal(object_name=request.object_name, place_object=request.object_xy_m is not None,
                           object_yaw_rad=float(request.object_yaw_rad))
    if request.object_xy_m is not None:
        goal.object_x_m, goal.object_y_m = (float(v) for v in request.object_xy_m)
    return goal


def reset_request(goal: ResetWorld.Goal) -> WorldReset:
    xy = (float(goal.object_x_m), float(goal.object_y_m)) if goal.place_object else None
    values = [*(xy or ()), float(goal.object_yaw_rad)]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"object placement has NaN or inf: {values}")
    return WorldReset(goal.object_name, xy, float(goal.object_yaw_rad))


# -- capture_images ---------------------------------------------------------------------------------------
def capture_goal(request: CaptureRequest, with_depth: bool) -> CaptureImages.Goal:
    goal = CaptureImages.Goal(num_images=int(request.num_images), radius_m=float(request.radius_m),
                              output_dir=str(request.output_dir), with_depth=bool(with_depth))
    goal.look_at.header.frame_id = request.frame_id
    goal.look_at.point.x, goal.look_at.point.y, goal.look_at.point.z = (float(v) for v in request.look_at_m)
    return goal


def capture_request(goal: CaptureImages.Goal) -> tuple[CaptureRequest, bool]:
    p = goal.look_at.point
    return (CaptureRequest(look_at_m=[p.x, p.y, p.z], output_dir=goal.output_dir, frame_id=goal.look_at.header.frame_id,
                           num_images=int(goal.num_images), radius_m=float(goal.radius_m)), bool(goal.with_depth))


# -- train_nerf / extract_object --------------------------------------------------------------------------
def nerf_goal(request: NerfRequest) -> TrainNerf.Goal:
    return TrainNerf.Goal(dataset_dir=request.dataset_dir, output_dir=request.output_dir, profile=request.profile,
                          num_iterations=int(request.num_iterations), seed=int(request.seed))


def nerf_request(goal: TrainNerf.Goal) -> NerfRequest:
    if not goal.dataset_dir or not goal.output_dir:
        raise ValueError("dataset_dir and output_dir must both be given")
    return NerfRequest(goal.dataset_dir, goal.output_dir, goal.profile, int(goal.num_iterations), int(goal.seed))


def extract_goal(request: ExtractRequest) -> ExtractObject.Goal:
    return ExtractObject.Goal(backend=request.backend, dataset_dir=request.dataset_dir, output_dir=request.output_dir,
                              nerf_config_path=request.nerf_config_path)


def extract_request(goal: ExtractObject.Goal) -> ExtractRequest:
    return ExtractRequest(goal.backend, goal.dataset_dir, goal.output_dir, goal.nerf_config_path)


# -- plan_grasp -------------------------------------------------------------------------------------------
def plan_goal(request: PlanRequest) -> PlanGrasp.Goal:
    """A point-cloud request, with its mesh when it has one (what the grasp task sends), or a mesh-only request."""
    if request.points_m is None and request.mesh_path is None:
        raise ValueError("plan_goal sends point-cloud and mesh requests only")
    source = PlanGrasp.Goal.SOURCE_MESH if request.points_m is None else PlanGrasp.Goal.SOURCE_POINT_CLOUD
    goal = PlanGrasp.Goal(object_source=source, num_grasps=int(request.num_grasps),
                          sampler=request.sampler, evaluator=request.evaluator,
                          refinement_iterations=int(request.refinement_iterations), seed=int(request.seed),
                          timeout_s=float(request.timeout_s), mesh_path=request.mesh_path or "",
                          mesh_frame_id=request.frame_id)
    if request.points_m is not None:
        goal.point_cloud = numpy_to_point_cloud2(request.points_m, request.frame_id)
    if request.human_demo is not None:
        goal.human_demo = human_demo_to_msg(request.human_demo)
    return goal


def human_demo_to_msg(demonstration: HumanDemonstration) -> HumanDemonstrationMsg:
    msg = HumanDemonstrationMsg(format=demonstration.format, handedness=demonstration.handedness)
    msg.header.frame_id = demonstration.frame_id
    msg.keypoints = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in demonstration.keypoints_m]
    if demonstration.vertices_m is not None:
        msg.vertices = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in demonstration.vertices_m]
    return msg


def human_demo_from_msg(msg: HumanDemonstrationMsg) -> HumanDemonstration | None:
    """None for an empty format; DemonstrationError (a ValueError) naming what is wrong otherwise."""
    if not msg.format:
        return None
    data = {"format": msg.format, "frame_id": msg.header.frame_id, "handedness": msg.handedness or "right",
            "keypoints_m" if msg.format == "keypoints21" else "joints_m": [[p.x, p.y, p.z] for p in msg.keypoints]}
    if msg.format == "mano_mesh":
        data["vertices_m"] = [[p.x, p.y, p.z] for p in msg.vertices]
    return demonstration_from_dict(data)


def plan_request(goal: PlanGrasp.Goal) -> PlanRequest:
    """PlanGrasp goal -> core request (any of the four object sources)."""
    request = PlanRequest(num_grasps=goal.num_grasps, sampler=goal.sampler, evaluator=goal.evaluator,
                          refinement_iterations=goal.refinement_iterations, seed=goal.seed, timeout_s=goal.timeout_s)
    if goal.mesh_path and goal.object_source not in (PlanGrasp.Goal.SOURCE_POINT_CLOUD, PlanGrasp.Goal.SOURCE_MESH):
        raise ValueError("mesh_path goes with SOURCE_POINT_CLOUD or SOURCE_MESH only")
    if goal.object_source == PlanGrasp.Goal.SOURCE_POINT_CLOUD:
        request.points_m = point_cloud2_to_numpy(goal.point_cloud)
        request.frame_id = goal.point_cloud.header.frame_id
        if goal.mesh_path:
            if goal.mesh_frame_id != request.frame_id:
                raise ValueError(f"the mesh is in frame {goal.mesh_frame_id!r}, the point cloud in "
                                 f"{request.frame_id!r}: they must share one")
            request.mesh_path = goal.mesh_path
    elif goal.object_source == PlanGrasp.Goal.SOURCE_MESH:
        if not goal.mesh_path:
            raise ValueError("SOURCE_MESH needs mesh_path")
        request.mesh_path, request.frame_id = goal.mesh_path, goal.mesh_frame_id
    elif goal.object_source == PlanGrasp.Goal.SOURCE_BPS:
        request.bps = goal.bps.tolist() if hasattr(goal.bps, "tolist") else list(goal.bps)
        request.frame_id = goal.bps_frame_id
        request.bps_centroid_height_m = goal.bps_centroid_height_m
    elif goal.object_source == PlanGrasp.Goal.SOURCE_NERF:
        request.nerf_config_path = goal.nerf_config_path
        request.frame_id = "world"
    else:
        raise ValueError(f"unknown object_source {goal.object_source} (0 = point cloud, 1 = BPS, 2 = NeRF, 3 = mesh)")
    if not request.frame_id:
        raise ValueError("the object data has no frame_id")
    request.human_demo = human_demo_from_msg(goal.human_demo)
    return request


# -- plan_motion ------------------------------------------------------------------------------------------
def motion_goal(request: MotionRequest, labels: np.ndarray | None = None) -> PlanMotion.Goal:
    goal = PlanMotion.Goal(grasps=grasps_to_msgs(request.grasps, labels), object_mesh_path=request.object_mesh_path,
                           planner=request.planner, seed=int(request.seed), timeout_s=float(request.timeout_s))
    if request.start_arm_rad is not None:
        goal.start_state = JointStateMsg(name=list(ARM_JOINT_NAMES + HAND_JOINT_NAMES),
                                         position=[float(v) for v in np.concatenate([request.start_arm_rad,
                                                                                     request.start_hand_rad])])
    return goal


def motion_request(goal: PlanMotion.Goal) -> MotionRequest:
    grasps, _ = grasp_msgs_to_core(list(goal.grasps))
    arm = hand = None
    if goal.start_state.name:
        names, q = list(goal.start_state.name), np.asarray(goal.start_state.position, float)
        if len(q) != len(names):
            raise ValueError(f"start_state has {len(names)} names and {len(q)} positions")
        arm, hand = reorder_by_name(q, names, ARM_JOINT_NAMES), reorder_by_name(q, names, HAND_JOINT_NAMES)
    if not math.isfinite(goal.timeout_s) or goal.timeout_s < 0:
        raise ValueError(f"timeout_s must be >= 0 (0 = no limit), got {goal.timeout_s}")
    return MotionRequest(grasps, arm, hand, goal.object_mesh_path, goal.planner, int(goal.seed), float(goal.timeout_s))


def stages_to_msgs(stages: GraspStages, stamp=None) -> dict:
    return {name: joint_trajectory_to_msg(t, stamp) for name, t in stages.as_list()}


def stages_from_msgs(holder) -> GraspStages:
    """The four trajectories of a PlanMotion result or an ExecuteGrasp goal."""
    return GraspStages(*(joint_trajectory_from_msg(getattr(holder, name), name) for name in STAGE_NAMES))


# -- execute_grasp ----------------------------------------------------------------------------------------
def execute_goal(request: ExecuteRequest, stamp=None) -> ExecuteGrasp.Goal:
    return ExecuteGrasp.Goal(object_mesh_path=request.object_mesh_path, **stages_to_msgs(request.stages, stamp))


def execute_request(goal: ExecuteGrasp.Goal) -> ExecuteRequest:
    return ExecuteRequest(stages_from_msgs(goal), goal.object_mesh_path)
