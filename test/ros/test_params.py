"""Node parameters mirror the core config dataclasses; the shipped YAML matches them."""

import dataclasses
import importlib

import pytest
import yaml
from rclpy.parameter import Parameter

from getagrip_ros.paths import config_path
from getagrip_ros.planning.planner import GraspPlannerConfig
from getagrip_ros.config_tree import flatten
from getagrip_ros.ros.params import declare_config


def _flatten_yaml(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flatten_yaml(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


NODE_CONFIGS = {  # node name (= its YAML file and top-level key) -> the dataclass its parameters mirror
    "plan_grasp": "getagrip_ros.ros.plan_grasp_node:PlanGraspNodeConfig",
    "robot": "getagrip_ros.ros.robot_node:RobotNodeConfig",
    "train_nerf": "getagrip_ros.ros.train_nerf_node:TrainNerfNodeConfig",
    "extract_object": "getagrip_ros.ros.extract_object_node:ExtractObjectNodeConfig",
    "grasp_task": "getagrip_ros.ros.grasp_task_node:GraspTaskNodeConfig",
}


@pytest.mark.parametrize("node, config_class", NODE_CONFIGS.items(), ids=list(NODE_CONFIGS))
def test_shipped_yaml_lists_every_config_field_with_its_default(node, config_class):
    module, name = config_class.split(":")
    config = getattr(importlib.import_module(module), name)()
    params = yaml.safe_load(config_path(f"{node}.yaml").read_text())[node]["ros__parameters"]
    assert _flatten_yaml(params) == flatten(config)


def test_declared_parameters_build_the_config_and_refuse_runtime_changes(rclpy_node):
    from rclpy.node import Node

    overrides = [Parameter("num_samples", value=123), Parameter("closing.pregrasp_distance_m", value=-0.02),
                 Parameter("cable_filter.up", value=[0.0, 1.0, 0.0])]
    node = Node("params_probe", parameter_overrides=overrides)
    try:
        config = declare_config(node, GraspPlannerConfig())
        expected = dataclasses.replace(
            GraspPlannerConfig(), num_samples=123,
            closing=dataclasses.replace(GraspPlannerConfig().closing, pregrasp_distance_m=-0.02),
            cable_filter=dataclasses.replace(GraspPlannerConfig().cable_filter, up=(0.0, 1.0, 0.0)))
        assert config == expected
        result = node.set_parameters([Parameter("num_samples", value=5)])[0]
        assert not result.successful and "restart the node" in result.reason
        assert node.get_parameter("num_samples").value == 123
    finally:
        node.destroy_node()


def test_wrong_parameter_type_is_refused(rclpy_node):
    from rclpy.exceptions import InvalidParameterTypeException
    from rclpy.node import Node

    node = Node("params_probe_bad", parameter_overrides=[Parameter("num_samples", value="many")])
    try:
        with pytest.raises(InvalidParameterTypeException):
            declare_config(node, GraspPlannerConfig())
    finally:
        node.destroy_node()


def test_capture_spiral_parameters_rebuild_the_spiral_config():
    from getagrip_ros.perception.capture_trajectory import SpiralConfig
    from getagrip_ros.task.robot_stages import SpiralParams

    spiral = SpiralParams().spiral()
    default = SpiralConfig()
    assert (spiral.radii_m, spiral.heights_m, spiral.turns, spiral.look_at_height_m) == \
        (default.radii_m, default.heights_m, default.turns, default.look_at_height_m)
    with pytest.raises(ValueError, match="one value per spiral"):
        SpiralParams(radii_m=(0.3, 0.2)).spiral()


def test_the_stack_config_sets_only_real_node_parameters_with_their_defaults():
    """The benchmark's ROS mode gives a bring-up `StackConfig.node_parameters()`: every name is a parameter the node
    declares, and the default StackConfig gives the nodes' own defaults (one set of dataclasses, no drift)."""
    from getagrip_ros.task.in_process import StackConfig

    for node, values in StackConfig().node_parameters().items():
        module, name = NODE_CONFIGS[node].split(":")
        declared = flatten(getattr(importlib.import_module(module), name)())
        assert set(values) <= set(declared), (node, sorted(set(values) - set(declared)))
        assert {k: declared[k] for k in values} == values, node
