"""The human_demo sampler in the planner and the CLI: a demonstration in, its Allegro grasp out (over ROS: a later
part of issue 23)."""

import json

import numpy as np
import pytest
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.human_demo.demonstration import HumanDemonstration, save_demonstration
from getagrip_ros.human_demo.transfer import TransferConfig
from getagrip_ros.objects.primitives import cylinder_surface_points
from getagrip_ros.planning.human_demo_sampler import HumanDemoSamplerConfig
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.status import StatusCode
from getagrip_ros.task.benchmark import BenchmarkProtocol

from ..human_demo.demos import side_power_grasp
from .test_graspd_sampler import FAST as FAST_GRASPD

FAST = HumanDemoSamplerConfig(transfer=TransferConfig(num_object_points=800, finger_iterations=20, iterations=30,
                                                      lr_drop_at=20))
CAN = dict(radius_m=0.04, height_m=0.10, centre_xy_m=(0.65, 0.0))

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def planner():
    return GraspPlanner(GraspPlannerConfig(graspd=FAST_GRASPD, human_demo=FAST))


@pytest.fixture(scope="module")
def demo():
    """The palm on the can's -y side, the fingers forward (+x) round its far side: a grasp the cable filter allows."""
    return side_power_grasp(centre_xy_m=CAN["centre_xy_m"], radius_m=CAN["radius_m"], height_m=0.05, frame_id="world",
                            azimuth_deg=-90.0)


def request(demonstration, **kwargs) -> PlanRequest:
    options = {"frame_id": "world", "num_grasps": 1, "sampler": "human_demo", "evaluator": "none", "seed": 0,
               "points_m": cylinder_surface_points(**CAN), "human_demo": demonstration, **kwargs}
    return PlanRequest(**options)


def test_the_demonstrated_grasp_is_planned_on_the_cloud(planner, demo):
    calls = []
    result = planner.plan(request(demo), progress=lambda *a: calls.append(a))
    assert result.success, result.reason
    assert "transferred from the human demonstration" in result.reason and "the demonstrated grasp" in result.reason
    grasps = result.planned.grasps
    assert isinstance(grasps, Grasp) and len(grasps) == 1 and grasps.frame_id == "world"
    # the Allegro palm is where the human palm was: on the can's -y side, facing it, the fingers forward
    palm, R = grasps.palm_position_m[0].numpy(), grasps.palm_rotation[0].numpy()
    assert palm[1] < -0.03 and abs(palm[0] - 0.65) < 0.1
    assert R[:, 0] @ np.array([0.0, 1.0, 0.0]) > 0.8 and R[:, 2] @ np.array([1.0, 0.0, 0.0]) > 0.8
    assert result.planned.closed_joints_rad.shape == (1, 16) and torch.isnan(result.planned.y_pgs).all()
    assert any(stage == "sampling" for stage, *_ in calls)


@pytest.mark.parametrize("change, message", [
    (dict(human_demo=None), "needs a human demonstration"),
    (dict(sampler="heuristic"), "used by the human_demo sampler only"),
    (dict(frame_id="base"), "frame 'world', the object in 'base'"),
])
def test_goals_without_a_usable_demonstration_are_invalid(planner, demo, change, message):
    result = planner.plan(request(demo, **change))
    assert result.status == StatusCode.INVALID_GOAL and message in result.reason, result.reason


def test_a_demonstration_away_from_the_object_is_refused(planner, demo):
    far = HumanDemonstration("keypoints21", "world", demo.keypoints_m + np.array([0.0, -0.4, 0.0]))
    result = planner.plan(request(far))
    assert result.status == StatusCode.INVALID_GOAL and "cm from the object" in result.reason, result.reason


def test_cli_plans_from_a_demonstration_file(tmp_path, demo, capsys):
    from getagrip_ros.cli.plan_grasps import main

    np.save(tmp_path / "cloud.npy", cylinder_surface_points(**CAN))
    save_demonstration(demo, tmp_path / "demo.json")
    out = tmp_path / "g.npz"
    code = main([str(tmp_path / "cloud.npy"), "--sampler", "human_demo", "--human-demo", str(tmp_path / "demo.json"),
                 "--evaluator", "none", "--num-grasps", "1", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert len(np.load(out)["vectors_37d"]) == 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**demo.to_dict(), "keypoints_m": [[0, 0, 0]] * 21}))
    assert main([str(tmp_path / "cloud.npy"), "--sampler", "human_demo", "--human-demo", str(bad), "--out", str(out)]) == 2
    assert "bone" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path / "cloud.npy"), "--sampler", "graspd", "--human-demo", str(tmp_path / "demo.json")])


def test_benchmark_protocols_refuse_the_demonstration_sampler():
    with pytest.raises(ValueError, match="needs a demonstration per object"):
        BenchmarkProtocol(objects=("tabletop20/cube",), methods=("human_demo+none",))
