"""What the nodes' "hardware" backends share: the FR3 through franky and the Allegro hand's driver topics.

libfranka lets one client control the arm at a time: the robot node is the only one of the stack that
moves it, and it connects for a goal and releases the arm when it ends (`release_arm_between_goals`), so
other programs (Franka Desk, a teach pendant script) can take it between goals.
"""

from __future__ import annotations

from dataclasses import dataclass

from getagrip_ros.robot.allegro import WONIK_JOINT_NAMES
from getagrip_ros.robot.backend import RobotBackend, RobotUnavailable
from getagrip_ros.ros.allegro_topic_hand import AllegroTopicConfig


@dataclass(frozen=True)
class HandTopicParams:
    """The Allegro driver's topics (`AllegroTopicConfig`): used by the hardware backend, served by the sim."""

    command_topic: str = AllegroTopicConfig.command_topic
    command_type: str = AllegroTopicConfig.command_type
    state_topic: str = AllegroTopicConfig.state_topic
    command_joint_names: tuple[str, ...] = WONIK_JOINT_NAMES
    rate_hz: float = AllegroTopicConfig.rate_hz

    def topic_config(self) -> AllegroTopicConfig:
        return AllegroTopicConfig(self.command_topic, self.command_type, self.state_topic, tuple(self.command_joint_names),
                                  self.rate_hz)


@dataclass(frozen=True)
class HardwareParams:
    franky_host: str = "172.16.0.2"
    """FCI address of the FR3."""
    relative_dynamics_factor: float = 0.5
    release_arm_between_goals: bool = True
    """Disconnect from the FR3 after each goal, so that another client can take it between goals."""


@dataclass(frozen=True)
class ZedParams:
    """The wrist ZED 2i (`perception.cameras.ZedConfig`)."""

    resolution: str = "HD720"
    fps: int = 30
    depth_mode: str = "NEURAL"
    serial_number: int = -1
    """-1 = the first camera found."""


class HardwareRobot(RobotBackend):
    """The FR3 (franky, connected for each goal), the Allegro hand (its driver's topics, through `node`) and the
    ZED 2i (opened when a goal needs it): the robot a hardware bring-up owns."""

    def __init__(self, node, hardware: HardwareParams, hand: HandTopicParams, zed: ZedParams) -> None:
        from getagrip_ros.robot.franky_arm import FrankyArm, FrankyArmConfig
        from getagrip_ros.ros.allegro_topic_hand import AllegroTopicHand

        self.params, self.zed, self._log = hardware, zed, node.get_logger()
        self._arm = FrankyArm(FrankyArmConfig(host=hardware.franky_host,
                                              relative_dynamics_factor=hardware.relative_dynamics_factor))
        self._hand = AllegroTopicHand(node, hand.topic_config())
        self._camera = None
        self.description = (f"FR3 at {hardware.franky_host} through franky, Allegro on {hand.command_topic}, "
                            f"ZED 2i ({zed.resolution})")

    @property
    def arm(self):
        return self._arm

    @property
    def hand(self):
        return self._hand

    def acquire(self) -> None:
        """Connect the FR3 (libfranka admits one controlling client); RobotUnavailable with the reason."""
        if self._arm.connected:
            return
        try:
            self._arm.connect()
        except Exception as err:  # noqa: BLE001 - FrankyNotInstalledError, ArmConnectionError, libfranka errors
            raise RobotUnavailable(f"the FR3 at {self.params.franky_host} is not reachable: "
                                   f"{type(err).__name__}: {err}") from err
        self._log.info(f"FR3 at {self.params.franky_host} connected")

    def release(self) -> None:
        """After a goal: give the FR3 back to other clients (release_arm_between_goals)."""
        if self.params.release_arm_between_goals and self._arm.connected:
            self._arm.close()
            self._log.info(f"FR3 at {self.params.franky_host} released")

    @property
    def connected(self) -> bool:
        return self._arm.connected

    def camera(self, with_depth: bool):
        """The ZED 2i, opened now (CameraUnavailable without the SDK or the camera)."""
        from getagrip_ros.perception.cameras import ZedCamera, ZedConfig

        if self._camera is None or self._camera.config.with_depth != with_depth:
            self.close_camera()
            self._camera = ZedCamera(ZedConfig(self.zed.resolution, self.zed.fps, with_depth, self.zed.depth_mode,
                                               None if self.zed.serial_number < 0 else self.zed.serial_number))
        return self._camera

    def close_camera(self) -> None:
        if self._camera is not None:
            self._camera.close()
            self._camera = None

    def close(self) -> None:
        self.close_camera()
        self._arm.close()
