"""The learners' optimizer: torch's fused AdamW where the parameters' device has it, the same
update as the per-tensor AdamW."""

from __future__ import annotations

import copy

import torch

from devicerl.algos.optim import adamw


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))


def _steps(net: torch.nn.Module, opt: torch.optim.Optimizer, n: int = 5) -> None:
    g = torch.Generator().manual_seed(1)
    for _ in range(n):
        opt.zero_grad()
        net(torch.randn(4, 8, generator=g)).pow(2).mean().backward()
        opt.step()


def test_cpu_parameters_get_the_fused_kernel_and_the_same_update() -> None:
    a, b = _net(), _net()
    fused = adamw(a.parameters(), 1e-2, weight_decay=0.1)
    assert fused.defaults["fused"] is True
    plain = torch.optim.AdamW(b.parameters(), lr=1e-2, weight_decay=0.1, foreach=False)
    _steps(a, fused)
    _steps(b, plain)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)


def test_a_device_without_the_kernel_gets_the_plain_optimizer() -> None:
    net = _net().to("meta")
    assert not adamw(net.parameters(), 1e-3).defaults["fused"]


def test_state_round_trips_through_a_state_dict() -> None:
    a = _net()
    opt = adamw(a.parameters(), 1e-2)
    _steps(a, opt, 2)
    b = copy.deepcopy(a)
    resumed = adamw(b.parameters(), 1e-2)
    resumed.load_state_dict(copy.deepcopy(opt.state_dict()))  # as read back from a file
    _steps(a, opt, 3)
    _steps(b, resumed, 3)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
