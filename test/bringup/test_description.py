"""The declarative node description, the launch files built on it, and the single-process bring-up's arguments."""

import ast
import re
from pathlib import Path

import pytest
import yaml

from getagrip_ros.bringup.description import LAUNCH_ARGUMENTS, PROFILES, arguments_for, node_parameters, profile
from getagrip_ros.bringup.single_process import ros_arguments

ROOT = Path(__file__).resolve().parents[2]


def _console_scripts() -> set[str]:
    text = (ROOT / "setup.py").read_text()
    return set(re.findall(r'"([\w-]+) = getagrip_ros[\w.]+:main"', text))


def _launch_files() -> list[Path]:
    return sorted((ROOT / "launch").glob("*.launch.py"))


def test_every_profile_node_has_its_executable_parameter_file_and_class():
    import importlib

    scripts = _console_scripts()
    for name, nodes in PROFILES.items():
        for node in nodes:
            assert node.executable in scripts, (name, node.executable)
            assert (ROOT / "config" / node.params_file).is_file(), node.params_file
            params = yaml.safe_load((ROOT / "config" / node.params_file).read_text())
            assert node.name in params, f"{node.params_file} is not keyed by the node name {node.name}"
            assert hasattr(importlib.import_module(node.module), node.node_class)


def test_every_launch_file_names_only_existing_executables_configs_and_profiles():
    scripts, configs = _console_scripts(), {p.name for p in (ROOT / "config").iterdir()}
    assert {"sim.launch.py", "grasp.launch.py", "planner.launch.py"} <= {p.name for p in _launch_files()}
    for path in _launch_files():
        text = path.read_text()
        ast.parse(text)
        for executable in re.findall(r'executable="([\w-]+)"', text):
            assert executable in scripts or executable == "robot_state_publisher", (path.name, executable)
        for config in re.findall(r'"([\w.]+\.ya?ml)"', text):
            assert config in configs, (path.name, config)
        for name in re.findall(r'profile_launch_description\("(\w+)"', text):
            profile(name)
    assert "sim" in (ROOT / "launch" / "sim.launch.py").read_text()


def test_launch_arguments_reach_the_right_node_parameters():
    nodes = profile("sim")
    params = node_parameters(nodes, {"object": "tabletop20/cube", "evaluator": "none"})
    assert params["capture_images"]["sim.object_name"] == params["grasp_execution"]["sim.object_name"] == "tabletop20/cube"
    assert params["grasp_task"]["task.evaluator"] == "none" and params["grasp_task"]["object_label"] == "tabletop20/cube"
    assert params["grasp_execution"]["backend"] == "sim" and profile("hardware")[4].parameters["backend"] == "hardware"
    with pytest.raises(ValueError, match="unknown launch arguments"):
        node_parameters(nodes, {"objet": "x"})
    with pytest.raises(ValueError, match="unknown profile"):
        profile("simulation")
    assert {a.name for a in arguments_for(profile("planner"))} == {
        a.name for a in LAUNCH_ARGUMENTS if any(n == "plan_grasp" for n, _ in a.targets)}


def _flat(tree: dict, prefix: str = "") -> set[str]:
    out = set()
    for k, v in tree.items():
        out |= _flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}"}
    return out


def test_every_dotted_target_is_a_parameter_of_its_node():
    """(The YAML files mirror the nodes' config dataclasses: test/ros/test_params.py.)"""
    names = {}
    for node in PROFILES["sim"]:
        names[node.name] = _flat(yaml.safe_load((ROOT / "config" / node.params_file).read_text())[node.name]["ros__parameters"])
        assert set(node.parameters) <= names[node.name], node.name
    for argument in LAUNCH_ARGUMENTS:
        for node, parameter in argument.targets:
            assert parameter in names[node], (argument.name, node, parameter)


def test_single_process_arguments_use_the_same_files_and_overrides(tmp_path):
    nodes = profile("sim")
    args = ros_arguments(nodes, {"object": "tabletop20/cube"}, {"plan_grasp": {"num_samples": 256}}, tmp_path)
    files = [args[i + 1] for i, a in enumerate(args) if a == "--params-file"]
    assert [Path(f).name for f in files[:-1]] == [n.params_file for n in nodes]
    overrides = yaml.safe_load(Path(files[-1]).read_text())
    assert overrides["plan_grasp"]["ros__parameters"]["num_samples"] == 256
    assert overrides["capture_images"]["ros__parameters"]["sim"]["object_name"] == "tabletop20/cube"
    with pytest.raises(ValueError, match="no node"):
        ros_arguments(nodes, {}, {"nobody": {"x": 1}}, tmp_path)
