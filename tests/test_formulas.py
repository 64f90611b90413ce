import math

import pytest
import torch

from devicerl.algos.formulas import (
    filtered_bc_mask,
    instruction_advantages,
    keep_steps,
    step_advantages,
    top_p_mask,
    two_head_bce,
    value_bce,
)

T = torch.tensor


def test_step_advantage_success_by_hand() -> None:
    # H = 3, lambda = 0.5, r_H = 1.
    # h=1: w = 0.25, td = 0.4 + 0 - 0.2 = 0.2 -> 0.25 + 0.75 * 0.2 = 0.40
    # h=2: w = 0.5,  td = 0.7 - 0.4 = 0.3     -> 0.5 + 0.5 * 0.3  = 0.65
    # h=3: w = 1                              -> 1.0
    a = step_advantages(
        values=T([0.2, 0.4, 0.7]),
        next_values=T([0.4, 0.7, 0.0]),
        rewards=T([0.0, 0.0, 1.0]),
        final_reward=1.0,
        lam=0.5,
    )
    assert torch.allclose(a, T([0.40, 0.65, 1.0]))
    assert keep_steps(a, horizon=10).tolist() == [True, True, True]
    assert keep_steps(a, horizon=2).tolist() == [False, True, True]


def test_step_advantage_failure_is_td_error() -> None:
    a = step_advantages(T([0.5, 0.3]), T([0.3, 0.0]), T([0.0, 0.0]), 0.0, 0.5)
    assert torch.allclose(a, T([-0.2, -0.3]))
    assert not keep_steps(a, 10).any()
    # A useful step of a failed trajectory (value went up) can still be kept.
    a = step_advantages(T([0.1, 0.6]), T([0.6, 0.0]), T([0.0, 0.0]), 0.0, 0.5)
    assert keep_steps(a, 10).tolist() == [True, False]


def test_instruction_advantage_and_curriculum() -> None:
    adv = instruction_advantages(T([1.0, 1.0, 0.0, 0.0]), T([0.9, 0.2, 0.5, 0.1]))
    assert torch.allclose(adv, T([0.1, 0.8, -0.5, -0.1]))
    assert top_p_mask(adv, 0.25).tolist() == [False, True, False, False]  # the curriculum
    assert top_p_mask(adv, 0.5).tolist() == [True, True, False, False]


def test_top_p_keeps_ties_and_at_least_one() -> None:
    assert top_p_mask(T([0.1, 0.9, 0.5, 0.9]), 0.25).tolist() == [False, True, False, True]
    assert top_p_mask(T([0.3, 0.2]), 0.01).tolist() == [True, False]
    assert top_p_mask(torch.zeros(0), 0.1).numel() == 0


def test_filtered_bc_rule_when_few_succeed() -> None:
    ten = T([0.0] * 9 + [1.0])
    assert filtered_bc_mask(ten, 0.1).tolist() == [False] * 9 + [True]
    # 20 trajectories, 1 success, top 10% = 2: the cut-off would be 0; only the success is kept.
    twenty = T([0.0] * 19 + [1.0])
    assert filtered_bc_mask(twenty, 0.1).sum() == 1
    assert not filtered_bc_mask(torch.zeros(8), 0.1).any()
    many = T([1.0] * 6 + [0.0] * 4)
    assert filtered_bc_mask(many, 0.1).sum() == 6  # ties at the top are all kept


def test_value_losses() -> None:
    logits = T([0.0, 2.0])
    expected = -(math.log(0.5) + math.log(1 - 1 / (1 + math.exp(-2.0)))) / 2
    assert value_bce(logits, T([1.0, 0.0])).item() == pytest.approx(expected, rel=1e-5)
    two = T([[0.0, 2.0], [1.0, -1.0]])
    loss = two_head_bce(two, T([1.0, 0.0]))
    manual = value_bce(two.reshape(-1), T([1.0, 1.0, 0.0, 0.0]))
    assert loss.item() == pytest.approx(manual.item(), rel=1e-6)
