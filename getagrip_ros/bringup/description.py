"""The stack's node sets ("profiles") and launch arguments, declared once.

The launch files (launch/sim.launch.py, grasp.launch.py, planner.launch.py) and the single-process
bring-up (`getagrip bringup --profile sim`) both read this module, so they cannot drift apart.
Pure Python: no rclpy or launch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class NodeSpec:
    """One node of a profile."""

    name: str
    """Node name = the top-level key of its parameter file."""
    executable: str
    """console_scripts entry of the package (setup.py)."""
    module: str
    """Python module holding the node class (single-process bring-up)."""
    node_class: str
    params_file: str
    """File under config/ with the node's parameters."""
    parameters: dict[str, object] = field(default_factory=dict)
    """Fixed parameter overrides of this profile (dotted names)."""


@dataclass(frozen=True)
class LaunchArgument:
    name: str
    default: str
    description: str
    targets: tuple[tuple[str, str], ...]
    """(node name, dotted parameter name) pairs the argument sets."""


def _node(name: str, cls: str, **parameters: object) -> NodeSpec:
    return NodeSpec(name, f"{name}_node", f"getagrip_ros.ros.{name}_node", cls, f"{name}.yaml", dict(parameters))


def _profile_nodes(backend: str) -> tuple[NodeSpec, ...]:
    # In simulation the capture and execution nodes each hold a world; grasp_execution's is the robot whose
    # joint_states the trials record, so the capture node publishes its own only while it captures.
    idle_states = {"state_rate_hz": 0.0} if backend == "sim" else {}
    return (_node("capture_images", "CaptureImagesNode", backend=backend, **idle_states),
            _node("train_nerf", "TrainNerfNode"),
            _node("extract_object", "ExtractObjectNode"),
            _node("plan_grasp", "PlanGraspNode"),
            _node("grasp_execution", "GraspExecutionNode", backend=backend),
            _node("grasp_task", "GraspTaskNode"))


PROFILES: dict[str, tuple[NodeSpec, ...]] = {
    "sim": _profile_nodes("sim"),
    "hardware": _profile_nodes("hardware"),
    "planner": (_node("plan_grasp", "PlanGraspNode"),),
}
"""sim: the whole stack against the simulated world; hardware: the same nodes on the FR3 + Allegro + ZED 2i;
planner: plan_grasp alone (for other nodes that bring their own perception and motion)."""

LAUNCH_ARGUMENTS: tuple[LaunchArgument, ...] = (
    LaunchArgument("object", "tabletop20/green_tea", "sim: catalog object on the table",
                   (("capture_images", "sim.object_name"), ("grasp_execution", "sim.object_name"),
                    ("grasp_task", "object_label"))),
    LaunchArgument("perception", "depth", "perception backend of grasp_object goals: depth or nerf",
                   (("grasp_task", "task.perception"),)),
    LaunchArgument("sampler", "fixed", "grasp sampler of grasp_object goals (fixed, diffusion, heuristic)",
                   (("grasp_task", "task.sampler"),)),
    LaunchArgument("evaluator", "geometry", "grasp evaluator of grasp_object goals (geometry, bps, bps+geometry, nerf, none)",
                   (("grasp_task", "task.evaluator"),)),
    LaunchArgument("planner", "ompl", "arm motion planner: ompl (CPU) or curobo (GPU)", (("grasp_task", "task.planner"),)),
    LaunchArgument("bps_evaluator", "shipped", "BPS evaluator checkpoint (a file or 'shipped')",
                   (("plan_grasp", "models.bps_evaluator"),)),
    LaunchArgument("nerf_evaluator", "", "NeRF evaluator checkpoint (none ships)", (("plan_grasp", "models.nerf_evaluator"),)),
    LaunchArgument("geometry_evaluator", "shipped", "hand-object geometry evaluator checkpoint (a file or 'shipped')",
                   (("plan_grasp", "models.geometry_evaluator"),)),
    LaunchArgument("bps_sampler", "shipped", "diffusion sampler checkpoint (a file or 'shipped')",
                   (("plan_grasp", "models.bps_sampler"),)),
    LaunchArgument("fixed_grasps", "shipped", "fixed grasp set (a file or 'shipped')", (("plan_grasp", "models.fixed_grasps"),)),
    LaunchArgument("trials_dir", "~/getagrip_trials", "where trial bags go", (("grasp_task", "task.trials_dir"),)),
    LaunchArgument("device", "cpu", "torch device of the learned models and NeRFs (cpu or cuda)",
                   (("plan_grasp", "device"), ("train_nerf", "device"), ("extract_object", "device"))),
)


def profile(name: str) -> tuple[NodeSpec, ...]:
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; known: {sorted(PROFILES)}")
    return PROFILES[name]


def arguments_for(nodes: tuple[NodeSpec, ...]) -> tuple[LaunchArgument, ...]:
    """The launch arguments that set a parameter of one of `nodes`."""
    names = {n.name for n in nodes}
    return tuple(a for a in LAUNCH_ARGUMENTS if any(node in names for node, _ in a.targets))


def node_parameters(nodes: tuple[NodeSpec, ...], arguments: dict[str, object]) -> dict[str, dict[str, object]]:
    """{node name: {dotted parameter: value}}: each profile's fixed overrides, then the given launch arguments
    (unknown argument names raise ValueError)."""
    known = {a.name: a for a in LAUNCH_ARGUMENTS}
    unknown = sorted(set(arguments) - set(known))
    if unknown:
        raise ValueError(f"unknown launch arguments {unknown}; known: {sorted(known)}")
    out = {n.name: dict(n.parameters) for n in nodes}
    for name, value in arguments.items():
        for node, parameter in known[name].targets:
            if node in out:
                out[node][parameter] = value
    return out
