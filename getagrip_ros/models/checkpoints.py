"""Checkpoints of the learned models: ours (weights + config + BPS basis + normalisation) and the public
Get a Grip layouts. Everything is read with ``torch.load(weights_only=True)``.

Our file is a dict ``{"format", "version", "kind", "config", "state_dict", "bps_basis", "grasp_mean",
"grasp_std", "training_state", "metadata"}`` of tensors and plain values, and for a calibrated evaluator
``"calibration"`` (:mod:`getagrip_ros.models.calibration`). Public layouts recognised:
the BPS evaluator's bare state_dict, the BPS and NeRF samplers' list ``[state_dict, optimizer, epoch, step,
(ema)]`` (raw weights, as the public code loads them; the NeRF sampler's has the CNN's ``conv.*`` keys besides) and
the NeRF evaluator's ``{"nerf_evaluator_model": ...}``, also named by the public run's ``config.yaml`` (read as plain
data with its finger grid: `models.public_config`).
Sizes of public checkpoints are read off the weight shapes.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from getagrip_ros.models.bps_evaluator import BpsEvaluator, BpsEvaluatorConfig
from getagrip_ros.models.bps_sampler import BpsSampler, BpsSamplerConfig
from getagrip_ros.models.calibration import PlattCalibration
from getagrip_ros.models.geometry_evaluator import GeometryEvaluator, GeometryEvaluatorConfig
from getagrip_ros.models.nerf_evaluator import NerfEvaluator, NerfEvaluatorConfig
from getagrip_ros.models.nerf_sampler import NerfSampler, NerfSamplerConfig

FORMAT = "getagrip_ros.checkpoint"
VERSION = 1
MODELS: dict[str, tuple[type, type]] = {
    "bps_evaluator": (BpsEvaluator, BpsEvaluatorConfig),
    "bps_sampler": (BpsSampler, BpsSamplerConfig),
    "nerf_evaluator": (NerfEvaluator, NerfEvaluatorConfig),
    "geometry_evaluator": (GeometryEvaluator, GeometryEvaluatorConfig),
    "nerf_sampler": (NerfSampler, NerfSamplerConfig),
}
MODEL_KINDS = tuple(MODELS)


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable, of another kind, or does not match its model."""


@dataclass
class LoadedModel:
    kind: str
    model: nn.Module
    """In eval mode, on the requested device."""
    config: Any
    bps_basis: np.ndarray | None
    """(N, 3) basis the model was trained with, in the y-up frame By; None = the public basis."""
    grasp_mean: torch.Tensor | None
    """Grasp normalisation of a sampler, x = (g - mean) / std; None = raw grasps (public)."""
    grasp_std: torch.Tensor | None
    training_state: dict | None
    metadata: dict = field(default_factory=dict)
    source: str = "getagrip"
    """"getagrip" (our format) or "public"."""
    calibration: PlattCalibration | None = None
    """An evaluator's calibration of its predicted labels (None: the raw outputs)."""

    def calibrated(self, predicted: torch.Tensor) -> torch.Tensor:
        """(B, 3) evaluator predictions, calibrated when the checkpoint holds a calibration."""
        return predicted if self.calibration is None else self.calibration(predicted)


def _config_dict(config) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}


def _config_from_dict(cls: type, values: dict):
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - names
    if unknown:
        raise CheckpointError(f"unknown {cls.__name__} fields in the checkpoint: {sorted(unknown)}")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def _check_config(config) -> None:
    """Sizes and flags of a model config must have their declared types, and sizes must be positive."""
    for f in dataclasses.fields(config):
        value, default = getattr(config, f.name), f.default
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
        elif isinstance(default, tuple):
            ok = isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        else:
            ok = True
        if not ok:
            raise CheckpointError(f"the {type(config).__name__} field {f.name} = {value!r} is not a valid "
                                  f"{type(default).__name__}{' > 0' if isinstance(default, int) and not isinstance(default, bool) else ''}")


