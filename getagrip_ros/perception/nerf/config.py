"""NeRF training settings: the paper's profile and a CPU profile, mapped onto a nerfstudio TrainerConfig.

Frames: the dataset's poses are in the NeRF frame N (z up, metres, scale 1), which is the world frame
translated so that its origin lies on the table below the capture centre (``T_world_nerf`` in the
dataset's metadata). Get a Grip settings: no scene contraction, no pose auto-scaling, no centering or
orientation, scale factor 1.0, so NeRF coordinates are metric and axis-aligned with the world.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nerfstudio.engine.trainer import TrainerConfig

METADATA_FILE = "getagrip_nerf.json"
"""Written next to nerfstudio's config.yml: T_world_nerf, the training settings and measured quality."""
NERF_TRANSFORMS_FILE = "transforms_nerf_frame.json"
"""The dataset's transforms with poses in the NeRF frame (absolute image paths), written into the run folder."""


@dataclass(frozen=True)
class NerfTrainConfig:
    """nerfacto settings that matter for Get a Grip; everything else stays at nerfacto's defaults."""

    num_iterations: int = 400
    """Training iterations (paper: 400)."""
    train_rays_per_batch: int = 4096
    """Rays per training iteration (nerfacto default 4096)."""
    eval_rays_per_batch: int = 4096
    """Rays per held-out evaluation batch (PSNR on views not trained on)."""
    log2_hashmap_size: int = 19
    """Hash-grid table size per level (nerfacto default 19)."""
    num_proposal_samples_per_ray: tuple[int, int] = (256, 96)
    """Samples per ray of the two proposal networks (nerfacto default)."""
    num_nerf_samples_per_ray: int = 48
    """Samples per ray of the final field (nerfacto default)."""
    near_plane_m: float = 0.05
    far_plane_m: float = 1000.0
    """Ray range (nerfacto defaults); space outside the scene box has zero density anyway."""
    scene_half_extent_m: float = 1.0
    """The scene box is [-e, e]^3 m in the NeRF frame (nerfstudio ``scene_scale``); density is zero outside."""
    eval_num_rays_per_chunk: int = 1 << 15
    """Rays rendered at once when rendering images."""
    camera_optimizer: str = "SO3xR3"
    """Pose refinement of nerfacto ("SO3xR3" default, "off" trusts the robot's poses)."""
    train_split_fraction: float = 0.9
    """Fraction of images trained on; the rest give the held-out PSNR."""
    seed: int = 0
    device: str = "cpu"
    """"cpu" or "cuda"."""

    def __post_init__(self) -> None:
        if self.num_iterations < 1:
            raise ValueError(f"num_iterations must be >= 1, got {self.num_iterations}")
        if self.train_rays_per_batch < 1 or self.eval_rays_per_batch < 1:
            raise ValueError("rays per batch must be >= 1")
        if not 0.0 < self.train_split_fraction <= 1.0:
            raise ValueError(f"train_split_fraction must be in (0, 1], got {self.train_split_fraction}")
        if self.camera_optimizer not in ("SO3xR3", "SE3", "off"):
            raise ValueError(f"camera_optimizer must be SO3xR3, SE3 or off, got {self.camera_optimizer!r}")
        if not 0.0 < self.near_plane_m < self.far_plane_m:
            raise ValueError("need 0 < near_plane_m < far_plane_m")


NERF_PROFILES: dict[str, NerfTrainConfig] = {
    # As published: nerfacto defaults with the Get a Grip settings, 400 iterations.
    "paper": NerfTrainConfig(),
    # Fits 2 CPU cores in minutes: a quarter of the rays, fewer samples, a smaller hash table, a scene box,
    # near and far planes that fit the capture spirals (cameras are 0.15-0.6 m from the object), and the
    # robot's poses trusted: nerfacto's pose refinement (on in "paper") moved the NeRF 12-16 cm off the
    # world frame in our measurements (README, Perception numbers).
    "cpu": NerfTrainConfig(train_rays_per_batch=1024, eval_rays_per_batch=1024, log2_hashmap_size=15,
                           num_proposal_samples_per_ray=(96, 48), num_nerf_samples_per_ray=32, near_plane_m=0.1,
                           far_plane_m=1.2, scene_half_extent_m=0.6, eval_num_rays_per_chunk=4096,
                           camera_optimizer="off"),
}


