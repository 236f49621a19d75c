"""NeRF density to centroid, mesh, per-finger and global grids, checked on analytic densities."""

import math

import numpy as np
import pytest
import torch
import trimesh

from getagrip_ros.perception.density import (
    FingerGridConfig,
    GlobalGridConfig,
    MeshConfig,
    ObjectBox,
    density_centroid,
    density_grid,
    evaluate_density,
    extract_mesh,
    finger_density_grids,
    finger_frames,
    global_density_grid,
    write_mesh_obj,
)

OBJECT_XY = (0.6, 0.1)
LOWER, UPPER = ObjectBox().bounds_world(OBJECT_XY)


def sphere_density(center_m, radius_m, scale_m=0.01, inside=1e4, level=15.0):
    """sigma = level at the sphere surface, growing exponentially inward (capped at inside), decaying outward."""
    center = torch.as_tensor(center_m, dtype=torch.float32)

    def density(points_m: torch.Tensor) -> torch.Tensor:
        distance = (points_m - center).norm(dim=-1)
        return (level * torch.exp((radius_m - distance) / scale_m)).clamp(max=inside)

    return density


def union(*fns):
    return lambda p: torch.stack([f(p) for f in fns]).amax(dim=0)


def test_object_box_bounds_and_validation():
    lower, upper = ObjectBox().bounds_world((0.6, 0.1))
    assert np.allclose(lower, (0.4, -0.1, 0.0)) and np.allclose(upper, (0.8, 0.3, 0.3))
    with pytest.raises(ValueError, match="below max_m"):
        ObjectBox(min_m=(0.0, 0.0, 0.0), max_m=(0.1, 0.1, 0.0))


def test_density_grid_is_inclusive_ij():
    values, (xs, ys, zs) = density_grid(lambda p: p[:, 0] + 10 * p[:, 1] + 100 * p[:, 2], (0, 1, 2), (1, 2, 4), (3, 4, 5))
    assert values.shape == (3, 4, 5)
    assert torch.allclose(xs, torch.tensor([0.0, 0.5, 1.0])) and ys[-1] == 2 and zs[0] == 2 and zs[-1] == 4
    expected = xs[:, None, None] + 10 * ys[None, :, None] + 100 * zs[None, None, :]
    assert torch.allclose(values, expected)
    with pytest.raises(ValueError, match="below upper_m"):
        density_grid(lambda p: p[:, 0], (0, 0, 0), (1, 0, 1), 4)


def test_centroid_is_the_sphere_centre():
    center = (0.63, 0.08, 0.07)
    voxel = 0.4 / 99
    centroid = density_centroid(sphere_density(center, 0.05), LOWER, UPPER)
    assert centroid.shape == (3,)
    assert np.linalg.norm(centroid.numpy() - center) < voxel


def test_centroid_counts_only_density_above_the_threshold():
    dense, faint = torch.tensor([0.5, 0.0, 0.1]), torch.tensor([0.7, 0.2, 0.1])

    def density(points_m):
        near_dense, near_faint = ((points_m - c).norm(dim=-1) < 0.03 for c in (dense, faint))
        return torch.where(near_dense, 20.0, torch.where(near_faint, 10.0, 0.0))

    assert torch.allclose(density_centroid(density, LOWER, UPPER, resolution=60), dense, atol=0.004)
    both = density_centroid(density, LOWER, UPPER, resolution=60, threshold=5.0)
    assert torch.allclose(both, (dense + faint) / 2, atol=0.004)


def test_centroid_of_empty_density_is_a_clear_error():
    with pytest.raises(ValueError, match="no surface.*no density above 15"):
        density_centroid(lambda p: torch.zeros(len(p)), LOWER, UPPER, resolution=20)


