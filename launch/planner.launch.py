"""plan_grasp alone, for nodes that bring their own perception and motion.

    ros2 launch getagrip_ros planner.launch.py [bps_evaluator:=shipped] [bps_sampler:=shipped] [device:=cpu]

Nodes and parameters come from getagrip_ros.bringup.description (profile "planner").
"""

from getagrip_ros.bringup.launch_description import profile_launch_description


def generate_launch_description():
    return profile_launch_description("planner")