@dataclass(frozen=True)
class NerfTrainerConfig:
    """How a NeRF trainer (the train_nerf node, the in-process stack) turns a request into training settings."""

    profile: str = "cpu"
    """Profile for requests that name none: "cpu" (minutes on 2 cores) or "paper" (as published; use a GPU)."""
    device: str = "cpu"
    """"cpu" or "cuda"."""
    camera_optimizer: str = ""
    """nerfacto pose refinement: "" = the profile's (paper: SO3xR3, cpu: off), or "off", "SO3xR3", "SE3".
    With robot (FK) poses, "off" keeps the NeRF in the world frame."""

    def training_config(self, profile: str = "", num_iterations: int = 0, seed: int = 0) -> "NerfTrainConfig":
        """The settings of one request ("" / 0 = this trainer's profile and its iteration count); ValueError for an
        unknown profile."""
        name = profile or self.profile
        if name not in NERF_PROFILES:
            raise ValueError(f"unknown profile {name!r}; use one of {sorted(NERF_PROFILES)}")
        overrides: dict = {"seed": int(seed), "device": self.device}
        if num_iterations:
            overrides["num_iterations"] = int(num_iterations)
        if self.camera_optimizer:
            overrides["camera_optimizer"] = self.camera_optimizer
        return nerf_profile(name, **overrides)


def nerf_profile(name: str, **overrides) -> NerfTrainConfig:
    """A named profile ("paper" or "cpu"), with fields overridden."""
    if name not in NERF_PROFILES:
        raise ValueError(f"unknown NeRF profile {name!r}; choose one of {sorted(NERF_PROFILES)}")
    return dataclasses.replace(NERF_PROFILES[name], **overrides)


def trainer_config(dataset_dir: Path, output_dir: Path, config: NerfTrainConfig,
                   experiment_name: str = "object") -> "TrainerConfig":
    """The nerfstudio TrainerConfig for nerfacto with the Get a Grip settings (writes nothing).

    The saved config.yml works with nerfstudio's own tools (e.g. ``ns-viewer --load-config``); its model is
    :class:`~getagrip_ros.perception.nerf.offline_nerfacto.OfflineNerfactoModel` (nerfacto that builds offline).
    """
    from nerfstudio.cameras.camera_optimizers import CameraOptimizerConfig
    from nerfstudio.configs.base_config import LoggingConfig, MachineConfig, ViewerConfig
    from nerfstudio.data.datamanagers.base_datamanager import VanillaDataManagerConfig
    from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig
    from nerfstudio.engine.optimizers import AdamOptimizerConfig
    from nerfstudio.engine.schedulers import ExponentialDecaySchedulerConfig
    from nerfstudio.engine.trainer import TrainerConfig
    from nerfstudio.pipelines.base_pipeline import VanillaPipelineConfig

    from getagrip_ros.perception.nerf.offline_nerfacto import OfflineNerfactoModelConfig

    dataparser = NerfstudioDataParserConfig(
        data=dataset_dir, scale_factor=1.0, downscale_factor=1, scene_scale=config.scene_half_extent_m, orientation_method="none",
        center_method="none", auto_scale_poses=False, train_split_fraction=config.train_split_fraction)
    model = OfflineNerfactoModelConfig(
        eval_num_rays_per_chunk=config.eval_num_rays_per_chunk, average_init_density=0.01,
        disable_scene_contraction=True, implementation="torch" if config.device == "cpu" else "tcnn",
        near_plane=config.near_plane_m, far_plane=config.far_plane_m,
        num_proposal_samples_per_ray=tuple(config.num_proposal_samples_per_ray),
        num_nerf_samples_per_ray=config.num_nerf_samples_per_ray, log2_hashmap_size=config.log2_hashmap_size,
        camera_optimizer=CameraOptimizerConfig(mode=config.camera_optimizer))

    def adam(lr: float, lr_final: float, max_steps: int) -> dict:
        return {"optimizer": AdamOptimizerConfig(lr=lr, eps=1e-15),
                "scheduler": ExponentialDecaySchedulerConfig(lr_final=lr_final, max_steps=max_steps)}

    return TrainerConfig(
        method_name="nerfacto", experiment_name=experiment_name, output_dir=output_dir, data=dataset_dir,
        max_num_iterations=config.num_iterations, steps_per_save=config.num_iterations, mixed_precision=False,
        machine=MachineConfig(seed=config.seed, device_type=config.device),
        logging=LoggingConfig(profiler="none"), viewer=ViewerConfig(num_rays_per_chunk=config.eval_num_rays_per_chunk),
        vis="tensorboard",
        pipeline=VanillaPipelineConfig(
            datamanager=VanillaDataManagerConfig(dataparser=dataparser, data=dataset_dir,
                                                 train_num_rays_per_batch=config.train_rays_per_batch,
                                                 eval_num_rays_per_batch=config.eval_rays_per_batch),
            model=model),
        optimizers={  # nerfacto's published optimisers
            "proposal_networks": adam(1e-2, 1e-4, 200000),
            "fields": adam(1e-2, 1e-4, 200000),
            "camera_opt": adam(1e-3, 1e-4, 5000),
        })
