"""The benchmark's ROS mode: the stack users launch (`getagrip bringup`, a process per node as `ros2 launch` starts
them), started with a protocol's settings as node parameters, and one `grasp_object` goal per trial."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml

from getagrip_ros.bringup.description import profile
from getagrip_ros.config_tree import flatten
from getagrip_ros.human_demo.demonstration import HumanDemonstration
from getagrip_ros.ros.processes import NodeProcess, isolated_ros_environment
from getagrip_ros.task.config import GraspTaskConfig
from getagrip_ros.task.in_process import StackConfig

READY_TIMEOUT_S = 300.0
_ENV_KEYS = ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID", "ROS_LOG_DIR")


class BenchmarkStack:
    """A sim bring-up with a process per node and a grasp_object client in this process (a context manager)."""

    def __init__(self, stack: StackConfig, task: GraspTaskConfig, out_dir: Path, log: Callable[[str], None] = print,
                 processes: str = "per-node") -> None:
        self.stack, self.task, self.out, self.log, self.processes = stack, task, Path(out_dir), log, processes
        self.bringup: NodeProcess | None = None

    def node_parameters(self) -> dict[str, dict[str, object]]:
        """Every node's parameters from the protocol: the stack's stage settings and the task's."""
        params = self.stack.node_parameters()
        params["grasp_task"] = {**flatten(self.task, "task."), "object_label": self.stack.sim.object_name}
        for node in ("robot", "train_nerf", "extract_object", "plan_grasp"):  # goal paths: the trials' own work data
            params[node]["data_roots"] = [str(Path(self.task.work_dir).expanduser())]
        return params

    def __enter__(self) -> BenchmarkStack:
        import rclpy
        from rclpy.action import ActionClient

        from getagrip_interfaces.action import GraspObject

        self.out.mkdir(parents=True, exist_ok=True)
        env = isolated_ros_environment(log_dir=self.out / "ros_log")
        self._saved = {k: os.environ.get(k) for k in _ENV_KEYS}
        os.environ.update({k: env[k] for k in _ENV_KEYS})
        params = self.out / "bringup_parameters.yaml"
        params.write_text(yaml.safe_dump(self.node_parameters()))
        self.log_path = self.out / "bringup.log"
        command = [sys.executable, "-m", "getagrip_ros.cli.getagrip", "bringup", "--profile", "sim",
                   "--processes", self.processes, "--params", str(params)]
        self.log(f"[benchmark] starting `getagrip bringup --profile sim --processes {self.processes}` "
                 f"(ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}; log {self.log_path})")
        self.bringup = NodeProcess("bringup", env=env, command=command, log_path=self.log_path).start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = {n.name for n in profile("sim").nodes}
        while waiting and time.monotonic() < deadline and self.bringup.process.poll() is None:
            text = self.bringup.output()
            waiting = {n for n in waiting if f"{n} ready" not in text}
            time.sleep(0.5)
        if waiting:
            self.__exit__()
            raise RuntimeError(f"the bring-up did not start (not ready: {sorted(waiting)}); see {self.log_path}")
        rclpy.init()
        self.node = rclpy.create_node("getagrip_benchmark")
        self.client = ActionClient(self.node, GraspObject, "grasp_object")
        return self

    def run_trial(self, position_m: np.ndarray, name: str, object_name: str, config: GraspTaskConfig,
                  human_demo: HumanDemonstration | None = None):
        """One grasp_object goal (with `human_demo`, world frame, for the human_demo sampler); its result message."""
        from getagrip_interfaces.action import GraspObject
        from getagrip_ros.ros.client import call_action
        from getagrip_ros.ros.stage_messages import human_demo_to_msg

        differs = [k for k in ("num_images", "plan_with_mesh", "planner", "trials_dir", "work_dir", "timeouts", "scoring",
                                 "record_image_stride")
                   if getattr(config, k) != getattr(self.task, k)]
        if differs:
            raise ValueError(f"the bring-up was started with other task settings: {differs}")
        goal = GraspObject.Goal(object_name=object_name, perception=config.perception, sampler=config.sampler,
                                evaluator=config.evaluator, num_grasps=config.num_grasps, seed=config.seed, trial_name=name)
        if human_demo is not None:
            goal.human_demo = human_demo_to_msg(human_demo)
        goal.object_position.header.frame_id = "world"
        goal.object_position.point.x, goal.object_position.point.y, goal.object_position.point.z = (float(v) for v in position_m)
        budget = sum(getattr(config.timeouts, f) for f in config.timeouts.__dataclass_fields__) + 120.0
        _, result = call_action(self.node, self.client, goal, timeout_s=budget)
        return result

    def __exit__(self, *exc) -> None:
        import rclpy

        if getattr(self, "node", None) is not None:
            self.client.destroy()
            self.node.destroy_node()
            self.node = None
            rclpy.try_shutdown()
        if self.bringup is not None:
            code = self.bringup.stop(timeout_s=30.0)
            self.log(f"[benchmark] bring-up stopped (exit code {code})")
            self.bringup = None
        for k, v in getattr(self, "_saved", {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

