"""A video of a simulated trial, re-rendered from its bag: the recorded joint states and object states replayed in
the MuJoCo world (no physics) and filmed by a camera beside the table, from the capture spiral to the lift and hold.

The robot reports its state every `sample_every_ms` of robot time while it moves (capture and execution), so a
segment of n samples spans (n - 1) x sample_every_ms of robot time; the video shows the capture sped up to
`capture_s` seconds and the execution at `execution_speed`. Written as MP4 (H.264, PyAV's bundled FFmpeg) with a
contact sheet PNG beside it.
World frame: robot base, z up, table top at z = 0; metres, radians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from getagrip_ros.trials.bag import TrialBag, read_bag
from getagrip_ros.trials.messages import matrix

SAMPLE_EVERY_MS, CAPTURE_SAMPLE_EVERY_MS = 50.0, 250.0
"""The robot stages' default reporting periods during execution and capture (trials record theirs)."""


@dataclass(frozen=True)
class VideoConfig:
    width_px: int = 480
    height_px: int = 360
    fps: int = 10
    capture_s: float = 5.0
    """The capture (minutes of robot time along the spirals) is sped up to last this long (never slowed down)."""
    execution_speed: float = 1.0
    """Hand shaping, approach, close, lift and hold at this multiple of robot time."""
    lookat_m: tuple[float, float, float] = (0.5, 0.0, 0.3)
    azimuth_deg: float = 215.0
    """MuJoCo free camera: 180 looks from in front of the robot back at it."""
    elevation_deg: float = -12.0
    distance_m: float = 1.3
    sheet_frames: int = 8
    """Frames in the contact sheet (evenly spread over the video)."""


@dataclass(frozen=True)
class Segment:
    """Recorded states of one stage, in the robot's order."""

    stage: str
    joint_names: tuple[str, ...]
    positions_rad: np.ndarray
    """(n, J)."""
    object_poses: list
    """Per state, the object's recorded pose at that moment (a geometry_msgs/Pose; None: not recorded)."""
    captions: list[str]
    speed: float
    """Shown at this multiple of robot time."""
    sample_s: float
    """Robot time between two states."""

    def frame_indices(self, fps: int) -> np.ndarray:
        """State shown in each frame: frames every speed / fps of robot time over the segment's span."""
        n = len(self.positions_rad)
        if n == 0:
            return np.zeros(0, dtype=int)
        num_frames = int(math.floor((n - 1) * self.sample_s * fps / self.speed + 1e-9)) + 1
        return np.minimum(np.round(np.arange(num_frames) * self.speed / fps / self.sample_s).astype(int), n - 1)


@dataclass(frozen=True)
class TrialVideo:
    path: Path
    sheet_path: Path
    num_frames: int
    duration_s: float
    segments: dict[str, int]
    """Frames per stage."""


def trial_segments(bag: TrialBag, config: VideoConfig = VideoConfig()) -> list[Segment]:
    """The capture's and the execution's recorded states (a stage without states is left out)."""
    events = sorted(bag.json("/trial/events"), key=lambda e: e.get("time_ns", 0))
    objects = sorted(bag.topic("/sim/object_state"), key=lambda m: m.stamp_ns)
    object_stamps = np.array([m.stamp_ns for m in objects], dtype=np.int64)
    phases = [(e["time_ns"], str(e.get("phase", ""))) for e in events if e.get("event") == "phase"]
    out = []
    for stage in ("capture", "execution"):
        sample_s = sample_period_s(bag, stage)
        inside = [m for m in bag.stage_messages("/joint_states", stage) if len(m.msg.name) == len(m.msg.position)]
        if not inside:
            continue
        t0 = bag.stage_window(stage)[0]
        names = tuple(inside[0].msg.name)
        inside = [m for m in inside if tuple(m.msg.name) == names]
        span_s = (len(inside) - 1) * sample_s
        speed = max(1.0, span_s / config.capture_s) if stage == "capture" else config.execution_speed
        poses, captions = [], []
        for m in inside:
            poses.append(_object_pose_at(objects, object_stamps, m.stamp_ns))
            phase = [p for t, p in phases if t <= m.stamp_ns and t >= t0]
            label = stage if stage == "capture" else (phase[-1] if phase else "execution")
            rise = "" if poses[-1] is None or poses[0] is None else \
                f", object {100 * (poses[-1].position.z - poses[0].position.z):+.1f} cm"
            captions.append(f"{label} ({speed:.3g}x){rise}")
        out.append(Segment(stage, names, np.array([m.msg.position for m in inside], dtype=float), poses, captions, speed,
                           sample_s))
    return out


def _object_pose_at(objects: list, stamps: np.ndarray, stamp_ns: int):
    """The pose of the object state recorded nearest `stamp_ns` (the robot reports both at once), or None."""
    if len(objects) == 0:
        return None
    i = int(np.clip(np.searchsorted(stamps, stamp_ns), 1, len(stamps) - 1)) if len(stamps) > 1 else 0
    if i > 0 and abs(stamps[i - 1] - stamp_ns) <= abs(stamps[i] - stamp_ns):
        i -= 1
    return objects[i].msg.pose


def sample_period_s(bag: TrialBag, stage: str) -> float:
    """The robot's reporting period during `stage` ("capture" or "execution"), as recorded with the trial (the robot
    node's parameters over ROS, the robot stages' settings in process; else the defaults)."""
    name = "capture_sample_every_ms" if stage == "capture" else "sample_every_ms"
    meta = bag.metadata
    for settings in (meta.get("actuators"), meta.get("robot_stages")):
        value = settings.get(name) if isinstance(settings, dict) else None
        if isinstance(value, (int, float)) and value > 0:
            return float(value) / 1000.0
    return (CAPTURE_SAMPLE_EVERY_MS if stage == "capture" else SAMPLE_EVERY_MS) / 1000.0


