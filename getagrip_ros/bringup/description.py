"""The stack's node sets ("profiles") and launch arguments, declared once.

The launch files (launch/*.launch.py) and the process bring-ups (`getagrip bringup --profile sim`, one
process or one per node) all read this module, so they cannot drift apart. The robot node is the one owner
of the robot in every profile that has it. Pure Python: no rclpy or launch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALL_NODES = "*"
"""A target node name that means every node of the profile."""


@dataclass(frozen=True)
class NodeSpec:
    """One node of a profile."""

    name: str
    """Node name = the top-level key of its parameter file."""
    executable: str
    """console_scripts entry of the package (setup.py)."""
    module: str
    """Python module holding the node class (and its main())."""
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
    """(node name or ALL_NODES, dotted parameter name) pairs the argument sets."""
    kind: type = str
    """The parameters' type: str, or bool for "true"/"false" arguments."""
    negate: bool = False
    """The parameters get the argument's boolean negation (publish_robot -> publish_camera_tf)."""
    profiles: tuple[str, ...] = ()
    """Profiles that declare it; () = every profile with one of its target nodes."""
    list_targets: tuple[tuple[str, str], ...] = ()
    """(node name, dotted parameter name) pairs that get the argument as a one-element list of strings."""


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    nodes: tuple[NodeSpec, ...]
    defaults: dict[str, str] = field(default_factory=dict)
    """Argument defaults of this profile (else the argument's own)."""

    @property
    def has_robot(self) -> bool:
        return any(n.name == "robot" for n in self.nodes)


def _node(name: str, cls: str, **parameters: object) -> NodeSpec:
    return NodeSpec(name, f"{name}_node", f"getagrip_ros.ros.{name}_node", cls, f"{name}.yaml", dict(parameters))


def _stack(backend: str) -> tuple[NodeSpec, ...]:
    return (_node("robot", "RobotNode", backend=backend), _node("train_nerf", "TrainNerfNode"),
            _node("extract_object", "ExtractObjectNode"), _node("plan_grasp", "PlanGraspNode"),
            _node("grasp_task", "GraspTaskNode"))


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("sim", "the whole stack against one simulated world (MuJoCo FR3 + Allegro + wrist camera, one object)",
            _stack("sim")),
    Profile("hardware", "the same nodes on the FR3 (franky), the Allegro hand (its driver's topics) and the ZED 2i",
            _stack("hardware")),
    Profile("planner", "plan_grasp alone, for nodes that bring their own perception and motion",
            (_node("plan_grasp", "PlanGraspNode"),)),
    Profile("robot", "the robot alone: reset_world, capture_images, plan_motion and execute_grasp",
            (_node("robot", "RobotNode"),)),
    Profile("perception", "the robot (capture_images) with train_nerf and extract_object",
            (_node("robot", "RobotNode"), _node("train_nerf", "TrainNerfNode"), _node("extract_object", "ExtractObjectNode"))),
)}
"""Every bring-up of the stack, by name."""

