"""Start arm motion planning and grasp execution (plan_motion, execute_grasp) on the simulated or the real robot.

    ros2 launch getagrip_ros grasp_execution.launch.py [params_file:=...] [backend:=sim|hardware] [use_sim_time:=false]
"""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    share = Path(get_package_share_directory("getagrip_ros"))
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=str(share / "config" / "grasp_execution.yaml"),
                              description="YAML parameters of the grasp_execution node"),
        DeclareLaunchArgument("backend", default_value="sim", description="sim (MuJoCo) or hardware (franky + Allegro)"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="use the /clock topic"),
        Node(package="getagrip_ros", executable="grasp_execution_node", name="grasp_execution", output="screen",
             parameters=[LaunchConfiguration("params_file"), {"backend": LaunchConfiguration("backend"),
                                                              "use_sim_time": LaunchConfiguration("use_sim_time")}]),
    ])
