"""Human grasp demonstrations: the JSON forms, their validation and frames."""

import json

import numpy as np
import pytest

from getagrip_ros.human_demo.demonstration import (BONES, NUM_MANO_VERTICES, REFERENCE_BONE_LENGTHS_M,
                                                   REFERENCE_KEYPOINTS_M, DemonstrationError, HumanDemonstration,
                                                   demonstration_from_dict, load_demonstration, save_demonstration)


def keypoints_dict(keypoints=REFERENCE_KEYPOINTS_M, **extra):
    return {"format": "keypoints21", "frame_id": "world", "keypoints_m": np.asarray(keypoints).tolist(), **extra}


def test_reference_hand_is_adult_sized():
    assert len(BONES) == 20 and len(REFERENCE_BONE_LENGTHS_M) == 20
    # wrist to middle fingertip ~ 19 cm; bones between 1.5 cm (a distal phalanx) and 9.5 cm (wrist to index knuckle)
    assert 0.17 < np.linalg.norm(REFERENCE_KEYPOINTS_M[12] - REFERENCE_KEYPOINTS_M[0]) < 0.20
    assert REFERENCE_BONE_LENGTHS_M.min() > 0.015 and REFERENCE_BONE_LENGTHS_M.max() < 0.095


def test_keypoints_round_trip(tmp_path):
    demo = demonstration_from_dict(keypoints_dict(REFERENCE_KEYPOINTS_M * 1.2))
    assert demo.format == "keypoints21" and demo.frame_id == "world" and demo.handedness == "right"
    back = load_demonstration(save_demonstration(demo, tmp_path / "demo.json"))
    np.testing.assert_allclose(back.keypoints_m, REFERENCE_KEYPOINTS_M * 1.2)


def test_mano_mesh_form():
    rng = np.random.default_rng(0)
    data = {"format": "mano_mesh", "frame_id": "camera", "joints_m": REFERENCE_KEYPOINTS_M.tolist(),
            "vertices_m": rng.normal(size=(NUM_MANO_VERTICES, 3)).tolist(), "handedness": "left"}
    demo = demonstration_from_dict(data)
    assert demo.vertices_m.shape == (NUM_MANO_VERTICES, 3) and demo.handedness == "left"
    assert demonstration_from_dict(demo.to_dict()).frame_id == "camera"


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(keypoints_m=d["keypoints_m"][:20]), "21 points"),
    (lambda d: d["keypoints_m"][3].__setitem__(1, float("nan")), "NaN"),
    (lambda d: d.update(keypoints_m=[["a", 0, 0]] * 21), "list of"),
    (lambda d: d.update(frame_id=""), "frame_id"),
    (lambda d: d.update(format="mediapipe"), "format"),
    (lambda d: d.update(handedness="both"), "handedness"),
    (lambda d: d.pop("keypoints_m"), "missing"),
    # millimetres instead of metres: every bone 1000x too long
    (lambda d: d.update(keypoints_m=(REFERENCE_KEYPOINTS_M * 1000).tolist()), "adult hand"),
    # a finger tip pulled 12 cm away: the index's last bone is 6x too long
    (lambda d: d["keypoints_m"].__setitem__(8, [0.0, 0.03, 0.29]), "index_dip-index_tip"),
    # a thumb collapsed onto its MCP
    (lambda d: d["keypoints_m"].__setitem__(3, d["keypoints_m"][2]), "thumb_mcp-thumb_ip"),
])
def test_invalid_demonstrations_say_why(mutate, message):
    data = keypoints_dict()
    mutate(data)
    with pytest.raises(DemonstrationError, match=message):
        demonstration_from_dict(data)


def test_mano_counts_are_checked():
    data = {"format": "mano_mesh", "frame_id": "w", "joints_m": REFERENCE_KEYPOINTS_M.tolist(),
            "vertices_m": np.zeros((777, 3)).tolist()}
    with pytest.raises(DemonstrationError, match="778 points"):
        demonstration_from_dict(data)


def test_files_are_plain_json_and_bounded(tmp_path):
    bad = tmp_path / "demo.json"
    bad.write_text("!!python/object/apply:os.system ['true']")
    with pytest.raises(DemonstrationError, match="not a JSON"):
        load_demonstration(bad)
    with pytest.raises(DemonstrationError, match="cannot read"):
        load_demonstration(tmp_path / "missing.json")
    big = tmp_path / "big.json"
    big.write_text(json.dumps(keypoints_dict()) + " " * (5 * 1024 * 1024))
    with pytest.raises(DemonstrationError, match="at most"):
        load_demonstration(big)


def test_transformed_moves_every_point():
    rng = np.random.default_rng(1)
    demo = HumanDemonstration("mano_mesh", "camera", REFERENCE_KEYPOINTS_M.copy(), rng.normal(size=(778, 3)))
    T = np.eye(4)
    T[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    T[:3, 3] = [0.5, 0.0, 0.1]
    moved = demo.transformed(T, "world")
    assert moved.frame_id == "world"
    np.testing.assert_allclose(moved.keypoints_m[5], T[:3, :3] @ REFERENCE_KEYPOINTS_M[5] + T[:3, 3])
    np.testing.assert_allclose(moved.vertices_m[7], T[:3, :3] @ demo.vertices_m[7] + T[:3, 3])
    with pytest.raises(DemonstrationError):
        demo.transformed(np.full((4, 4), np.nan), "world")
