"""RViz markers for planned grasps: palm axes, fingertips at the pre-grasp and closing directions."""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.robot.allegro import AllegroHand


def _color(rank: int, total: int, score: float) -> ColorRGBA:
    """Green = best; by predicted y_PGS when known, else by rank."""
    t = score if np.isfinite(score) else 1.0 - rank / max(total - 1, 1)
    return ColorRGBA(r=float(1.0 - t), g=float(t), b=0.2, a=0.9)


def grasp_markers(grasps: Grasp, scores: np.ndarray, hand: AllegroHand, stamp: Time | None = None,
                  namespace: str = "grasps", max_grasps: int = 40) -> MarkerArray:
    """Palm-normal arrow, fingertip spheres and closing directions per grasp (best first).

    Args:
        grasps: ranked grasps; scores: (B,) predicted y_PGS (NaN = unknown, coloured by rank).
    """
    g = grasps[: max_grasps]
    header = Header(frame_id=g.frame_id, stamp=stamp or Time())
    T = g.T_frame_palm.double()
    tips_palm = hand.contact_positions(g.joint_angles_rad.to(hand.dtype)).double()
    tips = (T[:, None, :3, :3] @ tips_palm[..., None]).squeeze(-1) + T[:, None, :3, 3]
    scores = np.asarray(scores, dtype=float)[: len(g)]
    out = MarkerArray(markers=[Marker(header=header, ns=namespace, action=Marker.DELETEALL)])
    for i in range(len(g)):
        color = _color(i, len(g), float(scores[i]))
        p = T[i, :3, 3].numpy()
        normal_end = p + 0.05 * T[i, :3, 0].numpy()
        palm = Marker(header=header, ns=namespace, id=3 * i, type=Marker.ARROW, action=Marker.ADD, color=color)
        palm.points = [Point(x=float(a), y=float(b), z=float(c)) for a, b, c in (p, normal_end)]
        palm.scale.x, palm.scale.y, palm.scale.z = 0.008, 0.014, 0.014
        palm.pose.orientation.w = 1.0
        spheres = Marker(header=header, ns=namespace, id=3 * i + 1, type=Marker.SPHERE_LIST, action=Marker.ADD, color=color)
        spheres.points = [Point(x=float(a), y=float(b), z=float(c)) for a, b, c in tips[i].numpy()]
        spheres.scale.x = spheres.scale.y = spheres.scale.z = 0.024
        spheres.pose.orientation.w = 1.0
        dirs = Marker(header=header, ns=namespace, id=3 * i + 2, type=Marker.LINE_LIST, action=Marker.ADD, color=color)
        ends = tips[i] + 0.03 * g.fingertip_directions[i].double()
        dirs.points = [Point(x=float(a), y=float(b), z=float(c)) for pair in zip(tips[i].numpy(), ends.numpy()) for a, b, c in pair]
        dirs.scale.x = 0.003
        dirs.pose.orientation.w = 1.0
        out.markers += [palm, spheres, dirs]
    return out
