"""Hand-posed human demonstrations for the tests."""

import math

import torch

from getagrip_ros.human_demo.demonstration import HumanDemonstration
from getagrip_ros.human_demo.human_hand import HumanHandModelConfig, human_hand_model, model_keypoints
from getagrip_ros.synthesis.hand_model import SurfaceSamplingConfig

F64 = torch.float64

#: The planner's human_demo settings (dotted parameter names) for tests whose demonstration only has to get past grasp
#: planning: one finger start, short optimisations, two candidates.
SHORT_TRANSFER = {"human_demo.num_candidates": 2, "human_demo.transfer.finger_init": "contact",
                  "human_demo.transfer.num_object_points": 800, "human_demo.transfer.finger_iterations": 20,
                  "human_demo.transfer.iterations": 30, "human_demo.transfer.lr_drop_at": 20}


def side_power_grasp(centre_xy_m=(0.0, 0.0), radius_m=0.035, height_m=0.06, frame_id="object",
                     azimuth_deg=0.0) -> HumanDemonstration:
    """A right hand on the side of an upright can (axis through centre_xy_m) at azimuth_deg from +x, the palm
    facing the axis at height_m, the fingers round it counter-clockwise seen from above (MCP 0.4, PIP 0.8, DIP 0.3
    rad), the thumb slightly flexed. At -90 deg the palm is on the -y side and the fingers point along +x."""
    human = human_hand_model(HumanHandModelConfig(sampling=SurfaceSamplingConfig(num_samples=100)))
    x, z = torch.tensor([-1.0, 0.0, 0.0], dtype=F64), torch.tensor([0.0, 1.0, 0.0], dtype=F64)
    T = torch.eye(4, dtype=F64)
    T[:3, :3] = torch.stack([x, torch.linalg.cross(z, x), z], 1)
    T[:3, 3] = torch.tensor([radius_m + 0.013, -0.085, height_m], dtype=F64)
    a = math.radians(azimuth_deg)
    about_axis = torch.eye(4, dtype=F64)
    about_axis[:2, :2] = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=F64)
    about_axis[:2, 3] = torch.tensor(centre_xy_m, dtype=F64)
    q = torch.zeros(1, 20, dtype=F64)
    names = human.tree.joint_names
    for finger in ("index", "middle", "ring", "pinky"):
        for joint, angle in (("mcp", 0.4), ("pip", 0.8), ("dip", 0.3)):
            q[0, names.index(f"{finger}_{joint}")] = angle
    q[0, names.index("thumb_mcp")] = 0.4
    return HumanDemonstration("keypoints21", frame_id, model_keypoints(human, (about_axis @ T)[None], q)[0].numpy())
