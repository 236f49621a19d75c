"""The robot alone, the one owner of the arm, hand and camera: reset_world, capture_images, plan_motion, execute_grasp.

    ros2 launch getagrip_ros robot.launch.py [backend:=sim|hardware] [object:=tabletop20/cube] [franky_host:=172.16.0.2]

Nodes and parameters come from getagrip_ros.bringup.description (profile "robot").
"""

from getagrip_ros.bringup.launch_description import profile_launch_description


def generate_launch_description():
    return profile_launch_description("robot")
