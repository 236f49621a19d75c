"""getagrip-plan-grasps: plan grasps for an object point cloud file, a mesh file or a trained NeRF, without ROS.

    getagrip-plan-grasps cloud.npy --num-grasps 40 --out grasps.npz --image grasps.png   # shipped fixed set + evaluator
    getagrip-plan-grasps cloud.npy --sampler fixed --fixed-grasps set.npz --evaluator bps --bps-evaluator best.pt
    getagrip-plan-grasps --nerf runs/.../config.yml --sampler diffusion --bps-sampler s.pt --evaluator nerf \
        --nerf-evaluator n.pt
    getagrip-plan-grasps cloud.npy --sampler graspd --evaluator none --graspd-grasps 32 --graspd-steps 500
    getagrip-plan-grasps cloud.npy --mesh object_mesh.obj --sampler graspd   # graspd's SDF from extraction's mesh
    getagrip-plan-grasps --mesh object.obj --sampler graspd                  # points drawn on the mesh
    getagrip-plan-grasps cloud.npy --sampler human_demo --human-demo demo.json --evaluator none --image demo.png  # as a human did
    getagrip-plan-grasps cloud.npy --sampler human_demo --human-demo demo.json --human-demo-refine-steps 200  # refined

The cloud is (N, 3) metres in a z-up frame with the table top at z = 0 (.npy, or text .xyz/.txt); a mesh
(.obj, .ply, .stl) and a human demonstration (JSON: 21 keypoints or a MANO mesh, see
``getagrip_ros.human_demo.demonstration``) are in the same frame.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

from getagrip_ros.cli.progress import stage_progress
from getagrip_ros.models.shipped import default_method
from getagrip_ros.planning.planner import EVALUATORS, SAMPLERS, GraspPlanner, GraspPlannerConfig, ModelFiles, PlanRequest


def load_points(path: Path) -> np.ndarray:
    """(N, 3) points from .npy or whitespace/comma separated text; ValueError if unreadable."""
    if path.suffix == ".npy":
        return np.load(path)
    if path.suffix in (".xyz", ".txt", ".csv"):
        return np.loadtxt(path, delimiter="," if path.suffix == ".csv" else None, ndmin=2)[:, :3]
    raise ValueError(f"unsupported point cloud file {path} (use .npy, .xyz, .txt or .csv)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="getagrip-plan-grasps", description=__doc__.splitlines()[0])
    parser.add_argument("cloud", type=Path, nargs="?", help="object point cloud (N, 3), metres, z up, table at z = 0")
    parser.add_argument("--nerf", type=Path, help="instead of a cloud: a trained NeRF's config.yml (world frame)")
    parser.add_argument("--mesh", type=Path, help="the object's surface mesh: alone, or with a cloud (the graspd "
                        "sampler then builds its SDF from the mesh)")
    parser.add_argument("--frame-id", default="world", help="frame of the cloud and of the grasps")
    parser.add_argument("--num-grasps", type=int, default=40)
    parser.add_argument("--num-samples", type=int, default=GraspPlannerConfig.num_samples)
    sampler, evaluator = default_method(quick=True)
    parser.add_argument("--sampler", default=sampler, choices=SAMPLERS,
                        help=f"default {sampler!r} (the shipped models when installed, else the geometric sampler; the whole "
                        "task's fixed_graspd with geometry>sim plans better in ~40 s)")
    parser.add_argument("--evaluator", default=evaluator, choices=EVALUATORS, help=f"default {evaluator!r}")
    parser.add_argument("--iterations", type=int, default=50, help="refinement iterations (with an evaluator)")
    parser.add_argument("--diffusion-steps", type=int, default=GraspPlannerConfig().diffusion.num_steps)
    graspd = GraspPlannerConfig().graspd
    parser.add_argument("--graspd-grasps", type=int, default=graspd.num_grasps,
                        help="graspd sampler: grasps synthesised (at least --num-grasps; --num-samples does not apply)")
    parser.add_argument("--graspd-steps", type=int, default=graspd.synthesis.num_steps,
                        help="graspd sampler: gradient steps of the synthesis")
    parser.add_argument("--human-demo", type=Path, help="human_demo sampler: a human grasp demonstration (JSON) "
                        "in the cloud's frame")
    parser.add_argument("--human-demo-refine-steps", type=int, default=None,
                        help="human_demo sampler: refine the transfer by the Grasp'D core for this many steps in a soft "
                             "similarity trust region (default 0: off; README \"Grasp like a human\")")
    for field in dataclasses.fields(ModelFiles):
        parser.add_argument(f"--{field.name.replace('_', '-')}", default=field.default,
                            help=f"file, 'shipped' (the package's own) or '' (none); default {field.default!r}")
    parser.add_argument("--device", default="cpu", help="where the learned models run (cpu, cuda:0)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("grasps.npz"), help="output .npz")
    parser.add_argument("--image", type=Path, help="also draw the best grasps into this PNG (human_demo: the human hand "
                        "and the Allegro side by side on the object, with both contact heatmaps)")
    args = parser.parse_args(argv)

    if args.nerf is not None and (args.cloud is not None or args.mesh is not None):
        parser.error("--nerf goes alone: give a point cloud file, --mesh MESH (or both), or --nerf CONFIG")
    if args.cloud is None and args.nerf is None and args.mesh is None:
        parser.error("give a point cloud file, --mesh MESH (or both), or --nerf CONFIG")
    if args.graspd_grasps < 1 or args.graspd_steps < 1:
        parser.error(f"--graspd-grasps and --graspd-steps must be >= 1, got {args.graspd_grasps}, {args.graspd_steps}")
    if (args.sampler == "human_demo") != (args.human_demo is not None):
        parser.error("--sampler human_demo and --human-demo DEMO.json go together")
    if args.human_demo_refine_steps is not None and (args.human_demo is None or args.human_demo_refine_steps < 0):
        parser.error("--human-demo-refine-steps takes a number of steps >= 0, with --human-demo")
    demonstration = None
    if args.human_demo is not None:
        from getagrip_ros.human_demo.demonstration import DemonstrationError, load_demonstration

        try:
            demonstration = load_demonstration(args.human_demo)
        except DemonstrationError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    points = None
    if args.cloud is not None:
        try:
            points = load_points(args.cloud)
        except (OSError, ValueError) as err:
            print(f"error: cannot read {args.cloud}: {err}", file=sys.stderr)
            return 2
    base = GraspPlannerConfig()
    models = ModelFiles(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ModelFiles)})
    graspd = dataclasses.replace(base.graspd, num_grasps=args.graspd_grasps,
                                 synthesis=dataclasses.replace(base.graspd.synthesis, num_steps=args.graspd_steps))
    config = dataclasses.replace(base, num_samples=args.num_samples, models=models, device=args.device,
                                 diffusion=dataclasses.replace(base.diffusion, num_steps=args.diffusion_steps),
                                 graspd=graspd)
    if args.human_demo_refine_steps is not None:
        refinement = dataclasses.replace(base.human_demo.physics_refinement, num_steps=args.human_demo_refine_steps)
        config = dataclasses.replace(config, human_demo=dataclasses.replace(base.human_demo, physics_refinement=refinement))
    planner = GraspPlanner(config)
    request = PlanRequest(frame_id=args.frame_id, points_m=points, num_grasps=args.num_grasps, sampler=args.sampler,
                          evaluator=args.evaluator, refinement_iterations=args.iterations, seed=args.seed,
                          nerf_config_path=None if args.nerf is None else str(args.nerf),
                          mesh_path=None if args.mesh is None else str(args.mesh), human_demo=demonstration)
    with stage_progress("planning") as update:
        result = planner.plan(request, lambda stage, fraction, best: update(stage, fraction))
    if not result.success:
        print(f"error: {result.status.name}: {result.reason}", file=sys.stderr)
        return 1
    p = result.planned
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, vectors_37d=p.grasps.to_numpy_vector(), pregrasp_joints_rad=p.pregrasp_joints_rad.numpy(),
             closed_joints_rad=p.closed_joints_rad.numpy(), y_pgs=p.y_pgs.numpy(), y_coll=p.y_coll.numpy(),
             y_pick=p.y_pick.numpy(), frame_id=p.grasps.frame_id)
    print(f"{result.reason}; " + ", ".join(f"{k} {v:.2f} s" for k, v in result.timings_s.items()))
    print(f"wrote {args.out}")
    if args.image and p.transfer is not None:  # the human hand and the Allegro side by side, with both heatmaps
        from getagrip_ros.human_demo.human_hand import demonstration_keypoints
        from getagrip_ros.planning.human_demo_sampler import human_demo_hand_model
        from getagrip_ros.viz.transfer_image import draw_transfer

        keypoints = demonstration_keypoints(demonstration).numpy()
        print(f"wrote {draw_transfer(keypoints, p.transfer, human_demo_hand_model(config.human_demo.hand), args.image)}")
    elif args.image:
        from getagrip_ros.objects.mesh_object import load_mesh_file
        from getagrip_ros.viz.grasp_image import draw_grasps

        mesh = None if args.mesh is None else load_mesh_file(args.mesh)
        scores = None if np.isnan(p.y_pgs.numpy()).all() else p.y_pgs.numpy()
        image = draw_grasps(points, p.grasps, planner.hand, args.image, scores=scores, mesh=mesh,
                            closed_joints_rad=p.closed_joints_rad[0].numpy() if len(p.grasps) else None)
        print(f"wrote {image}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
