"""The human_demo sampler: the grasp a human demonstrated, transferred to the Allegro hand.

Pure Python/torch (no rclpy). The object's SDF is built as the graspd sampler builds it (from the goal's mesh, else
from its cloud: :func:`getagrip_ros.planning.graspd_sampler.planning_object_sdf`), then
:func:`getagrip_ros.human_demo.transfer.transfer_grasp` turns the demonstration (in the goal's frame) into one
37-D grasp in that frame. A demonstration farther than 2 cm from the object, or in another frame, is refused.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.human_demo.demonstration import HumanDemonstration
from getagrip_ros.human_demo.transfer import (PhysicsRefinement, SimilarityRegion, TransferConfig, TransferError,
                                              TransferResult, refine_with_physics, similar_grasps, transfer_grasp,
                                              transfer_objective)
from getagrip_ros.planning.graspd_sampler import GraspdSamplerConfig, graspd_hand_model, planning_object_sdf
from getagrip_ros.planning.object_input import PlanningObject
from getagrip_ros.status import StageError, StatusCode
from getagrip_ros.synthesis.hand_model import AllegroModelConfig, HandModel, SurfaceSamplingConfig, allegro_hand_model


@dataclass(frozen=True)
class HumanDemoSamplerConfig:
    """Settings of the human_demo sampler."""

    transfer: TransferConfig = field(default_factory=TransferConfig)
    """The optimisation (losses, steps, learning rates; the seed's numbers)."""
    num_candidates: int = 16
    """The transferred grasp, and up to this many minus one variants of it in the similarity region for an evaluator
    to choose among, or for the motion planner to fall back on
    (:func:`getagrip_ros.human_demo.transfer.similar_grasps`); 1: the transfer alone."""
    similarity_region: SimilarityRegion = SimilarityRegion()
    physics_refinement: PhysicsRefinement = PhysicsRefinement()
    """``num_steps`` > 0: the transfer refined by the contact-rich synthesis core inside a soft similarity trust region
    (:func:`getagrip_ros.human_demo.transfer.refine_with_physics`); the candidates are then its ``num_starts`` refined
    grasps in the synthesis's physics-score order, then the transfer, instead of the random variants."""
    hand: AllegroModelConfig = AllegroModelConfig(contact_links="all", sampling=SurfaceSamplingConfig(num_samples=1000))
    """The Allegro's surface for the heatmaps and the interpenetration terms (1000 samples: one start of a transfer
    takes ~5 s on 2 cores at the machine's usual matmul rate; 3000: ~9 s, the same similarity)."""

    def __post_init__(self) -> None:
        if not isinstance(self.num_candidates, int) or self.num_candidates < 1:
            raise ValueError(f"human_demo: num_candidates must be a whole number >= 1, got {self.num_candidates!r}")


@functools.lru_cache(maxsize=2)
def human_demo_hand_model(config: AllegroModelConfig) -> HandModel:
    """The Allegro hand model of `config`, built once per process (~1 s)."""
    return allegro_hand_model(config)


@dataclass
class HumanDemoSample:
    grasps: Grasp
    """The transferred grasp (and its variants), in the object's frame."""
    transfer: TransferResult
    note: str


def sample_human_demo(obj: PlanningObject, demonstration: HumanDemonstration, config: HumanDemoSamplerConfig,
                      object_config: GraspdSamplerConfig, seed: int, step: Callable[[float], None]) -> HumanDemoSample:
    """Transfer `demonstration` onto `obj`; `object_config` (graspd's settings) says how the object's SDF is built
    and how the pre-grasp leaves the contact.

    `step(fraction)` is called before the SDF, before the transfer, during a physics refinement and at the end, and
    may raise (a cancel).

    Raises:
        StageError(INVALID_GOAL): a demonstration in another frame or far from the object, or an object whose SDF
            cannot be built.
    """
    if demonstration.frame_id != obj.frame_id:
        raise StageError(StatusCode.INVALID_GOAL, f"the demonstration is in frame {demonstration.frame_id!r}, the "
                         f"object in {obj.frame_id!r}")
    step(0.0)
    sdf, source, note = planning_object_sdf(obj, object_config)
    step(0.2)
    try:
        result = transfer_grasp(demonstration, human_demo_hand_model(config.hand), sdf, config.transfer,
                                T_object_table=np.eye(4), seed=seed, pregrasp=object_config.synthesis)
    except TransferError as err:
        raise StageError(StatusCode.INVALID_GOAL, f"human demonstration: {err}") from err
    grasps, refine, variants = result.grasp, config.physics_refinement, ""
    if refine.num_steps > 0 or config.num_candidates > 1:
        objective = transfer_objective(demonstration, human_demo_hand_model(config.hand), sdf, config.transfer,
                                       T_object_table=np.eye(4), seed=seed)
        generator = torch.Generator().manual_seed(seed)
        if refine.num_steps > 0:
            refined = refine_with_physics(objective, result, graspd_hand_model(object_config.hand), object_config.synthesis,
                                          refine, generator, config.similarity_region,
                                          progress=lambda fraction: step(0.4 + 0.6 * fraction))
            grasps = Grasp.cat([refined.grasps, result.grasp])
            variants = (f"; refined by the synthesis core from {refine.num_starts} starts, first the best physics score "
                        f"(contact heatmap difference {float(refined.contact_heatmap_difference[0]):.3f}, orientation "
                        f"difference {float(refined.orientation_difference[0]):.3f}), the transfer last")
        else:
            grasps, _, _ = similar_grasps(objective, result, config.num_candidates, generator, config.similarity_region,
                                          object_config.synthesis)
            variants = f"; {len(grasps) - 1} variants in the similarity region"
    step(1.0)
    note += (f"; transferred from the human demonstration (contact heatmap difference "
             f"{result.contact_heatmap_difference:.3f}, orientation difference {result.orientation_difference:.3f}"
             f"{', SDF from the mesh' if source == 'mesh' else ''}{variants})")
    return HumanDemoSample(grasps, result, note)
