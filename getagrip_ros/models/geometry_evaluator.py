"""Geometry grasp evaluator: hand-object features -> predicted [y_pick, y_coll, y_PGS].

Not a model of the paper (a getagrip_ros addition). The BPS evaluator sees the object through 4096 distances
from basis points ~3 cm apart, too coarse for the centimetre offsets that decide y_coll and y_pick. This one
places the hand (forward kinematics of the pre-grasp joints) and measures it against the observed cloud:

- distance from each of 24 hand points (the 20 skeleton points: four links and the tip of each finger, and 4
  points on the palm) to the nearest cloud point (24 values, clipped at ``max_distance_m``),
- the height of each of those points above the table (24),
- per finger, the cosine between its closing direction d_i and the direction from its tip to the nearest
  cloud point (4),
- log(1 + number of cloud points) within 3 cm, then 6 cm, of the palm centre and of a point in front of the palm (4).

Every feature is invariant to moving the object and the hand together over the table. Frames: the grasps and
the cloud are in the object frame Oy (y up, origin at the cloud's centroid); the table is the plane y = table_y_m.
Metres and radians. The model is an MLP on the standardised features; the standardisation (feature mean and
std of the training grasps) is part of the weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch import nn

from getagrip_ros.grasp.grasp import NUM_FINGERS, Grasp
from getagrip_ros.models.bps_evaluator import LABEL_NAMES
from getagrip_ros.models.layers import LEAKY_SLOPE
from getagrip_ros.robot.allegro import AllegroHand

PALM_POINTS_PALM_M = ((0.01, 0.0, -0.045), (0.01, 0.0, -0.01), (0.01, 0.04, -0.03), (0.01, -0.04, -0.03))
"""Points on the palm surface in the palm_link frame (x = palm normal, y = toward the index, z = along the fingers):
centre, below the middle finger, index side, little-finger side."""
COUNT_CENTRES_PALM_M = ((0.01, 0.0, -0.045), (0.06, 0.0, 0.0))
"""Where the cloud points are counted: the palm centre and a point in front of the palm, between fingers and thumb."""
COUNT_RADII_M = (0.03, 0.06)
NUM_HAND_POINTS = NUM_FINGERS * 5 + len(PALM_POINTS_PALM_M)
NUM_FEATURES = 2 * NUM_HAND_POINTS + NUM_FINGERS + len(COUNT_CENTRES_PALM_M) * len(COUNT_RADII_M)
"""56 with the defaults above."""


@dataclass(frozen=True)
class GeometryEvaluatorConfig:
    num_features: int = NUM_FEATURES
    hidden_widths: tuple[int, ...] = (512, 512)
    dropout: float = 0.1
    max_distance_m: float = 0.2
    """Hand-cloud distances are clipped here (a point far from the object carries no more information)."""


class GeometryEvaluator(nn.Module):
    """MLP on standardised hand-object features; ``feature_mean`` / ``feature_std`` are buffers (saved with it)."""

    def __init__(self, config: GeometryEvaluatorConfig = GeometryEvaluatorConfig()) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("feature_mean", torch.zeros(config.num_features))
        self.register_buffer("feature_std", torch.ones(config.num_features))
        layers: list[nn.Module] = []
        width = config.num_features
        for hidden in config.hidden_widths:
            layers += [nn.Linear(width, hidden), nn.LeakyReLU(LEAKY_SLOPE), nn.Dropout(config.dropout)]
            width = hidden
        layers.append(nn.Linear(width, len(LABEL_NAMES)))
        self.mlp = nn.Sequential(*layers)

    def set_normalization(self, features: torch.Tensor, min_std: float = 1e-6) -> None:
        """Standardise with the mean and std of these (training) features, (N, num_features)."""
        self.feature_mean.copy_(features.mean(dim=0))
        self.feature_std.copy_(features.std(dim=0).clamp(min=min_std))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(B, num_features) raw features -> (B, 3) probabilities [y_pick, y_coll, y_PGS]."""
        return torch.sigmoid(self.mlp((features - self.feature_mean) / self.feature_std))


class HandObjectFeatures:
    """The features of grasps on one object: the cloud's k-d tree is built once, then any number of batches.

    Args:
        cloud_Oy_m: (N, 3) observed object points in Oy, N >= 1.
        table_y_m: the table plane's y in Oy (minus the centroid's height above the table).
    """

    def __init__(self, hand: AllegroHand, cloud_Oy_m: np.ndarray, table_y_m: float,
                 max_distance_m: float = GeometryEvaluatorConfig.max_distance_m) -> None:
        cloud = np.asarray(cloud_Oy_m, dtype=np.float64)
        if cloud.ndim != 2 or cloud.shape[1] != 3 or len(cloud) == 0:
            raise ValueError(f"the object cloud must have shape (N >= 1, 3), got {cloud.shape}")
        if not np.isfinite(cloud).all() or not np.isfinite(table_y_m):
            raise ValueError("the object cloud and the table height must be finite")
        self.hand, self.cloud, self.table_y_m, self.max_distance_m = hand, cloud, float(table_y_m), max_distance_m
        self.tree = cKDTree(cloud)
        self._palm_points = torch.tensor(PALM_POINTS_PALM_M, dtype=torch.float64)
        self._count_centres = torch.tensor(COUNT_CENTRES_PALM_M, dtype=torch.float64)

    def __call__(self, grasps_Oy: Grasp) -> torch.Tensor:
        """(B, NUM_FEATURES) float32 features of grasps given in Oy."""
        g = grasps_Oy.to(device="cpu", dtype=torch.float64)
        b = len(g)
        q = g.joint_angles_rad.to(self.hand.device, self.hand.dtype)
        skeleton_palm = self.hand.skeleton_positions(q).cpu().double().reshape(b, NUM_FINGERS * 5, 3)
        local = torch.cat([skeleton_palm, self._palm_points.expand(b, -1, -1),
                           self._count_centres.expand(b, -1, -1)], dim=1)
        points = torch.einsum("bij,bpj->bpi", g.palm_rotation, local) + g.palm_position_m[:, None]  # Oy
        hand_points = points[:, :NUM_HAND_POINTS].numpy()
        distance, nearest = self.tree.query(hand_points.reshape(-1, 3))
        distance = np.minimum(distance, self.max_distance_m).reshape(b, NUM_HAND_POINTS)
        height = hand_points[..., 1] - self.table_y_m
        tip_rows = np.arange(4, NUM_FINGERS * 5, 5)
        tips = hand_points[:, tip_rows]
        to_nearest = self.cloud[nearest.reshape(b, NUM_HAND_POINTS)[:, tip_rows]] - tips
        to_nearest /= np.maximum(np.linalg.norm(to_nearest, axis=-1, keepdims=True), 1e-9)
        cosine = (g.fingertip_directions.numpy() * to_nearest).sum(-1)
        centres = points[:, NUM_HAND_POINTS:].numpy().reshape(-1, 3)
        counts = [np.log1p(self.tree.query_ball_point(centres, r, return_length=True)).reshape(b, -1) for r in COUNT_RADII_M]
        features = np.concatenate([distance, height, cosine, *counts], axis=1)
        return torch.from_numpy(features).float()
