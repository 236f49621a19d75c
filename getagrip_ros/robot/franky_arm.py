"""The real FR3: the `Arm` interface on Franka's FCI through franky (PyPI ``franky-control``).

A `JointTrajectory` (fr3_joint1..7, time-stamped waypoints, linear in between) becomes one franky
`JointWaypointMotion` (joint position control, franky's Ruckig generator on the 1 kHz loop): one
`JointWaypoint` per waypoint, with the segment's duration as its ``minimum_time`` and a target velocity so that
the arm passes through intermediate waypoints without stopping (franky's tutorial: a waypoint's target velocity
defaults to 0, i.e. stop there). The target velocity at a waypoint is the harmonic mean of the two neighbouring
segment velocities when they have the same sign and 0 otherwise (monotone: the arm never overshoots a waypoint
that is an extremum of a joint). Ruckig keeps velocity, acceleration and jerk within the FR3's limits times the
relative dynamics factor; a trajectory that needs more acceleration than that runs late (seen in the reported
duration and tracking error) instead of faster. The motion ends with a 1e-5 rad time-optimal hop (see
`FrankyArm._waypoints`).

Every trajectory is checked before anything moves (`check_trajectory`): the seven arm joint names (any order),
finite values, waypoints at least 1 ms apart, the FR3 joint position limits and joint velocity limits (Franka's
"rectangular" limits: usable anywhere inside the position box); once connected, that it starts where the arm
is. Refusals are `ValueError`s that say why. While moving, `should_stop` is polled and the measured joints are
sampled every poll period; tracking error is |trajectory(t) - measured(t)| on the robot's clock.

Faults. libfranka's 1 kHz link fails now and then: on a loaded host or a kernel without PREEMPT_RT robot states
arrive late or not at all, libfranka raises "UDP receive: Timeout" (a NetworkException) after about a second without
one, franky raises "Net Exception" (a RuntimeError) once the link is gone, and the FR3 aborts the motion with a
communication_constraints_violation reflex; a collision raises a reflex too. Any franky error is a fault: it is
recorded (`faulted`, `last_fault`), and until it is cleared every call (`move`, `state`, `recover`) first recovers
the arm: franky's automatic error recovery (`Robot.recover_from_errors`) on the same connection, or on a new one when
that connection is dead. A motion also starts with a recovery when the robot reports an error (e.g. a reflex). One call absorbs `FrankyArmConfig.fault_retries` faults (recovering after each, waiting k x
`retry_backoff_s` before the k-th retry); the next one raises `ArmConnectionError` naming the host and the last fault.
A motion is never re-sent blindly: after a fault it is re-sent only if it had not got under way (the arm moved at most
start_tolerance_rad during the failed try, the fault was a communication fault, not a reflex) and the recovered arm
still starts where the plan does; otherwise the call returns a failed `MotionResult` saying why it was not re-sent
(plan again from the measured joints).

franky is imported only when a `FrankyArm` connects, so the rest of the project imports without it.
Units: rad, rad/s, s, Nm.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import numpy as np

from getagrip_ros.robot.backend import RobotUnavailable
from getagrip_ros.robot.description import ARM_JOINT_NAMES, FR3_LOWER_RAD, FR3_UPPER_RAD, FR3_VELOCITY_RAD_S
from getagrip_ros.robot.interfaces import Arm, JointState, JointTrajectory, MotionResult, StopFn

T = TypeVar("T")

FRANKY_REQUIREMENT = "franky-control==2.0.0"
#: FR3 joint velocity maxima (Franka's "Limits for Franka Research 3"; franky's default joint_velocity_limit),
#: which franky scales by the relative dynamics factor.
FR3_MAX_JOINT_VELOCITY_RAD_S = (2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26)
#: The motion ends this far (one joint) from the last waypoint; see FrankyArm._waypoints.
END_NUDGE_RAD = 1e-5
_FRANKY_ERROR_NAMES = (
    "Exception", "CommandException", "ControlException", "IncompatibleVersionException", "InvalidOperationException",
    "ModelException", "NetworkException", "ProtocolException", "RealtimeException", "InvalidMotionTypeException",
    "MotionReuseException", "ReactionRecursionException",
)
#: Words of a fault that lost the link rather than the motion: libfranka's connection errors, the Poco socket errors
#: franky passes on as RuntimeError ("Net Exception", "Timeout", "I/O error", "Connection refused" / "reset by peer")
#: and the FR3's reflex for missed commands. Only such a fault lets a motion that had not got under way be re-sent.
COMMUNICATION_FAULT_WORDS = ("Net Exception", "Timeout", "I/O error", "Connection", "connection", "UDP", "TCP",
                             "communication_constraints_violation")


class FrankyNotInstalledError(ImportError):
    """franky (PyPI ``franky-control``) is not installed."""


class ArmConnectionError(ConnectionError, RobotUnavailable):
    """The robot could not be reached or refused the connection, or it kept faulting: one call met more than
    `FrankyArmConfig.fault_retries` faults (recovering after each). The message names the host and the last fault.
    A `RobotUnavailable`, so a goal that meets it ends as a hardware error."""


class RecoveryFailedError(RuntimeError):
    """franky's automatic error recovery did not clear the robot's errors (one fault; retried like the others)."""


@dataclass(frozen=True)
class FrankyArmConfig:
    """How to reach the FR3 and how strictly a motion is judged."""

    host: str
    """FCI address of the robot (IP or hostname, e.g. the robot's 172.16.0.2)."""
    enforce_realtime: bool = False
    """True: refuse to connect without a realtime kernel (franky RealtimeConfig.Enforce); False: Ignore."""
    relative_dynamics_factor: float = 0.5
    """Scales the FR3's maximum joint velocity, acceleration and jerk for every motion, in (0, 1]."""
    stop_dynamics_factor: float = 1.0
    """Extra factor (times relative_dynamics_factor) for the deceleration when a motion is stopped, in (0, 1]."""
    goal_tolerance_rad: float = 0.02
    """A motion succeeds when every joint ends this close to the last waypoint."""
    settle_timeout_s: float = 1.0
    """After a motion (or a stop) wait up to this long for the joints to reach the goal tolerance (or to stand
    still) before judging."""
    still_velocity_rad_s: float = 0.01
    """The arm counts as standing still when no joint moves faster than this."""
    start_tolerance_rad: float = 0.05
    """Refuse a trajectory whose first waypoint is farther than this from the measured joints (any joint)."""
    lower_limits_rad: tuple[float, ...] = FR3_LOWER_RAD
    """fr3_joint1..7 lower position limits a trajectory must respect (default: Franka's rectangular limits)."""
    upper_limits_rad: tuple[float, ...] = FR3_UPPER_RAD
    """fr3_joint1..7 upper position limits."""
    velocity_limits_rad_s: tuple[float, ...] = FR3_VELOCITY_RAD_S
    """fr3_joint1..7 speed limits between waypoints; the FR3 maxima times relative_dynamics_factor also apply."""
    poll_period_s: float = 0.01
    """How often should_stop is polled during a motion."""
    connect_timeout_s: float = 10.0
    """Give up connecting after this long (libfranka itself can wait minutes on a silent host)."""
    max_overrun_s: float = 5.0
    """Stop and fail a motion still running this long (robot time) after the trajectory's end."""
    min_waypoint_spacing_s: float = 0.2
    """Dense trajectories (a time-parameterised path sampled every 10 ms) are thinned to waypoints at least this far
    apart, keeping every corner and rest point: franky plans each waypoint with Ruckig, and 10 ms segments are
    beyond the jerk limits, so the motion runs late and off the path."""
    fault_retries: int = 2
    """How many faults one call (`move`, `state`, `recover`) absorbs; the next one raises ArmConnectionError (naming
    the host and the last fault). A fault: any franky error (e.g. a NetworkException when robot states stop
    arriving, "Net Exception" on a dead link, a reflex), a failed reconnection, or an error recovery that did not clear
    the errors. After each the call recovers the arm (franky's automatic error recovery; a new connection when the
    old one is dead) and tries again: a state read is repeated; a motion is re-sent only if it had not got under way
    (the arm moved at most start_tolerance_rad, the fault was one of the link, and the arm still starts where the plan
    does), else the call returns a failed MotionResult saying why. 0: the first fault raises (the next call still
    recovers first)."""
    retry_backoff_s: float = 0.5
    """Wait k * retry_backoff_s before a call's k-th retry (defaults: 0.5 s, then 1.0 s), so that a loaded host, the
    network or the robot's controller has time to come back."""

    def __post_init__(self) -> None:
        if not self.host:
            raise ValueError("FrankyArmConfig.host is empty")
        for name in ("relative_dynamics_factor", "stop_dynamics_factor"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"FrankyArmConfig.{name} must be in (0, 1], got {getattr(self, name)}")
        for name in ("goal_tolerance_rad", "start_tolerance_rad", "still_velocity_rad_s", "poll_period_s",
                     "connect_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"FrankyArmConfig.{name} must be > 0, got {getattr(self, name)}")
        if not isinstance(self.fault_retries, int) or isinstance(self.fault_retries, bool) or self.fault_retries < 0:
            raise ValueError(f"FrankyArmConfig.fault_retries must be an int >= 0, got {self.fault_retries!r}")
        for name in ("settle_timeout_s", "max_overrun_s", "min_waypoint_spacing_s", "retry_backoff_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"FrankyArmConfig.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("lower_limits_rad", "upper_limits_rad", "velocity_limits_rad_s"):
            if len(getattr(self, name)) != len(ARM_JOINT_NAMES):
                raise ValueError(f"FrankyArmConfig.{name} needs {len(ARM_JOINT_NAMES)} values (fr3_joint1..7)")
        if any(lo >= hi for lo, hi in zip(self.lower_limits_rad, self.upper_limits_rad)):
            raise ValueError("FrankyArmConfig: every lower limit must be below its upper limit")
        if any(v <= 0 for v in self.velocity_limits_rad_s):
            raise ValueError("FrankyArmConfig.velocity_limits_rad_s must be > 0")

    @property
    def effective_velocity_limits_rad_s(self) -> np.ndarray:
        """(7,) fastest joint speeds a trajectory may ask for: the configured limits, capped by the FR3 maxima
        times relative_dynamics_factor (what franky will allow)."""
        return np.minimum(np.asarray(self.velocity_limits_rad_s, float),
                          np.asarray(FR3_MAX_JOINT_VELOCITY_RAD_S) * self.relative_dynamics_factor)


@dataclass(frozen=True)
class CheckedTrajectory:
    """A trajectory that passed `FrankyArm.check`, in fr3_joint1..7 column order, on a 1 ms time grid."""

    times_ms: np.ndarray
    """(T,) int waypoint times from the start of the motion."""
    positions_rad: np.ndarray
    """(T, 7) waypoint positions, arm joint order."""
    velocities_rad_s: np.ndarray
    """(T, 7) target velocities at the waypoints (0 at the first and last)."""
    to_trajectory_order: np.ndarray
    """(n,) index into the arm order of each of the trajectory's joints (to report errors in its order)."""


def key_waypoints(times_s: np.ndarray, positions_rad: np.ndarray, min_spacing_s: float,
                  corner_cos: float = 0.9998) -> np.ndarray:
    """Indices of the waypoints to send: the first and the last, every rest point and corner (the motion
    stops, or turns by more than ~1 deg), and in between at most one per min_spacing_s."""
    n = len(times_s)
    if n <= 2:
        return np.arange(n)
    seg = np.diff(positions_rad, axis=0)
    length = np.linalg.norm(seg, axis=1)
    unit = seg / np.where(length > 1e-12, length, 1.0)[:, None]
    turns = (unit[:-1] * unit[1:]).sum(axis=1) < corner_cos
    rests = (length[:-1] <= 1e-12) | (length[1:] <= 1e-12)
    must = np.concatenate([[True], turns | rests, [True]])
    keep, last_t = [], -np.inf
    for i in range(n):
        if must[i] or times_s[i] - last_t >= min_spacing_s:
            if not must[i] and times_s[-1] - times_s[i] < min_spacing_s / 2:
                continue  # too close to the end: the end is kept anyway
            keep.append(i)
            last_t = times_s[i]
    return np.array(keep)


def waypoint_velocities(times_s: np.ndarray, positions_rad: np.ndarray) -> np.ndarray:
    """(T, n) velocities at the waypoints of a piecewise-linear path: 0 at both ends and wherever the joint
    turns or rests, else the harmonic mean of the neighbouring segment velocities (never beyond either)."""
    velocities = np.zeros_like(positions_rad, dtype=float)
    if len(times_s) < 3:
        return velocities
    slopes = np.diff(positions_rad, axis=0) / np.diff(times_s)[:, None]
    before, after = slopes[:-1], slopes[1:]
    same_sign = before * after > 0
    safe_sum = np.where(same_sign, before + after, 1.0)
    velocities[1:-1] = np.where(same_sign, 2.0 * before * after / safe_sum, 0.0)
    return velocities


def check_trajectory(trajectory: JointTrajectory, config: FrankyArmConfig) -> CheckedTrajectory:
    """Everything about a trajectory that can be checked without the robot; raises ValueError saying why not."""
    names = tuple(trajectory.joint_names)
    unknown = [n for n in names if n not in ARM_JOINT_NAMES]
    missing = [n for n in ARM_JOINT_NAMES if n not in names]
    if unknown or missing or len(names) != len(ARM_JOINT_NAMES):
        raise ValueError(f"FrankyArm drives exactly the joints {list(ARM_JOINT_NAMES)} (any order); trajectory names "
                         f"{list(names)}" + (f", unknown {unknown}" if unknown else "")
                         + (f", missing {missing}" if missing else ""))
    times = np.asarray(trajectory.times_s, dtype=float)
    positions = np.asarray(trajectory.positions_rad, dtype=float)
    if times.ndim != 1 or len(times) == 0 or positions.shape != (len(times), len(names)):
        raise ValueError(f"trajectory positions must be (T, 7) for T = {len(times)} times, got {positions.shape}")
    if not np.isfinite(times).all():
        raise ValueError("trajectory times contain NaN or inf")
    bad = np.argwhere(~np.isfinite(positions))
    if len(bad):
        i, j = bad[0]
        raise ValueError(f"trajectory contains NaN or inf: {names[j]} at waypoint {i}")
    times_ms = np.round(times * 1000.0).astype(np.int64)
    if times_ms[0] < 0:
        raise ValueError(f"trajectory starts at t = {times[0]} s < 0")
    gaps = np.diff(times_ms)
    if (gaps < 1).any():
        i = int(np.argmax(gaps < 1))
        raise ValueError(f"trajectory waypoints {i} and {i + 1} (t = {times[i]:.4f}, {times[i + 1]:.4f} s) are less than "
                         "1 ms apart (franky times waypoints in ms) or out of order")
    columns = np.array([names.index(n) for n in ARM_JOINT_NAMES])
    q = positions[:, columns]
    lower, upper = np.asarray(config.lower_limits_rad), np.asarray(config.upper_limits_rad)
    outside = np.argwhere((q < lower) | (q > upper))
    if len(outside):
        i, j = outside[0]
        raise ValueError(f"{ARM_JOINT_NAMES[j]} = {q[i, j]:.4f} rad at waypoint {i} (t = {times[i]:.3f} s) is outside "
                         f"the FR3 limits [{lower[j]:.4f}, {upper[j]:.4f}] rad")
    t_s = times_ms / 1000.0
    if len(t_s) > 1:
        speed = np.abs(np.diff(q, axis=0)) / np.diff(t_s)[:, None]
        limit = config.effective_velocity_limits_rad_s
        too_fast = np.argwhere(speed > limit * (1 + 1e-9))  # rounding of exact-limit trajectories is let through
        if len(too_fast):
            i, j = too_fast[0]
            raise ValueError(f"{ARM_JOINT_NAMES[j]} would move at {speed[i, j]:.3f} rad/s between waypoints {i} and {i + 1} "
                             f"(t = {t_s[i]:.3f}-{t_s[i + 1]:.3f} s), above its limit of {limit[j]:.3f} rad/s "
                             f"(FR3 limit {config.velocity_limits_rad_s[j]}, {FR3_MAX_JOINT_VELOCITY_RAD_S[j]} x relative "
                             f"dynamics factor {config.relative_dynamics_factor}); slow the trajectory down")
    keep = key_waypoints(t_s, q, config.min_waypoint_spacing_s)
    times_ms, t_s, q = times_ms[keep], t_s[keep], q[keep]
    to_traj = np.array([ARM_JOINT_NAMES.index(n) for n in names])
    limit = config.effective_velocity_limits_rad_s  # Ruckig refuses a target velocity above its limit, even by rounding
    return CheckedTrajectory(times_ms, q, np.clip(waypoint_velocities(t_s, q), -limit, limit), to_traj)


def import_franky() -> Any:
    """The franky module, or FrankyNotInstalledError saying how to install it."""
    try:
        import franky
    except ImportError as e:
        raise FrankyNotInstalledError(f"FrankyArm needs franky, which is not installed here ({e}); install it with "
                                      f"`pip install {FRANKY_REQUIREMENT}` (MIT, bundles libfranka)") from e
    return franky


@dataclass
class _Attempt:
    """What one try of a motion did (kept when it faults, to decide about re-sending and to report)."""

    sent: bool = False
    """The motion was handed to franky (it may have moved the arm)."""
    outcome: str = ""
    """"done" (franky finished it), "stopped", "overrun" or "" (still running when it faulted)."""
    q_start: np.ndarray | None = None
    t0_s: float = 0.0
    times_s: list[float] = field(default_factory=list)
    measured: list[np.ndarray] = field(default_factory=list)
    fault: BaseException | None = None

    def travel_rad(self, q_now: np.ndarray) -> float:
        """Largest joint displacement from the try's start over its samples and q_now."""
        if self.q_start is None:
            return 0.0
        return float(max([np.abs(q - self.q_start).max() for q in self.measured] + [np.abs(q_now - self.q_start).max()]))


class FrankyArm(Arm):
    """The FR3 through franky. Connects on `connect()` or on first use; `close()` (or `with`) disconnects.

    `move` blocks until the trajectory ends, fails, or should_stop() / `stop()` stops it (the arm then
    decelerates and holds still). `stop()` may be called from another thread while `move` runs. After a fault
    (`faulted`) the next call recovers the arm first; see the module docstring and `FrankyArmConfig.fault_retries`.
    """

    joint_names = ARM_JOINT_NAMES

    def __init__(self, config: FrankyArmConfig) -> None:
        self.config = config
        self._franky: Any = None
        self._robot: Any = None
        self._stop_requested = threading.Event()
        self._moving = False
        self._fault: BaseException | None = None
        self._last_fault: str | None = None
        self._recovery_lock = threading.Lock()

    # -- connection ---------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._robot is not None

    @property
    def faulted(self) -> bool:
        """A fault has not been recovered from yet: the next call recovers first."""
        return self._fault is not None

    @property
    def last_fault(self) -> str | None:
        """The last fault met ("Type: message"), recovered from or not; None before the first."""
        return self._last_fault

    def connect(self) -> None:
        """Connect to the robot (no-op when connected); FrankyNotInstalledError or ArmConnectionError on failure.
        A first connection is tried once (a wrong address should fail fast); reconnecting after a fault is retried."""
        if self._robot is not None:
            return
        franky = import_franky()
        cfg = self.config
        realtime = franky.RealtimeConfig.Enforce if cfg.enforce_realtime else franky.RealtimeConfig.Ignore
        outcome: dict[str, Any] = {}
        lock, done = threading.Lock(), threading.Event()

        def attempt() -> None:  # libfranka blocks without a timeout on a host that accepts but never answers
            try:
                robot = franky.Robot(cfg.host, relative_dynamics_factor=cfg.relative_dynamics_factor,
                                     realtime_config=realtime)
            except Exception as e:  # reported to the caller below
                robot, outcome["error"] = None, e
            with lock:
                if not outcome.get("abandoned"):
                    outcome["robot"] = robot
                done.set()

        threading.Thread(target=attempt, name=f"franky-connect-{cfg.host}", daemon=True).start()
        if not done.wait(cfg.connect_timeout_s):
            with lock:
                outcome["abandoned"] = not done.is_set()
            if outcome["abandoned"]:
                raise ArmConnectionError(f"no answer from the FR3 at {cfg.host} within {cfg.connect_timeout_s} s: is it on, "
                                         "is FCI enabled in Desk, and is this the robot's FCI address?")
        error = outcome.get("error")
        if error is not None:
            kind = type(error).__name__
            hint = {"IncompatibleVersionException": f"the robot's system version does not match {FRANKY_REQUIREMENT} "
                                                    "(libfranka 0.21); install the franky build for it",
                    "RealtimeException": "no realtime kernel; set enforce_realtime=False to run without one"}.get(
                        kind, "check that the robot is on, FCI is enabled in Desk and the address is right")
            raise ArmConnectionError(f"cannot connect to the FR3 at {cfg.host}: {kind}: {error} ({hint})") from error
        self._franky, self._robot = franky, outcome["robot"]

    def close(self) -> None:
        """Disconnect (franky closes the connection when its Robot goes away). A later call connects afresh (and
        recovers the robot first if it reports an error)."""
        self._robot = None
        self._fault = None

    def __enter__(self) -> "FrankyArm":
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _errors(self) -> tuple[type, ...]:
        found = [getattr(self._franky, n) for n in _FRANKY_ERROR_NAMES if isinstance(getattr(self._franky, n, None), type)]
        return tuple(found) + (RuntimeError,)

    def _faults(self) -> tuple[type, ...]:
        """What counts as a fault: franky's errors, a failed reconnection, a failed error recovery."""
        return self._errors() + (ArmConnectionError, RecoveryFailedError)

    def is_communication_fault(self, error: BaseException) -> bool:
        """The fault lost the link (network, timing), not the motion (a reflex, the motion planner)."""
        network = getattr(self._franky, "NetworkException", None)
        if isinstance(error, ArmConnectionError) or (isinstance(network, type) and isinstance(error, network)):
            return True
        return any(word in str(error) for word in COMMUNICATION_FAULT_WORDS)

    # -- faults -------------------------------------------------------------------------------
    def _on_fault(self, error: BaseException, faults: int, what: str, wait: Callable[[float], Any] = time.sleep) -> None:
        """Record a fault (calls recover first until it is cleared); ArmConnectionError when it is one too many for
        this call, else wait before the next try."""
        error.with_traceback(None)  # its frames would keep the faulted franky Robot, and so its connection, alive
        self._fault, self._last_fault = error, f"{type(error).__name__}: {error}"
        cfg = self.config
        if faults > cfg.fault_retries:
            raise ArmConnectionError(
                f"the FR3 at {cfg.host} kept faulting while {what}: {faults} faults in one call, recovering after each "
                f"(fault_retries = {cfg.fault_retries}); last fault: {self._last_fault}. Check the robot (Desk: errors, "
                "e-stop, FCI) and the network; the next call recovers first") from error
        wait(faults * cfg.retry_backoff_s)

    def _with_retries(self, what: str, call: Callable[[], T]) -> T:
        """call() until it returns, recovering after each fault (see FrankyArmConfig.fault_retries)."""
        if self._fault is None:
            self.connect()  # a first connection is not retried: ArmConnectionError says why it failed
        faults = 0
        while True:
            try:
                return call()
            except self._faults() as e:
                faults += 1
                self._on_fault(e, faults, what)

    def _recover_once(self) -> None:
        """One recovery: franky's automatic error recovery on this connection, or on a new one when this one is
        dead (libfranka admits one client: the dead one is dropped first). Clears the fault; raises (a fault) when
        it does not work."""
        with self._recovery_lock:
            if self._robot is not None:
                try:
                    self._clear_errors(self._robot)
                    return
                except RecoveryFailedError:
                    raise
                except self._errors():
                    pass  # the connection is dead: a new one below
                self._robot = None
            self.connect()
            self._clear_errors(self._robot)

    def _clear_errors(self, robot: Any) -> None:
        if not robot.recover_from_errors():
            raise RecoveryFailedError(f"franky's automatic error recovery failed ({self._robot_errors(robot)}); the FR3 "
                                      "may need a person (e-stop or user stop released? Desk says why)")
        if robot.has_errors:  # reads a fresh robot state: this also proves that the connection works
            raise RecoveryFailedError(f"the FR3 still reports errors after automatic error recovery "
                                      f"({self._robot_errors(robot)})")
        self._fault = None

    @staticmethod
    def _robot_errors(robot: Any) -> str:
        try:
            return f"robot errors: {robot.state.current_errors}"
        except Exception:  # noqa: BLE001 - only for the message
            return "robot errors unknown"

    def _ready(self, recover_robot_errors: bool) -> Any:
        """The connected robot, recovered first after a fault (and, if asked, when it reports an error such as a
        reflex). Faults propagate."""
        if self._fault is None:
            self.connect()
            if not (recover_robot_errors and self._robot.has_errors):
                return self._robot
        self._recover_once()
        return self._robot

    # -- state --------------------------------------------------------------------------------
    def state(self) -> JointState:
        """Measured positions, velocities and link-side torques of fr3_joint1..7 (one robot state). Recovers first
        after a fault, and retries a failed read (fault_retries); while a `move` runs in another thread it reads once
        (that move owns the recovery)."""
        if self._moving and self._robot is not None:
            return self._joint_state(self._robot.state)
        return self._with_retries("reading the joint state", lambda: self._joint_state(self._ready(False).state))

    @staticmethod
    def _joint_state(s: Any) -> JointState:
        return JointState(ARM_JOINT_NAMES, np.array(s.q, dtype=float).reshape(-1), np.array(s.dq, dtype=float).reshape(-1),
                          np.array(s.tau_J, dtype=float).reshape(-1))

    def recover(self) -> bool:
        """Recover now, as the next call would after a fault: franky's automatic error recovery (e.g. after a
        reflex), on a new connection when the old one is dead; retried (fault_retries), then ArmConnectionError.
        Returns True."""
        self._with_retries("recovering", self._recover_once)
        return True

    # -- motion -------------------------------------------------------------------------------
    def check(self, trajectory: JointTrajectory) -> CheckedTrajectory:
        """Check a trajectory without the robot (names, values, timing, FR3 limits); ValueError says why not."""
        return check_trajectory(trajectory, self.config)

    def stop(self) -> None:
        """Stop now and hold still: ends a `move` running in another thread, or halts the arm if it is moving. With
        a dead connection there is nothing to halt (libfranka's control loop has ended, and the FR3 stops itself when
        commands stop coming); the fault is recorded and the next call recovers."""
        self._stop_requested.set()
        robot = self._robot
        if robot is None or self._moving or self._fault is not None:
            return
        try:
            if robot.is_in_control:
                self._halt(robot)
        except self._errors() as e:
            self._fault, self._last_fault = e.with_traceback(None), f"{type(e).__name__}: {e}"

    def move(self, trajectory: JointTrajectory, should_stop: StopFn | None = None) -> MotionResult:
        """Follow the trajectory (blocking). Raises ValueError before moving if the trajectory is invalid or does
        not start at the measured joints. A fault during the motion is recovered from; the motion is re-sent only if
        it had not got under way, else the result is a failed MotionResult saying why (see the module docstring).
        ArmConnectionError after more than fault_retries faults in this call."""
        checked = self.check(trajectory)
        self._stop_requested.clear()
        if self._fault is None:
            self.connect()  # a first connection is not retried
        faults, faulted = 0, None  # faulted: the last try that faulted after its motion was sent
        while True:
            attempt = _Attempt()
            try:
                return self._move_once(checked, should_stop, attempt, faulted)
            except self._faults() as e:
                faults += 1
                if attempt.sent:
                    attempt.fault, faulted = e, attempt
                self._on_fault(e, faults, "moving", self._stop_requested.wait)  # stop() cuts the wait short

    def _result(self, checked: CheckedTrajectory, success: bool, reason: str, duration_s: float, final: np.ndarray,
                worst: np.ndarray) -> MotionResult:
        to = checked.to_trajectory_order
        return MotionResult(success, reason, duration_s, final[to], np.maximum(worst, final)[to])

    def _after_fault(self, checked: CheckedTrajectory, faulted: _Attempt, q_now: np.ndarray) -> MotionResult | None:
        """After a try that faulted once its motion was sent, with the arm recovered at q_now: the result when the
        motion must not be re-sent, None when it may be (it had not got under way and q_now is at the plan's start)."""
        cfg = self.config
        ref_t, ref_q = checked.times_ms / 1000.0, checked.positions_rad
        fault = f"{type(faulted.fault).__name__}: {faulted.fault}"
        t_last = faulted.times_s[-1] if faulted.times_s else 0.0
        worst = (self._max_error(np.array(faulted.times_s), np.array(faulted.measured), ref_t, ref_q)
                 if faulted.times_s else np.zeros(len(ARM_JOINT_NAMES)))
        final = np.abs(self._reference(ref_t, ref_q, t_last) - q_now)
        if faulted.outcome == "stopped":
            return self._result(checked, False, f"stopped on request (then a robot fault, {fault}; recovered)", t_last,
                                final, worst)
        if faulted.outcome == "overrun":
            return self._result(checked, False, f"stopped: still running {cfg.max_overrun_s} s after the trajectory's end "
                                f"(then a robot fault, {fault}; recovered)", t_last, final, worst)
        if faulted.outcome == "done":  # franky finished the motion; the fault came while it settled
            final = np.abs(ref_q[-1] - q_now)
            if final.max() <= cfg.goal_tolerance_rad:
                return self._result(checked, True, "reached the end of the trajectory (a robot fault while settling, "
                                    f"{fault}; recovered)", t_last, final, worst)
            j = int(np.argmax(final))
            return self._result(checked, False, f"ended {final[j]:.4f} rad from the last waypoint on {ARM_JOINT_NAMES[j]} "
                                f"(a robot fault while settling, {fault}; recovered)", t_last, final, worst)
        if not self.is_communication_fault(faulted.fault):
            return self._result(checked, False, f"robot error during the motion: {fault}; the arm was recovered and holds "
                                "where it stopped; not re-sent", t_last, final, worst)
        travel = faulted.travel_rad(q_now)
        offset = np.abs(ref_q[0] - q_now)
        if travel > cfg.start_tolerance_rad or offset.max() > cfg.start_tolerance_rad:
            j = int(np.argmax(offset))
            return self._result(checked, False, f"robot fault during the motion ({fault}) after the arm had moved "
                                f"{travel:.3f} rad; recovered, it holds {offset[j]:.3f} rad from the trajectory's start "
                                f"({ARM_JOINT_NAMES[j]}); not re-sent: plan again from the measured joints", t_last,
                                final, worst)
        return None

    def _move_once(self, checked: CheckedTrajectory, should_stop: StopFn | None, attempt: _Attempt,
                   faulted: _Attempt | None) -> MotionResult:
        """One try: recover if needed, check the start, run the motion. Faults propagate (attempt says how far it
        got)."""
        robot = self._ready(True)
        cfg, franky = self.config, self._franky
        q_start = np.array(robot.current_joint_positions, dtype=float).reshape(-1)
        ref_t = checked.times_ms / 1000.0
        ref_q = checked.positions_rad
        if faulted is not None:
            verdict = self._after_fault(checked, faulted, q_start)
            if verdict is not None:
                return verdict
        offset = np.abs(ref_q[0] - q_start)
        if offset.max() > cfg.start_tolerance_rad:
            j = int(np.argmax(offset))
            raise ValueError(f"trajectory starts {offset[j]:.3f} rad away from the measured {ARM_JOINT_NAMES[j]} "
                             f"({q_start[j]:.4f} rad; allowed {cfg.start_tolerance_rad}); plan from the current state")

        def result(success: bool, reason: str, duration_s: float, final: np.ndarray, worst: np.ndarray) -> MotionResult:
            return self._result(checked, success, reason, duration_s, final, worst)

        if self._stop_requested.is_set() or (should_stop is not None and should_stop()):
            err = np.abs(ref_q[0] - q_start)
            return result(False, "stopped on request", 0.0, err, err)

        motion = franky.JointWaypointMotion(self._waypoints(checked))
        t0_s = robot.state.time.to_sec()
        attempt.q_start, attempt.t0_s = q_start, t0_s
        times_s, measured = attempt.times_s, attempt.measured  # robot time since the start, measured joints
        deadline_s = ref_t[-1] + cfg.max_overrun_s
        outcome, t_stop = "done", 0.0
        self._moving = True
        try:
            attempt.sent = True  # from here on the arm may move
            robot.move(motion, asynchronous=True)
            while not robot.join_motion(cfg.poll_period_s):
                s = robot.state
                times_s.append(s.time.to_sec() - t0_s)
                measured.append(np.array(s.q, dtype=float).reshape(-1))
                if self._stop_requested.is_set() or (should_stop is not None and should_stop()):
                    outcome = "stopped"
                elif times_s[-1] > deadline_s:
                    outcome = "overrun"
                else:
                    continue
                t_stop, attempt.outcome = times_s[-1], outcome
                self._halt(robot)
                break
        except self._errors():  # a fault; if the motion still runs (a state read failed, not the motion), halt it
            self._halt_quietly(robot, only_in_control=True)
            raise
        except BaseException:  # should_stop() raised, Ctrl-C, ...: do not leave the arm moving
            self._halt_quietly(robot)
            raise
        finally:
            self._moving = False
        attempt.outcome = outcome

        s = robot.state
        duration = s.time.to_sec() - t0_s
        q_end = np.array(s.q, dtype=float).reshape(-1)
        if outcome == "done":  # after a stop the reference runs on; judge tracking up to the stop only
            times_s.append(duration)
            measured.append(q_end)
        worst = self._max_error(np.array(times_s), np.array(measured), ref_t, ref_q)
        if outcome in ("stopped", "overrun"):
            q_now = self._wait_still(robot)
            final = np.abs(self._reference(ref_t, ref_q, t_stop) - q_now)
            reason = ("stopped on request" if outcome == "stopped" else
                      f"stopped: still running {cfg.max_overrun_s} s after the trajectory's end ({ref_t[-1]:.3f} s)")
            return result(False, reason, duration, final, worst)
        final = self._wait_settled(robot, ref_q[-1])
        if final.max() <= cfg.goal_tolerance_rad:
            return result(True, "reached the end of the trajectory", duration, final, worst)
        j = int(np.argmax(final))
        return result(False, f"ended {final[j]:.4f} rad from the last waypoint on {ARM_JOINT_NAMES[j]} (tolerance "
                      f"{cfg.goal_tolerance_rad} rad; blocked or overloaded?)", duration, final, worst)

    def _halt_quietly(self, robot: Any, only_in_control: bool = False) -> None:
        """`_halt`, for when another exception is on its way: a fault while halting is recorded, not raised (a dead
        connection has no motion left to halt)."""
        try:
            if not only_in_control or robot.is_in_control:
                self._halt(robot)
        except self._errors() as e:
            self._fault, self._last_fault = e.with_traceback(None), f"{type(e).__name__}: {e}"

    # -- helpers ------------------------------------------------------------------------------
    def _waypoints(self, checked: CheckedTrajectory) -> list[Any]:
        """franky JointWaypoints: one per trajectory waypoint after the first, each timed by its segment's duration
        (``minimum_time``) and carrying its target velocity; the first waypoint too when it has a time stamp > 0.

        With a first time stamp of 0 the first timed segment starts from where the arm stands (within
        start_tolerance_rad of the first waypoint). The motion ends with a time-optimal hop of END_NUDGE_RAD on one
        joint (toward the middle of its range). Why: franky holds the last waypoint for 10 ms and, when that waypoint
        was reached on a timed profile, recomputes Ruckig's trajectory without a minimum duration from a state that
        differs from the target only by rounding (~1e-16); Ruckig's synchronisation then often fails ("Motion planner
        failed with error code -111": in 7-8 of 16 runs of the tests' 5-waypoint path in franky-sim, in 35 of 383
        random trajectories replayed through Ruckig 0.19.4 with franky's waypoint logic). The same happens when a
        motion starts with an untimed waypoint at the arm's commanded position, hence no untimed first waypoint. A
        hop to a target 1e-5 rad away never failed.
        """
        franky = self._franky
        waypoints = []
        previous_ms = 0
        for t_ms, q, v in zip(checked.times_ms, checked.positions_rad, checked.velocities_rad_s):
            segment_ms = int(t_ms) - previous_ms
            previous_ms = int(t_ms)
            if segment_ms > 0:
                waypoints.append(franky.JointWaypoint(franky.JointState(q, v), minimum_time=franky.Duration(segment_ms)))
        waypoints.append(franky.JointWaypoint(franky.JointState(self._nudged(checked.positions_rad[-1]))))
        return waypoints

    def _nudged(self, q: np.ndarray) -> np.ndarray:
        """q moved by END_NUDGE_RAD on the joint with the most room, toward the middle of its range."""
        lower, upper = np.asarray(self.config.lower_limits_rad), np.asarray(self.config.upper_limits_rad)
        room = np.minimum(q - lower, upper - q)
        j = int(np.argmax(room))
        nudged = np.array(q, dtype=float)
        nudged[j] += END_NUDGE_RAD if q[j] < 0.5 * (lower[j] + upper[j]) else -END_NUDGE_RAD
        return nudged

    def _halt(self, robot: Any) -> None:
        """Replace the running motion by a joint stop motion and wait until it has ended."""
        franky = self._franky
        try:
            robot.move(franky.JointStopMotion(self.config.stop_dynamics_factor), asynchronous=True)
            robot.join_motion()
        except RuntimeError as e:
            # A stop requested while the arm stands still can hit the same Ruckig rounding failure as the end of
            # a motion (see _waypoints); the control loop has ended then and the arm holds where it stands.
            if "Motion planner failed" not in str(e):
                raise

    def _wait_still(self, robot: Any) -> np.ndarray:
        """Wait (up to settle_timeout_s) until no joint moves faster than still_velocity_rad_s; the positions.

        Speeds come from position changes over robot time (>= 20 ms), not from the measured dq, which can
        chatter around zero at rest (franky-sim's joint 7 does)."""
        end = time.monotonic() + self.config.settle_timeout_s
        s = robot.state
        t_prev, q_prev = s.time.to_sec(), np.array(s.q, dtype=float).reshape(-1)
        while time.monotonic() < end:
            time.sleep(self.config.poll_period_s)
            s = robot.state
            t_now, q_now = s.time.to_sec(), np.array(s.q, dtype=float).reshape(-1)
            if t_now - t_prev < 0.02:
                continue
            if np.abs(q_now - q_prev).max() / (t_now - t_prev) <= self.config.still_velocity_rad_s:
                return q_now
            t_prev, q_prev = t_now, q_now
        return np.array(robot.current_joint_positions, dtype=float).reshape(-1)

    def _wait_settled(self, robot: Any, goal: np.ndarray) -> np.ndarray:
        """Wait (up to settle_timeout_s) until every joint is within goal_tolerance_rad of goal; the errors."""
        end = time.monotonic() + self.config.settle_timeout_s
        while True:
            error = np.abs(goal - np.array(robot.current_joint_positions, dtype=float).reshape(-1))
            if error.max() <= self.config.goal_tolerance_rad or time.monotonic() >= end:
                return error
            time.sleep(self.config.poll_period_s)

    @staticmethod
    def _reference(ref_t: np.ndarray, ref_q: np.ndarray, t_s: float) -> np.ndarray:
        return np.array([np.interp(t_s, ref_t, ref_q[:, j]) for j in range(ref_q.shape[1])])

    @staticmethod
    def _max_error(times_s: np.ndarray, measured: np.ndarray, ref_t: np.ndarray, ref_q: np.ndarray) -> np.ndarray:
        """(7,) largest |trajectory(t) - measured(t)| over the robot states sampled during the motion."""
        ref = np.stack([np.interp(times_s, ref_t, ref_q[:, j]) for j in range(ref_q.shape[1])], axis=1)
        return np.abs(ref - measured).max(axis=0)
