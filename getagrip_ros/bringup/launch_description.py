"""A ROS 2 LaunchDescription for a profile of `bringup.description` (used by launch/*.launch.py).

Imports `launch` and `launch_ros` (a real ROS 2 install; they are not on PyPI). Every node gets its
config/<node>.yaml, the profile's fixed overrides and the launch arguments that target it. Profiles with the
robot also start robot_state_publisher (unless publish_robot:=false); the robot node then leaves the camera's
frame to it, so every frame of the TF tree has one parent. Profiles that declare `rviz` start rviz2 with
rviz/getagrip.rviz when rviz:=true.
"""

from __future__ import annotations

from getagrip_ros.paths import share_dir


def _value(argument, LaunchConfiguration, PythonExpression):
    """The substitution a parameter gets from an argument (booleans negated where the argument says so)."""
    if not argument.negate:
        return LaunchConfiguration(argument.name)
    return PythonExpression(["'", LaunchConfiguration(argument.name), "'.strip().lower() not in ('true', '1')"])


def profile_launch_description(profile_name: str):
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument
    from launch.conditions import IfCondition
    from launch.substitutions import LaunchConfiguration, PythonExpression
    from launch_ros.actions import Node

    from getagrip_ros.bringup.description import ALL_NODES, arguments_for, profile

    prof = profile(profile_name)
    share = share_dir()
    arguments = arguments_for(prof)
    entities = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description) for a in arguments]
    if prof.has_robot:
        entities.append(Node(package="robot_state_publisher", executable="robot_state_publisher", output="screen",
                             condition=IfCondition(LaunchConfiguration("publish_robot")),
                             parameters=[{"robot_description": (share / "urdf" / "fr3_algr_zed2i.urdf").read_text(),
                                          "use_sim_time": LaunchConfiguration("use_sim_time")}]))
    if any(a.name == "rviz" for a in arguments):
        entities.append(Node(package="rviz2", executable="rviz2", output="screen",
                             arguments=["-d", str(share / "rviz" / "getagrip.rviz")],
                             condition=IfCondition(LaunchConfiguration("rviz")),
                             parameters=[{"use_sim_time": LaunchConfiguration("use_sim_time")}]))
    for node in prof.nodes:
        overrides: dict[str, object] = dict(node.parameters)
        for a in arguments:
            for target, parameter in a.targets:
                if target in (node.name, ALL_NODES):
                    overrides[parameter] = _value(a, LaunchConfiguration, PythonExpression)
            for target, parameter in a.list_targets:
                if target == node.name:  # launch_ros: a list of lists of substitutions is a list of strings
                    overrides[parameter] = [[LaunchConfiguration(a.name)]]
        entities.append(Node(package="getagrip_ros", executable=node.executable, name=node.name, output="screen",
                             parameters=[str(share / "config" / node.params_file), overrides]))
    return LaunchDescription(entities)
