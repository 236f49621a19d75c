"""The epsilon-quality of point contacts: force closure is positive, the rest is 0."""

import numpy as np
import pytest

from getagrip_ros.grasp.quality import cone_edges, epsilon_quality

CENTRE = np.zeros(3)


def box_contacts(faces):
    """Contacts at the centres of a 4 cm cube's faces (given by their outward axes), normals pointing in."""
    out = np.array(faces, dtype=float)
    return 0.02 * out, -out


def test_cone_edges_lie_on_the_cone():
    normals = np.array([[0.0, 0.0, 1.0], [1.0, 1.0, 0.0]]) / np.array([[1.0], [np.sqrt(2)]])
    edges = cone_edges(normals, 0.5, 8)
    assert edges.shape == (2, 8, 3)
    along = (edges * normals[:, None]).sum(-1)
    np.testing.assert_allclose(along, 1.0)  # unit normal force
    np.testing.assert_allclose(np.linalg.norm(edges - along[..., None] * normals[:, None], axis=-1), 0.5)


def test_six_face_contacts_are_in_force_closure_and_friction_helps():
    points, normals = box_contacts([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])
    low = epsilon_quality(points, normals, CENTRE, 0.035, friction=0.2)
    high = epsilon_quality(points, normals, CENTRE, 0.035, friction=0.8)
    assert 0 < low < high
    # the hull is convex: a contact more never lowers the quality
    more = epsilon_quality(np.vstack([points, [[0.02, 0.01, 0.0]]]), np.vstack([normals, [[-1, 0, 0]]]), CENTRE, 0.035, 0.2)
    assert more >= low - 1e-12


@pytest.mark.parametrize("faces", [
    [[1, 0, 0], [-1, 0, 0]],              # two antipodal points: the object spins about their line
    [[0, 0, 1], [0, 0, 1], [0, 0, 1]],    # every force pushes down: nothing holds it from below
])
def test_without_force_closure_the_quality_is_zero(faces):
    points, normals = box_contacts(faces)
    if len(faces) == 3:
        points = points + np.array([[0.01, 0, 0], [-0.01, 0.01, 0], [0, -0.01, 0]])
    assert epsilon_quality(points, normals, CENTRE, 0.035) == 0.0


def test_bad_contacts_give_zero():
    assert epsilon_quality(np.zeros((0, 3)), np.zeros((0, 3)), CENTRE, 0.03) == 0.0
    points, normals = box_contacts([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0]])
    points[0, 0] = np.nan
    assert epsilon_quality(points, normals, CENTRE, 0.03) == 0.0
