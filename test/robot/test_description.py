"""Checks of the generated URDFs and the cuRobo YAML against the published facts (no ROS).

Expected numbers below are copied from the fact sheets (Franka DH table and limits, simlab Allegro URDF,
Get a Grip's fr3_algr_zed2i model), not from the generator, so a wrong table entry makes a test fail.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml

from getagrip_ros.robot import description as desc

import pinocchio as pin

ROOT = Path(__file__).resolve().parents[2]
FULL_URDF = ROOT / "urdf" / "fr3_algr_zed2i.urdf"
HAND_URDF = ROOT / "urdf" / "allegro_right.urdf"
CUROBO_YAML = ROOT / "config" / "fr3_algr_zed2i_curobo.yml"

PI = math.pi
Q_READY = [0.0, -PI / 4, 0.0, -3 * PI / 4, 0.0, PI / 2, PI / 4]
HAND_DEFAULT = [0, 0.5, 0, 0, 0, 0.5, 0, 0, 0, 0.5, 0, 0, 1.4, 0, 0, 0]  # ALLEGRO_HAND_DEFAULT_JOINT_ANGLES
DEFAULT_Q_ALGR = [0, 1.5, 1, 1, 0, 1.5, 1, 1, 0, 1.5, 1, 1, 0.5, 0.5, 1.5, 1]
ARM = [f"fr3_joint{i}" for i in range(1, 8)]
HAND = [f"joint_{i}.0" for i in range(16)]
TIPS = ["link_3.0_tip", "link_7.0_tip", "link_11.0_tip", "link_15.0_tip"]

# Franka FR3 "rectangular" limits and simlab Allegro limits (lower, upper, velocity).
ARM_LIMITS = {
    "fr3_joint1": (-2.3093, 2.3093, 2.0), "fr3_joint2": (-1.5133, 1.5133, 1.0), "fr3_joint3": (-2.4937, 2.4937, 1.5),
    "fr3_joint4": (-2.7478, -0.4461, 1.25), "fr3_joint5": (-2.4800, 2.4800, 3.0), "fr3_joint6": (0.8521, 4.2094, 1.5),
    "fr3_joint7": (-2.6895, 2.6895, 3.0),
}
_FINGER = [(-0.47, 0.47), (-0.196, 1.61), (-0.174, 1.709), (-0.227, 1.618)]
_THUMB = [(0.263, 1.396), (-0.105, 1.163), (-0.189, 1.644), (-0.162, 1.719)]
HAND_LIMITS = {f"joint_{i}.0": (*(_FINGER[i % 4] if i < 12 else _THUMB[i - 12]), 7.0) for i in range(16)}

# allegro_hand.md §5: fingertip (tip link origin) in palm_link, rows index, middle, ring, thumb.
TIP_FK = {
    "zeros": [(0, 0.05531, 0.13344), (0, 0, 0.13620), (0, -0.05531, 0.13344), (-0.01320, 0.16770, -0.08607)],
    "default": [(0.05710, 0.05404, 0.11892), (0.05710, 0, 0.12162), (0.05710, -0.05404, 0.11892),
                (0.13175, 0.03769, -0.07470)],
    "q_algr": [(0.06748, 0.04040, -0.03695), (0.06748, 0, -0.03485), (0.06748, -0.04040, -0.03695),
               (0.03152, 0.02682, -0.00628)],
}
HAND_CONFIGS = {"zeros": [0.0] * 16, "default": HAND_DEFAULT, "q_algr": DEFAULT_Q_ALGR}

# Sphere count per link of Get a Grip's cuRobo sphere file, mapped to our names.
SPHERE_COUNTS = {"fr3_link0": 3, "fr3_link1": 5, "fr3_link2": 4, "fr3_link3": 5, "fr3_link4": 8, "fr3_link5": 6,
                 "fr3_link6": 2, "fr3_link7": 9, "palm_link": 7}
for _first in (0, 4, 8):
    SPHERE_COUNTS.update({f"link_{_first}.0": 2, f"link_{_first + 1}.0": 3, f"link_{_first + 2}.0": 2,
                          f"link_{_first + 3}.0": 2})
SPHERE_COUNTS.update({"link_12.0": 2, "link_13.0": 3, "link_14.0": 2, "link_15.0": 3})


class Robot:
    """Pinocchio model of a URDF with name-based configuration and frame placements."""

    def __init__(self, path: Path) -> None:
        self.model = pin.buildModelFromUrdf(str(path))
        self.data = self.model.createData()

    def q(self, values: dict[str, float]) -> np.ndarray:
        q = pin.neutral(self.model)
        for name, value in values.items():
            q[self.model.joints[self.model.getJointId(name)].idx_q] = value
        return q

    def frame(self, q: np.ndarray, name: str) -> np.ndarray:
        """4x4 pose of frame `name` in the root link."""
        assert self.model.existFrame(name), name
        pin.framesForwardKinematics(self.model, self.data, q)
        return self.data.oMf[self.model.getFrameId(name)].homogeneous.copy()


@pytest.fixture(scope="module")
def full() -> Robot:
    return Robot(FULL_URDF)


@pytest.fixture(scope="module")
def hand() -> Robot:
    return Robot(HAND_URDF)


def _joints(path: Path) -> dict[str, ET.Element]:
    return {j.get("name"): j for j in ET.parse(path).getroot().findall("joint")}


def _links(path: Path) -> set[str]:
    return {link.get("name") for link in ET.parse(path).getroot().findall("link")}


def test_committed_urdfs_match_generator():
    assert FULL_URDF.read_text() == desc.fr3_algr_zed2i_urdf(), "regenerate: python -m getagrip_ros.robot.description"
    assert HAND_URDF.read_text() == desc.allegro_right_urdf(), "regenerate: python -m getagrip_ros.robot.description"
    assert desc.HEADER in FULL_URDF.read_text().splitlines()[1]


def test_cli_writes_same_files(tmp_path):
    desc.main(["--out", str(tmp_path)])
    assert (tmp_path / "fr3_algr_zed2i.urdf").read_text() == FULL_URDF.read_text()
    assert (tmp_path / "allegro_right.urdf").read_text() == HAND_URDF.read_text()


def test_robot_names_roots_and_dof(full, hand):
    assert ET.parse(FULL_URDF).getroot().get("name") == "fr3_algr_zed2i"
    assert ET.parse(HAND_URDF).getroot().get("name") == "allegro_right"
    assert full.model.nq == 23 and hand.model.nq == 16
    assert full.model.frames[full.model.getFrameId("fr3_link0")].parentJoint == 0
    assert hand.model.frames[hand.model.getFrameId("palm_link")].parentJoint == 0
    assert "fr3_link0" not in _links(HAND_URDF) and _links(HAND_URDF) <= _links(FULL_URDF)
    expected = {f"fr3_link{i}" for i in range(8)} | {f"link_{i}.0" for i in range(16)} | set(TIPS) | {
        "fr3_flange", "connector", "palm_link", "zed2i", "zed2i_left_optical", "zed2i_right_optical"}
    assert _links(FULL_URDF) == expected


@pytest.mark.parametrize(
    "frame, position, rotation",
    [
        ("fr3_link7", (0.30689, 0, 0.69728), [[0.70711, -0.70711, 0], [-0.70711, -0.70711, 0], [0, 0, -1]]),
        ("fr3_flange", (0.30689, 0, 0.59028), [[1, 0, 0], [0, -1, 0], [0, 0, -1]]),
        ("palm_link", (0.44087, 0, 0.56378), [[0, 0, 1], [0, 1, 0], [-1, 0, 0]]),
        ("zed2i_left_optical", (0.23621, -0.06, 0.58848), [[0, 1, 0], [1, 0, 0], [0, 0, -1]]),
        ("zed2i_right_optical", (0.23621, 0.06, 0.58848), [[0, 1, 0], [1, 0, 0], [0, 0, -1]]),
    ],
)
def test_fk_at_ready_pose(full, frame, position, rotation):
    pose = full.frame(full.q(dict(zip(ARM, Q_READY))), frame)
    np.testing.assert_allclose(pose[:3, 3], position, atol=1e-4)
    np.testing.assert_allclose(pose[:3, :3], rotation, atol=1e-4)


def _dh_link7(q: np.ndarray) -> np.ndarray:
    """Craig (modified) DH of the FR3: T_i = RotX(alpha) TransX(a) RotZ(theta) TransZ(d)."""
    table = [(0, 0.333, 0), (0, 0, -PI / 2), (0, 0.316, PI / 2), (0.0825, 0, PI / 2), (-0.0825, 0.384, -PI / 2),
             (0, 0, PI / 2), (0.088, 0, PI / 2)]
    T = np.eye(4)
    for (a, d, alpha), theta in zip(table, q):
        ca, sa, ct, st = math.cos(alpha), math.sin(alpha), math.cos(theta), math.sin(theta)
        T = T @ np.array([[ct, -st, 0, a], [st * ca, ct * ca, -sa, -d * sa], [st * sa, ct * sa, ca, d * ca],
                          [0, 0, 0, 1]])
    return T


def test_dh_matches_urdf(full):
    rng = np.random.default_rng(0)
    lo, hi = np.array([v[0] for v in ARM_LIMITS.values()]), np.array([v[1] for v in ARM_LIMITS.values()])
    for q_arm in [np.array(Q_READY)] + [rng.uniform(lo, hi) for _ in range(5)]:
        q = full.q(dict(zip(ARM, q_arm)))
        T7 = _dh_link7(q_arm)
        np.testing.assert_allclose(full.frame(q, "fr3_link7"), T7, atol=1e-9)
        flange = T7 @ np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0.107], [0, 0, 0, 1]])
        c, s = math.cos(-PI / 4), math.sin(-PI / 4)
        flange[:3, :3] = flange[:3, :3] @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
        np.testing.assert_allclose(full.frame(q, "fr3_flange"), flange, atol=1e-9)


@pytest.mark.parametrize("config", sorted(TIP_FK))
def test_fingertips_in_palm(hand, full, config):
    q_hand = dict(zip(HAND, HAND_CONFIGS[config]))
    q = hand.q(q_hand)
    for tip, expected in zip(TIPS, TIP_FK[config]):
        np.testing.assert_allclose(hand.frame(q, tip)[:3, 3], expected, atol=1e-4, err_msg=tip)
    # Through the full robot at a random arm pose: tip = T_base_palm * tip_in_palm.
    q_arm = dict(zip(ARM, np.random.default_rng(1).uniform(-1.0, 1.0, 7) + np.array(Q_READY)))
    q_full = full.q({**q_arm, **q_hand})
    T_base_palm = full.frame(q_full, "palm_link")
    for tip in TIPS:
        np.testing.assert_allclose(full.frame(q_full, tip), T_base_palm @ hand.frame(q, tip), atol=1e-9)


@pytest.mark.parametrize("path", [FULL_URDF, HAND_URDF], ids=["full", "hand"])
def test_joint_limits(path):
    joints = _joints(path)
    movable = {n: j for n, j in joints.items() if j.get("type") != "fixed"}
    expected = {**(ARM_LIMITS if path == FULL_URDF else {}), **HAND_LIMITS}
    assert set(movable) == set(expected)
    for name, (lower, upper, velocity) in expected.items():
        limit = movable[name].find("limit")
        assert movable[name].get("type") == "revolute"
        got = [float(limit.get(k)) for k in ("lower", "upper", "velocity")]
        assert got == pytest.approx([lower, upper, velocity], abs=1e-12), name
        effort = float(limit.get("effort"))
        assert effort == (0.7 if name in HAND_LIMITS else (87.0 if int(name[-1]) <= 4 else 12.0)), name


def test_fixed_chain_names():
    joints = _joints(FULL_URDF)
    chain = {j.find("child").get("link"): j.find("parent").get("link") for j in joints.values()}
    assert chain["fr3_flange"] == "fr3_link7" and chain["connector"] == "fr3_flange"
    assert chain["palm_link"] == "connector" and chain["zed2i"] == "connector"
    assert chain["zed2i_left_optical"] == chain["zed2i_right_optical"] == "zed2i"
    for tip, distal in zip(TIPS, ["link_3.0", "link_7.0", "link_11.0", "link_15.0"]):
        assert chain[tip] == distal and joints[f"joint_{distal[5:]}_tip"].get("type") == "fixed"


def test_masses():
    masses = {link.get("name"): float(link.find("inertial/mass").get("value"))
              for link in ET.parse(FULL_URDF).getroot().findall("link") if link.find("inertial") is not None}
    assert masses["connector"] == 0.070 and masses["zed2i"] == 0.230
    assert masses["palm_link"] == 0.4154 and masses["link_15.0_tip"] == 0.0168
    hand_total = sum(m for n, m in masses.items() if n.startswith(("link_", "palm")))
    assert hand_total == pytest.approx(0.9549, abs=1e-9)  # sum of the simlab URDF masses, tips included
    assert all(m > 0 for m in masses.values()) and len([n for n in masses if n.startswith("fr3_link")]) == 8


@pytest.fixture(scope="module")
def curobo() -> dict:
    with open(CUROBO_YAML, encoding="utf-8") as stream:
        return yaml.safe_load(stream)["robot_cfg"]["kinematics"]


def test_curobo_names_exist(curobo):
    links = _links(FULL_URDF)
    mentioned = {curobo["base_link"], curobo["ee_link"], *curobo["link_names"], *curobo["collision_link_names"],
                 *curobo["collision_spheres"], *curobo["self_collision_buffer"], *curobo["self_collision_ignore"]}
    mentioned |= {n for v in curobo["self_collision_ignore"].values() for n in v}
    assert mentioned <= links, mentioned - links
    assert curobo["urdf_path"] == "fr3_algr_zed2i.urdf"
    assert (curobo["base_link"], curobo["ee_link"]) == ("fr3_link0", "palm_link")
    assert curobo["link_names"] == ["link_3.0", "link_7.0", "link_11.0", "link_15.0"]
    assert curobo["collision_link_names"] == [f"fr3_link{i}" for i in range(1, 8)] + ["palm_link"] + [
        f"link_{i}.0" for i in range(16)]


def test_curobo_cspace(curobo):
    movable = [n for n, j in _joints(FULL_URDF).items() if j.get("type") != "fixed"]
    cspace = curobo["cspace"]
    assert cspace["joint_names"] == movable == ARM + HAND
    retract = cspace["retract_config"]
    assert len(retract) == 23 and retract[:7] == pytest.approx(Q_READY)
    limits = {**ARM_LIMITS, **HAND_LIMITS}
    for name, value in zip(cspace["joint_names"], retract):
        assert limits[name][0] <= value <= limits[name][1], name
    assert cspace["null_space_weight"] == [1.0] * 23 and cspace["cspace_distance_weight"] == [1.0] * 23
    assert (cspace["max_jerk"], cspace["max_acceleration"]) == (500.0, 15.0)


def test_curobo_spheres(curobo):
    spheres = curobo["collision_spheres"]
    assert {link: len(s) for link, s in spheres.items()} == SPHERE_COUNTS
    assert sum(len(s) for s in spheres.values()) == 86
    assert all(s["radius"] > 0 and len(s["center"]) == 3 for ss in spheres.values() for s in ss)
    assert curobo["collision_sphere_buffer"] == 0.001
    assert set(curobo["self_collision_buffer"].values()) == {-0.02}
    assert spheres["link_15.0"][2] == {"center": [0.0, 0.0, 0.04], "radius": 0.0286}


def test_urdf_arm_spheres_equal_curobo(curobo):
    """The FR3 links' URDF collision spheres are the cuRobo arm spheres."""
    root = ET.parse(FULL_URDF).getroot()
    for link in root.findall("link"):
        name = link.get("name")
        if not name.startswith("fr3_link"):
            continue
        urdf = [([float(x) for x in c.find("origin").get("xyz").split()],
                 float(c.find("geometry/sphere").get("radius"))) for c in link.findall("collision")]
        yml = [(s["center"], s["radius"]) for s in curobo["collision_spheres"][name]]
        assert urdf == yml, name


def test_load_curobo_config_resolves_paths():
    cfg = desc.load_curobo_config()
    kinematics = cfg["robot_cfg"]["kinematics"]
    assert Path(kinematics["urdf_path"]).is_absolute() and Path(kinematics["urdf_path"]).samefile(FULL_URDF)
    assert Path(kinematics["asset_root_path"]).samefile(FULL_URDF.parent)
