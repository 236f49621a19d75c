"""The cuRobo adapter against cuRobo's documented v1 API contract (fake_curobo), and its errors without cuRobo/CUDA."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from getagrip_ros.motion.backend import PalmGoals, PlanOptions, PlanStatus
from getagrip_ros.motion.world import ObjectMesh, ObjectPointCloud, PlanningWorld, table_box, translation
from getagrip_ros.robot.description import ARM_JOINT_NAMES, HAND_JOINT_NAMES

from . import fake_curobo
from .conftest import OPEN_HAND, Q_READY


@pytest.fixture
def backend(monkeypatch):
    from getagrip_ros.motion.curobo_backend import CuroboBackend

    fake_curobo.install(monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    return CuroboBackend()


def _palm_goals(xs) -> PalmGoals:
    T = np.stack([translation((x, 0.0, 0.3)) for x in xs])
    T[:, :3, :3] = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # palm normal down, fingers forward
    return PalmGoals(T, np.tile(OPEN_HAND, (len(xs), 1)))


def test_without_curobo_the_error_says_what_to_install(monkeypatch):
    from getagrip_ros.motion.curobo_backend import CuroboBackend, CuroboUnavailableError

    monkeypatch.setitem(sys.modules, "curobo", None)  # import curobo raises ImportError
    with pytest.raises(CuroboUnavailableError, match=r"v0.7.8 .*or use the ompl backend"):
        CuroboBackend()


def test_without_cuda_the_error_says_so(monkeypatch):
    from getagrip_ros.motion.curobo_backend import CuroboBackend, CuroboUnavailableError

    fake_curobo.install(monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(CuroboUnavailableError, match="needs a CUDA device"):
        CuroboBackend()


def test_construction_follows_get_a_grip(backend):
    gen = fake_curobo.MotionGen.instances[-1]
    assert gen.warmed_up
    kwargs = gen.config.kwargs
    assert kwargs["num_graph_seeds"] == 1 and kwargs["collision_cache"] == {"obb": 16, "mesh": 4}
    kin = gen.config.robot_cfg.cfg["kinematics"]
    assert kin["collision_sphere_buffer"] == 0.001 and kin["ee_link"] == "palm_link"
    assert kin["urdf_path"].endswith("fr3_algr_zed2i.urdf") and kin["urdf_path"].startswith("/")
    first = gen.worlds[0].data  # caches sized from a world that has a mesh and a box, far away
    assert set(first) == {"cuboid", "mesh"} and len(first["mesh"]) == 1 and len(first["cuboid"]) == 1
    assert first["mesh"]["placeholder_mesh"]["pose"][:3] == [10.0, 10.0, 10.0]


def test_world_conversion_and_fresh_mesh_names(backend):
    gen = fake_curobo.MotionGen.instances[-1]
    mesh = ObjectMesh("mug", np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]], float),
                      np.array([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]), translation((0.65, 0.0, 0.0)))
    backend.set_world(PlanningWorld((table_box(),), (mesh,)))
    world = gen.worlds[-1].data
    assert world["cuboid"]["table"]["dims"] == [1.3208, 1.8288, 0.02]
    assert world["cuboid"]["table"]["pose"] == pytest.approx([0.50165, 0.0, -0.01, 1.0, 0.0, 0.0, 0.0])
    (name_1,) = world["mesh"]
    assert name_1.startswith("mug") and world["mesh"][name_1]["pose"] == pytest.approx([0.65, 0, 0, 1, 0, 0, 0])
    cloud = ObjectPointCloud("mug", np.random.default_rng(0).uniform(-0.03, 0.03, (200, 3)) + [0.65, 0, 0.05])
    backend.set_world(PlanningWorld((table_box(),), (cloud,)))
    (name_2,) = gen.worlds[-1].data["mesh"]
    assert name_2 != name_1  # cuRobo ignores a mesh update under a name it knows (issue #263)
    hull = np.array(gen.worlds[-1].data["mesh"][name_2]["vertices"])
    assert len(hull) >= 4 and np.abs(hull - [0.65, 0, 0.05]).max() <= 0.03 + 1e-9  # the cloud's convex hull


def test_batch_planning_contract_and_results(backend):
    gen = fake_curobo.MotionGen.instances[-1]
    goals = _palm_goals([1.2, 0.6, 0.5])  # the first is out of the fake's reach
    plans = backend.plan_to_palm_poses(Q_READY, goals, PlanOptions(time_limit_s=2.0))
    name, call = gen.calls[-1]
    assert name == "plan_batch" and call["B"] == 3
    config = call["plan_config"]
    assert config.enable_graph and not config.enable_opt and config.num_graph_seeds == 1 and config.timeout == 2.0
    assert set(call["link_poses"]) == {"link_3.0", "link_7.0", "link_11.0", "link_15.0"}
    start = call["start"].position.numpy()
    names = gen.joint_names
    np.testing.assert_allclose(start[:, [names.index(n) for n in ARM_JOINT_NAMES]], np.tile(Q_READY, (3, 1)), atol=1e-6)
    np.testing.assert_allclose(start[:, [names.index(n) for n in HAND_JOINT_NAMES]], goals.hand_rad, atol=1e-6)
    quat = call["goal_pose"].quaternion.numpy()[0]  # wxyz of the palm rotation (a 90 deg turn about y)
    np.testing.assert_allclose(np.abs(quat), [np.sqrt(0.5), 0, np.sqrt(0.5), 0], atol=1e-6)
    # the fingertip links sit ahead of the palm, inside the hand's reach
    finger = call["link_poses"]["link_7.0"].position.numpy()[1]
    assert 0.05 < np.linalg.norm(finger - goals.T_world_palm[1, :3, 3]) < 0.2

    assert [p.status for p in plans] == [PlanStatus.IK_FAILED, PlanStatus.SUCCESS, PlanStatus.NOT_TRIED]
    assert plans[0].reason.startswith("cuRobo: IK Fail")
    assert plans[1].path_rad.shape == (5, 7)
    np.testing.assert_allclose(plans[1].path_rad[0], Q_READY, atol=1e-6)
    np.testing.assert_allclose(plans[1].q_goal_arm_rad, fake_curobo.GOAL_Q, atol=1e-6)


def test_joint_goal_planning(backend):
    goal = np.array(fake_curobo.GOAL_Q)
    plan = backend.plan_to_joints(Q_READY, goal, OPEN_HAND, PlanOptions())
    assert plan.success and plan.path_rad.shape == (4, 7)
    np.testing.assert_allclose(plan.path_rad[[0, -1]], [Q_READY, goal], atol=1e-6)


def test_the_motion_planner_runs_on_the_curobo_backend(backend):
    """The same MotionPlanner picks the first grasp cuRobo solved and times its path."""
    from getagrip_ros.grasp.grasp import Grasp
    from getagrip_ros.motion.planner import MotionPlanner

    goals = _palm_goals([1.2, 0.6])
    grasps = Grasp(torch.tensor(goals.T_world_palm[:, :3, 3]), torch.tensor(goals.T_world_palm[:, :3, :3]),
                   torch.tensor(goals.hand_rad), torch.tensor(np.repeat(goals.T_world_palm[:, None, :3, 0], 4, axis=1)),
                   frame_id="world")
    result = MotionPlanner(backend=backend).plan_grasps(Q_READY, PlanningWorld(), grasps)
    assert result.success and result.grasp_index == 1
    assert result.rejected[0].status == PlanStatus.IK_FAILED
    np.testing.assert_allclose(result.trajectory.positions_rad[-1], fake_curobo.GOAL_Q, atol=1e-6)
