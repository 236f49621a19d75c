"""Grasps drawn with the Allegro hand itself (MuJoCo renders its links): the hand is in the picture where its palm
projects, in the colour of its score, and the fingers close onto the object's points."""

import matplotlib.pyplot
import numpy as np
import pytest
import torch

from getagrip_ros.grasp.grasp import Grasp
from getagrip_ros.objects.primitives import box_surface_points
from getagrip_ros.robot.allegro import OPEN_HAND_JOINT_ANGLES_RAD, AllegroHand
from getagrip_ros.viz.grasp_image import TILE_CAPTION_PX, TITLE_PX, draw_grasps
from getagrip_ros.viz.hand_render import HandRenderer, closed_on_points, grasp_views

BOX = box_surface_points()  # 6 x 6 x 12 cm upright box centred at x = 0.65 m


def side_grasps(n: int) -> Grasp:
    """n grasps with the palm 9 cm in front of the box centre facing it (+x), fingers up, 1 cm apart in height."""
    position = torch.tensor([[0.56, 0.0, 0.1 + 0.01 * i] for i in range(n)], dtype=torch.float64)
    q = torch.tensor([OPEN_HAND_JOINT_ANGLES_RAD] * n, dtype=torch.float64)
    directions = torch.tensor([[1.0, 0.0, 0.0]] * 4, dtype=torch.float64).expand(n, 4, 3)
    return Grasp(position, torch.eye(3, dtype=torch.float64).expand(n, 3, 3), q, directions)


@pytest.fixture(scope="module")
def renderer():
    with HandRenderer(BOX) as r:
        yield r


def test_the_hand_is_rendered_where_its_palm_projects_in_every_view(renderer):
    g = side_grasps(1)
    T = g.T_frame_palm[0].numpy()
    for view in grasp_views(T, BOX.mean(0), renderer.config.distance_m):
        far = T.copy()
        far[:3, 3] += [0.0, 0.0, 5.0]  # the hand out of the picture
        renderer.pose(far, g.joint_angles_rad[0].numpy(), (0.1, 0.9, 0.1, 1.0))
        without = renderer.render(view)
        renderer.pose(T, g.joint_angles_rad[0].numpy(), (0.1, 0.9, 0.1, 1.0))
        shown = renderer.render(view)
        assert not without.hand_mask.any()
        mask = shown.hand_mask
        assert mask.sum() > 2000, (view.name, mask.sum())  # a hand, not a speck, at 320 x 240
        u, v = np.round(shown.palm_px).astype(int)
        assert 0 <= u < mask.shape[1] and 0 <= v < mask.shape[0], (view.name, shown.palm_px)
        assert mask[v - 4 : v + 5, u - 4 : u + 5].mean() > 0.5, (view.name, shown.palm_px)
        # the picture itself changed there, to the hand's (green) colour
        changed = np.abs(shown.rgb.astype(int) - without.rgb.astype(int)).sum(-1) > 30
        assert changed[mask].mean() > 0.9
        r, gr, b = shown.rgb[mask].astype(float).mean(0)
        assert gr > r + 40 and gr > b + 40, (r, gr, b)


def test_closing_stops_the_fingers_on_the_points():
    hand = AllegroHand()
    palm_down = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)  # normal -z
    g = Grasp(torch.tensor([[0.58, 0.0, 0.19]], dtype=torch.float64), palm_down[None],  # 7 cm above the box, fingers +x
              torch.tensor([OPEN_HAND_JOINT_ANGLES_RAD], dtype=torch.float64),
              torch.tensor([[[0.0, 0.0, -1.0]] * 4], dtype=torch.float64))
    closed = closed_on_points(hand, g, BOX)
    free = closed_on_points(hand, g, None)  # no points: the closing targets themselves
    assert closed.shape == (1, 16) and not torch.allclose(closed.double(), g.joint_angles_rad)
    T = g.T_frame_palm.to(hand.dtype)

    def tip_gaps(q):
        tips = hand.contact_positions(q.to(hand.dtype))[0]
        world = tips @ T[0, :3, :3].T + T[0, :3, 3]
        return np.linalg.norm(world.numpy()[:, None] - BOX[None], axis=-1).min(1)

    before, after = tip_gaps(g.joint_angles_rad), tip_gaps(closed)
    assert (after <= before + 1e-9).all() and after.min() < 0.01, (before, after)
    assert not torch.allclose(closed, free)  # stopped before the targets (which reach into the box)


def test_the_grasp_picture_has_the_best_grasp_closed_and_the_grid(tmp_path):
    scores = np.array([0.9, 0.7, 0.5, 0.3, 0.1])
    path = draw_grasps(BOX, side_grasps(5), AllegroHand(), tmp_path / "g.png", max_grasps=5, scores=scores)
    image = matplotlib.pyplot.imread(path)
    tile_h, tile_w = 240 + TILE_CAPTION_PX, 320
    assert image.shape[:2] == (TITLE_PX + 4 * tile_h, 3 * tile_w)  # best: 2 rows x 3 views; then 5 grasps, 3 a row
    # the best grasp's tiles show a green hand, the worst grasp's a red one (the hand's colour is its score)
    best = image[TITLE_PX + TILE_CAPTION_PX : TITLE_PX + tile_h, :tile_w, :3]
    worst = image[TITLE_PX + 3 * tile_h + TILE_CAPTION_PX :, tile_w : 2 * tile_w, :3]
    assert (best[..., 1] - best[..., 0] > 0.2).mean() > 0.02 and (worst[..., 0] - worst[..., 1] > 0.2).mean() > 0.02
    single = matplotlib.pyplot.imread(draw_grasps(BOX, side_grasps(1), AllegroHand(), tmp_path / "one.png"))
    assert single.shape[:2] == (TITLE_PX + 2 * tile_h, 3 * tile_w)  # one grasp: its views only
