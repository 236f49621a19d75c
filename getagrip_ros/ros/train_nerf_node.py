"""`train_nerf` action server: trains nerfacto on a captured dataset (thin wrapper of perception.nerf.train).

Parameters mirror :class:`TrainNerfNodeConfig`: the trainer's ``profile`` ("cpu" or "paper", used when a goal leaves
it empty), ``device`` and ``camera_optimizer``, and the ``data_roots`` a goal's folders must lie under.
Feedback every iteration (loss, PSNR); cancel stops training between iterations (nothing is saved).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from getagrip_interfaces.action import TrainNerf
from getagrip_ros.perception.nerf.config import NerfTrainerConfig
from getagrip_ros.ros.actions import StackNode, accepting_action_server, end_goal
from getagrip_ros.ros.conversions import timings_to_msgs
from getagrip_ros.ros.params import declare_config
from getagrip_ros.ros.spin import spin_node
from getagrip_ros.ros.stage_messages import nerf_request
from getagrip_ros.safe_files import DEFAULT_DATA_ROOTS, check_goal_paths
from getagrip_ros.status import StageError, StatusCode


@dataclass(frozen=True)
class TrainNerfNodeConfig(NerfTrainerConfig):
    """The trainer's settings plus where a goal's folders may be."""

    data_roots: tuple[str, ...] = DEFAULT_DATA_ROOTS
    """A goal's dataset_dir and output_dir must lie under one of these folders."""
    max_iterations: int = 100_000
    """Ceiling on a goal's num_iterations (more is refused; the paper profile trains 30k)."""


class TrainNerfNode(StackNode):
    def __init__(self) -> None:
        super().__init__("train_nerf")
        self.config = declare_config(self, TrainNerfNodeConfig())
        self._busy = threading.Lock()  # one training at a time
        self.server = accepting_action_server(self, TrainNerf, "train_nerf", self.execute)
        self.get_logger().info(f"train_nerf ready (profile {self.config.profile}, device {self.config.device})")

    def execute(self, goal_handle) -> TrainNerf.Result:
        goal, result = goal_handle.request, TrainNerf.Result()
        try:
            try:
                request = nerf_request(goal)
                check_goal_paths(self.config.data_roots, dataset_dir=request.dataset_dir, output_dir=request.output_dir)
                if request.num_iterations > self.config.max_iterations:
                    raise ValueError(f"num_iterations must be in [0, {self.config.max_iterations}] (0 = the profile's; "
                                     f"max_iterations), got {request.num_iterations}")
                config = self.config.training_config(request.profile, request.num_iterations, request.seed)
            except ValueError as err:  # UnsafeFile included
                raise StageError(StatusCode.INVALID_GOAL, str(err)) from err
            from getagrip_ros.perception.nerf.train import train_nerf  # imports nerfstudio on first use

            with self.running(goal_handle, "train_nerf") as running:
                def feedback(p) -> None:
                    running.feedback(TrainNerf.Feedback(iteration=p.iteration, num_iterations=p.num_iterations,
                                                        loss=p.loss, psnr_db=p.psnr_db))

                with self._busy:
                    trained = train_nerf(Path(request.dataset_dir), Path(request.output_dir), config, feedback,
                                         running.stopped)
        except StageError as err:
            return end_goal(self, goal_handle, result, err.code, err.reason)
        except Exception as err:  # noqa: BLE001 - a failed sub-step must not take the node down
            return end_goal(self, goal_handle, result, StatusCode.INTERNAL_ERROR, f"{type(err).__name__}: {err}")
        result.config_path = str(trained.config_path)
        result.final_psnr_db, result.eval_psnr_db = trained.train_psnr_db, trained.eval_psnr_db
        result.timings = timings_to_msgs({"train": trained.train_time_s})
        return end_goal(self, goal_handle, result, StatusCode.SUCCEEDED,
                        f"{trained.num_iterations} iterations ({config.train_rays_per_batch} rays each), "
                        f"held-out PSNR {trained.eval_psnr_db:.1f} dB")


def main(args: list[str] | None = None) -> None:
    spin_node(TrainNerfNode, args)


if __name__ == "__main__":
    main()
