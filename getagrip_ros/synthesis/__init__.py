"""Contact-rich grasp synthesis by differentiable contact (after Grasp'D): a hand-agnostic torch core.

Modules: ``hand_model`` (any hand: kinematic tree, surface samples, collision spheres, adjacency; the
Allegro builder), ``object_sdf`` (grid signed distance of a mesh or point cloud), ``contact`` (penalty
contact with the leaky gradient), ``losses`` (the relaxed objective) and ``optimizer``
(``synthesize_grasps``). Pure torch/numpy: nothing here imports ROS.
"""
