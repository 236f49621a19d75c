"""A stand-in for cuRobo's v1 API (v0.7.x), for testing the adapter on machines without CUDA.

It implements only what the adapter calls, with the documented names, signatures and data layouts
(Pose = position (B, 3) + quaternion wxyz (B, 4); cuboid dims = full side lengths; JointState.position
(B, dof); MotionGenResult.success (B,), .status, .get_paths()), and checks the contract on every call
(shapes, unit quaternions, joint names, one graph seed for plan_batch, link_poses only for links of the
robot config). Its "planner" succeeds for goals whose palm is within `reach_m` of the robot base and
returns a straight joint path from the start to a fixed configuration.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

GOAL_Q = [0.1, 0.2, 0.0, -2.0, 0.0, 2.2, 0.8]


@dataclass
class TensorDeviceType:
    device: torch.device = torch.device("cpu")
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        self.device = torch.device("cpu")  # the fake computes on the CPU whatever device is asked for


@dataclass
class Pose:
    position: torch.Tensor
    quaternion: torch.Tensor

    def __post_init__(self) -> None:
        assert self.position.ndim == 2 and self.position.shape[1] == 3, self.position.shape
        assert self.quaternion.shape == (len(self.position), 4), self.quaternion.shape
        assert torch.allclose(self.quaternion.norm(dim=1), torch.ones(len(self.position)), atol=1e-4)


@dataclass
class JointState:
    position: torch.Tensor
    joint_names: Optional[list[str]] = None

    @classmethod
    def from_position(cls, position: torch.Tensor, joint_names: Optional[list[str]] = None) -> "JointState":
        assert position.ndim == 2, position.shape
        return cls(position, joint_names)


class RobotConfig:
    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg

    @classmethod
    def from_dict(cls, cfg: dict, tensor_args: TensorDeviceType = TensorDeviceType()) -> "RobotConfig":
        kin = cfg["kinematics"]
        for key in ("urdf_path", "base_link", "ee_link", "collision_spheres", "cspace"):
            assert key in kin, key
        return cls(cfg)


class WorldConfig:
    def __init__(self, data: dict) -> None:
        self.data = data

    @classmethod
    def from_dict(cls, data: dict) -> "WorldConfig":
        for name, cuboid in data.get("cuboid", {}).items():
            assert len(cuboid["dims"]) == 3 and all(d > 0 for d in cuboid["dims"]), name
            assert len(cuboid["pose"]) == 7, name
        for name, mesh in data.get("mesh", {}).items():
            assert len(mesh["pose"]) == 7 and ("file_path" in mesh or ("vertices" in mesh and "faces" in mesh)), name
        return cls(data)


@dataclass
class MotionGenPlanConfig:
    enable_graph: bool = False
    enable_opt: bool = True
    num_graph_seeds: Optional[int] = None
    timeout: float = 10.0


@dataclass
class MotionGenConfig:
    robot_cfg: RobotConfig
    world_model: WorldConfig
    kwargs: dict = field(default_factory=dict)

    @classmethod
    def load_from_robot_config(cls, robot_cfg, world_model=None, tensor_args=TensorDeviceType(), **kwargs) -> "MotionGenConfig":
        return cls(robot_cfg, world_model, kwargs)


@dataclass
class MotionGenResult:
    success: torch.Tensor
    status: Any
    paths: list

    def get_paths(self) -> list:
        return self.paths


class MotionGen:
    reach_m = 0.85
    instances: list["MotionGen"] = []

    def __init__(self, config: MotionGenConfig) -> None:
        self.config = config
        self.worlds = [config.world_model]
        self.calls: list[tuple[str, Any]] = []
        self.warmed_up = False
        kin = config.robot_cfg.cfg["kinematics"]
        self.joint_names = list(kin["cspace"]["joint_names"])
        self.link_names = set(kin.get("link_names") or [])
        MotionGen.instances.append(self)

    def warmup(self, enable_graph: bool = True, batch: Optional[int] = None, warmup_js_trajopt: bool = True, **kwargs) -> None:
        self.warmed_up = True

    def update_world(self, world: WorldConfig) -> None:
        self.worlds.append(world)

    def _check_state(self, state: JointState, batch: int) -> None:
        assert self.warmed_up
        assert state.position.shape == (batch, len(self.joint_names)), state.position.shape
        assert state.joint_names == self.joint_names

    def _path(self, start: torch.Tensor) -> JointState:
        goal = start.clone()
        goal[:7] = torch.tensor(GOAL_Q)
        steps = torch.linspace(0, 1, 5)[:, None]
        return JointState(start[None] + steps * (goal - start)[None], self.joint_names)

    def plan_batch(self, start_state: JointState, goal_pose: Pose, plan_config: MotionGenPlanConfig = MotionGenPlanConfig(),
                   link_poses: Optional[dict] = None) -> MotionGenResult:
        B = len(goal_pose.position)
        self._check_state(start_state, B)
        if plan_config.enable_graph:
            assert plan_config.num_graph_seeds == 1, "plan_batch needs num_graph_seeds = 1"
        for name, pose in (link_poses or {}).items():
            assert name in self.link_names, f"{name} is not in the robot config's link_names"
            assert len(pose.position) == B
        self.calls.append(("plan_batch", {"B": B, "plan_config": plan_config, "link_poses": link_poses,
                                          "goal_pose": goal_pose, "start": start_state}))
        ok = goal_pose.position.norm(dim=1) < self.reach_m
        paths = [self._path(start_state.position[i]) for i in range(B)]
        return MotionGenResult(ok, None if bool(ok.all()) else "IK Fail", paths)

    def plan_single_js(self, start_state: JointState, goal_state: JointState,
                       plan_config: MotionGenPlanConfig = MotionGenPlanConfig()) -> MotionGenResult:
        self._check_state(start_state, 1)
        self._check_state(goal_state, 1)
        self.calls.append(("plan_single_js", {"start": start_state, "goal": goal_state}))
        steps = torch.linspace(0, 1, 4)[:, None]
        path = start_state.position + steps * (goal_state.position - start_state.position)
        return MotionGenResult(torch.tensor([True]), "Success", [JointState(path, self.joint_names)])


def install(monkeypatch) -> None:
    """Register the fake as the `curobo` package (v1 module layout) for the duration of a test."""
    layout = {
        "curobo": {}, "curobo.geom": {}, "curobo.geom.types": {"WorldConfig": WorldConfig},
        "curobo.types": {}, "curobo.types.base": {"TensorDeviceType": TensorDeviceType}, "curobo.types.math": {"Pose": Pose},
        "curobo.types.robot": {"RobotConfig": RobotConfig, "JointState": JointState},
        "curobo.types.state": {"JointState": JointState}, "curobo.wrap": {}, "curobo.wrap.reacher": {},
        "curobo.wrap.reacher.motion_gen": {"MotionGen": MotionGen, "MotionGenConfig": MotionGenConfig,
                                           "MotionGenPlanConfig": MotionGenPlanConfig, "MotionGenResult": MotionGenResult},
    }
    for name, members in layout.items():
        module = types.ModuleType(name)
        module.__dict__.update(members)
        monkeypatch.setitem(sys.modules, name, module)
    MotionGen.instances.clear()
