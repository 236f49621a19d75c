"""`train_nerf` action server: trains nerfacto on a captured dataset (thin wrapper of perception.nerf.train).

Parameters mirror :class:`getagrip_ros.perception.nerf.config.NerfTrainerConfig`: ``profile`` ("cpu" or
"paper", used when a goal leaves it empty), ``device`` and ``camera_optimizer``.
Feedback every iteration (loss, PSNR); cancel stops training between iterations (nothing is saved).
"""

from __future__ import annotations

import threading
from pathlib import Path

from rclpy.node import Node

from getagrip_interfaces.action import TrainNerf
from getagrip_ros.perception.nerf.config import NerfTrainerConfig
from getagrip_ros.ros.actions import accepting_action_server, end_goal
from getagrip_ros.ros.conversions import timings_to_msgs
from getagrip_ros.ros.params import declare_config
from getagrip_ros.ros.spin import spin_node
from getagrip_ros.ros.stage_messages import nerf_request
from getagrip_ros.status import StageError, StatusCode


class TrainNerfNode(Node):
    def __init__(self) -> None:
        super().__init__("train_nerf")
        self.config = declare_config(self, NerfTrainerConfig())
        self._busy = threading.Lock()  # one training at a time
        self.server = accepting_action_server(self, TrainNerf, "train_nerf", self.execute)
        self.get_logger().info(f"train_nerf ready (profile {self.config.profile}, device {self.config.device})")

    def execute(self, goal_handle) -> TrainNerf.Result:
        goal, result = goal_handle.request, TrainNerf.Result()
        try:
            try:
                request = nerf_request(goal)
                config = self.config.training_config(request.profile, request.num_iterations, request.seed)
            except ValueError as err:
                raise StageError(StatusCode.INVALID_GOAL, str(err)) from err
            from getagrip_ros.perception.nerf.train import train_nerf  # imports nerfstudio on first use

            def feedback(p) -> None:
                goal_handle.publish_feedback(TrainNerf.Feedback(iteration=p.iteration, num_iterations=p.num_iterations,
                                                                loss=p.loss, psnr_db=p.psnr_db))

            with self._busy:
                trained = train_nerf(Path(request.dataset_dir), Path(request.output_dir), config, feedback,
                                     lambda: goal_handle.is_cancel_requested)
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
