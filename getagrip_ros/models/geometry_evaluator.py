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

A model trained with the "surface" feature set (:class:`GeometryEvaluatorConfig`) adds 6 features per hand link
measured from samples on the link surfaces. Every feature is invariant to moving the object and the hand together over
the table. Frames: the grasps and
the cloud are in the object frame Oy (y up, origin at the cloud's centroid); the table is the plane y = table_y_m.
Metres and radians. The model is an MLP on the standardised features; the standardisation (feature mean and
std of the training grasps) is part of the weights.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch import nn

from getagrip_ros.grasp.grasp import NUM_FINGERS, Grasp
from getagrip_ros.models.bps_evaluator import LABEL_NAMES
from getagrip_ros.models.layers import LEAKY_SLOPE
from getagrip_ros.robot.allegro import AllegroHand

if TYPE_CHECKING:
    from getagrip_ros.synthesis.hand_model import HandModel

PALM_POINTS_PALM_M = ((0.01, 0.0, -0.045), (0.01, 0.0, -0.01), (0.01, 0.04, -0.03), (0.01, -0.04, -0.03))
"""Points on the palm surface in the palm_link frame (x = palm normal, y = toward the index, z = along the fingers):
centre, below the middle finger, index side, little-finger side."""
COUNT_CENTRES_PALM_M = ((0.01, 0.0, -0.045), (0.06, 0.0, 0.0))
"""Where the cloud points are counted: the palm centre and a point in front of the palm, between fingers and thumb."""
COUNT_RADII_M = (0.03, 0.06)
NUM_HAND_POINTS = NUM_FINGERS * 5 + len(PALM_POINTS_PALM_M)
NUM_FEATURES = 2 * NUM_HAND_POINTS + NUM_FINGERS + len(COUNT_CENTRES_PALM_M) * len(COUNT_RADII_M)
"""56 with the defaults above."""


SURFACE_SAMPLES = 400
"""Samples on the hand's link surfaces for the "surface" feature set (spread by area over the 21 links)."""
SURFACE_NEIGHBOURS = 16
"""Cloud points whose spread gives each cloud point's normal."""
SURFACE_CLIP_M = 0.05
"""Signed distances are clipped to +-this."""
CONTACT_DISTANCE_M = 0.01
"""A hand surface sample this close to the cloud is in contact."""
ALIGN_DISTANCE_M = 0.02
"""Normals are compared for hand samples this close to the cloud."""
SURFACE_FEATURES_PER_LINK = 6


@dataclass(frozen=True)
class GeometryEvaluatorConfig:
    num_features: int = NUM_FEATURES
    hidden_widths: tuple[int, ...] = (512, 512)
    dropout: float = 0.1
    max_distance_m: float = 0.2
    """Hand-cloud distances are clipped here (a point far from the object carries no more information)."""
    feature_set: str = "skeleton"
    """"skeleton": the 56 features above. "surface": those, then per hand link (21: palm, 16 finger links, 4 tips),
    measured from samples on the link surfaces (:func:`feature_count`: 182 in all): the smallest distance to the cloud,
    the smallest signed distance along the cloud's normal (negative inside the object), the fraction of samples in
    contact, the mean alignment of the hand's outward normal with the cloud's inward one near it, the lowest height
    above the table, and log(1 + cloud points inside the link's collision spheres)."""


FEATURE_SETS = ("skeleton", "surface")


@functools.lru_cache(maxsize=1)
def _surface_hand() -> "HandModel":
    """The Allegro hand's surface samples (in each link's frame) and collision spheres, built once (~1-2 s)."""
    from getagrip_ros.synthesis.hand_model import AllegroModelConfig, SurfaceSamplingConfig, allegro_hand_model

    return allegro_hand_model(AllegroModelConfig(contact_links="all", sampling=SurfaceSamplingConfig(num_samples=SURFACE_SAMPLES)))


def feature_count(feature_set: str) -> int:
    """The number of features of a feature set ("skeleton" or "surface")."""
    if feature_set not in FEATURE_SETS:
        raise ValueError(f"unknown feature set {feature_set!r}; known: {FEATURE_SETS}")
    if feature_set == "skeleton":
        return NUM_FEATURES
    return NUM_FEATURES + SURFACE_FEATURES_PER_LINK * len(_surface_hand().link_names)


class GeometryEvaluator(nn.Module):
    """MLP on standardised hand-object features; ``feature_mean`` / ``feature_std`` are buffers (saved with it)."""

    def __init__(self, config: GeometryEvaluatorConfig = GeometryEvaluatorConfig()) -> None:
        super().__init__()
        if config.num_features != feature_count(config.feature_set):
            raise ValueError(f"the {config.feature_set!r} feature set has {feature_count(config.feature_set)} "
                             f"features, the config says {config.num_features}")
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
        config: the model's config (its feature set and distance clip).
    """

    def __init__(self, hand: AllegroHand, cloud_Oy_m: np.ndarray, table_y_m: float,
                 config: GeometryEvaluatorConfig = GeometryEvaluatorConfig()) -> None:
        cloud = np.asarray(cloud_Oy_m, dtype=np.float64)
        if cloud.ndim != 2 or cloud.shape[1] != 3 or len(cloud) == 0:
            raise ValueError(f"the object cloud must have shape (N >= 1, 3), got {cloud.shape}")
        if not np.isfinite(cloud).all() or not np.isfinite(table_y_m):
            raise ValueError("the object cloud and the table height must be finite")
        feature_count(config.feature_set)  # a known set
        self.hand, self.cloud, self.table_y_m, self.config = hand, cloud, float(table_y_m), config
        self.max_distance_m = config.max_distance_m
        self.tree = cKDTree(cloud)
        self._palm_points = torch.tensor(PALM_POINTS_PALM_M, dtype=torch.float64)
        self._count_centres = torch.tensor(COUNT_CENTRES_PALM_M, dtype=torch.float64)
        self._cloud_normals = _cloud_normals(cloud, self.tree) if config.feature_set == "surface" else None

    def __call__(self, grasps_Oy: Grasp) -> torch.Tensor:
        """(B, num_features) float32 features of grasps given in Oy."""
        skeleton = self._skeleton_features(grasps_Oy)
        if self.config.feature_set == "skeleton":
            return skeleton
        return torch.cat([skeleton, self._surface_features(grasps_Oy)], dim=1)

    def _surface_features(self, grasps_Oy: Grasp) -> torch.Tensor:
        g = grasps_Oy.to(device="cpu", dtype=torch.float64)
        b, model = len(g), _surface_hand()
        T_Oy_palm = torch.eye(4, dtype=torch.float64).repeat(b, 1, 1)
        T_Oy_palm[:, :3, :3], T_Oy_palm[:, :3, 3] = g.palm_rotation, g.palm_position_m
        with torch.no_grad():
            T_Oy_link = model.link_poses(T_Oy_palm, g.joint_angles_rad)
            points, hand_normals = (x.numpy() for x in model.surface(T_Oy_link))
            centres = model.sphere_centres(T_Oy_link).numpy()
        num_links, link = len(model.link_names), model.sample_link.numpy()
        distance, nearest = self.tree.query(points.reshape(-1, 3))
        distance, nearest = distance.reshape(b, -1), nearest.reshape(b, -1)
        cloud_normals = self._cloud_normals[nearest]
        signed = np.clip(((points - self.cloud[nearest]) * cloud_normals).sum(-1), -SURFACE_CLIP_M, SURFACE_CLIP_M)
        near = distance < ALIGN_DISTANCE_M
        align = np.where(near, -(hand_normals * cloud_normals).sum(-1), 0.0)
        height = points[..., 1] - self.table_y_m
        radii = np.broadcast_to(model.sphere_radii_m.numpy(), centres.shape[:2])
        inside = self.tree.query_ball_point(centres.reshape(-1, 3), radii.reshape(-1), return_length=True).reshape(b, -1)
        out = np.zeros((b, num_links, SURFACE_FEATURES_PER_LINK))
        for i in range(num_links):
            on_link, sphere_on_link = link == i, model.sphere_link.numpy() == i
            out[:, i, 0] = np.minimum(distance[:, on_link].min(1), self.max_distance_m)
            out[:, i, 1] = signed[:, on_link].min(1)
            out[:, i, 2] = (distance[:, on_link] < CONTACT_DISTANCE_M).mean(1)
            out[:, i, 3] = align[:, on_link].sum(1) / np.maximum(near[:, on_link].sum(1), 1)
            out[:, i, 4] = height[:, on_link].min(1)
            out[:, i, 5] = np.log1p(inside[:, sphere_on_link].sum(1))
        return torch.from_numpy(out.reshape(b, -1)).float()

    def _skeleton_features(self, grasps_Oy: Grasp) -> torch.Tensor:
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


def _cloud_normals(cloud: np.ndarray, tree: cKDTree) -> np.ndarray:
    """(N, 3) unit normals of the cloud's points: the direction of least spread among each point's neighbours, turned
    away from the centroid."""
    k = min(SURFACE_NEIGHBOURS, len(cloud))
    _, neighbours = tree.query(cloud, k=k)
    patch = cloud[neighbours.reshape(len(cloud), k)]
    patch = patch - patch.mean(axis=1, keepdims=True)
    _, vectors = np.linalg.eigh(np.einsum("npi,npj->nij", patch, patch))
    normals = vectors[:, :, 0]
    outward = ((cloud - cloud.mean(axis=0)) * normals).sum(-1) < 0
    normals[outward] *= -1
    return normals