def test_sphere_mesh_is_closed_outward_and_in_world_coordinates():
    center, radius = np.array([0.62, 0.05, 0.1]), 0.05
    mesh = extract_mesh(sphere_density(center, radius), LOWER, UPPER)
    assert isinstance(mesh, trimesh.Trimesh)
    assert mesh.is_watertight and mesh.metadata["watertight"] and mesh.metadata["components_kept"] == 1
    assert mesh.volume == pytest.approx(4 / 3 * math.pi * radius**3, rel=0.02)
    assert mesh.area == pytest.approx(4 * math.pi * radius**2, rel=0.02)
    distance = np.linalg.norm(mesh.vertices - center, axis=1)
    assert np.all(np.abs(distance - radius) < 0.001)
    proper = mesh.area_faces > 1e-12  # a few near-zero faces where the density equals the level at grid points
    assert proper.mean() > 0.98
    outward = np.einsum("ij,ij->i", mesh.face_normals[proper], mesh.triangles_center[proper] - center)
    assert np.all(outward > 0)


def test_surface_cut_by_the_table_gets_a_cap():
    radius = 0.05
    center = np.array([*OBJECT_XY, 0.0])  # half the sphere below the box floor z = 0
    mesh = extract_mesh(sphere_density(center, radius), LOWER, UPPER)
    assert mesh.is_watertight
    assert mesh.volume == pytest.approx(2 / 3 * math.pi * radius**3, rel=0.02)
    assert mesh.bounds[0, 2] == pytest.approx(0.0, abs=1e-4) and mesh.bounds[1, 2] == pytest.approx(radius, abs=1e-3)
    open_mesh = extract_mesh(sphere_density(center, radius), LOWER, UPPER, MeshConfig(close_at_box=False))
    assert not open_mesh.is_watertight
    proper = open_mesh.area_faces > 1e-12  # open, so orientation comes from marching cubes alone
    assert np.all(np.einsum("ij,ij->i", open_mesh.face_normals[proper], open_mesh.triangles_center[proper] - center) > 0)


def test_tiny_floater_is_dropped_and_the_object_kept():
    center, blob = np.array([0.6, 0.1, 0.1]), np.array([0.7, 0.2, 0.2])
    density = union(sphere_density(center, 0.04), sphere_density(blob, 0.003, scale_m=0.001))
    everything = extract_mesh(density, LOWER, UPPER, MeshConfig(min_component_edges=0))
    assert everything.metadata["components_kept"] == 2
    assert np.linalg.norm(everything.vertices - blob, axis=1).min() < 0.005
    mesh = extract_mesh(density, LOWER, UPPER)
    assert mesh.metadata["components_kept"] == 1 and mesh.metadata["components_dropped"] == 1
    assert np.linalg.norm(mesh.vertices - blob, axis=1).min() > 0.05
    assert mesh.is_watertight and mesh.volume == pytest.approx(4 / 3 * math.pi * 0.04**3, rel=0.02)
    with pytest.raises(ValueError, match="smaller than 31 edges"):
        extract_mesh(sphere_density(blob, 0.003, scale_m=0.001), LOWER, UPPER)


@pytest.mark.parametrize("value, message", [
    (0.0, "no surface: density never reaches level 15"),
    (100.0, "density is above the level 15 everywhere"),
])
def test_mesh_without_a_surface_is_a_clear_error(value, message):
    with pytest.raises(ValueError, match=message):
        extract_mesh(lambda p: torch.full((len(p), 1), value), LOWER, UPPER, MeshConfig(voxel_size_m=0.02))


def test_mesh_written_as_obj(tmp_path):
    mesh = extract_mesh(sphere_density((0.6, 0.1, 0.1), 0.05), LOWER, UPPER, MeshConfig(voxel_size_m=0.01))
    path = write_mesh_obj(mesh, tmp_path / "nerf" / "object.obj")
    loaded = trimesh.load(path, force="mesh")
    assert len(loaded.faces) == len(mesh.faces) and np.allclose(loaded.bounds, mesh.bounds, atol=1e-6)
    with pytest.raises(ValueError, match=".obj"):
        write_mesh_obj(mesh, tmp_path / "object.stl")


