"""The learned models: public sizes and parameter names, the fast conditioned paths, DDIM, checkpoints."""

import dataclasses

import numpy as np
import pytest
import torch

from getagrip_ros.models.bps_evaluator import BpsEvaluator, BpsEvaluatorConfig
from getagrip_ros.models.bps_sampler import BpsSampler, BpsSamplerConfig
from getagrip_ros.models.checkpoints import CheckpointError, load_checkpoint, save_checkpoint
from getagrip_ros.models.diffusion import DiffusionSchedule, ddim_timesteps
from getagrip_ros.models.nerf_evaluator import NerfEvaluator, NerfEvaluatorConfig

SMALL_EVAL = BpsEvaluatorConfig(num_basis_points=64, hidden_width=32, block_neurons=16)
SMALL_SAMPLER = BpsSamplerConfig(num_basis_points=64, d_model=16, num_heads=8, block_neurons=32)
SMALL_NERF = NerfEvaluatorConfig(conv_channels=(4, 8), global_conv_channels=(4, 6), mlp_hidden=(16,))


class Unsafe:
    """Stands for any pickled object that is not plain weights."""


def _randomise_batchnorm(model: torch.nn.Module, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm1d):
            n = m.num_features
            m.running_mean.copy_(torch.rand(n, generator=g) * 2 - 1)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(n, generator=g) - 0.5)


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_public_sizes_and_parameter_names():
    evaluator, sampler, nerf = BpsEvaluator(), BpsSampler(), NerfEvaluator()
    assert (_count(evaluator), len(evaluator.state_dict())) == (39_618_637, 55)
    assert (_count(sampler), len(sampler.state_dict())) == (4_559_013, 36)
    assert (_count(nerf), len(nerf.state_dict())) == (791_750, 18)
    assert evaluator.state_dict()["rb2.fc3.weight"].shape == (2048, 6181)
    assert sampler.state_dict()["ca_fc_key.weight"].shape == (512, 4096)
    assert nerf.state_dict()["model.mlp.0.weight"].shape == (256, 640)
    assert nerf.state_dict()["model.global_conv.8.weight"].shape == (128, 64, 3, 3, 3)


def test_conditioned_evaluator_equals_the_full_forward():
    torch.manual_seed(0)
    model = BpsEvaluator(SMALL_EVAL)
    _randomise_batchnorm(model)
    model.eval()
    bps, grasps = torch.rand(64), torch.randn(50, 37)
    with torch.no_grad():
        full = model(bps.expand(50, -1), grasps)
    fast = model.conditioned(bps)(grasps)
    assert fast.shape == (50, 3)
    torch.testing.assert_close(fast, full, atol=1e-5, rtol=1e-5)
    assert ((full > 0) & (full < 1)).all()
    with pytest.raises(ValueError, match="64 values"):
        model.conditioned(torch.rand(63))
    model.train()
    with pytest.raises(RuntimeError, match="eval mode"):
        model.conditioned(bps)


PUBLIC_SMALL_SAMPLER = dataclasses.replace(SMALL_SAMPLER, query_residual=False, timestep_scale=1.0)


@pytest.mark.parametrize("config", [SMALL_SAMPLER, PUBLIC_SMALL_SAMPLER], ids=["ours", "public"])
def test_conditioned_sampler_equals_the_full_forward(config):
    torch.manual_seed(1)
    model = BpsSampler(config).eval()
    bps, x, t = torch.rand(64), torch.randn(7, 37), torch.arange(7.0) * 100
    with torch.no_grad():
        full = model(x, t, bps.expand(7, -1))
    torch.testing.assert_close(model.conditioned(bps)(x, t), full, atol=1e-6, rtol=1e-5)
    # the timestep matters
    assert not torch.allclose(model.conditioned(bps)(x, t + 50), full)


def test_nerf_evaluator_shapes_and_bad_input():
    model = NerfEvaluator(SMALL_NERF).eval()
    fingers, global_grid = torch.rand(3, 4, 4, 9, 9, 11), torch.rand(3, 4, 8, 8, 8)
    with torch.no_grad():
        p = model(fingers, global_grid)
    assert p.shape == (3, 3) and ((p > 0) & (p < 1)).all()
    with pytest.raises(ValueError, match="global grid"):
        model(fingers, None)
    with pytest.raises(ValueError, match="finger grids"):
        model(torch.rand(3, 3, 4, 9, 9, 11), global_grid)


