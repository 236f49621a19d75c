"""Picture of the coarse-to-fine synthesis trajectory on a tabletop-20 object (docs/graspd/trajectory.png).

    python benchmarks/plot_graspd_trajectory.py --object tabletop20/apple --grasps 3 --out docs/graspd/trajectory.png
    python benchmarks/plot_graspd_trajectory.py --object tabletop20/yellow_cup --contact-links all \
        --out docs/graspd/trajectory_all_links.png   # contact on every link: the paper's power grasps
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from getagrip_ros.objects.catalog import object_by_name
from getagrip_ros.objects.mesh_object import prepare_object
from getagrip_ros.synthesis.hand_model import AllegroModelConfig, allegro_hand_model
from getagrip_ros.synthesis.losses import HandState
from getagrip_ros.synthesis.object_sdf import ObjectSDF
from getagrip_ros.synthesis.optimizer import SynthesisConfig, SynthesisOptions, offset_at, sample_starts, synthesize_grasps
from getagrip_ros.viz.synthesis_trajectory import draw_synthesis_trajectory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--object", default="tabletop20/apple")
    parser.add_argument("--grasps", type=int, default=3)
    parser.add_argument("--snapshots", default="0,100,200,350,500", help="steps to draw (0: the start)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--contact-links", choices=("distal", "all"), default="distal",
                        help="links that may carry force (distal: Get a Grip's protocol; all: power grasps)")
    parser.add_argument("--out", type=Path, default=Path("docs/graspd/trajectory.png"))
    args = parser.parse_args()
    mesh = prepare_object(object_by_name(args.object)).mesh  # resting on the table, z = 0
    sdf = ObjectSDF.from_mesh(mesh, name=args.object)
    hand = allegro_hand_model(AllegroModelConfig(contact_links=args.contact_links))
    config = SynthesisConfig()
    wanted = {int(s) for s in args.snapshots.split(",")}
    snapshots = []
    generator = torch.Generator().manual_seed(args.seed)
    if 0 in wanted:  # the start, drawn as synthesize_grasps samples it
        T0 = sample_starts(hand, sdf, args.grasps, config.approach_distance_m, config.offset_start_m,
                           torch.eye(4, dtype=torch.float64), generator)
        q0 = hand.open_joint_angles_rad.expand(args.grasps, -1)
        snapshots.append((0, config.offset_start_m, HandState(T0, q0, torch.zeros(0), torch.zeros(0))))

    def on_chunk(step: int, state: HandState, terms) -> None:
        if step in wanted:
            snapshots.append((step, offset_at(step, config), state))

    result = synthesize_grasps(hand, sdf, config, SynthesisOptions(num_grasps=args.grasps, seed=args.seed, on_chunk=on_chunk))
    score = result.physics_score()
    path = draw_synthesis_trajectory(mesh.sample(4000), hand, snapshots, args.out, list(range(args.grasps)),
                                     f"{args.object}: coarse-to-fine synthesis of {args.grasps} grasps, {args.contact_links} contact "
                                     f"({result.elapsed_s:.0f} s); physics scores {', '.join(f'{s:.2f}' for s in score.tolist())}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