def _finger_inputs(batch=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    positions = torch.rand(batch, 4, 3, generator=gen) * 0.1 + torch.tensor([0.55, 0.05, 0.05])
    closing = torch.randn(batch, 4, 3, generator=gen)
    along = torch.randn(batch, 4, 3, generator=gen)
    return positions, closing, along


def test_finger_frames_are_right_handed_with_z_closing():
    positions, closing, along = _finger_inputs()
    along[0, 1] = 3.0 * closing[0, 1]  # parallel to the closing direction: any perpendicular y
    T = finger_frames(positions, closing, along)
    assert T.shape == (2, 4, 4, 4)
    R = T[..., :3, :3]
    assert torch.allclose(R.transpose(-1, -2) @ R, torch.eye(3).expand(2, 4, 3, 3), atol=1e-5)
    assert torch.allclose(torch.linalg.det(R), torch.ones(2, 4), atol=1e-5)
    assert torch.allclose(R[..., 2], closing / closing.norm(dim=-1, keepdim=True), atol=1e-6)
    assert torch.allclose(T[..., :3, 3], positions) and torch.all(T[..., 3, :] == torch.tensor([0.0, 0, 0, 1]))
    y_dot_along = (R[..., 1] * along).sum(-1)
    y_dot_along[0, 1] = 1.0
    assert torch.all(y_dot_along > 0)  # y is the along-finger direction made perpendicular, not its opposite
    with pytest.raises(ValueError, match="non-zero"):
        finger_frames(positions, torch.zeros_like(closing), along)
    with pytest.raises(ValueError, match=r"\(B, F, 3\)"):
        finger_frames(positions[0], closing[0], along[0])


def test_finger_grids_sample_in_front_of_each_fingertip():
    center, radius = torch.tensor([0.6, 0.1, 0.1]), 0.03
    density = sphere_density(center, radius, scale_m=0.002)
    positions, _, along = _finger_inputs(batch=1)
    closing = torch.randn(1, 4, 3, generator=torch.Generator().manual_seed(3))
    closing = closing / closing.norm(dim=-1, keepdim=True)
    positions = center - 0.04 * closing  # 1 cm outside the sphere, closing straight at its centre
    config = FingerGridConfig()
    assert np.allclose(config.spacing_m, 0.002) and config.delta_m == pytest.approx(0.002)
    grids = finger_density_grids(density, positions, closing, along, config)
    assert grids.alpha.shape == (1, 4, 31, 31, 41) and grids.points_world_m.shape == (1, 4, 31, 31, 41, 3)
    assert grids.T_world_finger.shape == (1, 4, 4, 4)
    assert torch.allclose(grids.points_world_m[:, :, 15, 15, 0], positions, atol=1e-6)
    assert torch.allclose(grids.points_world_m[:, :, 15, 15, 40], positions + 0.08 * closing, atol=1e-6)
    steps = grids.points_world_m[:, :, 15, 15, 1:] - grids.points_world_m[:, :, 15, 15, :-1]
    assert torch.allclose(steps.norm(dim=-1), torch.full((1, 4, 40), 0.002), atol=1e-6)
    corner = grids.points_world_m[:, :, 0, 0, 0] - positions
    assert torch.allclose(corner.norm(dim=-1), torch.full((1, 4), 0.03 * math.sqrt(2)), atol=1e-6)
    axis = grids.alpha[:, :, 15, 15]  # along the closing direction: outside, surface at index 5, inside
    assert torch.all(axis[..., 0] < 0.01) and torch.all(axis[..., 15:26] > 0.95)
    expected = 1 - torch.exp(-0.002 * density(grids.points_world_m.reshape(-1, 3)))
    assert torch.allclose(grids.alpha.reshape(-1), expected, atol=1e-6)
    assert grids.alpha.min() >= 0 and grids.alpha.max() <= 1


def test_global_grid_is_centred_on_the_centroid():
    centroid = torch.tensor([0.61, 0.09, 0.08])
    density = sphere_density(centroid, 0.05)
    grid = global_density_grid(density, centroid)
    alpha, points = grid
    assert alpha.shape == (41, 41, 41) and points.shape == (41, 41, 41, 3)
    assert torch.allclose(points[20, 20, 20], centroid, atol=1e-6)
    assert torch.allclose(points[0, 0, 0], centroid - 0.2, atol=1e-6)
    assert torch.allclose(points[-1, -1, -1], centroid + 0.2, atol=1e-6)
    assert torch.allclose(points[1, 0, 0] - points[0, 0, 0], torch.tensor([0.01, 0.0, 0.0]), atol=1e-6)
    delta = 0.4 / 41
    assert GlobalGridConfig().delta_m == pytest.approx(delta)
    assert torch.allclose(alpha, 1 - torch.exp(-delta * density(points.reshape(-1, 3)).reshape(41, 41, 41)))
    assert alpha[20, 20, 20] > 0.99 and alpha[0, 0, 0] < 1e-3
    public = global_density_grid(density, centroid, GlobalGridConfig(resolution=30, size_m=0.3))
    assert public.alpha.shape == (30, 30, 30)
    assert torch.allclose(public.points_world_m[-1, -1, -1] - public.points_world_m[0, 0, 0], torch.full((3,), 0.3))


def test_global_grid_indexed_along_the_object_frame_axes():
    centroid = torch.tensor([0.6, 0.0, 0.05])
    density = sphere_density(centroid + torch.tensor([0.0, 0.0, 0.1]), 0.03)  # a sphere 10 cm above the centroid
    R_world_Oy = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # Oy: y up (Rx(+90 deg))
    config = GlobalGridConfig(resolution=21, size_m=0.4)
    world, oy = global_density_grid(density, centroid, config), global_density_grid(density, centroid, config,
                                                                                      R_world_grid=R_world_Oy)
    # index [i, j, k] steps along Oy's x, y, z: the sphere lies along +j (Oy's y = up), not +k
    assert torch.allclose(oy.points_world_m[10, 15, 10], centroid + torch.tensor([0.0, 0.0, 0.1]), atol=1e-6)
    assert oy.alpha[10, 15, 10] > 0.2 and oy.alpha[10, 10, 15] < 0.01
    assert world.alpha[10, 10, 15] > 0.2 and torch.equal(oy.alpha.permute(0, 2, 1).flip(1), world.alpha)
    with pytest.raises(ValueError, match="R_world_grid"):
        global_density_grid(density, centroid, config, R_world_grid=np.eye(4))


def test_chunking_does_not_change_results():
    calls = []
    sphere = sphere_density((0.6, 0.1, 0.1), 0.05)

    def density(points_m):
        calls.append(len(points_m))
        assert not torch.is_grad_enabled()
        return sphere(points_m)[:, None]  # (N, 1) as a nerfstudio field returns

    positions, closing, along = _finger_inputs()
    small = finger_density_grids(density, positions, closing, along, chunk_size=1000)
    assert max(calls) == 1000 and len(calls) == math.ceil(2 * 4 * 31 * 31 * 41 / 1000)
    calls.clear()
    whole = finger_density_grids(density, positions, closing, along, chunk_size=10**7)
    assert len(calls) == 1 and torch.equal(small.alpha, whole.alpha)
    centroid = torch.tensor([0.6, 0.1, 0.1])
    assert torch.equal(global_density_grid(density, centroid, chunk_size=777).alpha,
                       global_density_grid(density, centroid).alpha)
    assert torch.equal(density_grid(density, LOWER, UPPER, 30, chunk_size=999)[0],
                       density_grid(density, LOWER, UPPER, 30)[0])


def test_density_function_with_a_wrong_shape_is_a_clear_error():
    with pytest.raises(ValueError, match=r"expected shape \(10,\)"):
        evaluate_density(lambda p: torch.zeros(len(p), 2), torch.zeros(10, 3))
    with pytest.raises(ValueError, match="chunk_size"):
        evaluate_density(lambda p: torch.zeros(len(p)), torch.zeros(10, 3), chunk_size=0)
