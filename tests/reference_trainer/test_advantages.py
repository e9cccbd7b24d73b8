"""token_gae, turn_gae and grpo, and the estimators the trainer looks up, against small cases computed by hand
(docs/algorithms.md)."""

import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from reference_trainer.advantages import (
    ESTIMATORS,
    batch_rewards,
    episode_weights,
    grpo,
    masked_whiten,
    outcome_rewards,
    token_gae,
    turn_gae,
    turns_to_tokens,
)

T = torch.tensor


def test_token_gae__skips_observation_tokens_carrying_value_and_gae():
    # positions: 0 prompt | 1, 2 response of turn 0 | 3, 4 observation | 5 response of turn 1
    mask = T([[0, 1, 1, 0, 0, 1]], dtype=torch.bool)
    rewards = T([[0.0, 0.0, 0.5, 7.0, 7.0, 1.0]])  # the 7s sit on observation tokens: ignored
    values = T([[9.0, 0.1, 0.2, 9.0, 9.0, 0.4]])  # so are the 9s
    adv, ret = token_gae(rewards, values, mask, gamma=0.9, lam=0.8)
    # t=5: d = 1 - 0.4 = 0.6                       A5 = 0.6
    # t=2: d = 0.5 + 0.9*0.4 - 0.2 = 0.66           A2 = 0.66 + 0.72*0.6 = 1.092
    # t=1: d = 0 + 0.9*0.2 - 0.1 = 0.08             A1 = 0.08 + 0.72*1.092 = 0.86624
    assert torch.allclose(adv, T([[0.0, 0.86624, 1.092, 0.0, 0.0, 0.6]]), atol=1e-6)
    assert torch.allclose(ret, T([[0.0, 0.96624, 1.292, 0.0, 0.0, 1.0]]), atol=1e-6)


def test_token_gae__bootstraps_a_truncated_row():
    mask = T([[0, 1, 1, 0, 0, 1]], dtype=torch.bool)
    rewards = T([[0.0, 0.0, 0.5, 0.0, 0.0, 1.0]])
    values = T([[0.0, 0.1, 0.2, 0.0, 0.0, 0.4]])
    adv, _ = token_gae(rewards, values, mask, gamma=0.9, lam=0.8, bootstrap=T([2.0]))
    # t=5: d = 1 + 0.9*2 - 0.4 = 2.4; t=2: 0.66 + 0.72*2.4 = 2.388; t=1: 0.08 + 0.72*2.388
    assert torch.allclose(adv[0, [1, 2, 5]], T([0.08 + 0.72 * 2.388, 2.388, 2.4]), atol=1e-6)


def test_token_gae__gamma_lambda_one_is_return_minus_value():
    # Search-R1's setting: A_t = R - V_t for every action token.
    mask = T([[1, 1, 0, 1, 1]], dtype=torch.bool)
    rewards = T([[0.0, 0.3, 0.0, 0.0, 1.0]])
    values = T([[0.5, -0.2, 3.0, 0.7, 0.1]])
    adv, ret = token_gae(rewards, values, mask, gamma=1.0, lam=1.0)
    R = T([[1.3, 1.3, 0.0, 1.0, 1.0]])
    assert torch.allclose(adv, torch.where(mask, R - values, torch.zeros(1)), atol=1e-6)
    assert torch.allclose(ret, torch.where(mask, R, torch.zeros(1)), atol=1e-6)


