"""The human_demo sampler in the planner and the CLI: a demonstration in, its Allegro grasp out (over ROS: a later
part of issue 23)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.human_demo.demonstration import HumanDemonstration, load_demonstration, save_demonstration
from getagrip_ros.human_demo.transfer import TransferConfig
from getagrip_ros.objects.primitives import cylinder_surface_points
from getagrip_ros.planning.human_demo_sampler import HumanDemoSamplerConfig
from getagrip_ros.planning.planner import GraspPlanner, GraspPlannerConfig, PlanRequest
from getagrip_ros.status import StatusCode
from getagrip_ros.task.benchmark import BenchmarkProtocol

from ..human_demo.demos import side_power_grasp
from .test_graspd_sampler import FAST as FAST_GRASPD

FAST = HumanDemoSamplerConfig(transfer=TransferConfig(num_object_points=800, finger_iterations=20, iterations=30,
                                                      lr_drop_at=20, finger_init="contact"), num_candidates=1)
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


def test_an_evaluator_chooses_among_variants_in_the_similarity_region(demo):
    import dataclasses

    config = GraspPlannerConfig(graspd=FAST_GRASPD, human_demo=dataclasses.replace(FAST, num_candidates=8))
    planner = GraspPlanner(config)
    result = planner.plan(request(demo, evaluator="geometry", num_grasps=4, refinement_iterations=0))
    assert result.success, result.reason
    assert "variants in the similarity region" in result.reason and "ranked by the geometry evaluator" in result.reason
    planned = result.planned
    assert 2 <= len(planned.grasps) <= 4 and torch.isfinite(planned.y_pgs).all()
    assert (planned.y_pgs[:-1] >= planned.y_pgs[1:]).all()  # best first
    # every variant still holds the can the demonstrated way: palm on the -y side, fingers forward
    R = planned.grasps.palm_rotation.numpy()
    assert (R[:, 1, 0] > 0.8).all() and (R[:, 0, 2] > 0.8).all()
    assert planned.transfer is not None and planned.transfer.orientation_difference < 0.1
    with pytest.raises(ValueError, match="num_candidates"):
        dataclasses.replace(FAST, num_candidates=0)


def test_the_physics_refinement_returns_its_grasps_then_the_transfer(demo):
    import dataclasses

    from getagrip_ros.human_demo.transfer import PhysicsRefinement

    refine = dataclasses.replace(FAST, physics_refinement=PhysicsRefinement(num_steps=20, num_starts=2))
    planner = GraspPlanner(GraspPlannerConfig(graspd=FAST_GRASPD, human_demo=refine))
    calls = []
    result = planner.plan(request(demo, num_grasps=3), progress=lambda *a: calls.append(a))
    assert result.success, result.reason
    assert "refined by the synthesis core from 2 starts" in result.reason and "the transfer last" in result.reason
    grasps = result.planned.grasps
    assert len(grasps) == 3 and torch.isfinite(grasps.palm_position_m).all()
    # the last is the transfer itself, as the planner gets it without refinement
    alone = GraspPlanner(GraspPlannerConfig(graspd=FAST_GRASPD, human_demo=FAST)).plan(request(demo))
    assert torch.allclose(grasps.palm_position_m[-1], alone.planned.grasps.palm_position_m[0])
    # still the demonstrated way of holding the can: palm on its -y side, fingers forward
    R = grasps.palm_rotation.numpy()
    assert (R[:, 1, 0] > 0.7).all() and (R[:, 0, 2] > 0.7).all(), R
    assert sum(stage == "sampling" for stage, *_ in calls) >= 3  # progress during the refinement
    with pytest.raises(ValueError, match="num_steps"):
        PhysicsRefinement(num_steps=-1)


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
                 "--evaluator", "none", "--num-grasps", "1", "--out", str(out), "--image", str(tmp_path / "demo.png")])
    assert code == 0, capsys.readouterr().err
    assert len(np.load(out)["vectors_37d"]) == 1
    # the picture: the human hand (left) and the Allegro (right), each drawn blue, on heatmaps that are red at contact
    import matplotlib.image

    rgb = (matplotlib.image.imread(tmp_path / "demo.png")[..., :3] * 255).astype(int)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    red, blue = (r > 150) & (g < 90) & (b < 90), (b > r + 40) & (b > g + 20)
    half = rgb.shape[1] // 2
    for side in (slice(0, half), slice(half, None)):
        assert red[:, side].sum() > 200 and blue[:, side].sum() > 200, (red[:, side].sum(), blue[:, side].sum())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**demo.to_dict(), "keypoints_m": [[0, 0, 0]] * 21}))
    assert main([str(tmp_path / "cloud.npy"), "--sampler", "human_demo", "--human-demo", str(bad), "--out", str(out)]) == 2
    assert "bone" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path / "cloud.npy"), "--sampler", "graspd", "--human-demo", str(tmp_path / "demo.json")])
    with pytest.raises(SystemExit):
        main([str(tmp_path / "cloud.npy"), "--sampler", "graspd", "--human-demo-refine-steps", "10"])


def test_benchmark_protocols_hold_a_demonstration_per_object(tmp_path):
    import shutil

    from getagrip_ros.task.benchmark import check_protocol, demonstration_path, freeze, load_protocol

    with pytest.raises(ValueError, match="needs a demonstration per object"):
        BenchmarkProtocol(objects=("tabletop20/cube",), methods=("human_demo+none",))
    with pytest.raises(ValueError, match="no method uses them"):
        BenchmarkProtocol(objects=("tabletop20/cube",), methods=("fixed+none",), human_demos=str(tmp_path))
    shipped = Path(__file__).resolve().parents[2] / "docs" / "human_demo" / "demos"
    protocol = BenchmarkProtocol(objects=("tabletop20/cube", "tabletop20/apple"), methods=("human_demo+none", "fixed+none"),
                                 human_demos=str(tmp_path), human_demo_kind="tripod")
    assert demonstration_path(protocol, "tabletop20/apple") == tmp_path / "tabletop20_apple__tripod.json"
    shutil.copy(shipped / "tabletop20_cube__tripod.json", tmp_path)
    with pytest.raises(ValueError, match=r"'tabletop20/apple' has no usable demonstration at .*tabletop20_apple__tripod"):
        check_protocol(protocol)
    (tmp_path / "tabletop20_apple__tripod.json").write_text(json.dumps({"format": "keypoints21", "frame_id": "world",
                                                                      "keypoints_m": [[0, 0, 0]] * 20}))
    with pytest.raises(ValueError, match="21"):
        check_protocol(protocol)
    demo = load_demonstration(shipped / "tabletop20_apple__tripod.json")
    save_demonstration(HumanDemonstration("keypoints21", "camera", demo.keypoints_m), tmp_path / "tabletop20_apple__tripod.json")
    with pytest.raises(ValueError, match="world frame, not 'camera'"):
        check_protocol(protocol)
    shutil.copy(shipped / "tabletop20_apple__tripod.json", tmp_path)
    check_protocol(protocol)
    freeze(protocol, tmp_path / "bench")
    assert load_protocol(tmp_path / "bench" / "protocol.yaml") == protocol