LAUNCH_ARGUMENTS: tuple[LaunchArgument, ...] = (
    LaunchArgument("object", "tabletop20/green_tea", "sim: the catalog object (or mesh file) the world resets to",
                   (("robot", "sim.object_name"),), profiles=("sim", "robot", "perception")),
    LaunchArgument("object_label", "", "what stands on the table, recorded with trials whose goal names none ('' = sim: "
                   "the simulated object; hardware: unknown)", (("grasp_task", "object_label"),)),
    LaunchArgument("backend", "sim", "the robot: sim (MuJoCo) or hardware (FR3 + Allegro + ZED 2i)", (("robot", "backend"),),
                   profiles=("robot", "perception")),
    LaunchArgument("franky_host", "172.16.0.2", "hardware: the FR3's FCI address", (("robot", "hardware.franky_host"),),
                   profiles=("hardware", "robot", "perception")),
    LaunchArgument("perception", "depth", "perception backend of grasp_object goals: depth or nerf",
                   (("grasp_task", "task.perception"),)),
    LaunchArgument("sampler", "fixed_graspd", "grasp sampler of grasp_object goals (fixed_graspd with geometry>sim; fixed, diffusion, heuristic, graspd)",
                   (("grasp_task", "task.sampler"),)),
    LaunchArgument("evaluator", "geometry>sim", "grasp evaluator of grasp_object goals (geometry>sim, geometry, bps, bps+geometry, nerf, sim, none)",
                   (("grasp_task", "task.evaluator"),)),
    LaunchArgument("planner", "ompl", "arm motion planner: ompl (CPU) or curobo (GPU)", (("grasp_task", "task.planner"),)),
    LaunchArgument("plan_with_mesh", "true", "send perception's fused mesh with the cloud to plan_grasp (graspd and "
                   "fixed_graspd: their SDF and the sim evaluator's model from the mesh)", (("grasp_task", "task.plan_with_mesh"),),
                   kind=bool),
    LaunchArgument("bps_evaluator", "shipped", "BPS evaluator checkpoint (a file or 'shipped')",
                   (("plan_grasp", "models.bps_evaluator"),)),
    LaunchArgument("nerf_evaluator", "", "NeRF evaluator checkpoint (none ships)", (("plan_grasp", "models.nerf_evaluator"),)),
    LaunchArgument("geometry_evaluator", "shipped", "hand-object geometry evaluator checkpoint (a file or 'shipped')",
                   (("plan_grasp", "models.geometry_evaluator"),)),
    LaunchArgument("bps_sampler", "shipped", "diffusion sampler checkpoint (a file or 'shipped')",
                   (("plan_grasp", "models.bps_sampler"),)),
    LaunchArgument("fixed_grasps", "shipped", "fixed grasp set (a file or 'shipped')", (("plan_grasp", "models.fixed_grasps"),)),
    LaunchArgument("trials_dir", "~/getagrip_trials", "where trial bags go", (("grasp_task", "task.trials_dir"),)),
    LaunchArgument("work_dir", "~/getagrip_trials/work", "each trial's capture, NeRF and mesh (<work_dir>/<trial>/); "
                   "goal paths (NeRF runs, datasets, output folders, meshes) must lie under it",
                   (("grasp_task", "task.work_dir"),),
                   list_targets=tuple((n, "data_roots") for n in ("robot", "train_nerf", "extract_object", "plan_grasp"))),
    LaunchArgument("device", "cpu", "torch device of the learned models and NeRFs (cpu or cuda)",
                   (("plan_grasp", "device"), ("train_nerf", "device"), ("extract_object", "device"))),
    LaunchArgument("publish_robot", "true", "ros2 launch: also run robot_state_publisher with the FR3 + Allegro + ZED 2i "
                   "model (the robot node then leaves the camera frame to it)", (("robot", "publish_camera_tf"),),
                   kind=bool, negate=True),
    LaunchArgument("use_sim_time", "false", "use the /clock topic", ((ALL_NODES, "use_sim_time"),), kind=bool),
    LaunchArgument("rviz", "false", "ros2 launch: also run rviz2 with rviz/getagrip.rviz (robot, TF, camera image, object "
                   "cloud and mesh, candidate grasps, the executed grasp and the palm's path)", (), kind=bool,
                   profiles=("sim", "hardware")),
)


def profile(name: str) -> Profile:
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; known: {sorted(PROFILES)}")
    return PROFILES[name]


def arguments_for(prof: Profile) -> tuple[LaunchArgument, ...]:
    """The launch arguments a profile declares, with the profile's defaults."""
    from dataclasses import replace

    names = {n.name for n in prof.nodes}
    out = []
    for a in LAUNCH_ARGUMENTS:
        declared = prof.name in a.profiles if a.profiles else any(n in names or n == ALL_NODES
                                                                   for n, _ in a.targets + a.list_targets)
        if declared:
            out.append(replace(a, default=prof.defaults.get(a.name, a.default)))
    return tuple(out)


def as_bool(value: object) -> bool:
    """A launch argument's boolean value ("true"/"false", as ROS 2 launch writes them)."""
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0"):
        raise ValueError(f"expected true or false, got {value!r}")
    return text in ("true", "1")


def node_parameters(prof: Profile, arguments: dict[str, object]) -> dict[str, dict[str, object]]:
    """{node name: {dotted parameter: value}}: the profile's fixed overrides, then the given arguments (the others
    leave the parameter files' values, which are the arguments' defaults); unknown or undeclared argument names and
    malformed booleans raise ValueError."""
    declared = {a.name: a for a in arguments_for(prof)}
    unknown = sorted(set(arguments) - set(declared))
    if unknown:
        raise ValueError(f"unknown launch arguments {unknown} for profile {prof.name!r}; known: {sorted(declared)}")
    out = {n.name: dict(n.parameters) for n in prof.nodes}
    for name, value in arguments.items():
        argument = declared[name]
        if argument.kind is bool:
            value = as_bool(value) != argument.negate
        else:
            value = str(value)
        for node, parameter in argument.targets:
            for target in (out if node == ALL_NODES else [node] if node in out else []):
                out[target][parameter] = value
        for node, parameter in argument.list_targets:
            if node in out:
                out[node][parameter] = [value]
    return out
