"""A ROS 2 LaunchDescription for a profile of `bringup.description` (used by launch/*.launch.py).

Imports `launch` and `launch_ros` (a real ROS 2 install; they are not on PyPI).
"""

from __future__ import annotations

from pathlib import Path


def profile_launch_description(profile_name: str, defaults: dict[str, str] | None = None):
    """Declare the profile's launch arguments and start its nodes with config/<node>.yaml + the arguments (and
    robot_state_publisher for RViz unless publish_robot:=false)."""
    from ament_index_python.packages import get_package_share_directory
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument
    from launch.conditions import IfCondition
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    from getagrip_ros.bringup.description import arguments_for, profile

    config = Path(get_package_share_directory("getagrip_ros")) / "config"
    nodes = profile(profile_name)
    arguments = arguments_for(nodes)
    entities = [DeclareLaunchArgument(a.name, default_value=(defaults or {}).get(a.name, a.default), description=a.description)
                for a in arguments]
    entities.append(DeclareLaunchArgument("use_sim_time", default_value="false", description="use the /clock topic"))
    entities.append(DeclareLaunchArgument("publish_robot", default_value="true",
                                          description="also run robot_state_publisher with the FR3 + Allegro + ZED 2i model"))
    share = config.parent
    entities.append(Node(package="robot_state_publisher", executable="robot_state_publisher", output="screen",
                         condition=IfCondition(LaunchConfiguration("publish_robot")),
                         parameters=[{"robot_description": (share / "urdf" / "fr3_algr_zed2i.urdf").read_text(),
                                      "use_sim_time": LaunchConfiguration("use_sim_time")}]))
    for node in nodes:
        overrides: dict[str, object] = dict(node.parameters)
        for a in arguments:
            for target, parameter in a.targets:
                if target == node.name:
                    overrides[parameter] = LaunchConfiguration(a.name)
        overrides["use_sim_time"] = LaunchConfiguration("use_sim_time")
        entities.append(Node(package="getagrip_ros", executable=node.executable, name=node.name, output="screen",
                             parameters=[str(config / node.params_file), overrides]))
    return LaunchDescription(entities)
