"""The robot one bring-up owns: the arm, the hand and the wrist camera behind one interface.

Capture and grasp execution both drive the robot through a `RobotBackend`: in simulation one MuJoCo world
(`sim.robot_backend.SimRobot`), on hardware the FR3 through franky, the Allegro hand through its driver's
topics and the ZED 2i (`ros.hardware.HardwareRobot`). Frames: world = robot base fr3_link0 (z up, table top
at z = 0); metres, radians, seconds.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from getagrip_ros.robot.interfaces import Arm, Hand, JointState, StopFn

LiftCheck = Callable[[], tuple[bool, str]]
"""After the lift: (object in the hand?, why)."""


class RobotUnavailable(Exception):
    """The robot cannot serve a goal now (not connected, not reachable, released to another client)."""


class ResetNotSupported(Exception):
    """This robot cannot put its world back (hardware: a person places the object)."""


@dataclass(frozen=True)
class ObjectObservation:
    """Where the object is and what touches it (simulation ground truth; metres, newtons)."""

    T_world_object: np.ndarray
    """(4, 4) object pose in the world."""
    touching: dict[str, float] = field(default_factory=dict)
    """{robot link touching the object: total normal force, N}."""
    touches_table: bool = False


@dataclass(frozen=True)
class RobotSample:
    """One state of the whole robot (arm + hand) and, in simulation, of the object."""

    joint_state: JointState
    object: Optional[ObjectObservation] = None


@dataclass(frozen=True)
class WorldReset:
    """What a reset before a trial asks for (simulation)."""

    object_name: str = ""
    """Catalog object (or mesh file) to stand on the table; "" = the one in the world now."""
    object_xy_m: Optional[tuple[float, float]] = None
    """World x, y of the object; None = its configured placement."""
    object_yaw_rad: float = 0.0
    """Yaw about world z (used with object_xy_m)."""


@dataclass(frozen=True)
class ResetReport:
    """The world after a reset: the robot at home, the object at rest."""

    object_name: str
    T_world_object: np.ndarray
    joint_state: JointState
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"object": self.object_name, "T_world_object": np.asarray(self.T_world_object).tolist(),
                "joint_names": list(self.joint_state.joint_names),
                "positions_rad": np.asarray(self.joint_state.positions_rad).tolist(), "detail": self.detail}


class RobotBackend(abc.ABC):
    """The arm, hand and camera of one robot; every call that touches them runs through `run` (its thread).

    `acquire` takes the robot for a goal and `release` gives it back (hardware: libfranka admits one controlling
    client, so the FR3 is connected for each goal and released after it when configured).
    """

    description: str = ""
    simulated: bool = False

    @property
    @abc.abstractmethod
    def arm(self) -> Arm: ...

    @property
    @abc.abstractmethod
    def hand(self) -> Hand: ...

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call fn(*args) where the robot may be driven (the simulation's thread) and return its result."""
        return fn(*args)

    def acquire(self) -> None:
        """Take the robot for a goal; raises RobotUnavailable with the reason."""

    def release(self) -> None:
        """After a goal."""

    @abc.abstractmethod
    def camera(self, with_depth: bool):
        """The wrist camera (`perception.cameras.Camera`); raises CameraUnavailable."""

    def sample(self) -> RobotSample:
        """The robot's joint state now (arm then hand) and, in simulation, the object's."""
        arm, hand = self.arm.state(), self.hand.state()
        return RobotSample(JointState(arm.joint_names + hand.joint_names,
                                      np.concatenate([arm.positions_rad, hand.positions_rad]),
                                      np.concatenate([arm.velocities_rad_s, hand.velocities_rad_s])))

    def advance_idle(self) -> None:
        """Between goals (simulation: the physics follows the wall clock)."""

    def reset(self, request: WorldReset) -> ResetReport:
        """Put the world back before a trial; raises ResetNotSupported where a person must."""
        raise ResetNotSupported(f"{self.description or type(self).__name__}: the scene is reset by a person")

    def lift_check(self, min_rise_m: float) -> LiftCheck | None:
        """A check of the object in the hand after the lift, taken now (simulation: from the physics); None: none."""
        return None

    def paced(self, should_stop: StopFn, motion: str) -> StopFn:
        """A should_stop for the motions of `motion` ("capture" or "execution"); a simulation also keeps them at its
        real-time factor for that kind of motion. Real robots move in real time anyway."""
        return should_stop

    def hand_link_names(self) -> tuple[str, ...]:
        """Links the scorer counts as hand contacts."""
        from getagrip_ros.robot.description import FINGERTIP_LINK_NAMES, HAND_LINK_NAMES, PALM_LINK

        return (PALM_LINK, *HAND_LINK_NAMES, *FINGERTIP_LINK_NAMES)

    def physics_settings(self) -> dict[str, Any]:
        """What shapes a simulated result ({} on hardware)."""
        return {}

    def close(self) -> None:
        """Stop and release everything."""
