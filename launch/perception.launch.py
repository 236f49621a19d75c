"""Start the perception stage: capture_images, train_nerf and extract_object action servers.

    ros2 launch getagrip_ros perception.launch.py [backend:=sim] [nerf_profile:=cpu] [extract_backend:=depth]
"""

from pathlib import Path  # noqa: I001 - ruff takes `launch` for this repository's launch/ folder

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    config = Path(get_package_share_directory("getagrip_ros")) / "config"
    use_sim_time = LaunchConfiguration("use_sim_time")
    return LaunchDescription([
        DeclareLaunchArgument("backend", default_value="sim", description="capture backend: sim or hardware"),
        DeclareLaunchArgument("nerf_profile", default_value="cpu", description="NeRF profile: cpu or paper"),
        DeclareLaunchArgument("device", default_value="cpu", description="torch device for NeRF work: cpu or cuda"),
        DeclareLaunchArgument("extract_backend", default_value="depth", description="object extraction: depth or nerf"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="use the /clock topic"),
        Node(package="getagrip_ros", executable="capture_images_node", name="capture_images", output="screen",
             parameters=[str(config / "capture_images.yaml"),
                         {"backend": LaunchConfiguration("backend"), "use_sim_time": use_sim_time}]),
        Node(package="getagrip_ros", executable="train_nerf_node", name="train_nerf", output="screen",
             parameters=[str(config / "train_nerf.yaml"),
                         {"profile": LaunchConfiguration("nerf_profile"), "device": LaunchConfiguration("device"),
                          "use_sim_time": use_sim_time}]),
        Node(package="getagrip_ros", executable="extract_object_node", name="extract_object", output="screen",
             parameters=[str(config / "extract_object.yaml"),
                         {"backend": LaunchConfiguration("extract_backend"), "device": LaunchConfiguration("device"),
                          "use_sim_time": use_sim_time}]),
    ])
