"""getagrip-perception: capture (simulated robot), train a NeRF, extract the object, without ROS.

    getagrip-perception capture --object tabletop20/red_mug --out data/mug --depth
    getagrip-perception train-nerf data/mug runs/ --profile cpu
    getagrip-perception extract --backend nerf --nerf runs/mug/nerfacto/<stamp>/config.yml --out obj/
    getagrip-perception extract --backend depth --dataset data/mug --out obj/

World frame: robot base, z up, table top at z = 0; metres.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from getagrip_ros.cli.progress import stage_progress
from getagrip_ros.status import StageError


def _capture(args: argparse.Namespace) -> int:
    from getagrip_ros.objects.catalog import object_by_name
    from getagrip_ros.objects.mesh_object import prepare_object
    from getagrip_ros.perception.cameras import SimCamera
    from getagrip_ros.perception.capture import CaptureRequest, run_capture
    from getagrip_ros.sim.robots import SimArm, SimHand
    from getagrip_ros.sim.scene import CameraConfig, SceneConfig
    from getagrip_ros.sim.world import ObjectPlacement, SimWorld

    position = np.array([args.x, args.y, 0.0])
    obj = prepare_object(object_by_name(args.object))
    scene = SceneConfig(camera=CameraConfig(args.width, args.height, args.focal_px))
    with SimWorld(scene, obj, ObjectPlacement(xy_m=(args.x, args.y))) as world, \
            tqdm(total=args.num_images, unit="img", desc="capture", disable=None) as bar:
        def on_image(index: int, total: int, *_) -> None:
            bar.total = total
            bar.update(1)

        result = run_capture(SimArm(world), SimCamera(world, with_depth=args.depth),
                             CaptureRequest(look_at_m=position, output_dir=str(args.out), num_images=args.num_images),
                             on_image=on_image, hand=SimHand(world))
    print(f"{result.status.name}: {result.reason}")
    return 0 if result.dataset_dir else 1


def _train(args: argparse.Namespace) -> int:
    from getagrip_ros.perception.nerf.config import nerf_profile
    from getagrip_ros.perception.nerf.train import train_nerf

    overrides = {"seed": args.seed, "device": args.device}
    if args.iterations:
        overrides["num_iterations"] = args.iterations
    if args.camera_optimizer:
        overrides["camera_optimizer"] = args.camera_optimizer
    config = nerf_profile(args.profile, **overrides)
    with tqdm(total=config.num_iterations, unit="it", desc=f"nerfacto ({args.profile})", disable=None) as bar:
        def progress(p) -> None:
            bar.set_postfix(loss=f"{p.loss:.4f}", psnr=f"{p.psnr_db:.1f}")
            bar.update(1)

        result = train_nerf(args.dataset, args.output_dir, config, progress)
    print(f"config: {result.config_path}\nheld-out PSNR {result.eval_psnr_db:.2f} dB, "
          f"train PSNR {result.train_psnr_db:.2f} dB, {result.train_time_s:.0f} s")
    return 0


def _extract(args: argparse.Namespace) -> int:
    from getagrip_ros.perception.extract import extract_object, representation_summary

    with stage_progress("extract") as progress:
        rep = extract_object(args.backend, args.out, args.nerf or "", args.dataset or "", device=args.device,
                             progress=progress)
    np.save(args.out / "object_cloud.npy", rep.points_world_m)
    np.save(args.out / "bps.npy", rep.bps.distances_m)
    summary = representation_summary(rep)
    (args.out / "object.json").write_text(json.dumps(summary, indent=1))
    from getagrip_ros.viz.grasp_image import draw_object

    image = draw_object(rep.points_world_m, args.out / "object.png",
                        f"{rep.backend} backend: {len(rep.points_world_m)} cleaned points (colour = height)")
    print(json.dumps(summary, indent=1))
    print(f"wrote {image}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="getagrip-perception", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="capture a dataset with the simulated robot around a catalog object")
    cap.add_argument("--object", default="tabletop20/red_mug", help="catalog object name")
    cap.add_argument("--x", type=float, default=0.55, help="object x on the table, metres")
    cap.add_argument("--y", type=float, default=0.0, help="object y on the table, metres")
    cap.add_argument("--num-images", type=int, default=100)
    cap.add_argument("--depth", action="store_true", help="also write depth images")
    cap.add_argument("--width", type=int, default=320)
    cap.add_argument("--height", type=int, default=180)
    cap.add_argument("--focal-px", type=float, default=133.25, help="focal length, pixels (ZED 2i HD720 / 4)")
    cap.add_argument("--out", type=Path, required=True, help="dataset folder")
    cap.set_defaults(run=_capture)
    train = sub.add_parser("train-nerf", help="train nerfacto (Get a Grip settings) on a dataset")
    train.add_argument("dataset", type=Path)
    train.add_argument("output_dir", type=Path)
    train.add_argument("--profile", default="cpu", choices=("cpu", "paper"))
    train.add_argument("--iterations", type=int, default=0, help="0 = the profile's (400)")
    train.add_argument("--camera-optimizer", default="", choices=("", "off", "SO3xR3", "SE3"),
                       help="nerfacto pose refinement; default: the profile's (paper: SO3xR3, cpu: off)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--device", default="cpu")
    train.set_defaults(run=_train)
    ext = sub.add_parser("extract", help="object cloud, BPS, mesh and frame from a NeRF or depth images")
    ext.add_argument("--backend", default="depth", choices=("nerf", "depth"))
    ext.add_argument("--nerf", type=Path, help="NeRF config.yml (nerf backend)")
    ext.add_argument("--dataset", type=Path, help="capture dataset (depth backend; nerf: default = training data)")
    ext.add_argument("--device", default="cpu")
    ext.add_argument("--out", type=Path, required=True)
    ext.set_defaults(run=_extract)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except StageError as err:
        print(f"error: {err.code.name}: {err.reason}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
