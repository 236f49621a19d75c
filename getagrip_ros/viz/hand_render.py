"""The Allegro hand itself, rendered by MuJoCo at a grasp: its link geometry (the simulated robot's) posed at the
grasp's palm pose and joints, over the object's points or mesh and the table.

Frames: world = the grasps' frame, z up, table top at z = 0 (the planner's frame); metres, radians. Views are
MuJoCo free cameras around a look-at point (azimuth and elevation in degrees). Rendering is offscreen (EGL or
OSMesa, `MUJOCO_GL`), a few milliseconds per view.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from getagrip_ros.grasp.closing import ClosingConfig, closing_targets
from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.robot.allegro import AllegroHand
from getagrip_ros.robot.description import HAND_JOINT_NAMES, PALM_LINK
from getagrip_ros.sim.scene import SceneConfig, build_scene

FINGER_JOINTS = (slice(0, 4), slice(4, 8), slice(8, 12), slice(12, 16))
"""Joints of the index, middle, ring finger and thumb (Get a Grip order)."""


@dataclass(frozen=True)
class HandRenderConfig:
    width_px: int = 320
    height_px: int = 240
    distance_m: float = 0.42
    """Camera distance from the look-at point."""
    point_radius_m: float = 0.0025
    """Object points are drawn as spheres of this radius."""
    max_points: int = 3000
    """At most this many object points are drawn (a fixed random subset)."""


@dataclass(frozen=True)
class View:
    """A camera looking at `lookat_m` along azimuth / elevation (degrees; MuJoCo's free camera)."""

    name: str
    lookat_m: tuple[float, float, float]
    azimuth_deg: float
    elevation_deg: float
    distance_m: float


@dataclass(frozen=True)
class RenderedView:
    rgb: np.ndarray
    """(H, W, 3) uint8."""
    hand_mask: np.ndarray
    """(H, W) bool: pixels showing a hand link (from MuJoCo's segmentation; all False when not asked for)."""
    palm_px: tuple[float, float]
    """(u, v) pixel where the palm link's geometry centre projects (u right, v down)."""


def grasp_views(T_world_palm: np.ndarray, object_centre_m: np.ndarray, distance_m: float) -> list[View]:
    """Three views of one grasp, turned with its approach: from either side of the palm normal and from above."""
    normal = T_world_palm[:3, 0]
    heading = float(np.degrees(np.arctan2(normal[1], normal[0])))
    lookat = tuple(float(v) for v in 0.5 * (T_world_palm[:3, 3] + object_centre_m))
    return [View("side", lookat, heading + 90.0, -25.0, distance_m), View("other side", lookat, heading - 90.0, -25.0, distance_m),
            View("above", lookat, heading + 90.0, -70.0, distance_m)]


def closed_on_points(hand: AllegroHand, grasp: Grasp, points_m: np.ndarray | None, stop_distance_m: float = 0.005,
                     steps: int = 20, closing: ClosingConfig = ClosingConfig(),
                     closed_targets_rad: torch.Tensor | np.ndarray | None = None) -> torch.Tensor:
    """(B, 16) closed joints to draw: each finger moves from the grasp's joints toward its closing target and stops
    where its fingertip comes within stop_distance_m of an object point (kinematics only; without points, the closing
    targets). The targets: `closed_targets_rad` (e.g. what the planner or the executed close commanded), else fingertip
    IK along the closing directions (`grasp.closing`)."""
    q_open = grasp.joint_angles_rad.to(hand.dtype)
    q_closed = (closing_targets(hand, grasp, closing).closed.joint_angles_rad if closed_targets_rad is None
                else torch.as_tensor(np.asarray(closed_targets_rad), dtype=hand.dtype).reshape(len(grasp), 16)).to(hand.dtype)
    if points_m is None or len(points_m) == 0:
        return q_closed
    points = torch.as_tensor(np.asarray(points_m, dtype=float), dtype=hand.dtype)
    T = grasp.T_frame_palm.to(hand.dtype)
    fractions = torch.linspace(0.0, 1.0, steps + 1, dtype=hand.dtype)
    q = q_open.clone()
    moving = torch.ones(len(grasp), 4, dtype=torch.bool)
    for f in fractions[1:]:
        candidate = q_open + f * (q_closed - q_open)
        tips = hand.contact_positions(candidate)  # (B, 4, 3) palm frame
        tips_world = (T[:, None, :3, :3] @ tips[..., None]).squeeze(-1) + T[:, None, :3, 3]
        distance = torch.cdist(tips_world.reshape(-1, 3), points).min(1).values.reshape(len(grasp), 4)
        for finger, joints in enumerate(FINGER_JOINTS):
            advance = moving[:, finger]
            q[advance, joints] = candidate[advance, joints]
        moving &= distance > stop_distance_m
        if not moving.any():
            break
    return q


_OCTAHEDRON_VERTICES = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=float)
_OCTAHEDRON_FACES = np.array([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4], [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])


