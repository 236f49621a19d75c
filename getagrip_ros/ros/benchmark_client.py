"""The benchmark's ROS mode: the stack users launch (a process per node, `bringup.multi_process`), started with a
protocol's settings as node parameters, and one `grasp_object` goal per trial."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from getagrip_ros.bringup.description import profile
from getagrip_ros.bringup.multi_process import NodeProcesses
from getagrip_ros.bringup.parameters import write_overrides
from getagrip_ros.config_tree import flatten
from getagrip_ros.ros.processes import isolated_ros_environment
from getagrip_ros.task.config import GraspTaskConfig
from getagrip_ros.task.in_process import StackConfig

READY_TIMEOUT_S = 300.0
_ENV_KEYS = ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID", "ROS_LOG_DIR")


class BenchmarkStack:
    """A sim bring-up with a process per node and a grasp_object client in this process (a context manager)."""

    def __init__(self, stack: StackConfig, task: GraspTaskConfig, out_dir: Path, log: Callable[[str], None] = print) -> None:
        self.stack, self.task, self.out, self.log = stack, task, Path(out_dir), log
        self.nodes: NodeProcesses | None = None

    def node_parameters(self) -> dict[str, dict[str, object]]:
        """Every node's parameters from the protocol: the stack's stage settings and the task's."""
        params = self.stack.node_parameters()
        params["grasp_task"] = {**flatten(self.task, "task."), "object_label": self.stack.sim.object_name}
        return params

    def __enter__(self) -> BenchmarkStack:
        import rclpy
        from rclpy.action import ActionClient

        from getagrip_interfaces.action import GraspObject

        prof = profile("sim")
        self.out.mkdir(parents=True, exist_ok=True)
        env = isolated_ros_environment(log_dir=self.out / "ros_log")
        self._saved = {k: os.environ.get(k) for k in _ENV_KEYS}
        os.environ.update({k: env[k] for k in _ENV_KEYS})
        overrides = write_overrides(prof, {}, self.node_parameters(), self.out / "bringup")
        self.log_path = self.out / "bringup.log"
        self._log_file = open(self.log_path, "a", buffering=1)
        self.log(f"[benchmark] starting the sim bring-up (a process per node, ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}; "
                 f"log {self.log_path})")
        self.nodes = NodeProcesses(prof.nodes, overrides, env, out=self._log_file)
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = {n.name for n in prof.nodes}
        while waiting and time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace")
            waiting = {n for n in waiting if f"{n} ready" not in text}
            if waiting and not self.nodes.check():
                break
            time.sleep(0.5)
        if waiting:
            self.__exit__()
            raise RuntimeError(f"the bring-up did not start (not ready: {sorted(waiting)}); see {self.log_path}")
        rclpy.init()
        self.node = rclpy.create_node("getagrip_benchmark")
        self.client = ActionClient(self.node, GraspObject, "grasp_object")
        return self

    def run_trial(self, position_m: np.ndarray, name: str, object_name: str, config: GraspTaskConfig):
        """One grasp_object goal; its result message."""
        from getagrip_interfaces.action import GraspObject
        from getagrip_ros.ros.client import call_action

        differs = [k for k in ("num_images", "planner", "trials_dir", "work_dir", "timeouts", "scoring", "record_image_stride")
                   if getattr(config, k) != getattr(self.task, k)]
        if differs:
            raise ValueError(f"the bring-up was started with other task settings: {differs}")
        goal = GraspObject.Goal(object_name=object_name, perception=config.perception, sampler=config.sampler,
                                evaluator=config.evaluator, num_grasps=config.num_grasps, seed=config.seed, trial_name=name)
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
        if self.nodes is not None:
            codes = self.nodes.stop()
            self.log(f"[benchmark] bring-up stopped: {codes}")
            self.nodes = None
            self._log_file.close()
        for k, v in getattr(self, "_saved", {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

