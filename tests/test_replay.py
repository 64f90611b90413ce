import json

import pytest
from _runs import collect

from devicerl.data.replay import ReplayBuffer
from devicerl.data.store import TrajectoryStore, TrajectoryWriter
from devicerl.errors import DataError


@pytest.fixture(scope="module")
def trajectories():
    return collect(12, screen=(48, 80))


def test_fifo_eviction(trajectories) -> None:
    buf = ReplayBuffer(capacity=5)
    for t in trajectories[:4]:
        assert buf.add_trajectory(t) == []
    evicted = [e for t in trajectories[4:8] for e in buf.add_trajectory(t)]
    assert [e.episode_id for e in evicted] == [t.episode_id for t in trajectories[:3]]
    assert [t.episode_id for t in buf] == [t.episode_id for t in trajectories[3:8]]
    assert buf.num_steps == sum(t.length for t in trajectories[3:8])
    assert buf.total_added == 8 and buf.total_evicted == 3


def test_step_capacity(trajectories) -> None:
    buf = ReplayBuffer(capacity=100, max_steps=12)
    buf.extend(trajectories)
    assert buf.num_steps <= 12 and len(buf) >= 1
    kept = [t.episode_id for t in buf]
    assert kept == [t.episode_id for t in trajectories[-len(kept) :]]


def test_resume_from_store(tmp_path, trajectories) -> None:
    with TrajectoryWriter(tmp_path, flush_every=3) as w:
        w.extend(trajectories)
    store = TrajectoryStore(tmp_path)
    buf = ReplayBuffer(capacity=7)
    buf.extend(trajectories)
    state = json.loads(json.dumps(buf.state_dict()))  # what a checkpoint would hold

    restored = ReplayBuffer(capacity=1)
    restored.load_state_dict(state, store)
    assert [t.episode_id for t in restored] == state["episode_ids"]
    assert restored.num_steps == buf.num_steps and restored.total_added == 12
    assert restored.state_dict() == buf.state_dict()

    state["episode_ids"].append("missing")
    with pytest.raises(DataError, match="not in store"):
        ReplayBuffer(1).load_state_dict(state, store)


def test_from_store_newest_filtered(tmp_path, trajectories) -> None:
    with TrajectoryWriter(tmp_path, flush_every=4) as w:
        w.extend(trajectories)
    buf = ReplayBuffer.from_store(TrajectoryStore(tmp_path), 3, task="synthetic/tap")
    taps = [t.episode_id for t in trajectories if t.task == "synthetic/tap"]
    assert [t.episode_id for t in buf] == taps[-3:]