def _add_visual_mesh(spec: mujoco.MjSpec, name: str, vertices_m: np.ndarray, faces: np.ndarray,
                     rgba: tuple[float, float, float, float]) -> None:
    """A mesh drawn in the world, touching nothing."""
    spec.add_mesh(name=name, uservert=vertices_m.ravel().tolist(), userface=faces.ravel().tolist())
    spec.worldbody.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=name, contype=0, conaffinity=0,
                            rgba=list(rgba), mass=0.0, density=0.0)


def _add_point_geoms(spec: mujoco.MjSpec, points_m: np.ndarray, radius_m: float, bands: int = 5) -> None:
    """Object points as small octahedra, merged into one mesh per height band (shaded low -> high): a few geoms
    render in milliseconds where thousands of spheres take a second a view."""
    if len(points_m) == 0:
        return
    z = points_m[:, 2]
    band = np.minimum(((z - z.min()) / max(float(np.ptp(z)), 1e-9) * bands).astype(int), bands - 1)
    for k in range(bands):
        pts = points_m[band == k]
        if len(pts) == 0:
            continue
        vertices = (pts[:, None, :] + radius_m * _OCTAHEDRON_VERTICES[None]).reshape(-1, 3)
        faces = (_OCTAHEDRON_FACES[None] + 6 * np.arange(len(pts))[:, None, None]).reshape(-1, 3)
        shade = 0.5 + 0.45 * k / max(bands - 1, 1)
        _add_visual_mesh(spec, f"object_points_{k}", vertices, faces, (0.3 * shade, 0.5 * shade, shade, 1.0))


