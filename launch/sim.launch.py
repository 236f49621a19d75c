"""The whole stack against the simulated world (MuJoCo FR3 + Allegro + wrist camera, one catalog object).

    ros2 launch getagrip_ros sim.launch.py [object:=tabletop20/cube] [sampler:=fixed] [evaluator:=bps] [perception:=depth]

Nodes and parameters come from getagrip_ros.bringup.description (profile "sim"), as for
`getagrip bringup --profile sim`. Then send a grasp_object goal.
"""

from getagrip_ros.bringup.launch_description import profile_launch_description


def generate_launch_description():
    return profile_launch_description("sim")