def test_turn_gae__hand_computed_terminated_and_truncated_rows():
    rewards = T([[0.0, -0.1, 1.0], [0.2, 0.3, 99.0]])
    values = T([[0.5, 0.6, 0.8], [0.1, 0.4, 99.0]])
    turn_mask = T([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    bootstrap = T([0.0, 0.7])  # row 0 terminated, row 1 truncated with V(s_3) = 0.7
    adv, ret = turn_gae(rewards, values, turn_mask, gamma=0.99, lam=0.9, bootstrap=bootstrap)
    # row 0: d2 = 1 - 0.8 = 0.2; d1 = -0.1 + 0.99*0.8 - 0.6 = 0.092; d0 = 0.99*0.6 - 0.5 = 0.094
    a2 = 0.2
    a1 = 0.092 + 0.891 * a2
    a0 = 0.094 + 0.891 * a1
    # row 1: d1 = 0.3 + 0.99*0.7 - 0.4 = 0.593; d0 = 0.2 + 0.99*0.4 - 0.1 = 0.496
    b1 = 0.593
    b0 = 0.496 + 0.891 * b1
    assert torch.allclose(adv, T([[a0, a1, a2], [b0, b1, 0.0]]), atol=1e-6)
    assert torch.allclose(ret, T([[a0 + 0.5, a1 + 0.6, a2 + 0.8], [b0 + 0.1, b1 + 0.4, 0.0]]), atol=1e-6)


def test_turn_gae__default_bootstrap_is_zero_and_defaults_are_the_papers():
    adv, _ = turn_gae(T([[1.0]]), T([[0.25]]), T([[True]]))
    assert adv.item() == pytest.approx(0.75)
    import inspect

    sig = inspect.signature(turn_gae).parameters
    assert sig["gamma"].default == 0.99 and sig["lam"].default == 0.9


def test_outcome_rewards__one_reward_on_the_last_turn_and_its_last_action_token():
    turn_mask = T([[1, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=torch.bool)
    action_mask = T([[0, 1, 1, 0, 1, 1, 0], [0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    turn_r, token_r = outcome_rewards(T([True, True, True]), turn_mask, action_mask)
    assert turn_r.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]  # no turn: no reward anywhere
    assert token_r.tolist() == [[0, 0, 0, 0, 0, 1, 0], [0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]]
    turn_r, token_r = outcome_rewards(T([0.0, 1.0, 0.0]), turn_mask, action_mask)
    assert turn_r.sum().item() == 1.0 and token_r[0].sum().item() == 0.0


def test_episode_weights__make_a_token_mean_an_episode_mean():
    mask = T([[1, 1, 1, 1, 0, 0], [0, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    w = episode_weights(mask)
    assert w.squeeze(1).tolist() == [0.75, 1.5, 0.0]  # mean length 3 over the episodes with tokens
    per_token = T([[1.0] * 6, [4.0] * 6, [9.0] * 6])
    token_mean = ((per_token * w) * mask).sum() / mask.sum()
    assert math.isclose(token_mean.item(), (1.0 + 4.0) / 2)  # each episode's own token mean, averaged


def test_turns_to_tokens__broadcasts_each_turn_to_its_action_tokens_only():
    per_turn = T([[10.0, 20.0]])
    turn_ids = T([[0, 0, 0, 1, 1, -1]])
    mask = T([[0, 1, 1, 0, 1, 0]], dtype=torch.bool)
    assert turns_to_tokens(per_turn, turn_ids, mask).tolist() == [[0.0, 10.0, 10.0, 0.0, 20.0, 0.0]]


def test_grpo__group_normalised_with_unbiased_std_and_zero_for_singletons():
    scores = T([1.0, 0.0, 0.0, 1.0, 5.0, 3.0, 3.0, 2.0])
    groups = T([0, 0, 0, 0, 1, 2, 2, 7])
    adv = grpo(scores, groups, eps=0.0)
    s = math.sqrt(4 * 0.25 / 3)  # unbiased std of [1, 0, 0, 1]
    assert torch.allclose(adv, T([0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s, 0.0, 0.0, 0.0, 0.0]), atol=1e-6)
    assert torch.allclose(grpo(scores, groups, scale_by_std=False), T([0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0]))


@given(st.lists(st.floats(-10, 10, allow_nan=False, width=32), min_size=1, max_size=12), st.integers(1, 4))
def test_grpo__finite_and_zero_mean_per_group_for_any_scores(values, n_groups):
    scores = T(values)
    groups = torch.arange(len(values)) % n_groups
    adv = grpo(scores, groups)
    assert torch.isfinite(adv).all()
    for g in groups.unique():
        assert abs(float(adv[groups == g].sum())) < 1e-3 * max(1, len(values))


@given(st.integers(1, 4), st.integers(1, 12), st.data())
def test_gae__finite_and_zero_off_the_mask_for_any_mask(B, L, data):
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31)))
    mask = torch.rand(B, L, generator=gen) < data.draw(st.floats(0, 1))
    rewards, values = torch.randn(B, L, generator=gen), torch.randn(B, L, generator=gen)
    boot = torch.randn(B, generator=gen)
    adv, ret = token_gae(rewards, values, mask, 0.97, 0.9, bootstrap=boot)
    assert torch.isfinite(adv).all() and torch.isfinite(ret).all()
    assert (adv[~mask] == 0).all() and (ret[~mask] == 0).all()
    # skipping mask-0 positions is the same as running GAE on the row with them removed
    for b in range(B):
        sel = mask[b]
        n = int(sel.sum())
        if n:
            compact, _ = token_gae(
                rewards[b][sel][None],
                values[b][sel][None],
                torch.ones(1, n, dtype=torch.bool),
                0.97,
                0.9,
                bootstrap=boot[b : b + 1],
            )
            assert torch.allclose(adv[b][sel], compact[0], atol=1e-5)


def test_masked_whiten__ignores_positions_off_the_mask_and_handles_constants():
    x = T([[1.0, 2.0, 100.0, 3.0]])
    mask = T([[1, 1, 0, 1]], dtype=torch.bool)
    w = masked_whiten(x, mask)
    assert w[0, 2] == 0 and abs(float(w[mask].mean())) < 1e-6
    assert torch.allclose(w[mask].std(unbiased=False), T(1.0), atol=1e-4)
    assert (masked_whiten(torch.ones(2, 3), torch.ones(2, 3, dtype=torch.bool)) == 0).all()
    assert (masked_whiten(torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.bool)) == 0).all()


def test_ema_update__hand_computed_and_pure():
    from reference_trainer.averaging import ema_update

    avg, cur = [torch.tensor([1.0, 2.0]), torch.tensor([[0.0]])], [torch.tensor([3.0, -2.0]), torch.tensor([[10.0]])]
    out = ema_update(avg, cur, 0.75)  # 0.75 * avg + 0.25 * cur
    assert torch.equal(out[0], torch.tensor([1.5, 1.0])) and torch.equal(out[1], torch.tensor([[2.5]]))
    assert torch.equal(avg[0], torch.tensor([1.0, 2.0]))  # inputs untouched
    assert torch.equal(ema_update(avg, cur, 0.0)[0], cur[0])
    with pytest.raises(ValueError, match="decay"):
        ema_update(avg, cur, 1.0)


# ---------------------------------------------------------------------- the registry the trainer looks up
def _one_episode(**over):
    """One terminated episode, two turns: tokens [obs, obs, a, a, obs, a]; V(s_1) read at 1, V(s_2) at 4."""
    fields = dict(
        action_mask=T([[0, 0, 1, 1, 0, 1]], dtype=torch.bool),
        turn_ids=T([[0, 0, 0, 0, 1, 1]]),
        turn_mask=T([[1, 1]], dtype=torch.bool),
        value_pos=T([[1, 4]]),
        bootstrap_pos=T([-1]),
        turn_rewards=T([[0.5, 1.0]]),
        token_rewards=T([[0.0, 0.0, 0.0, 0.5, 0.0, 1.0]]),
        scores=T([1.5]),
        success=T([True]),
        group_ids=T([0]),
    )
    fields = {**fields, **over}
    B = len(fields["scores"])
    fields.setdefault("episode_index", torch.arange(B))
    fields.setdefault("ends_episode", fields["turn_mask"].any(1))
    return SimpleNamespace(**fields)


VALUES = T([[0.1, 0.2, 0.3, 0.4, 0.6, 0.7]])


def test_estimators__registry_names_and_critic_use():
    assert {k: e.uses_critic for k, e in ESTIMATORS.items()} == {"token_gae": True, "turn_gae": True, "grpo": False}


def test_estimators__turn_gae_hand_computed_advantages_targets_and_read_positions():
    batch = _one_episode()
    est = ESTIMATORS["turn_gae"].estimate(batch, VALUES, batch_rewards(batch), SimpleNamespace(gamma=0.5, lam=0.5))
    # V(s_1) = 0.2, V(s_2) = 0.6, terminated: d_2 = 1 - 0.6 = 0.4 = A_2; d_1 = 0.5 + 0.5 * 0.6 - 0.2 = 0.6,
    # A_1 = 0.6 + 0.25 * 0.4 = 0.7; G = A + V: 0.9 and 1.0 at the read positions 1 and 4
    assert torch.allclose(est.advantages, T([[0.0, 0.0, 0.7, 0.7, 0.0, 0.4]]), atol=1e-6)
    assert torch.allclose(est.value_targets, T([[0.0, 0.9, 0.0, 0.0, 1.0, 0.0]]), atol=1e-6)
    assert est.value_mask.tolist() == [[False, True, False, False, True, False]]


def test_estimators__token_gae_hand_computed_advantages_targets_and_read_positions():
    batch = _one_episode()
    est = ESTIMATORS["token_gae"].estimate(batch, VALUES, batch_rewards(batch), SimpleNamespace(gamma=1.0, lam=1.0))
    # gamma = lam = 1: A_t = (rewards from t on) - V(state before t): 1.5 - 0.2, 1.5 - 0.3, 1.0 - 0.6;
    # the critic learns R_t = A_t + V at the token before each action token (positions 1, 2, 4)
    assert torch.allclose(est.advantages, T([[0.0, 0.0, 1.3, 1.2, 0.0, 0.4]]), atol=1e-6)
    assert torch.allclose(est.value_targets, T([[0.0, 1.5, 1.5, 0.0, 1.0, 0.0]]), atol=1e-6)
    assert est.value_mask.tolist() == [[False, True, True, False, True, False]]


def test_estimators__grpo_spreads_the_group_advantage_over_action_tokens_without_a_critic():
    batch = _one_episode(
        action_mask=T([[1, 1], [0, 1], [1, 0], [1, 1]], dtype=torch.bool),
        scores=T([1.0, 0.0, 2.0, 2.0]),
        group_ids=T([0, 0, 1, 1]),
        turn_rewards=torch.zeros(4, 1),
        token_rewards=torch.zeros(4, 2),
    )
    est = ESTIMATORS["grpo"].estimate(
        batch, torch.zeros(4, 2), batch_rewards(batch), SimpleNamespace(grpo_eps=0.0, grpo_scale_by_std=True)
    )
    a = 0.5 / math.sqrt(0.5)  # (1 - 0.5) / unbiased std of {1, 0}
    assert torch.allclose(est.advantages, T([[a, a], [0.0, -a], [0.0, 0.0], [0.0, 0.0]]), atol=1e-6)
    assert not est.value_mask.any() and not est.value_targets.any()


def _two_windows():
    """The episode of :func:`_one_episode` trained in two rows, as under ``history_window=1``: row 0 holds
    ``[obs, obs, a, a]`` (turn 0 trained, V(s_1) at 1), row 1 ``[obs, a]`` (turn 1 trained, V(s_2) at 0)."""
    return _one_episode(
        action_mask=T([[0, 0, 1, 1], [0, 1, 0, 0]], dtype=torch.bool),
        turn_ids=T([[0, 0, 0, 0], [1, 1, -1, -1]]),
        turn_mask=T([[1, 0], [0, 1]], dtype=torch.bool),
        value_pos=T([[1, 0], [0, 0]]),
        bootstrap_pos=T([-1, -1]),
        turn_rewards=T([[0.5, 0.0], [0.0, 1.0]]),
        token_rewards=T([[0.0, 0.0, 0.0, 0.5], [0.0, 1.0, 0.0, 0.0]]),
        scores=T([1.5, 1.5]),
        success=T([True, True]),
        group_ids=T([0, 0]),
        episode_index=T([0, 0]),
        ends_episode=T([False, True]),
    )


def test_turn_gae_across_a_window_boundary_equals_the_whole_episode():
    """The same values read in the rows that train each turn give the whole episode's advantages and targets."""
    batch = _two_windows()
    values = T([[0.1, 0.2, 0.3, 0.4], [0.6, 0.7, 0.0, 0.0]])  # V(s_1) = 0.2 in row 0, V(s_2) = 0.6 in row 1
    est = ESTIMATORS["turn_gae"].estimate(batch, values, batch_rewards(batch), SimpleNamespace(gamma=0.5, lam=0.5))
    # as in the whole episode: A_1 = 0.7 on turn 0's tokens, A_2 = 0.4 on turn 1's; G = 0.9 at (0, 1), 1.0 at (1, 0)
    assert torch.allclose(est.advantages, T([[0.0, 0.0, 0.7, 0.7], [0.0, 0.4, 0.0, 0.0]]), atol=1e-6)
    assert torch.allclose(est.value_targets, T([[0.0, 0.9, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]), atol=1e-6)
    assert est.value_mask.tolist() == [[False, True, False, False], [True, False, False, False]]
    truncated = _two_windows()
    truncated.bootstrap_pos = T([-1, 1])  # the final state's last token in row 1 (V = 0.7): A_2 = 1 + 0.35 - 0.6
    est = ESTIMATORS["turn_gae"].estimate(
        truncated, values, batch_rewards(truncated), SimpleNamespace(gamma=0.5, lam=0.5)
    )
    assert torch.allclose(est.advantages[1, 1], T(0.75)) and torch.allclose(est.advantages[0, 2], T(0.6 + 0.25 * 0.75))
    with pytest.raises(ValueError, match="turn-level"):
        ESTIMATORS["token_gae"].estimate(batch, values, batch_rewards(batch), SimpleNamespace(gamma=1.0, lam=1.0))


def test_windowed_rows__outcome_rewards_and_grpo_count_each_episode_once():
    batch = _two_windows()
    success = batch_rewards(batch, "success", 1.0)
    assert success.turn.tolist() == [[0.0, 0.0], [0.0, 1.0]]  # on the episode's last turn only, not each row's
    rows = _two_windows()  # plus a second episode, one row, in the same group: scores 1.5 and 0.5
    for name, extra in [
        ("scores", T([0.5])),
        ("success", T([False])),
        ("group_ids", T([0])),
        ("episode_index", T([1])),
    ]:
        setattr(rows, name, torch.cat([getattr(rows, name), extra]))
    rows.action_mask = torch.cat([rows.action_mask, T([[1, 0, 0, 0]], dtype=torch.bool)])
    est = ESTIMATORS["grpo"].estimate(
        rows, torch.zeros(3, 4), batch_rewards(rows), SimpleNamespace(grpo_eps=0.0, grpo_scale_by_std=True)
    )
    a = 0.5 / math.sqrt(0.5)  # two episodes (1.5, 0.5), not three rows (1.5, 1.5, 0.5)
    assert torch.allclose(est.advantages[:, :2], T([[0.0, 0.0], [0.0, a], [-a, 0.0]]), atol=1e-6)
    from reference_trainer.advantages import shuffled_rows

    drawn = {tuple(shuffled_rows(rows.episode_index, torch.Generator().manual_seed(s)).tolist()) for s in range(20)}
    assert drawn == {(0, 0, 2), (2, 2, 0)}  # a permutation of the two episodes, the same for both rows of one


def test_batch_rewards__scale_the_turn_and_token_rewards_not_the_episode_score():
    batch = _one_episode()
    env = batch_rewards(batch, "env", 0.1)
    assert torch.allclose(env.turn, T([[0.05, 0.1]])) and torch.allclose(env.token, T([[0, 0, 0, 0.05, 0, 0.1]]))
    assert env.episode.tolist() == [1.5]
    success = batch_rewards(batch, "success", 0.1)
    assert torch.allclose(success.turn, T([[0.0, 0.1]])) and torch.allclose(success.token, T([[0, 0, 0, 0, 0, 0.1]]))
    assert success.episode.tolist() == [1.0]
    with pytest.raises(ValueError, match="reward must be"):
        batch_rewards(batch, "score")


def test_batch_rewards__shuffled_pays_each_episode_another_ones_score_on_its_last_turn():
    batch = _one_episode(
        action_mask=T([[1, 1], [0, 1], [1, 0]], dtype=torch.bool),
        scores=T([1.0, 0.0, 2.0]),
        turn_mask=T([[1, 1], [1, 0], [1, 0]], dtype=torch.bool),
        turn_rewards=torch.ones(3, 2),
        token_rewards=torch.ones(3, 2),
    )
    shuffled = batch_rewards(batch, "shuffled", 0.5, permutation=torch.tensor([2, 0, 1]))
    # episode 0 is paid episode 2's score (2.0), episode 1 episode 0's (1.0), episode 2 episode 1's (0.0)
    assert shuffled.episode.tolist() == [2.0, 1.0, 0.0]
    assert torch.allclose(shuffled.turn, T([[0.0, 1.0], [0.5, 0.0], [0.0, 0.0]]))
    assert torch.allclose(shuffled.token, T([[0.0, 1.0], [0.0, 0.5], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="needs the permutation"):
        batch_rewards(batch, "shuffled")


def test_paired_ci_matches_the_hand_computed_case_of_docs_algorithms():
    from reference_trainer.stats import paired_ci, required_tasks

    ci = paired_ci([1, 0, 0, 1], [1, 1, 1, 0])
    assert ci.n == 4 and ci.mean == pytest.approx(0.25)
    assert ci.half_width == pytest.approx(1.959964 * (2.75 / 3) ** 0.5 / 2, rel=1e-6)
    assert ci.low == pytest.approx(0.25 - ci.half_width) and ci.high == pytest.approx(0.25 + ci.half_width)
    assert paired_ci([0.5] * 3, [0.7] * 3).half_width == 0.0  # no spread, no width
    assert required_tasks(0.3, 0.04) == 721
    with pytest.raises(ValueError, match="same tasks"):
        paired_ci([1, 0], [1])


def test_truncation_value__zero_values_a_truncated_episode_as_a_terminated_one():
    from reference_trainer.advantages import truncation_bootstrap_pos

    pos = T([5, -1, 3])
    assert torch.equal(truncation_bootstrap_pos(pos, "bootstrap"), pos)
    assert truncation_bootstrap_pos(pos, "zero").tolist() == [-1, -1, -1]
    with pytest.raises(ValueError, match="truncation_value"):
        truncation_bootstrap_pos(pos, "none")
    terminated = _one_episode()
    truncated = _one_episode(bootstrap_pos=T([5]))  # final state's last token at 5, V = 0.7
    algo = SimpleNamespace(gamma=0.5, lam=0.5)
    est = {
        name: ESTIMATORS["turn_gae"].estimate(b, VALUES, batch_rewards(b), algo)
        for name, b in [
            ("terminated", terminated),
            ("bootstrapped", truncated),
            ("zero", _one_episode(bootstrap_pos=truncation_bootstrap_pos(truncated.bootstrap_pos, "zero"))),
        ]
    }
    assert torch.equal(est["zero"].advantages, est["terminated"].advantages)
    # bootstrapped: d_2 = 1 + 0.5 * 0.7 - 0.6 = 0.75 = A_2 (0.4 when the value after it is 0)
    assert est["bootstrapped"].advantages[0, 5].item() == pytest.approx(0.75)