def write_trial_video(bag_path: str | Path, out_path: str | Path | None = None, config: VideoConfig = VideoConfig(),
                      progress=None, bag: TrialBag | None = None) -> TrialVideo:
    """Render a simulated trial's bag to an MP4 (default: <bag folder>/<trial>.mp4) and a contact sheet PNG beside it
    (`bag`: the bag at bag_path, read already).

    Raises ValueError when the bag has no recorded robot states (the trial ended before the capture moved the arm)
    or names no object to rebuild; progress(done, total) is called every frame."""
    import av
    import mujoco

    from getagrip_ros.sim.robot_backend import prepare_named_object
    from getagrip_ros.sim.scene import SceneConfig
    from getagrip_ros.sim.world import ObjectPlacement, SimWorld

    bag_path = Path(bag_path)
    bag = bag if bag is not None else read_bag(bag_path)
    segments = trial_segments(bag, config)
    if not segments:
        raise ValueError(f"{bag_path}: no robot states recorded during the capture or the execution: nothing to show")
    name = bag.metadata.get("object")
    reset = [e for e in bag.json("/trial/events") if e.get("event") == "reset" and e.get("object")]
    name = reset[-1]["object"] if reset else name
    has_object = any(pose is not None for s in segments for pose in s.object_poses)
    obj = prepare_named_object(name) if has_object and isinstance(name, str) and name not in ("", "unknown") else None
    trial = str(bag.metadata.get("trial") or bag_path.name)
    out_path = Path(out_path) if out_path is not None else (bag_path if bag_path.is_dir() else bag_path.parent) / f"{trial}.mp4"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    width, height = 2 * (config.width_px // 2), 2 * (config.height_px // 2)  # H.264 4:2:0 needs even sizes
    frames_of = [s.frame_indices(config.fps) for s in segments]
    total = int(sum(len(f) for f in frames_of))
    sheet_at = set(np.linspace(0, total - 1, min(config.sheet_frames, total)).round().astype(int).tolist())
    sheet: list[np.ndarray] = []
    with SimWorld(SceneConfig(robot="arm", skybox=True), obj, ObjectPlacement(xy_m=(10.0, 10.0))) as world:
        vis = world.model.vis
        vis.global_.offwidth, vis.global_.offheight = max(width, 640), max(height, 480)
        # no multisampling and coarser spheres: 4x faster on a CPU renderer (llvmpipe), nearly the same picture
        vis.quality.offsamples, vis.quality.numslices, vis.quality.numstacks = 0, 12, 8
        renderer = mujoco.Renderer(world.model, height, width)
        camera = mujoco.MjvCamera()
        camera.lookat[:], camera.azimuth, camera.elevation, camera.distance = (config.lookat_m, config.azimuth_deg,
                                                                               config.elevation_deg, config.distance_m)
        container = av.open(str(out_path), mode="w")
        try:
            stream = container.add_stream("libx264", rate=config.fps, options={"crf": "26", "preset": "veryfast"})
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            done = 0
            for segment, indices in zip(segments, frames_of):
                for k in indices:
                    pose = segment.object_poses[k]
                    world.show_state(segment.joint_names, segment.positions_rad[k], None if pose is None else matrix(pose))
                    renderer.update_scene(world.data, camera)
                    rgb = _caption(renderer.render(), f"{trial}: {segment.captions[k]}")
                    if done in sheet_at:
                        sheet.append(rgb)
                    container.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
                    done += 1
                    if progress is not None:
                        progress(done, total)
            container.mux(stream.encode())
        finally:
            container.close()
            renderer.close()
    sheet_path = out_path.with_name(out_path.stem + "_frames.png")
    _write_sheet(sheet, sheet_path)
    return TrialVideo(out_path, sheet_path, total, total / config.fps,
                      {s.stage: len(f) for s, f in zip(segments, frames_of)})


def _caption(rgb: np.ndarray, text: str) -> np.ndarray:
    """The frame with `text` in white on black at its top left."""
    band = _caption_band(text, max(12, rgb.shape[0] // 30))
    h, w = min(band.shape[0], rgb.shape[0] - 4), min(band.shape[1], rgb.shape[1] - 4)
    out = rgb.copy()
    out[4 : 4 + h, 4 : 4 + w] = band[:h, :w]
    return out


@lru_cache(maxsize=256)
def _caption_band(text: str, size_px: int) -> np.ndarray:
    """`text` drawn once per distinct caption (most frames repeat the one before)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size_px)
    left, top, right, bottom = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), text, font=font)
    band = Image.new("RGB", (right + 8, bottom + 6), (0, 0, 0))
    ImageDraw.Draw(band).text((4, 3), text, fill=(255, 255, 255), font=font)
    return np.asarray(band)


def _write_sheet(frames: list[np.ndarray], path: Path, columns: int = 4, scale: int = 2) -> Path:
    """Frames side by side (rows of `columns`), each downscaled `scale` times: the README's frame strip."""
    from PIL import Image

    small = [Image.fromarray(f).reduce(scale) for f in frames]
    w, h = small[0].size
    rows = int(math.ceil(len(small) / columns))
    sheet = Image.new("RGB", (columns * w, rows * h), (255, 255, 255))
    for i, image in enumerate(small):
        sheet.paste(image, ((i % columns) * w, (i // columns) * h))
    sheet.save(path)
    return path


def video_info(path: str | Path) -> tuple[int, float, tuple[int, int]]:
    """(frames, duration in seconds, (width, height)) of a video file, decoded (not read from the header)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(stream))
        rate = float(stream.average_rate or stream.guessed_rate)
        return frames, frames / rate, (stream.codec_context.width, stream.codec_context.height)