def save_checkpoint(path: str | Path, kind: str, model: nn.Module, config, *, bps_basis: np.ndarray | None = None,
                    grasp_mean: torch.Tensor | None = None, grasp_std: torch.Tensor | None = None,
                    training_state: dict | None = None, metadata: dict | None = None,
                    calibration: PlattCalibration | None = None) -> Path:
    """Write a checkpoint atomically (a crash never leaves a half-written file at ``path``)."""
    if kind not in MODELS:
        raise CheckpointError(f"unknown model kind {kind!r}; known: {list(MODELS)}")
    if calibration is not None and not kind.endswith("_evaluator"):
        raise CheckpointError(f"only evaluators are calibrated, not a {kind}")
    payload = {
        "format": FORMAT, "version": VERSION, "kind": kind, "config": _config_dict(config),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "bps_basis": None if bps_basis is None else torch.as_tensor(np.asarray(bps_basis, dtype=np.float32)),
        "grasp_mean": None if grasp_mean is None else grasp_mean.detach().cpu().float(),
        "grasp_std": None if grasp_std is None else grasp_std.detach().cpu().float(),
        "training_state": training_state, "metadata": dict(metadata or {}),
    }
    if calibration is not None:
        payload["calibration"] = calibration.to_dict()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _public_layout(data: Any) -> tuple[str, dict, Any]:
    """(kind, state_dict, config) of a public checkpoint, sizes read off the weights."""
    if isinstance(data, (list, tuple)) and data and isinstance(data[0], dict) and "ca_fc_key.weight" in data[0] \
            and any(k.startswith("conv.") for k in data[0]):  # the NeRF sampler: the BPS sampler's keys plus a CNN
        sd = data[0]
        d = sd["sa_fc_query.weight"].shape[0]
        convs = sorted((int(k.split(".")[1]), v.shape[0]) for k, v in sd.items()
                       if k.startswith("conv.") and k.endswith(".weight"))
        config = NerfSamplerConfig(conv_channels=tuple(c for _, c in convs), grasp_dim=sd["fc_out.weight"].shape[0],
                                   d_model=d, num_tokens=sd["ca_fc_key.weight"].shape[0] // d,
                                   block_neurons=sd["resblock.fc1.weight"].shape[0])
        return "nerf_sampler", sd, config
    if isinstance(data, (list, tuple)) and data and isinstance(data[0], dict) and "ca_fc_key.weight" in data[0]:
        sd = data[0]
        d = sd["sa_fc_query.weight"].shape[0]
        config = BpsSamplerConfig(num_basis_points=sd["ca_fc_key.weight"].shape[1], grasp_dim=sd["fc_out.weight"].shape[0],
                                  d_model=d, num_tokens=sd["ca_fc_key.weight"].shape[0] // d,
                                  block_neurons=sd["resblock.fc1.weight"].shape[0], query_residual=False, timestep_scale=1.0)
        return "bps_sampler", sd, config
    if isinstance(data, dict) and "rb1.fc1.weight" in data and "bn1.weight" in data:
        n_in = data["bn1.weight"].shape[0]
        grasp_dim = BpsEvaluatorConfig.grasp_dim
        config = BpsEvaluatorConfig(num_basis_points=n_in - grasp_dim, grasp_dim=grasp_dim,
                                    hidden_width=data["rb1.fc2.weight"].shape[0],
                                    block_neurons=data["rb1.fc1.weight"].shape[0])
        return "bps_evaluator", data, config
    if isinstance(data, dict) and isinstance(data.get("nerf_evaluator_model"), dict):
        sd = data["nerf_evaluator_model"]

        def channels(prefix: str) -> tuple[int, ...]:
            convs = sorted((int(k.split(".")[2]), v.shape[0]) for k, v in sd.items()
                           if k.startswith(prefix) and k.endswith(".weight"))
            return tuple(c for _, c in convs)

        mlp = sorted((int(k.split(".")[2]), v.shape[0]) for k, v in sd.items()
                     if k.startswith("model.mlp.") and k.endswith(".weight"))
        use_global = any(k.startswith("model.global_conv.") for k in sd)
        config = NerfEvaluatorConfig(conv_channels=channels("model.conv."),
                                     global_conv_channels=channels("model.global_conv.") if use_global else (32, 64, 128),
                                     mlp_hidden=tuple(c for _, c in mlp[:-1]), use_global=use_global)
        return "nerf_evaluator", sd, config
    raise CheckpointError("not a getagrip_ros checkpoint and not a known public Get a Grip layout "
                          "(BPS evaluator state_dict, BPS or NeRF sampler [state_dict, ...] list, NeRF evaluator dict)")


