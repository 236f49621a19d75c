"""RViz markers for planned grasps (palm normal, hand skeleton, fingertips and closing directions, by score), a
trial's outcome and the palm's executed path."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.arm import RobotKinematics
from getagrip_ros.robot.description import ARM_JOINT_NAMES


MARKERS_PER_GRASP = 4


def _color(rank: int, total: int, score: float) -> ColorRGBA:
    """Green = best; by predicted y_PGS when known, else by rank."""
    t = score if np.isfinite(score) else 1.0 - rank / max(total - 1, 1)
    return ColorRGBA(r=float(1.0 - t), g=float(t), b=0.2, a=0.9)


def grasp_markers(grasps: Grasp, scores: np.ndarray, hand: AllegroHand, stamp: Time | None = None,
                  namespace: str = "grasps", max_grasps: int = 40) -> MarkerArray:
    """Per grasp (best first): palm-normal arrow, fingertip spheres, closing directions and the hand skeleton
    (palm -> each finger's joints -> tip, at the pre-grasp joints); MARKERS_PER_GRASP markers each.

    Args:
        grasps: ranked grasps; scores: (B,) predicted y_PGS (NaN = unknown, coloured by rank).
    """
    g = grasps[: max_grasps]
    header = Header(frame_id=g.frame_id, stamp=stamp or Time())
    T = g.T_frame_palm.double()
    tips_palm = hand.contact_positions(g.joint_angles_rad.to(hand.dtype)).double()
    tips = (T[:, None, :3, :3] @ tips_palm[..., None]).squeeze(-1) + T[:, None, :3, 3]
    joints_palm = hand.skeleton_positions(g.joint_angles_rad.to(hand.dtype)).double()  # (B, 4, 5, 3)
    joints = torch.einsum("bij,bfkj->bfki", T[:, :3, :3], joints_palm) + T[:, None, None, :3, 3]
    scores = np.asarray(scores, dtype=float)[: len(g)]
    out = MarkerArray(markers=[Marker(header=header, ns=namespace, action=Marker.DELETEALL)])
    def points(xyz) -> list[Point]:
        return [Point(x=float(a), y=float(b), z=float(c)) for a, b, c in xyz]

    for i in range(len(g)):
        color = _color(i, len(g), float(scores[i]))

        def marker(kind: int, part: int, width: float) -> Marker:
            m = Marker(header=header, ns=namespace, id=MARKERS_PER_GRASP * i + part, type=kind, action=Marker.ADD,
                       color=color)
            m.scale.x = width
            m.pose.orientation.w = 1.0
            return m

        p = T[i, :3, 3].numpy()
        palm = marker(Marker.ARROW, 0, 0.008)
        palm.points = points((p, p + 0.05 * T[i, :3, 0].numpy()))
        palm.scale.y = palm.scale.z = 0.014
        spheres = marker(Marker.SPHERE_LIST, 1, 0.024)
        spheres.points = points(tips[i].numpy())
        spheres.scale.y = spheres.scale.z = 0.024
        dirs = marker(Marker.LINE_LIST, 2, 0.003)
        ends = tips[i] + 0.03 * g.fingertip_directions[i].double()
        dirs.points = points(xyz for pair in zip(tips[i].numpy(), ends.numpy()) for xyz in pair)
        skeleton = marker(Marker.LINE_LIST, 3, 0.004)
        for chain in joints[i].numpy():  # palm origin -> joints -> tip, as line segments
            path = [p, *chain]
            skeleton.points += points(xyz for pair in zip(path[:-1], path[1:]) for xyz in pair)
        out.markers += [palm, spheres, dirs, skeleton]
    return out


def outcome_marker(text: str, position_m: np.ndarray, success: bool, frame_id: str = "world", stamp: Time | None = None,
                   namespace: str = "trial_outcome") -> Marker:
    """A trial's outcome as text 30 cm above the object: green when the object was lifted, red otherwise."""
    m = Marker(header=Header(frame_id=frame_id, stamp=stamp or Time()), ns=namespace, id=0, type=Marker.TEXT_VIEW_FACING,
               action=Marker.ADD, text=text,
               color=ColorRGBA(r=0.1, g=0.8, b=0.2, a=1.0) if success else ColorRGBA(r=0.9, g=0.15, b=0.1, a=1.0))
    m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in np.asarray(position_m) + [0.0, 0.0, 0.3])
    m.pose.orientation.w = 1.0
    m.scale.z = 0.04
    return m


def palm_path_m(joint_states: Iterable[tuple[Sequence[str], Sequence[float]]],
                kinematics: RobotKinematics) -> np.ndarray:
    """(N, 3) palm positions (world = fr3_link0, metres) by forward kinematics, one per (joint names, positions rad)
    state that names every arm joint; joints are matched by name (the palm does not depend on the hand joints, so
    states without them count)."""
    rows = []
    for names, positions in joint_states:
        index = {name: i for i, name in enumerate(names)}
        if all(name in index for name in ARM_JOINT_NAMES):
            rows.append([float(positions[index[n]]) if n in index else 0.0 for n in kinematics.joint_names])
    if not rows:
        return np.zeros((0, 3))
    return kinematics.T_world_palm(torch.tensor(rows, dtype=torch.float64))[:, :3, 3].double().numpy()


def path_marker(points_m: np.ndarray, frame_id: str = "world", stamp: Time | None = None,
                namespace: str = "trial_path") -> Marker:
    """A line strip through (N, 3) points (metres, in frame_id), e.g. the palm's executed path; with fewer than two
    points a DELETEALL, so a latched topic drops the previous path."""
    header = Header(frame_id=frame_id, stamp=stamp or Time())
    points = np.asarray(points_m, dtype=float).reshape(-1, 3)
    if len(points) < 2:
        return Marker(header=header, ns=namespace, action=Marker.DELETEALL)
    m = Marker(header=header, ns=namespace, id=0, type=Marker.LINE_STRIP, action=Marker.ADD,
               color=ColorRGBA(r=1.0, g=0.45, b=0.0, a=1.0))
    m.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in points]
    m.pose.orientation.w = 1.0
    m.scale.x = 0.005
    return m
