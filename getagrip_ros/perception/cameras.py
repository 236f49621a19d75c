"""Camera backends behind one interface: the ZED 2i (pyzed, from the ZED SDK) and the simulated wrist camera.

Images are the left rectified view as RGB uint8 (H, W, 3); depth, when asked for, is metres along the
optical axis with 0 where there is no measurement. Intrinsics K are pixels (u right, v down).
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from getagrip_ros.sim.world import SimWorld


class CameraUnavailable(RuntimeError):
    """The camera (or its SDK) is missing or failed to open or grab."""


@dataclass(frozen=True)
class CameraImage:
    rgb: np.ndarray
    """(H, W, 3) uint8."""
    depth_m: np.ndarray | None
    """(H, W) float32 metres, 0 = no measurement; None when depth is off."""
    K: np.ndarray
    """(3, 3) intrinsics of the left rectified image, pixels."""
    stamp_s: float


class Camera(abc.ABC):
    """A camera that grabs posed images; the pose comes from the robot (the camera frame of the model)."""

    @abc.abstractmethod
    def grab(self) -> CameraImage:
        """One new image (and depth if enabled)."""

    def close(self) -> None:
        """Release the device."""


class SimCamera(Camera):
    """The simulated wrist camera of a SimWorld."""

    def __init__(self, world: "SimWorld", with_depth: bool = True) -> None:
        self.world, self.with_depth = world, with_depth

    def grab(self) -> CameraImage:
        frame = self.world.render()
        return CameraImage(frame.rgb, frame.depth_m if self.with_depth else None, frame.K, self.world.time_s)


@dataclass(frozen=True)
class ZedConfig:
    resolution: str = "HD720"
    """sl.RESOLUTION name: HD2K, HD1080, HD720 or VGA."""
    fps: int = 30
    with_depth: bool = False
    """The paper uses RGB only; depth enables the depth-fusion backend."""
    depth_mode: str = "NEURAL"
    serial_number: int | None = None
    """Open this camera; None = the first one found."""


class ZedCamera(Camera):
    """The ZED 2i through the ZED SDK's Python API (`pyzed.sl`, installed by the SDK, not from PyPI)."""

    def __init__(self, config: ZedConfig = ZedConfig()) -> None:
        try:
            import pyzed.sl as sl
        except ImportError as exc:
            raise CameraUnavailable("the ZED SDK's Python API (pyzed.sl) is not installed: install the ZED SDK and run "
                                    "its get_python_api.py (the PyPI package 'pyzed' is unrelated)") from exc
        if not hasattr(sl, "Camera"):
            raise CameraUnavailable("the installed 'pyzed' is not the ZED SDK's Python API (no pyzed.sl.Camera)")
        self.sl, self.config = sl, config
        init = sl.InitParameters()
        init.camera_resolution = getattr(sl.RESOLUTION, config.resolution)
        init.camera_fps = config.fps
        init.coordinate_units = sl.UNIT.METER
        init.depth_mode = getattr(sl.DEPTH_MODE, config.depth_mode) if config.with_depth else sl.DEPTH_MODE.NONE
        if config.serial_number is not None:
            init.set_from_serial_number(config.serial_number)
        self.camera = sl.Camera()
        err = self.camera.open(init)
        if err != sl.ERROR_CODE.SUCCESS:
            raise CameraUnavailable(f"ZED open failed: {err}")
        left = self.camera.get_camera_information().camera_configuration.calibration_parameters.left_cam
        self.K = np.array([[left.fx, 0.0, left.cx], [0.0, left.fy, left.cy], [0.0, 0.0, 1.0]])
        self._image, self._depth = sl.Mat(), sl.Mat()

    def grab(self) -> CameraImage:
        sl = self.sl
        err = self.camera.grab(sl.RuntimeParameters())
        if err != sl.ERROR_CODE.SUCCESS:
            raise CameraUnavailable(f"ZED grab failed: {err}")
        self.camera.retrieve_image(self._image, sl.VIEW.LEFT)
        bgra = self._image.get_data()
        rgb = np.ascontiguousarray(bgra[..., 2::-1])  # BGRA -> RGB, copied out of the SDK's buffer
        depth = None
        if self.config.with_depth:
            self.camera.retrieve_measure(self._depth, sl.MEASURE.DEPTH)
            depth = np.array(self._depth.get_data(), dtype=np.float32)
            depth[~np.isfinite(depth)] = 0.0
        stamp = self.camera.get_timestamp(sl.TIME_REFERENCE.IMAGE).get_nanoseconds() * 1e-9
        return CameraImage(rgb, depth, self.K.copy(), stamp if stamp > 0 else time.time())

    def close(self) -> None:
        self.camera.close()
