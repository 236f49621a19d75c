"""`plan_motion` and `execute_grasp` action servers: arm motion planning and the 3-stage grasp on a robot.

Translates goals for the core `motion.planner.MotionPlanner` (OMPL on CPU; cuRobo when installed) and
`execution.GraspExecutor` (safety checks, then hand shaping -> approach -> close -> lift). Parameters
mirror :class:`GraspExecutionNodeConfig` (config/grasp_execution.yaml).

Backends: ``sim`` - the MuJoCo arm world with one catalog object, in this process; it also serves the
Allegro driver topics (commands as `sensor_msgs/JointState` on ``hand.command_topic`` and as
`std_msgs/Float64MultiArray` on ``sim_hand_array_topic``, state on ``hand.state_topic``, driver joint
names) so the hand topic driver can be run against it. ``hardware`` - the FR3 through franky and the
Allegro hand through its driver's topics (`AllegroTopicHand`).

Publishes ``joint_states`` (the whole robot) and, with the sim backend, ``sim/object_state`` (the object's
pose and the robot links touching it: ground truth the trial recorder and the scorer use).
A `std_msgs/Bool` on ``estop_topic`` set to true stops
every motion and refuses new ones until false is published.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState as JointStateMsg
from std_msgs.msg import Bool, Float64MultiArray

from getagrip_interfaces.action import ExecuteGrasp, PlanMotion
from getagrip_interfaces.msg import ObjectState
from getagrip_ros.execution.executor import ExecutionConfig, ExecutionResult, GraspExecutor
from getagrip_ros.execution.safety import EStop, SafetyConfig, SafetyMonitor
from getagrip_ros.motion.curobo_backend import CuroboBackend, CuroboUnavailableError
from getagrip_ros.motion.planner import GraspStages, GraspStagesConfig, MotionPlanner, MotionPlannerConfig
from getagrip_ros.motion.world import PlanningWorld, load_object_mesh, table_box
from getagrip_ros.robot.allegro import WONIK_TO_GETAGRIP, reorder_by_name
from getagrip_ros.robot.description import ARM_JOINT_NAMES, HAND_JOINT_NAMES
from getagrip_ros.ros.actions import accepting_action_server, end_goal
from getagrip_ros.ros.allegro_topic_hand import AllegroTopicHand, to_driver_order
from getagrip_ros.ros.hardware import HandTopicParams, HardwareParams
from getagrip_ros.ros.conversions import (
    grasp_msgs_to_core, joint_state_msg, joint_trajectory_from_msg, joint_trajectory_to_msg, pose_from_matrix,
    timings_to_msgs,
)
from getagrip_ros.ros.params import declare_config
from getagrip_ros.ros.sim_backend import SimBackend, SimBackendConfig
from getagrip_ros.ros.spin import spin_node
from getagrip_ros.status import StatusCode

BACKENDS = ("sim", "hardware")
PLANNERS = ("ompl", "curobo")


@dataclass(frozen=True)
class GraspExecutionNodeConfig:
    """Parameters of the grasp_execution node (read at start-up)."""

    backend: str = "sim"
    """"sim" (MuJoCo arm world in this process) or "hardware" (franky + Allegro driver topics)."""
    world_frame: str = "world"
    state_rate_hz: float = 20.0
    """joint_states rate (between goals the simulated physics advances in real time at this rate)."""
    estop_topic: str = "estop"
    sim_hand_array_topic: str = "/allegro_hand_position_controller/commands"
    """sim backend: also accepts hand commands here (std_msgs/Float64MultiArray, driver order)."""
    planning_time_limit_s: float = 1.0
    """Path search time per grasp."""
    hand: HandTopicParams = field(default_factory=HandTopicParams)
    sim: SimBackendConfig = field(default_factory=lambda: SimBackendConfig(real_time_factor=1.0))
    hardware: HardwareParams = field(default_factory=HardwareParams)
    stages: GraspStagesConfig = field(default_factory=GraspStagesConfig)
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)


def stages_from_goal(goal: ExecuteGrasp.Goal) -> GraspStages:
    return GraspStages(*(joint_trajectory_from_msg(getattr(goal, name), name)
                         for name in ("hand_shape", "approach", "close", "lift")))


class GraspExecutionNode(Node):
    def __init__(self) -> None:
        super().__init__("grasp_execution")
        self.config = cfg = declare_config(self, GraspExecutionNodeConfig())
        self._closing = False
        self._busy = threading.Lock()  # one motion goal at a time
        self.estop = EStop()
        self.world: PlanningWorld | None = None
        self.sim: SimBackend | None = None
        self.arm = self.hand = None
        self.unavailable: tuple[StatusCode, str] | None = None
        group = ReentrantCallbackGroup()
        self.state_pub = self.create_publisher(JointStateMsg, "joint_states", 100)
        self.planner = MotionPlanner(MotionPlannerConfig(planning_time_limit_s=cfg.planning_time_limit_s,
                                                         stages=cfg.stages, world_frame=cfg.world_frame))
        self._curobo_planner: MotionPlanner | None = None
        self.safety = SafetyMonitor(cfg.safety)
        try:
            self._build_backend(group)
        except Exception as err:  # noqa: BLE001 - report it with every goal instead of dying
            self.unavailable = (StatusCode.HARDWARE_ERROR, f"the {cfg.backend} robot is not available: "
                                                           f"{type(err).__name__}: {err}")
        self.create_subscription(Bool, cfg.estop_topic, self._on_estop, 10, callback_group=group)
        self.plan_server = accepting_action_server(self, PlanMotion, "plan_motion", self.plan_motion, group)
        self.execute_server = accepting_action_server(self, ExecuteGrasp, "execute_grasp", self.execute_grasp, group)
        if cfg.state_rate_hz > 0:
            self.create_timer(1.0 / cfg.state_rate_hz, self._tick, callback_group=group)
        if self.unavailable is None:
            self.get_logger().info(f"grasp_execution ready ({self._description})")
        else:
            self.get_logger().error(f"grasp_execution ready, but every goal will fail: {self.unavailable[1]}")

    # -- robot -----------------------------------------------------------------------------------
    def _build_backend(self, group) -> None:
        cfg = self.config
        if cfg.backend == "sim":
            self.sim = SimBackend(cfg.sim)
            self.arm, self.hand = self.sim.arm, self.sim.hand
            hand = cfg.hand
            self._hand_state_pub = self.create_publisher(JointStateMsg, hand.state_topic, 10)
            self._object_pub = self.create_publisher(ObjectState, "sim/object_state", 1000)  # none lost to a slow recorder
            self.create_subscription(JointStateMsg, hand.command_topic, self._on_hand_joint_state, 10, callback_group=group)
            self.create_subscription(Float64MultiArray, cfg.sim_hand_array_topic, self._on_hand_array, 10,
                                     callback_group=group)
            self._description = f"{self.sim.description}; serving the hand topics {hand.command_topic}, {hand.state_topic}"
        elif cfg.backend == "hardware":
            from getagrip_ros.robot.franky_arm import FrankyArm, FrankyArmConfig

            self.hand = AllegroTopicHand(self, cfg.hand.topic_config())
            self.arm = FrankyArm(FrankyArmConfig(host=cfg.hardware.franky_host,
                                                 relative_dynamics_factor=cfg.hardware.relative_dynamics_factor))
            self._description = f"FR3 at {cfg.hardware.franky_host} through franky, Allegro on {cfg.hand.command_topic}"
            problem = self._robot_problem()
            if problem:
                self.get_logger().error(f"{problem} (retried with every goal)")
        else:
            raise ValueError(f"unknown backend {cfg.backend!r}; known: {list(BACKENDS)}")

    def _robot_problem(self) -> str:
        """Hardware: connect the arm if needed; "" when the robot is ready, else why not."""
        if self.sim is not None or self.arm.connected:
            return ""
        try:
            self.arm.connect()
        except Exception as err:  # noqa: BLE001 - FrankyNotInstalledError, ArmConnectionError, libfranka errors
            return f"the FR3 at {self.config.hardware.franky_host} is not reachable: {type(err).__name__}: {err}"
        return ""

    def _run(self, fn, *args) -> Any:
        """Robot calls run in the simulation thread for the sim backend, directly on hardware."""
        return self.sim.run(fn, *args) if self.sim is not None else fn(*args)

    def _measured(self) -> tuple[np.ndarray, np.ndarray]:
        return self._run(lambda: (self.arm.state().positions_rad, self.hand.state().positions_rad))

    def _object_state(self) -> ObjectState:
        """Sim thread: the object's pose and the robot links touching it (normal force per link, newtons)."""
        world = self.sim.world
        touching = world.object_contacts()
        links = {k: v for k, v in touching.items() if k != "world"}
        msg = ObjectState(pose=pose_from_matrix(world.object_pose()), touching_links=list(links),
                          normal_forces_n=[float(v) for v in links.values()], touches_table="world" in touching)
        msg.header.frame_id = self.config.world_frame
        return msg

    def _publish_state(self, arm_state, hand_state, object_state: ObjectState | None = None) -> None:
        now = self.get_clock().now().to_msg()
        if object_state is not None:
            object_state.header.stamp = now
            self._object_pub.publish(object_state)
        self.state_pub.publish(joint_state_msg(
            tuple(arm_state.joint_names) + tuple(hand_state.joint_names),
            np.concatenate([arm_state.positions_rad, hand_state.positions_rad]),
            np.concatenate([arm_state.velocities_rad_s, hand_state.velocities_rad_s]), now))
        if self.sim is not None:  # the simulated hand's driver state, driver names and order
            names = self.config.hand.command_joint_names
            self._hand_state_pub.publish(joint_state_msg(names, to_driver_order(hand_state.positions_rad),
                                                         to_driver_order(hand_state.velocities_rad_s), now))

    def _tick(self) -> None:
        if self._closing or self.unavailable is not None or (self.sim is None and not self.arm.connected):
            return
        if not self._busy.acquire(blocking=False):
            return
        try:
            if self.sim is not None:
                self.sim.run(self.sim.advance_idle)
            states = self._run(lambda: (self.arm.state(), self.hand.state(),
                                        self._object_state() if self.sim is not None else None))
        except Exception as err:  # noqa: BLE001 - a silent driver must not stop the node
            self.get_logger().warning(f"no robot state: {err}", throttle_duration_sec=5.0)
            return
        finally:
            self._busy.release()
        self._publish_state(*states)

    def _on_hand_joint_state(self, msg: JointStateMsg) -> None:
        try:
            q = reorder_by_name(np.asarray(msg.position, float), list(msg.name), list(self.config.hand.command_joint_names))
        except (KeyError, IndexError, ValueError) as err:
            self.get_logger().warning(f"ignored a malformed hand command: {err}", throttle_duration_sec=5.0)
            return
        self._set_hand(q[WONIK_TO_GETAGRIP])

    def _on_hand_array(self, msg: Float64MultiArray) -> None:
        if len(msg.data) != 16:
            self.get_logger().warning(f"ignored a hand command with {len(msg.data)} values (16 needed)",
                                      throttle_duration_sec=5.0)
            return
        self._set_hand(np.asarray(msg.data, float)[WONIK_TO_GETAGRIP])

    def _set_hand(self, q_rad: np.ndarray) -> None:
        if not np.isfinite(q_rad).all():
            self.get_logger().warning("ignored a hand command with NaN or inf", throttle_duration_sec=5.0)
        elif self.estop.triggered:
            self.get_logger().warning("ignored a hand command: e-stop active", throttle_duration_sec=5.0)
        else:
            self.sim.set_hand_target(q_rad)

    def _on_estop(self, msg: Bool) -> None:
        if msg.data and not self.estop.triggered:
            self.estop.trigger(f"e-stop on {self.config.estop_topic}")
            self.get_logger().error("e-stop: stopping every motion")
        elif not msg.data and self.estop.triggered:
            self.estop.reset()
            self.get_logger().info("e-stop released")

    # -- plan_motion -----------------------------------------------------------------------------
    def _planner(self, name: str) -> MotionPlanner:
        """The OMPL planner, or the cuRobo one (built at its first goal; CuroboUnavailableError without cuRobo/CUDA)."""
        if name == "ompl":
            return self.planner
        if self._curobo_planner is None:
            self._curobo_planner = MotionPlanner(self.planner.config, CuroboBackend())
        return self._curobo_planner

    def _start_state(self, msg: JointStateMsg) -> tuple[np.ndarray, np.ndarray]:
        if not msg.name:
            return self._measured()
        if len(msg.position) != len(msg.name):
            raise ValueError(f"start_state has {len(msg.name)} names and {len(msg.position)} positions")
        q = np.asarray(msg.position, float)
        return reorder_by_name(q, list(msg.name), ARM_JOINT_NAMES), reorder_by_name(q, list(msg.name), HAND_JOINT_NAMES)

    def _release_arm(self) -> None:
        """Hardware: disconnect after a goal so that the capture node can take the arm (see ros.hardware)."""
        if self.sim is None and self.config.hardware.release_arm_between_goals and self.arm is not None:
            self.arm.close()

    def plan_motion(self, goal_handle) -> PlanMotion.Result:
        try:
            return self._plan_motion(goal_handle)
        finally:
            self._release_arm()

    def execute_grasp(self, goal_handle) -> ExecuteGrasp.Result:
        try:
            return self._execute_grasp(goal_handle)
        finally:
            self._release_arm()

    def _plan_motion(self, goal_handle) -> PlanMotion.Result:
        goal = goal_handle.request
        result = PlanMotion.Result(grasp_index=-1)
        if self.unavailable is not None:
            return end_goal(self, goal_handle, result, *self.unavailable)
        problem = "" if goal.start_state.name else self._robot_problem()  # planning from the measured joints
        if problem:
            return end_goal(self, goal_handle, result, StatusCode.HARDWARE_ERROR, problem)
        if goal.planner not in PLANNERS:
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL,
                            f"unknown planner {goal.planner!r}; known: {list(PLANNERS)}")
        try:
            planner = self._planner(goal.planner)
        except CuroboUnavailableError as err:
            return end_goal(self, goal_handle, result, StatusCode.NOT_IMPLEMENTED, str(err))
        try:
            grasps, _ = grasp_msgs_to_core(list(goal.grasps))
            q_arm, q_hand = self._start_state(goal.start_state)
            objects = (load_object_mesh(goal.object_mesh_path),) if goal.object_mesh_path else ()
            world = PlanningWorld((table_box(),), objects, self.config.world_frame)
        except (ValueError, KeyError, RuntimeError) as err:
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")
        goal_handle.publish_feedback(PlanMotion.Feedback(grasps_tried=0, grasps_total=len(grasps)))
        try:
            planned = planner.plan_grasp_motion(  # only plans the safety layer will accept
                q_arm, q_hand, world, grasps, seed=0, timeout_s=float(goal.timeout_s) if goal.timeout_s > 0 else None,
                check=lambda stages: self.safety.check_stages(stages, q_arm, q_hand, world))
        except ValueError as err:
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")
        goal_handle.publish_feedback(PlanMotion.Feedback(grasps_tried=len(planned.attempts), grasps_total=len(grasps)))
        result.rejected = [f"{a.grasp_index}: {a.status.name}: {a.reason}" for a in planned.rejected]
        result.timings = timings_to_msgs(planned.timings_s)
        if not planned.success:
            return end_goal(self, goal_handle, result, planned.status, planned.reason)
        self.world = world
        result.grasp_index = int(planned.grasp_index)
        stamp = self.get_clock().now().to_msg()
        for name, trajectory in planned.stages.as_list():
            setattr(result, name, joint_trajectory_to_msg(trajectory, stamp))
        return end_goal(self, goal_handle, result, StatusCode.SUCCEEDED,
                        f"grasp {planned.grasp_index} planned ({len(planned.rejected)} better-ranked refused)")

    # -- execute_grasp ---------------------------------------------------------------------------
    def _execute_grasp(self, goal_handle) -> ExecuteGrasp.Result:
        result = ExecuteGrasp.Result(stage="validation", lifted=False)
        if self.unavailable is not None:
            return end_goal(self, goal_handle, result, *self.unavailable)
        problem = self._robot_problem()
        if problem:
            return end_goal(self, goal_handle, result, StatusCode.HARDWARE_ERROR, problem)
        try:
            stages = stages_from_goal(goal_handle.request)
        except ValueError as err:
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL, f"malformed goal: {err}")
        if self.world is None:
            return end_goal(self, goal_handle, result, StatusCode.INVALID_GOAL,
                            "no world to check the plan against: send a plan_motion goal first")
        with self._busy:
            try:
                outcome = self._run(self._execute, goal_handle, stages, self.world)
            except Exception as err:  # noqa: BLE001 - the node keeps serving
                outcome = ExecutionResult(False, StatusCode.INTERNAL_ERROR, "validation", f"{type(err).__name__}: {err}")
            if self.sim is not None:
                self.sim.mark_time()
        result.stage, result.lifted = outcome.stage, bool(outcome.lifted)
        result.timings = timings_to_msgs(outcome.timings_s)
        return end_goal(self, goal_handle, result, outcome.status, outcome.reason)

    def _execute(self, goal_handle, stages: GraspStages, world: PlanningWorld) -> ExecutionResult:
        """Runs in the simulation thread (sim backend)."""
        executor = GraspExecutor(self.arm, self.hand, self.safety, self.config.execution, self.estop)

        def cancelled() -> bool:
            return self._closing or goal_handle.is_cancel_requested

        def progress(stage: str, fraction: float) -> None:
            goal_handle.publish_feedback(ExecuteGrasp.Feedback(phase=stage, progress=float(fraction),
                                                               stamp=self.get_clock().now().to_msg()))

        lift_check = None
        if self.sim is not None:
            from getagrip_ros.sim.grasp_trial import object_lift_check

            lift_check = object_lift_check(self.sim.world, min_rise_m=0.9 * self.config.stages.lift_m)
            ticks = [0]

            def publish_now_and_then() -> None:  # joint_states during motions (every 50 ms of simulated time)
                ticks[0] += 1
                if ticks[0] % 5 == 0:
                    self._publish_state(self.arm.state(), self.hand.state(), self._object_state())

            should_stop = self.sim.paced(cancelled, publish_now_and_then)
        else:
            should_stop = cancelled
        return executor.execute(stages, world, should_stop, progress, lift_check)

    def close(self) -> None:
        """Stop a running motion and release the robot."""
        self._closing = True
        with self._busy:
            if self.sim is not None:
                self.sim.close()


def main(args: list[str] | None = None) -> None:
    spin_node(GraspExecutionNode, args)


if __name__ == "__main__":
    main()