class HandRenderer:
    """A MuJoCo scene with the floating Allegro hand and the table; the object is drawn from points or a mesh.

    Args:
        points_m: (N, 3) object points, world frame, or None.
        mesh_vertices_m, mesh_faces: an object mesh in the world frame (drawn instead of / with the points), or None.
    """

    def __init__(self, points_m: np.ndarray | None = None, mesh_vertices_m: np.ndarray | None = None,
                 mesh_faces: np.ndarray | None = None, config: HandRenderConfig = HandRenderConfig()) -> None:
        self.config = config
        spec = build_scene(SceneConfig(robot="floating_hand", table_texture=False, skybox=True))
        spec.visual.global_.offwidth = max(config.width_px, 640)
        spec.visual.global_.offheight = max(config.height_px, 480)
        if mesh_vertices_m is not None and mesh_faces is not None:
            _add_visual_mesh(spec, "object_mesh", np.asarray(mesh_vertices_m, float), np.asarray(mesh_faces, int),
                             (0.55, 0.6, 0.75, 1.0))
        points = np.zeros((0, 3)) if points_m is None else np.asarray(points_m, dtype=float).reshape(-1, 3)
        points = points[np.isfinite(points).all(1)]
        self.points_m = points[np.random.default_rng(0).permutation(len(points))[: config.max_points]]
        _add_point_geoms(spec, self.points_m, config.point_radius_m)
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        m = self.model
        hand_bodies = {i for i in range(m.nbody) if m.body(i).name == PALM_LINK or m.body(i).name.startswith("link_")}
        self._hand_geoms = np.array([g for g in range(m.ngeom) if m.geom_bodyid[g] in hand_bodies])
        self._is_hand_geom = np.zeros(m.ngeom + 1, dtype=bool)
        self._is_hand_geom[self._hand_geoms] = True
        self._palm_geoms = np.array([g for g in range(m.ngeom) if m.body(m.geom_bodyid[g]).name == PALM_LINK])
        wrist = m.joint("wrist")
        self._wrist_qpos = wrist.qposadr[0]
        self._hand_qpos = np.array([m.joint(n).qposadr[0] for n in HAND_JOINT_NAMES])
        self._renderer = mujoco.Renderer(m, config.height_px, config.width_px)
        self._camera = mujoco.MjvCamera()

    def pose(self, T_world_palm: np.ndarray, q_rad: np.ndarray, rgba: tuple[float, float, float, float]) -> None:
        """Place the hand (palm link at T_world_palm, 16 joints in Get a Grip order) and colour its links."""
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, np.ascontiguousarray(T_world_palm[:3, :3], dtype=float).reshape(-1))
        a = self._wrist_qpos
        self.data.qpos[a : a + 3], self.data.qpos[a + 3 : a + 7] = T_world_palm[:3, 3], quat
        self.data.qpos[self._hand_qpos] = np.asarray(q_rad, dtype=float)
        self.model.geom_rgba[self._hand_geoms] = rgba
        mujoco.mj_kinematics(self.model, self.data)

    def render(self, view: View, with_mask: bool = True) -> RenderedView:
        """The view's RGB image; with_mask: also the hand's pixels (a second, segmentation render)."""
        cam = self._camera
        cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        cam.lookat[:], cam.azimuth, cam.elevation, cam.distance = view.lookat_m, view.azimuth_deg, view.elevation_deg, view.distance_m
        r = self._renderer
        r.update_scene(self.data, cam)
        rgb = r.render().copy()
        palm = self.project(self.data.geom_xpos[self._palm_geoms].mean(0)[None])[0]
        if not with_mask:
            return RenderedView(rgb, np.zeros(rgb.shape[:2], dtype=bool), tuple(palm))
        r.enable_segmentation_rendering()
        r.update_scene(self.data, cam)
        seg = r.render()
        r.disable_segmentation_rendering()
        ids = np.where(seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM), seg[..., 0], -1)  # int(): an enum compares per pixel
        return RenderedView(rgb, self._is_hand_geom[ids], tuple(palm))

    def project(self, points_m: np.ndarray) -> np.ndarray:
        """(N, 3) world points -> (N, 2) pixels (u, v) in the last rendered view (its OpenGL camera)."""
        scene = self._renderer.scene
        gl = mujoco.mjv_averageCamera(scene.camera[0], scene.camera[1])  # the two eyes are ipd apart; mono = their mean
        forward, up = np.asarray(gl.forward), np.asarray(gl.up)
        right = np.cross(forward, up)
        rel = np.asarray(points_m, float) - np.asarray(gl.pos)
        depth = rel @ forward
        half_h = 0.5 * (gl.frustum_top - gl.frustum_bottom)
        half_w = half_h * self.config.width_px / self.config.height_px
        x = (rel @ right) * gl.frustum_near / depth
        y = (rel @ up) * gl.frustum_near / depth
        u = (x + half_w) / (2 * half_w) * self.config.width_px
        v = (gl.frustum_top - y) / (2 * half_h) * self.config.height_px
        return np.stack([u, v], axis=1)

    def close(self) -> None:
        self._renderer.close()

    def __enter__(self) -> "HandRenderer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
