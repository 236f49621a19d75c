"""The whole stack on the robot: FR3 through franky, the Allegro hand through its driver's topics, the ZED 2i.

    ros2 launch getagrip_ros grasp.launch.py [franky_host:=172.16.0.2] [object_label:=mug] [perception:=depth] [device:=cuda]

Start the Allegro driver (its joint_cmd / joint_states topics, config/robot.yaml `hand.*`) first.
Nodes and parameters come from getagrip_ros.bringup.description (profile "hardware").
"""

from getagrip_ros.bringup.launch_description import profile_launch_description


def generate_launch_description():
    return profile_launch_description("hardware")
