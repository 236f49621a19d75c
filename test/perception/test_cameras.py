"""Camera backends: the simulated camera, and the ZED adapter's logic against the documented pyzed API.

No ZED SDK exists here (it needs CUDA and the hardware), so the ZED test installs a stand-in
`pyzed.sl` that follows the documented names and behaviour (BGRA uint8 left image, float32 depth
with NaN/inf for no measurement, ERROR_CODE.SUCCESS, calibration_parameters.left_cam.fx/fy/cx/cy).
"""

import sys
import types

import numpy as np
import pytest

from getagrip_ros.perception.cameras import CameraUnavailable, SimCamera, ZedCamera, ZedConfig
from getagrip_ros.sim.world import SimWorld


def test_sim_camera_grabs_rgb_depth_and_intrinsics():
    with SimWorld() as world:
        image = SimCamera(world).grab()
        assert image.rgb.shape == (360, 640, 3) and image.rgb.dtype == np.uint8
        assert image.depth_m.shape == (360, 640) and image.K[0, 0] == pytest.approx(266.5)
        assert SimCamera(world, with_depth=False).grab().depth_m is None


def _fake_sl(open_error="SUCCESS", grab_error="SUCCESS"):
    sl = types.ModuleType("pyzed.sl")
    codes = types.SimpleNamespace(SUCCESS="SUCCESS", CAMERA_NOT_DETECTED="CAMERA_NOT_DETECTED", FAILURE="FAILURE")
    sl.ERROR_CODE = codes
    sl.RESOLUTION = types.SimpleNamespace(HD720="HD720", VGA="VGA")
    sl.DEPTH_MODE = types.SimpleNamespace(NONE="NONE", NEURAL="NEURAL")
    sl.UNIT = types.SimpleNamespace(METER="METER", MILLIMETER="MILLIMETER")
    sl.VIEW = types.SimpleNamespace(LEFT="LEFT")
    sl.MEASURE = types.SimpleNamespace(DEPTH="DEPTH")
    sl.TIME_REFERENCE = types.SimpleNamespace(IMAGE="IMAGE")
    sl.opened_with = {}

    class InitParameters:
        camera_resolution, camera_fps, coordinate_units, depth_mode = "AUTO", 0, "MILLIMETER", "NEURAL"

        def set_from_serial_number(self, sn):
            self.serial = sn

    class Mat:
        def __init__(self):
            self.data = None

        def get_data(self):
            return self.data

    class Camera:
        def open(self, init):
            sl.opened_with.update(vars(init))
            return getattr(codes, open_error)

        def get_camera_information(self):
            left = types.SimpleNamespace(fx=533.0, fy=533.5, cx=640.2, cy=361.0)
            return types.SimpleNamespace(camera_configuration=types.SimpleNamespace(
                calibration_parameters=types.SimpleNamespace(left_cam=left)))

        def grab(self, runtime=None):
            return getattr(codes, grab_error)

        def retrieve_image(self, mat, view):
            bgra = np.zeros((720, 1280, 4), np.uint8)
            bgra[..., 0], bgra[..., 1], bgra[..., 2], bgra[..., 3] = 10, 20, 30, 255  # B, G, R, A
            mat.data = bgra

        def retrieve_measure(self, mat, measure):
            depth = np.full((720, 1280), 0.8, np.float32)
            depth[0, 0], depth[0, 1] = np.nan, np.inf
            mat.data = depth

        def get_timestamp(self, ref):
            return types.SimpleNamespace(get_nanoseconds=lambda: 1_500_000_000)

        def close(self):
            sl.closed = True

    sl.InitParameters, sl.Mat, sl.Camera, sl.RuntimeParameters = InitParameters, Mat, Camera, lambda: None
    return sl


@pytest.fixture
def pyzed(monkeypatch):
    def install(**kwargs):
        sl = _fake_sl(**kwargs)
        package = types.ModuleType("pyzed")
        package.sl = sl
        monkeypatch.setitem(sys.modules, "pyzed", package)
        monkeypatch.setitem(sys.modules, "pyzed.sl", sl)
        return sl
    return install


def test_zed_adapter_opens_in_metres_reads_intrinsics_and_converts_images(pyzed):
    sl = pyzed()
    camera = ZedCamera(ZedConfig(with_depth=True, serial_number=123))
    assert sl.opened_with["coordinate_units"] == "METER" and sl.opened_with["depth_mode"] == "NEURAL"
    assert sl.opened_with["camera_resolution"] == "HD720" and sl.opened_with["serial"] == 123
    image = camera.grab()
    assert image.rgb.shape == (720, 1280, 3) and tuple(image.rgb[5, 5]) == (30, 20, 10)  # BGRA -> RGB
    assert image.depth_m[0, 0] == 0.0 and image.depth_m[0, 1] == 0.0 and image.depth_m[5, 5] == pytest.approx(0.8)
    assert image.K[0, 0] == 533.0 and image.K[1, 2] == 361.0 and image.stamp_s == pytest.approx(1.5)
    camera.close()
    assert sl.closed
    assert ZedCamera(ZedConfig()).grab().depth_m is None and sl.opened_with["depth_mode"] == "NONE"


def test_zed_errors_are_clear(pyzed, monkeypatch):
    pyzed(open_error="CAMERA_NOT_DETECTED")
    with pytest.raises(CameraUnavailable, match="ZED open failed: CAMERA_NOT_DETECTED"):
        ZedCamera()
    pyzed(grab_error="FAILURE")
    with pytest.raises(CameraUnavailable, match="ZED grab failed"):
        ZedCamera().grab()
    monkeypatch.setitem(sys.modules, "pyzed", None)
    monkeypatch.setitem(sys.modules, "pyzed.sl", None)
    with pytest.raises(CameraUnavailable, match="ZED SDK's Python API"):
        ZedCamera()
