"""Start the image capture (capture_images action) in the simulated world, or on the robot once that backend exists.

    ros2 launch getagrip_ros capture_images.launch.py [params_file:=...] [backend:=sim] [use_sim_time:=false]
"""

from pathlib import Path  # noqa: I001 - ruff takes `launch` for this repository's launch/ folder

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    share = Path(get_package_share_directory("getagrip_ros"))
    use_sim_time = LaunchConfiguration("use_sim_time")
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=str(share / "config" / "capture_images.yaml"),
                              description="YAML parameters of the capture_images node"),
        DeclareLaunchArgument("backend", default_value="sim",
                              description="sim (MuJoCo world) or hardware (FR3 + ZED 2i: not in this build)"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="use the /clock topic"),
        Node(package="getagrip_ros", executable="capture_images_node", name="capture_images", output="screen",
             parameters=[LaunchConfiguration("params_file"),
                         {"backend": LaunchConfiguration("backend"), "use_sim_time": use_sim_time}]),
    ])
