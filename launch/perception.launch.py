"""The perception stage: the robot (capture_images) with train_nerf and extract_object.

    ros2 launch getagrip_ros perception.launch.py [backend:=sim|hardware] [device:=cuda]

Nodes and parameters come from getagrip_ros.bringup.description (profile "perception").
"""

from getagrip_ros.bringup.launch_description import profile_launch_description


def generate_launch_description():
    return profile_launch_description("perception")