def test_ddim_timesteps_match_the_public_schedule():
    seq = ddim_timesteps(1000)
    assert len(seq) == 1000 and len(set(seq)) == 688 and seq.count(0) == 36 and sum(seq) == 266328
    assert seq[-4:] == [795, 796, 798, 800]
    assert ddim_timesteps(10, skip_type="uniform") == list(range(0, 1000, 100))
    schedule = DiffusionSchedule()
    a = schedule.alpha_bar(torch.tensor([-1, 0, 800, 999]))
    torch.testing.assert_close(a, torch.tensor([1.0, 0.9999, 1.5075e-3, 4.036e-5]), rtol=1e-3, atol=1e-7)
    with pytest.raises(ValueError):
        ddim_timesteps(0)


@pytest.mark.parametrize("num_steps", [5, 50])
def test_ddim_with_the_true_noise_recovers_the_data(num_steps):
    """For data concentrated at c the optimal noise predictor is known; deterministic DDIM must land on c."""
    schedule = DiffusionSchedule()
    c = torch.tensor([0.3, -1.0, 2.0])

    def eps_true(x, t):
        a = schedule.alpha_bar(t)[:, None]
        return (x - a.sqrt() * c) / (1 - a).sqrt()

    x_T = torch.randn(16, 3, generator=torch.Generator().manual_seed(0))
    steps = []
    x0 = schedule.ddim_sample(eps_true, x_T, ddim_timesteps(num_steps), on_step=lambda i, n: steps.append((i, n)))
    torch.testing.assert_close(x0, c.expand(16, 3), atol=1e-3, rtol=0)
    assert steps[-1] == (num_steps - 1, num_steps)


def test_training_loss_is_zero_for_the_true_noise_and_positive_otherwise():
    schedule = DiffusionSchedule()
    c = torch.tensor([0.5, 0.5])

    def eps_true(x, t):
        a = schedule.alpha_bar(t)[:, None]
        return (x - a.sqrt() * c) / (1 - a).sqrt()

    g = torch.Generator().manual_seed(0)
    assert schedule.training_loss(eps_true, c.expand(64, 2), g) < 1e-6
    assert schedule.training_loss(lambda x, t: torch.zeros_like(x), c.expand(64, 2), g) > 0.5


@pytest.mark.parametrize("kind,model", [("bps_evaluator", BpsEvaluator(SMALL_EVAL)),
                                        ("bps_sampler", BpsSampler(SMALL_SAMPLER)),
                                        ("nerf_evaluator", NerfEvaluator(SMALL_NERF))])
def test_our_checkpoint_round_trip(tmp_path, kind, model):
    basis = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    mean, std = torch.randn(37), torch.rand(37) + 0.1
    path = save_checkpoint(tmp_path / "m.pt", kind, model, model.config, bps_basis=basis, grasp_mean=mean,
                           grasp_std=std, training_state={"epoch": 3, "history": [1.0, 0.5]}, metadata={"note": "x"})
    loaded = load_checkpoint(path, kind=kind)
    assert loaded.source == "getagrip" and loaded.config == model.config and not loaded.model.training
    for k, v in model.state_dict().items():
        torch.testing.assert_close(loaded.model.state_dict()[k], v)
    np.testing.assert_array_equal(loaded.bps_basis, basis)
    torch.testing.assert_close(loaded.grasp_mean, mean)
    assert loaded.training_state["epoch"] == 3 and loaded.metadata == {"note": "x"}
    other = next(k for k in ("bps_evaluator", "bps_sampler") if k != kind)
    with pytest.raises(CheckpointError, match=f"not a {other}"):
        load_checkpoint(path, kind=other)
    assert not list(tmp_path.glob("*.tmp"))


