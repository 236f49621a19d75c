"""Typed settings of the grasp task (units: seconds, metres)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from getagrip_ros.trials.scoring import ScoringConfig

PERCEPTION_BACKENDS = ("depth", "nerf")


@dataclass(frozen=True)
class StageTimeouts:
    """Wall-clock budget of each stage; a stage over its budget ends the trial with TIMEOUT."""

    reset_s: float = 300.0
    """Simulation: a new object is prepared (convex decomposition) the first time it is used."""
    capture_s: float = 600.0
    perception_s: float = 1800.0
    """NeRF training on a CPU takes minutes; depth fusion seconds."""
    grasp_planning_s: float = 300.0
    motion_planning_s: float = 60.0
    execution_s: float = 120.0

    def of(self, stage: str) -> float:
        return float(getattr(self, f"{stage}_s"))


@dataclass(frozen=True)
class GraspTaskConfig:
    """What one trial does; recorded (with its hash) in every trial bag."""

    perception: str = "depth"
    """depth (fused depth images, fast on CPU) | nerf (nerfacto trained on the images)."""
    num_images: int = 100
    """Poses planned on the capture spirals (unreachable ones are dropped)."""
    sampler: str = "fixed_graspd"
    """fixed_graspd (the fixed set and Grasp'D synthesis pooled; the best measured in the whole task, README "The grasp
    benchmark") | fixed | diffusion | heuristic | graspd | human_demo."""
    evaluator: str = "geometry>sim"
    """geometry>sim (the geometry evaluator ranks, simulation on the perceived object verifies; fixed_graspd needs it)
    | geometry (hand-object distances, the best learned one in MODEL_CARD.md) | bps | nerf | sim | none."""
    num_grasps: int = 40
    """Ranked grasps handed to motion planning (the first with a feasible motion is executed)."""
    plan_with_mesh: bool = True
    """Send perception's object mesh with its cloud to grasp planning: the graspd sampler then builds its SDF from
    the mesh; the other samplers and the evaluators use the cloud either way."""
    planner: str = "ompl"
    """Arm motion planner: ompl (CPU) | curobo (GPU)."""
    seed: int = 0
    trials_dir: str = "trials"
    """Every trial bag goes under this folder."""
    work_dir: str = "work"
    """Each trial's capture, NeRF and object mesh go to <work_dir>/<trial name>/ (about 18 MB a trial at 640 x 360)."""
    record_image_stride: int = 1
    """Record every n-th capture image in the bag (1 = all)."""
    timeouts: StageTimeouts = field(default_factory=StageTimeouts)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)

    def __post_init__(self) -> None:
        if self.perception not in PERCEPTION_BACKENDS:
            raise ValueError(f"unknown perception backend {self.perception!r}; known: {list(PERCEPTION_BACKENDS)}")
        if self.num_grasps < 1 or self.num_images < 1 or self.record_image_stride < 1:
            raise ValueError("num_grasps, num_images and record_image_stride must be >= 1")

    def hash(self) -> str:
        """Short stable hash of every setting that shapes a trial (recorded with each one); where the files go
        (trials_dir, work_dir) is left out, so the same settings hash alike in every folder and mode."""
        import hashlib
        import json

        settings = {k: v for k, v in asdict(self).items() if k not in ("trials_dir", "work_dir")}
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
