"""A trained nerfacto NeRF, queried in the world frame: density at points, depth/opacity along rays, images.

Frames: N = NeRF frame (the dataset's poses), W = world (robot base, z up). ``T_world_nerf`` comes from the
``getagrip_nerf.json`` written next to config.yml by training (identity when absent). Metres.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from getagrip_ros.perception.nerf.config import METADATA_FILE, NERF_TRANSFORMS_FILE
from getagrip_ros.status import StageError, StatusCode



@dataclass(frozen=True)
class RayRender:
    rgb: torch.Tensor
    """(N, 3) colour in [0, 1]."""
    depth_m: torch.Tensor
    """(N,) median depth along each (unit-direction) ray, metres."""
    accumulation: torch.Tensor
    """(N,) accumulated opacity in [0, 1]."""
    points_world_m: torch.Tensor
    """(N, 3) origin + depth * direction, world frame."""


class LoadedNerf:
    """A nerfstudio pipeline loaded for queries, with world-frame helpers."""

    def __init__(self, pipeline, T_world_nerf: np.ndarray, config_path: Path, device: str = "cpu",
                 dataset_dir: str = "") -> None:
        self.pipeline, self.config_path, self.device = pipeline, config_path, device
        self.dataset_dir = dataset_dir
        """The capture dataset the NeRF was trained on ("" when unknown)."""
        self.T_world_nerf = torch.as_tensor(np.asarray(T_world_nerf, float), dtype=torch.float32)
        self.T_nerf_world = torch.linalg.inv(self.T_world_nerf)

    @property
    def model(self):
        return self.pipeline.model

    def to_nerf(self, points_world_m: torch.Tensor) -> torch.Tensor:
        R, t = self.T_nerf_world[:3, :3].to(points_world_m), self.T_nerf_world[:3, 3].to(points_world_m)
        return points_world_m @ R.T + t

    @torch.no_grad()
    def density(self, points_world_m: torch.Tensor, chunk: int = 1 << 16) -> torch.Tensor:
        """(N,) volume density sigma (1/m) at world points; zero outside the scene box."""
        points = torch.as_tensor(points_world_m, dtype=torch.float32).reshape(-1, 3)
        out = [self.model.field.density_fn(self.to_nerf(points[i:i + chunk]).to(self.device)).reshape(-1).cpu()
               for i in range(0, len(points), chunk)]
        return torch.cat(out) if out else torch.zeros(0)

    def density_fn(self, points_world_m: torch.Tensor) -> torch.Tensor:
        """The density as a plain callable (for getagrip_ros.perception.density)."""
        return self.density(points_world_m)

    @torch.no_grad()
    def render_rays(self, origins_world_m: torch.Tensor, directions_world: torch.Tensor,
                    pixel_area: float = 1e-5, chunk: int | None = None) -> RayRender:
        """Render rays given in the world frame (directions are normalised here)."""
        from nerfstudio.cameras.rays import RayBundle

        origins = self.to_nerf(torch.as_tensor(origins_world_m, dtype=torch.float32).reshape(-1, 3))
        directions = torch.as_tensor(directions_world, dtype=torch.float32).reshape(-1, 3)
        directions = directions / directions.norm(dim=-1, keepdim=True)
        directions = directions @ self.T_nerf_world[:3, :3].T
        chunk = chunk or self.model.config.eval_num_rays_per_chunk
        rgb, depth, acc = [], [], []
        for i in range(0, len(origins), chunk):
            o, d = origins[i:i + chunk].to(self.device), directions[i:i + chunk].to(self.device)
            bundle = RayBundle(origins=o, directions=d, pixel_area=torch.full_like(o[:, :1], pixel_area),
                               camera_indices=torch.zeros_like(o[:, :1], dtype=torch.long))
            outputs = self.model(bundle)
            rgb.append(outputs["rgb"].cpu()), depth.append(outputs["depth"].reshape(-1).cpu())
            acc.append(outputs["accumulation"].reshape(-1).cpu())
        depth_m = torch.cat(depth)
        points_nerf = origins + directions * depth_m[:, None]
        R, t = self.T_world_nerf[:3, :3], self.T_world_nerf[:3, 3]
        return RayRender(torch.cat(rgb), depth_m, torch.cat(acc), points_nerf @ R.T + t)

    def render_image(self, T_world_camera: np.ndarray, K: np.ndarray, width: int, height: int) -> RayRender:
        """Render a pinhole view; T_world_camera is the ROS optical frame (z forward, y down). Rows first."""
        v, u = torch.meshgrid(torch.arange(height) + 0.5, torch.arange(width) + 0.5, indexing="ij")
        K = torch.as_tensor(K, dtype=torch.float32)
        d_cam = torch.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], torch.ones_like(u)], -1).reshape(-1, 3)
        T = torch.as_tensor(np.asarray(T_world_camera, float), dtype=torch.float32)
        directions = d_cam @ T[:3, :3].T
        origins = T[:3, 3].expand_as(directions)
        return self.render_rays(origins, directions, pixel_area=float(1.0 / (K[0, 0] * K[1, 1])))


def load_nerf(config_path: str | Path, device: str = "cpu") -> LoadedNerf:
    """Load a NeRF trained by :func:`getagrip_ros.perception.nerf.train.train_nerf` (or ns-train nerfacto).

    Nothing the files name runs: the config is read by `safe_config.load_nerf_config`, the checkpoint with
    weights_only=True.

    Raises:
        StageError: INVALID_GOAL when the config or its checkpoint is missing, unreadable or refused.
    """
    config_path = Path(config_path)
    if not config_path.is_file():
        raise StageError(StatusCode.INVALID_GOAL, f"no NeRF config at {config_path}")
    from getagrip_ros.perception.nerf.safe_config import UnsafeNerfConfig, load_nerf_checkpoint, load_nerf_config

    try:
        config = load_nerf_config(config_path)
    except UnsafeNerfConfig as err:  # refused before anything it names runs
        raise StageError(StatusCode.INVALID_GOAL, str(err)) from err
    config.output_dir = config_path.parent.parent.parent.parent  # the run folder may have moved
    checkpoints = sorted(config.get_checkpoint_dir().glob("step-*.ckpt")) if hasattr(config, "get_checkpoint_dir") else []
    if not checkpoints:
        raise StageError(StatusCode.INVALID_GOAL, f"no checkpoint next to {config_path} (nerfstudio_models/step-*.ckpt)")
    metadata_path = config_path.parent / METADATA_FILE
    metadata = json.loads(metadata_path.read_text()) if metadata_path.is_file() else {}
    T_world_nerf = np.array(metadata.get("T_world_nerf", np.eye(4)), float)
    if (config_path.parent / NERF_TRANSFORMS_FILE).is_file():  # the run folder may have moved
        config.pipeline.datamanager.data = config_path.parent / NERF_TRANSFORMS_FILE
    try:
        pipeline = config.pipeline.setup(device=device, test_mode="inference")
    except Exception as err:  # noqa: BLE001 - the config names data or settings nerfstudio cannot set up
        raise StageError(StatusCode.INVALID_GOAL, f"cannot set up the NeRF run {config_path}: "
                         f"{type(err).__name__}: {str(err)[:300]}") from err
    try:
        state = load_nerf_checkpoint(checkpoints[-1])
        pipeline.load_pipeline(state["pipeline"], state["step"])
    except Exception as err:  # noqa: BLE001 - unreadable, holding more than weights, or not this model's weights
        raise StageError(StatusCode.INVALID_GOAL, f"cannot read the NeRF checkpoint {checkpoints[-1]}: "
                         f"{type(err).__name__}: {str(err)[:300]}") from err
    pipeline.eval()
    return LoadedNerf(pipeline, T_world_nerf, config_path, device, metadata.get("dataset_dir", ""))