def test_public_layouts_load(tmp_path):
    """Files with the public code's container layouts load; sizes come from the weight shapes."""
    evaluator, sampler, nerf = BpsEvaluator(SMALL_EVAL), BpsSampler(SMALL_SAMPLER), NerfEvaluator(SMALL_NERF)
    torch.save(evaluator.state_dict(), tmp_path / "ckpt-abc-step-810.pth")
    opt = torch.optim.Adam(sampler.parameters())
    torch.save([sampler.state_dict(), opt.state_dict(), 5, 1000, {"module.fc_out.weight": torch.zeros(37, 64)}],
               tmp_path / "ckpt_1000.pth")
    torch.save({"epoch": 2, "nerf_evaluator_model": nerf.state_dict(), "optimizer": {}, "lr_scheduler": None},
               tmp_path / "ckpt_0002.pth")
    e = load_checkpoint(tmp_path / "ckpt-abc-step-810.pth")
    assert (e.kind, e.source, e.config) == ("bps_evaluator", "public", SMALL_EVAL) and e.bps_basis is None
    s = load_checkpoint(tmp_path / "ckpt_1000.pth", kind="bps_sampler")
    assert s.config == PUBLIC_SMALL_SAMPLER and s.grasp_mean is None  # the public network: no residual, integer t
    torch.testing.assert_close(s.model.fc_out.weight, sampler.fc_out.weight)  # raw weights, not the EMA
    x, t, bps = torch.randn(3, 37), torch.tensor([10.0, 500.0, 990.0]), torch.rand(3, 64)
    with torch.no_grad():
        public_out, ours_out = s.model(x, t, bps), sampler.eval()(x, t, bps)
        query = sampler._tokens(sampler.resblock(torch.cat([x, t[:, None]], dim=1)))  # the public forward by hand
        query, _ = sampler.self_attention(sampler.sa_fc_query(query), sampler.sa_fc_key(query), sampler.sa_fc_value(query))
        key, value = sampler._tokens(sampler.ca_fc_key(bps)), sampler._tokens(sampler.ca_fc_value(bps))
        expected = sampler.fc_out(sampler.cross_attention(query, key, value)[0].permute(1, 0, 2).reshape(3, -1))
    torch.testing.assert_close(public_out, expected)
    assert not torch.allclose(ours_out, public_out)
    n = load_checkpoint(tmp_path / "ckpt_0002.pth")
    assert n.kind == "nerf_evaluator" and n.config.conv_channels == (4, 8) and n.config.mlp_hidden == (16,)


def test_bad_checkpoints_are_rejected_with_a_reason(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot read"):
        load_checkpoint(tmp_path / "junk.pt")
    torch.save({"state": Unsafe()}, tmp_path / "unsafe.pt")  # arbitrary objects are refused by weights_only
    with pytest.raises(CheckpointError, match="cannot read"):
        load_checkpoint(tmp_path / "unsafe.pt")
    torch.save({"some": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a known public"):
        load_checkpoint(tmp_path / "other.pt")
    sd = BpsEvaluator(SMALL_EVAL).state_dict()
    sd["rb2.fc1.weight"] = sd["rb2.fc1.weight"][:, :-1]
    torch.save(sd, tmp_path / "mismatch.pt")
    with pytest.raises(CheckpointError, match="do not match"):
        load_checkpoint(tmp_path / "mismatch.pt")


def test_malformed_checkpoints_are_refused_naming_the_file(tmp_path):
    """Public layouts with missing keys or 0-d weights, and our layout with impossible sizes: CheckpointError naming
    the file (never KeyError / IndexError / TypeError)."""
    sampler = BpsSampler(SMALL_SAMPLER).state_dict()
    del sampler["sa_fc_query.weight"]
    evaluator = {k: torch.tensor(1.0) for k in BpsEvaluator(SMALL_EVAL).state_dict()}  # 0-d everywhere
    files = {"sampler_missing_keys.pth": [sampler, {}, 5, 1000], "evaluator_0d.pth": evaluator}
    for name, payload in files.items():
        torch.save(payload, tmp_path / name)
    for width in (-1, "wide", 0, True):
        path = save_checkpoint(tmp_path / f"ours_{width}.pt", "bps_evaluator", BpsEvaluator(SMALL_EVAL), SMALL_EVAL)
        data = torch.load(path, weights_only=True)
        data["config"]["hidden_width"] = width
        torch.save(data, path)
        files[path.name] = None
    for name in files:
        with pytest.raises(CheckpointError) as err:
            load_checkpoint(tmp_path / name)
        assert str(tmp_path / name) in str(err.value), err.value
    with pytest.raises(CheckpointError, match="hidden_width = -1 is not a valid int > 0"):
        load_checkpoint(tmp_path / "ours_-1.pt")
    with pytest.raises(CheckpointError, match=r"malformed model checkpoint: KeyError: 'sa_fc_query.weight'"):
        load_checkpoint(tmp_path / "sampler_missing_keys.pth")
    with pytest.raises(CheckpointError, match=r"malformed model checkpoint: IndexError"):
        load_checkpoint(tmp_path / "evaluator_0d.pth")
