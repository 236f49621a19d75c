"""The declarative node description, the launch files built on it, and the process bring-ups' arguments."""

import ast
import re
from pathlib import Path

import pytest
import yaml

from getagrip_ros.bringup.description import (
    ALL_NODES, LAUNCH_ARGUMENTS, PROFILES, arguments_for, as_bool, node_parameters, profile,
)
from getagrip_ros.bringup.parameters import ros_arguments, write_overrides

ROOT = Path(__file__).resolve().parents[2]


def _console_scripts() -> set[str]:
    text = (ROOT / "setup.py").read_text()
    return set(re.findall(r'"([\w-]+) = getagrip_ros[\w.]+:main"', text))


def _launch_files() -> list[Path]:
    return sorted((ROOT / "launch").glob("*.launch.py"))


def _yaml_params(node) -> dict:
    return yaml.safe_load((ROOT / "config" / node.params_file).read_text())[node.name]["ros__parameters"]


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def test_every_profile_node_has_its_executable_parameter_file_and_class():
    import importlib

    scripts = _console_scripts()
    for prof in PROFILES.values():
        for node in prof.nodes:
            assert node.executable in scripts, (prof.name, node.executable)
            assert (ROOT / "config" / node.params_file).is_file(), node.params_file
            params = yaml.safe_load((ROOT / "config" / node.params_file).read_text())
            assert node.name in params, f"{node.params_file} is not keyed by the node name {node.name}"
            assert hasattr(importlib.import_module(node.module), node.node_class)


def test_one_robot_owner_per_profile():
    """Capture and execution drive the robot through one node: no profile holds two robot owners."""
    for prof in PROFILES.values():
        owners = [n for n in prof.nodes if n.name == "robot"]
        assert len(owners) <= 1 and prof.has_robot == bool(owners), prof.name
    assert not profile("planner").has_robot and profile("sim").has_robot and profile("hardware").has_robot


def test_every_launch_file_reads_an_existing_profile():
    assert {p.name for p in _launch_files()} == {f"{name}.launch.py" for name in
                                                 ("sim", "grasp", "planner", "robot", "perception")}
    used = set()
    for path in _launch_files():
        text = path.read_text()
        ast.parse(text)
        names = re.findall(r'profile_launch_description\("(\w+)"', text)
        assert len(names) == 1, path.name
        used.add(profile(names[0]).name)
    assert used == set(PROFILES)


def test_launch_arguments_reach_the_right_node_parameters():
    sim = profile("sim")
    params = node_parameters(sim, {"object": "tabletop20/cube", "evaluator": "none", "work_dir": "/w",
                                   "publish_robot": "false", "use_sim_time": "true", "plan_with_mesh": "false"})
    assert params["grasp_task"]["task.plan_with_mesh"] is False
    assert "task.plan_with_mesh" not in node_parameters(sim, {})["grasp_task"]  # the parameter file's true stands
    assert params["robot"]["sim.object_name"] == "tabletop20/cube" and "object_label" not in params["grasp_task"]
    assert params["grasp_task"]["task.evaluator"] == "none" and params["grasp_task"]["task.work_dir"] == "/w"
    assert params["robot"]["backend"] == "sim" and params["robot"]["publish_camera_tf"] is True  # no robot_state_publisher
    assert all(p["use_sim_time"] is True for p in params.values())
    hardware = profile("hardware")
    assert node_parameters(hardware, {})["robot"]["backend"] == "hardware"
    assert node_parameters(hardware, {"publish_robot": "true"})["robot"]["publish_camera_tf"] is False
    with pytest.raises(ValueError, match="unknown launch arguments"):
        node_parameters(sim, {"objet": "x"})
    with pytest.raises(ValueError, match="unknown launch arguments"):
        node_parameters(hardware, {"object": "tabletop20/cube"})  # hardware trials are labelled, not simulated
    with pytest.raises(ValueError, match="expected true or false"):
        node_parameters(sim, {"publish_robot": "maybe"})
    with pytest.raises(ValueError, match="unknown profile"):
        profile("simulation")


def test_arguments_make_sense_per_profile():
    names = {p: {a.name for a in arguments_for(profile(p))} for p in PROFILES}
    assert "object" in names["sim"] and "object" not in names["hardware"] and "object_label" in names["hardware"]
    assert "object_label" in names["sim"]
    assert "franky_host" in names["hardware"] and "franky_host" not in names["sim"]
    assert "publish_robot" not in names["planner"] and "publish_robot" in names["sim"]  # plan_grasp alone: no robot model
    assert {p for p in PROFILES if "rviz" in names[p]} == {"sim", "hardware"}  # the whole stack: something to show
    assert "backend" in names["robot"] and "backend" not in names["sim"]
    assert names["planner"] == {"bps_evaluator", "nerf_evaluator", "geometry_evaluator", "bps_sampler", "fixed_grasps",
                                "device", "use_sim_time", "work_dir"}  # work_dir: where NeRF goals may come from
    assert as_bool("True") and not as_bool("0")


