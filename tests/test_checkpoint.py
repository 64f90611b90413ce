import random

import numpy as np
import pytest
import torch

from devicerl.runtime.runs.checkpoint import CheckpointManager


def _model_and_opt():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    return model, opt


def test_round_trip_and_rng(tmp_path) -> None:
    model, opt = _model_and_opt()
    mgr = CheckpointManager(tmp_path / "ck", keep=2)
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    mgr.save(5, {"actor": model.state_dict()}, {"actor": opt.state_dict()}, {"env_steps": 77})
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    ck = mgr.load_latest()
    assert ck is not None and ck.iteration == 5 and ck.state["env_steps"] == 77
    ck.restore_rng()
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
    fresh = torch.nn.Linear(4, 2)
    fresh.load_state_dict(ck.models["actor"])
    assert torch.equal(fresh.weight, model.weight)
    opt2 = torch.optim.AdamW(fresh.parameters(), lr=1e-3)
    opt2.load_state_dict(ck.optimizers["actor"])
    assert opt2.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"]


def test_keeps_newest_and_falls_back_on_corruption(tmp_path, caplog) -> None:
    model, _opt = _model_and_opt()
    mgr = CheckpointManager(tmp_path, keep=2)
    for i in (1, 2, 3):
        mgr.save(i, {"actor": model.state_dict()}, {}, {})
    assert [p.name for p in mgr.published()] == ["iter-000002", "iter-000003"]
    weights = tmp_path / "iter-000003" / "actor.safetensors"
    weights.write_bytes(weights.read_bytes()[:10])
    ck = mgr.load_latest()
    assert ck is not None and ck.iteration == 2
    assert "iter-000003/actor.safetensors" in caplog.text


def test_refuses_pickled_objects(tmp_path) -> None:
    model, _ = _model_and_opt()
    mgr = CheckpointManager(tmp_path)
    path = mgr.save(1, {"actor": model.state_dict()}, {}, {})

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    torch.save({"x": Evil()}, path / "bad.optim.pt")
    from devicerl.errors import DataError

    with pytest.raises(DataError, match=r"bad\.optim\.pt"):
        mgr.load(path)
