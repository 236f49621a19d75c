"""Grasp evaluators: predicted [y_pick, y_coll, y_PGS] for grasps of one object (only y_PGS ranks), calibrated when
the checkpoint holds a calibration (:mod:`getagrip_ros.models.calibration`; it never changes an evaluator's ranking).

- BPS evaluator: the object's BPS and the grasp in Oy.
- NeRF evaluator: NeRF opacity on a grid in front of each fingertip and on a global grid around the
  centroid, each with the grid points' Oy coordinates as extra channels.
- Geometry evaluator: the hand placed by forward kinematics and measured against the object's points
  (:mod:`getagrip_ros.models.geometry_evaluator`); needs a point cloud or a NeRF, not a BPS alone.
- Mean evaluator: the mean of several evaluators' predictions (``bps+geometry``: it ranked best in the offline
  ranking diagnostic, and equals the geometry evaluator alone with the paper's protocol on validation objects).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from getagrip_ros.grasp.frames import invert_transform
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.models.checkpoints import LoadedModel
from getagrip_ros.models.geometry_evaluator import HandObjectFeatures
from getagrip_ros.perception.bps import public_basis_points_By
from getagrip_ros.perception.density import PUBLIC_GLOBAL_GRID, FingerGridConfig, GlobalGridConfig, finger_density_grids
from getagrip_ros.planning.object_input import PlanningObject, nerf_global_grid
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.status import StageError, StatusCode

ScoreFn = Callable[[Grasp], torch.Tensor]
"""Grasps in the object's frame -> (B, 3) float32 CPU predictions [y_pick, y_coll, y_PGS]."""



def _raw(predicted: torch.Tensor) -> torch.Tensor:
    return predicted


def _grasps_in_Oy(grasps: Grasp, obj: PlanningObject) -> Grasp:
    return grasps.to(dtype=torch.float64).transformed(invert_transform(obj.T_frame_Oy), "Oy")


class BpsGraspEvaluator:
    def __init__(self, loaded: LoadedModel) -> None:
        n = loaded.config.num_basis_points
        basis = public_basis_points_By()
        if loaded.bps_basis is not None and (loaded.bps_basis.shape != basis.shape
                                             or not np.allclose(loaded.bps_basis, basis, atol=1e-6)):
            raise StageError(StatusCode.INTERNAL_ERROR, "the BPS evaluator checkpoint was trained with another basis "
                             f"({loaded.bps_basis.shape[0]} points) than this stack's fixed basis")
        if n != len(basis):
            raise StageError(StatusCode.INTERNAL_ERROR, f"the BPS evaluator expects {n} basis points, the basis has {len(basis)}")
        self.loaded = loaded
        self.device = next(loaded.model.parameters()).device

    def prepare(self, obj: PlanningObject, calibrated: bool = True) -> ScoreFn:
        """Score grasps of this object (calibrated: through the checkpoint's calibration, when it has one)."""
        finish = self.loaded.calibrated if calibrated else _raw
        score = self.loaded.model.conditioned(torch.as_tensor(obj.bps_m, dtype=torch.float32, device=self.device))

        def evaluate(grasps: Grasp) -> torch.Tensor:
            x = _grasps_in_Oy(grasps, obj).to_vector().to(self.device, torch.float32)
            return finish(score(x).float().cpu())

        return evaluate


class GeometryGraspEvaluator:
    def __init__(self, loaded: LoadedModel, hand: AllegroHand) -> None:
        self.loaded, self.hand = loaded, hand
        self.device = next(loaded.model.parameters()).device

    def prepare(self, obj: PlanningObject, calibrated: bool = True) -> ScoreFn:
        """Score grasps of this object (calibrated: through the checkpoint's calibration, when it has one)."""
        finish = self.loaded.calibrated if calibrated else _raw
        if obj.points_m is None:
            raise StageError(StatusCode.INVALID_GOAL, "the geometry evaluator needs the object's points "
                             "(a point cloud or a NeRF goal, not a BPS alone)")
        T_Oy_frame = invert_transform(obj.T_frame_Oy).numpy()
        cloud_Oy = np.asarray(obj.points_m, dtype=np.float64) @ T_Oy_frame[:3, :3].T + T_Oy_frame[:3, 3]
        table_y = float(T_Oy_frame[1, 3])  # the frame's origin (on the table plane z = 0) has y = table height in Oy
        features = HandObjectFeatures(self.hand, cloud_Oy, table_y, self.loaded.config)
        model = self.loaded.model

        @torch.no_grad()
        def evaluate(grasps: Grasp) -> torch.Tensor:
            return finish(model(features(_grasps_in_Oy(grasps, obj)).to(self.device)).float().cpu())

        return evaluate


