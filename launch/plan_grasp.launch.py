"""Start the grasp planner (plan_grasp action) and publish the robot model for RViz.

    ros2 launch getagrip_ros plan_grasp.launch.py [params_file:=...] [publish_robot:=true] [use_sim_time:=false]
"""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    share = Path(get_package_share_directory("getagrip_ros"))
    params_file = LaunchConfiguration("params_file")
    use_sim_time = LaunchConfiguration("use_sim_time")
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=str(share / "config" / "plan_grasp.yaml"),
                              description="YAML parameters of the plan_grasp node"),
        DeclareLaunchArgument("publish_robot", default_value="true",
                              description="also run robot_state_publisher with the FR3 + Allegro + ZED 2i model"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="use the /clock topic"),
        Node(package="getagrip_ros", executable="plan_grasp_node", name="plan_grasp", output="screen",
             parameters=[params_file, {"use_sim_time": use_sim_time}], remappings=[("/tf", "tf"), ("/tf_static", "tf_static")]),
        Node(package="robot_state_publisher", executable="robot_state_publisher", output="screen",
             condition=IfCondition(LaunchConfiguration("publish_robot")),
             parameters=[{"robot_description": (share / "urdf" / "fr3_algr_zed2i.urdf").read_text(),
                          "use_sim_time": use_sim_time}],
             remappings=[("/tf", "tf"), ("/tf_static", "tf_static")]),
    ])