def test_rviz_starts_only_under_ros2_launch(capsys):
    """`rviz` sets no node parameter; the process bring-ups refuse rviz=true (rviz2 is C++), as they refuse
    publish_robot=true, before anything starts."""
    from getagrip_ros.cli.getagrip import main

    (rviz,) = [a for a in LAUNCH_ARGUMENTS if a.name == "rviz"]
    assert rviz.default == "false" and rviz.kind is bool and not rviz.targets and not rviz.list_targets
    sim = profile("sim")
    assert node_parameters(sim, {"rviz": "true"}) == node_parameters(sim, {})
    with pytest.raises(ValueError, match="expected true or false"):
        node_parameters(sim, {"rviz": "yes please"})
    with pytest.raises(ValueError, match="unknown launch arguments"):
        node_parameters(profile("planner"), {"rviz": "false"})
    assert main(["bringup", "--profile", "sim", "--arg", "rviz=true"]) == 2
    err = capsys.readouterr().err
    assert "rviz2 is a C++ program" in err and "<profile>.launch.py rviz:=true" in err
    source = (ROOT / "getagrip_ros" / "bringup" / "launch_description.py").read_text()
    assert 'arguments=["-d", str(share / "rviz" / "getagrip.rviz")]' in source
    assert 'condition=IfCondition(LaunchConfiguration("rviz"))' in source
    assert (ROOT / "rviz" / "getagrip.rviz").is_file()


def test_argument_defaults_are_the_parameter_files_values():
    """Launch files and process bring-ups agree: an argument's default is what its target's parameter file holds
    (publish_robot aside: only ros2 launch can start robot_state_publisher)."""
    for prof in PROFILES.values():
        files = {n.name: _flat(_yaml_params(n)) for n in prof.nodes}
        for argument in arguments_for(prof):
            if argument.negate or argument.kind is bool:
                continue
            for node, parameter in argument.targets:
                if node in files:
                    assert str(files[node][parameter]) == argument.default, (prof.name, argument.name, node, parameter)


def test_every_dotted_target_is_a_parameter_of_its_node():
    """(The YAML files mirror the nodes' config dataclasses: test/ros/test_params.py.)"""
    names = {n.name: set(_flat(_yaml_params(n))) for prof in PROFILES.values() for n in prof.nodes}
    for prof in PROFILES.values():
        for node in prof.nodes:
            assert set(node.parameters) <= names[node.name], node.name
    for argument in LAUNCH_ARGUMENTS:
        for node, parameter in argument.targets + argument.list_targets:
            if node != ALL_NODES and parameter != "use_sim_time":
                assert parameter in names[node], (argument.name, node, parameter)
    work_dir = {node: params for node, params in node_parameters(profile("sim"), {"work_dir": "/data/w"}).items()
                if params.get("data_roots")}
    assert set(work_dir) == {"robot", "train_nerf", "extract_object", "plan_grasp"}
    assert all(p["data_roots"] == ["/data/w"] for p in work_dir.values())


def test_the_readme_lists_every_launch_argument_with_its_default():
    readme = (ROOT / "README.md").read_text()
    for argument in LAUNCH_ARGUMENTS:
        default = argument.default or "''"
        assert f"| `{argument.name}` | `{default}` |" in readme, argument.name


def test_bringup_arguments_use_the_same_files_and_overrides(tmp_path):
    sim = profile("sim")
    overrides = write_overrides(sim, {"object": "tabletop20/cube"}, {"plan_grasp": {"num_samples": 256}}, tmp_path)
    args = ros_arguments(sim.nodes, overrides)
    files = [args[i + 1] for i, a in enumerate(args) if a == "--params-file"]
    assert [Path(f).name for f in files[:-1]] == [n.params_file for n in sim.nodes]
    values = yaml.safe_load(Path(files[-1]).read_text())
    assert values["plan_grasp"]["ros__parameters"]["num_samples"] == 256
    assert values["robot"]["ros__parameters"]["sim"]["object_name"] == "tabletop20/cube"
    with pytest.raises(ValueError, match="no node"):
        write_overrides(sim, {}, {"nobody": {"x": 1}}, tmp_path)