class MeanGraspEvaluator:
    """The mean of its members' uncalibrated predictions (the ensemble as it was measured; calibrating one member would
    reweigh it); needs what every member needs."""

    def __init__(self, members: list) -> None:
        if not members:
            raise ValueError("a mean evaluator needs at least one member")
        self.members = members

    def prepare(self, obj: PlanningObject) -> ScoreFn:
        scores = [member.prepare(obj, calibrated=False) for member in self.members]

        def evaluate(grasps: Grasp) -> torch.Tensor:
            return torch.stack([score(grasps) for score in scores]).mean(dim=0)

        return evaluate


def finger_grid_inputs(grasps: Grasp, hand: AllegroHand) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(fingertip positions, closing directions, along-finger directions), each (B, 4, 3) float32 in the grasps'
    frame: what :func:`getagrip_ros.perception.density.finger_frames` builds the finger grids from."""
    g = grasps.to(dtype=torch.float32)
    T_palm_tip = hand.fingertip_poses(g.joint_angles_rad.to(hand.device, hand.dtype)).cpu().float()  # (B, 4, 4, 4)
    R, p = g.palm_rotation, g.palm_position_m
    tips = torch.einsum("bij,bfj->bfi", R, T_palm_tip[..., :3, 3]) + p[:, None]
    along = torch.einsum("bij,bfj->bfi", R, T_palm_tip[..., :3, 2])
    return tips, g.fingertip_directions, along


class NerfGraspEvaluator:
    """Needs a NeRF (density function); ``batch_size`` grasps are gridded and evaluated at a time."""

    def __init__(self, loaded: LoadedModel, hand: AllegroHand, batch_size: int = 16) -> None:
        self.loaded, self.hand, self.batch_size = loaded, hand, batch_size
        finger, glob = loaded.metadata.get("finger_grid"), loaded.metadata.get("global_grid")
        self.finger_grid = FingerGridConfig(**finger) if finger else FingerGridConfig()
        self.global_grid = GlobalGridConfig(**glob) if glob else PUBLIC_GLOBAL_GRID
        self.device = next(loaded.model.parameters()).device

    def prepare(self, obj: PlanningObject, calibrated: bool = True) -> ScoreFn:
        """Score grasps of this object (calibrated: through the checkpoint's calibration, when it has one)."""
        finish = self.loaded.calibrated if calibrated else _raw
        if obj.density_fn is None:
            raise StageError(StatusCode.INVALID_GOAL, "the NeRF evaluator needs a NeRF object source")
        T_Oy_frame = invert_transform(obj.T_frame_Oy).float()

        def in_Oy(points: torch.Tensor) -> torch.Tensor:
            return points @ T_Oy_frame[:3, :3].T + T_Oy_frame[:3, 3]

        model = self.loaded.model
        # a cube around the Oy origin (the centroid), indexed along Oy's axes as the training grids
        # (getagrip_ros.training.datasets.global_grid_inputs)
        global_input = nerf_global_grid(obj, self.global_grid)[None].to(self.device) if model.config.use_global else None

        @torch.no_grad()
        def evaluate(grasps: Grasp) -> torch.Tensor:
            out = []
            for start in range(0, len(grasps), self.batch_size):
                g = grasps[start:start + self.batch_size].to(dtype=torch.float32)
                grids = finger_density_grids(obj.density_fn, *finger_grid_inputs(g, self.hand), self.finger_grid)
                coords = in_Oy(grids.points_world_m).permute(0, 1, 5, 2, 3, 4)
                fingers = torch.cat([grids.alpha[:, :, None], coords], dim=2).to(self.device)
                glob_batch = None if global_input is None else global_input.expand(len(g), -1, -1, -1, -1)
                out.append(model(fingers, glob_batch).float().cpu())
            return finish(torch.cat(out))

        return evaluate
