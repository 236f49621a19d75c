"""The models that ship inside the package, trained by the data engine (getagrip_ros/models/weights/).

A model-file setting of ``"shipped"`` names the package's own file; ``""`` means not configured; anything
else is a path. ``weights/MODEL_CARD.md`` says how the shipped files were made and how well they do.
"""

from __future__ import annotations

from pathlib import Path

SHIPPED = "shipped"
WEIGHTS_DIR = Path(__file__).with_name("weights")
SHIPPED_FILES = {"bps_evaluator": "bps_evaluator.pt", "bps_sampler": "bps_sampler.pt", "fixed_grasps": "fixed_grasps.npz",
                 "geometry_evaluator": "geometry_evaluator.pt"}
"""Model-file setting -> file name in WEIGHTS_DIR (no NeRF evaluator ships: the data engine makes no NeRFs at scale)."""


def resolve_model_file(setting: str, value: str) -> str:
    """The path a model-file setting (``ModelFiles`` field ``setting``) names: ``"shipped"`` -> the package's file.

    Raises:
        ValueError: ``"shipped"`` for a model the package does not ship.
    """
    if value != SHIPPED:
        return value
    if setting not in SHIPPED_FILES:
        raise ValueError(f"getagrip_ros ships no {setting}; give a file (models.{setting})")
    return str(WEIGHTS_DIR / SHIPPED_FILES[setting])


def shipped_available(*settings: str) -> bool:
    """True when the package holds the shipped file of every named setting (e.g. "bps_evaluator")."""
    return all(setting in SHIPPED_FILES and (WEIGHTS_DIR / SHIPPED_FILES[setting]).is_file() for setting in settings)


def default_method(quick: bool = False) -> tuple[str, str]:
    """(sampler, evaluator) of the whole task (the demo, as grasp_task's defaults): the shipped fixed set ranked by the
    shipped geometry evaluator and pooled with Grasp'D's synthesis, all verified in simulation (the best method of the
    whole-task benchmark, ~40 s a plan on one core). `quick` (the planning CLI's default): the fixed set ranked by the
    geometry evaluator alone (~1 s). Without the geometry evaluator the fixed set ranked by the BPS evaluator, or the
    geometric sampler unranked where the shipped models are missing."""
    if not shipped_available("fixed_grasps"):
        return ("heuristic", "none")
    if shipped_available("geometry_evaluator"):
        return ("fixed", "geometry") if quick else ("fixed_graspd", "geometry>sim")
    return ("fixed", "bps") if shipped_available("bps_evaluator") else ("fixed", "none")
