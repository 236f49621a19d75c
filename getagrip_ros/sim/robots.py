"""The simulated arm and hand: the Arm / Hand interfaces on top of a SimWorld."""

from __future__ import annotations

from getagrip_ros.robot.interfaces import Arm, Hand, JointGroup, JointState, JointTrajectory, MotionResult, StopFn
from getagrip_ros.sim.world import SimWorld


class _SimJointGroup(JointGroup):
    def __init__(self, world: SimWorld, joint_names: tuple[str, ...]) -> None:
        if not joint_names:
            raise ValueError(f"{type(self).__name__}: this world has no such joints (floating-hand world has no arm)")
        self.world, self.joint_names = world, tuple(joint_names)

    def move(self, trajectory: JointTrajectory, should_stop: StopFn | None = None) -> MotionResult:
        foreign = [n for n in trajectory.joint_names if n not in self.joint_names]
        if foreign:
            raise ValueError(f"{type(self).__name__} cannot move joints {foreign}")
        return self.world.follow(trajectory, should_stop)

    def state(self) -> JointState:
        return self.world.joint_state(self.joint_names)

    def stop(self) -> None:
        """Hold the measured position (the next motion starts from here)."""
        self.world.hold(self.joint_names)


class SimArm(_SimJointGroup, Arm):
    """The FR3 in the simulated world (fr3_joint1..7)."""

    def __init__(self, world: SimWorld) -> None:
        super().__init__(world, world.arm_joints)


class SimHand(_SimJointGroup, Hand):
    """The Allegro hand in the simulated world (joint_0.0..joint_15.0)."""

    def __init__(self, world: SimWorld) -> None:
        super().__init__(world, world.hand_joints)