def load_checkpoint(path: str | Path, kind: str | None = None, device: torch.device | str = "cpu") -> LoadedModel:
    """Load a model in eval mode; ``kind`` (if given) must match the checkpoint's.

    Raises:
        CheckpointError: missing/unreadable file, unknown layout, wrong kind, or weights not matching the model.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    if path.suffix in (".yaml", ".yml"):
        return _load_public_nerf_evaluator_config(path, kind, device)
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling problem is a bad checkpoint
        raise CheckpointError(f"cannot read checkpoint {path}: {type(err).__name__}: {err}") from err
    found = "model"
    try:  # a layout with missing keys, 0-d weights or impossible sizes is a bad file, whatever the exception
        if isinstance(data, dict) and data.get("format") == FORMAT:
            if data.get("version") != VERSION:
                raise CheckpointError(f"{path}: checkpoint version {data.get('version')}, this build reads {VERSION}")
            found = data.get("kind")
            if found not in MODELS:
                raise CheckpointError(f"{path}: unknown model kind {found!r}")
            state_dict, config = data["state_dict"], _config_from_dict(MODELS[found][1], data["config"])
            _check_config(config)
            extras = {k: data.get(k) for k in ("grasp_mean", "grasp_std", "training_state")}
            basis = None if data.get("bps_basis") is None else np.asarray(data["bps_basis"].numpy(), np.float32)
            if basis is not None and (basis.ndim != 2 or basis.shape[1] != 3 or not np.isfinite(basis).all()):
                raise CheckpointError(f"{path}: the BPS basis is not a finite (N, 3) array (shape {basis.shape})")
            metadata, source = data.get("metadata") or {}, "getagrip"
            calibration = None
            if data.get("calibration") is not None:
                try:
                    calibration = PlattCalibration.from_dict(data["calibration"])
                except ValueError as err:
                    raise CheckpointError(f"{path}: bad calibration: {err}") from err
        else:
            found, state_dict, config = _public_layout(data)
            extras, basis, metadata, source, calibration = {}, None, {}, "public", None
        if kind is not None and kind != found:
            raise CheckpointError(f"{path} holds a {found}, not a {kind}")
        model = MODELS[found][0](config)
        model.load_state_dict(state_dict, strict=True)
        model.to(device).eval()
        mean, std = (None if extras.get(k) is None else extras[k].to(device) for k in ("grasp_mean", "grasp_std"))
    except CheckpointError as err:
        raise CheckpointError(str(err) if str(path) in str(err) else f"{path}: {err}") from err
    except RuntimeError as err:
        raise CheckpointError(f"{path}: weights do not match the {found} model: {str(err)[:500]}") from err
    except Exception as err:  # noqa: BLE001 - KeyError, IndexError, TypeError, AttributeError... of a malformed file
        raise CheckpointError(f"{path}: malformed {found} checkpoint: {type(err).__name__}: {str(err)[:300]}") from err
    return LoadedModel(found, model, config, basis, mean, std,
                       extras.get("training_state"), metadata, source, calibration)


def _load_public_nerf_evaluator_config(path: Path, kind: str | None, device: torch.device | str) -> LoadedModel:
    """A public NeRF evaluator run named by its config.yaml: the checkpoint beside it, checked against the network the
    yaml describes, with the yaml's finger grid (`models.public_config`)."""
    from getagrip_ros.models.public_config import PublicConfigError, read_public_nerf_evaluator_config

    if kind not in (None, "nerf_evaluator"):
        raise CheckpointError(f"{path}: a public config.yaml describes a NeRF evaluator, not a {kind}")
    try:
        settings = read_public_nerf_evaluator_config(path)
    except PublicConfigError as err:
        raise CheckpointError(str(err)) from err
    loaded = load_checkpoint(settings.checkpoint, "nerf_evaluator", device)
    want, have = settings.network, loaded.config

    def layout(c: NerfEvaluatorConfig) -> tuple:
        return c.conv_channels, c.use_global, c.global_conv_channels if c.use_global else None, c.mlp_hidden

    if layout(want) != layout(have):
        raise CheckpointError(f"{path} describes the network (conv, global, global conv, mlp) {layout(want)}, but "
                              f"{settings.checkpoint.name} beside it holds {layout(have)}")
    loaded.metadata = {**loaded.metadata, "finger_grid": dataclasses.asdict(settings.finger_grid),
                       "public_config": str(path), "checkpoint": str(settings.checkpoint)}
    return loaded


def export_checkpoint(src: str | Path, dst: str | Path, metadata: dict | None = None, half: bool = False,
                      calibration: PlattCalibration | None = None) -> Path:
    """Write the model of a checkpoint (ours or a public layout) without its training state: what ships.

    Keeps the weights, config, basis, normalisation, calibration (``calibration`` replaces it) and metadata
    (``metadata`` entries added); drops the
    training state (the epoch, the run settings and, in a last.pt, the optimiser state: two thirds of its size).
    ``half`` stores the weights as float16 (half the size; they load back into the float32 model).

    Raises:
        CheckpointError: as :func:`load_checkpoint`.
    """
    loaded = load_checkpoint(src)
    model = copy.deepcopy(loaded.model).half() if half else loaded.model
    return save_checkpoint(dst, loaded.kind, model, loaded.config, bps_basis=loaded.bps_basis,
                           grasp_mean=loaded.grasp_mean, grasp_std=loaded.grasp_std,
                           metadata={**loaded.metadata, "exported_from": str(Path(src).name), "float16_weights": half,
                                     **(metadata or {})},
                           calibration=calibration or loaded.calibration)
