"""Node parameters mirror the core config dataclasses; the shipped YAML matches them."""

import dataclasses

import pytest
import yaml
from rclpy.parameter import Parameter

from getagrip_ros.paths import config_path
from getagrip_ros.planning.planner import GraspPlannerConfig
from getagrip_ros.ros.params import _flatten, declare_config


def _flatten_yaml(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flatten_yaml(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_shipped_yaml_lists_every_config_field_with_its_default():
    params = yaml.safe_load(config_path("plan_grasp.yaml").read_text())["plan_grasp"]["ros__parameters"]
    assert _flatten_yaml(params) == _flatten(GraspPlannerConfig())


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


def test_capture_images_yaml_lists_every_config_field_with_its_default():
    from getagrip_ros.ros.capture_images_node import CaptureNodeConfig

    params = yaml.safe_load(config_path("capture_images.yaml").read_text())["capture_images"]["ros__parameters"]
    assert _flatten_yaml(params) == _flatten(CaptureNodeConfig())


def test_capture_spiral_parameters_rebuild_the_spiral_config():
    from getagrip_ros.perception.capture_trajectory import SpiralConfig
    from getagrip_ros.ros.capture_images_node import SpiralParams

    spiral = SpiralParams().spiral()
    default = SpiralConfig()
    assert (spiral.radii_m, spiral.heights_m, spiral.turns, spiral.look_at_height_m) == \
        (default.radii_m, default.heights_m, default.turns, default.look_at_height_m)
    with pytest.raises(ValueError, match="one value per spiral"):
        SpiralParams(radii_m=(0.3, 0.2)).spiral()
