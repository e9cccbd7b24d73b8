"""policy_loss at every ratio level, the clipping-bias correction, value loss and KL, against
cases computed by hand (docs/algorithms.md)."""

import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from reference_trainer.losses import (
    LOSSES,
    LossInputs,
    Metric,
    clip_bias_scale,
    combine_parts,
    combine_steps,
    explained_variance,
    kl_penalty,
    log_ratios,
    policy_loss,
    value_loss,
)

T = torch.tensor
LOG = math.log


def _logp(old, ratios):
    """New log-probs (requiring grad) whose token ratios to ``old`` are ``ratios``."""
    return (old + torch.log(T(ratios))).clone().requires_grad_(True)


def test_policy_loss__token_level_hand_case():
    old = T([[0.0, -1.0, -1.0, -1.0]])
    logp = _logp(old, [[1.0, 1.5, 0.9, 0.7]])
    adv = T([[0.0, 1.0, -1.0, -2.0]])
    mask = T([[0, 1, 1, 1]], dtype=torch.bool)
    turns = T([[0, 0, 0, 0]])
    loss, m = policy_loss(logp, old, adv, mask, turns, ratio_level="token", clip_eps=0.2)
    # t1: r 1.5, A 1 -> -min(1.5, 1.2) = -1.2 (clipped); t2: r 0.9, A -1 -> 0.9;
    # t3: r 0.7, A -2 -> -min(-1.4, -1.6) = 1.6 (clipped)
    assert loss.item() == pytest.approx((-1.2 + 0.9 + 1.6) / 3, abs=1e-6)
    assert m["clipfrac"] == pytest.approx(2 / 3)
    loss.backward()
    # only the unclipped token has a gradient: d/dlogp (-r A) = -r A = 0.9, over N = 3
    assert torch.allclose(logp.grad, T([[0.0, 0.0, 0.3, 0.0]]), atol=1e-6)


def test_policy_loss__turn_level_uses_the_geometric_mean_ratio_and_clips_whole_turns():
    old = T([[0.0, -1.0, -2.0, 0.0, -1.0, -1.0]])
    logp = _logp(old, [[1.0, 1.1, 1.5, 1.0, 0.9, 1.0]])
    adv = T([[0.0, 2.0, 2.0, 0.0, -1.0, -1.0]])
    mask = T([[0, 1, 1, 0, 1, 1]], dtype=torch.bool)
    turns = T([[0, 0, 0, 1, 1, 1]])
    w0, w1 = math.sqrt(1.1 * 1.5), math.sqrt(0.9 * 1.0)  # 1.2845 (clipped, A > 0) and 0.9487
    lr = log_ratios(logp.detach(), old, mask, turns, "turn")
    assert torch.allclose(lr, T([[0.0, LOG(w0), LOG(w0), 0.0, LOG(w1), LOG(w1)]]), atol=1e-6)
    loss, m = policy_loss(logp, old, adv, mask, turns, ratio_level="turn", clip_eps=0.2)
    assert loss.item() == pytest.approx((-1.2 * 2 * 2 + w1 * 2) / 4, abs=1e-6)
    assert m["clipfrac"] == pytest.approx(0.5) and m["clipfrac_turn"] == pytest.approx(0.5)
    loss.backward()
    # turn 0 clipped as a whole; turn 1: d/dlogp_t of sum_s (-w1 A) = 2 * w1 * (1/2), over N = 4
    assert torch.allclose(logp.grad, T([[0.0, 0.0, 0.0, 0.0, w1 / 4, w1 / 4]]), atol=1e-6)


def test_policy_loss__token_level_differs_from_turn_level_on_the_same_data():
    old = T([[0.0, -1.0, -2.0, 0.0, -1.0, -1.0]])
    logp = _logp(old, [[1.0, 1.1, 1.5, 1.0, 0.9, 1.0]])
    adv = T([[0.0, 2.0, 2.0, 0.0, -1.0, -1.0]])
    mask = T([[0, 1, 1, 0, 1, 1]], dtype=torch.bool)
    loss, m = policy_loss(logp, old, adv, mask, T([[0, 0, 0, 1, 1, 1]]), ratio_level="token")
    assert loss.item() == pytest.approx((-2.2 - 2.4 + 0.9 + 1.0) / 4, abs=1e-6)
    assert m["clipfrac"] == pytest.approx(0.25) and m["clipfrac_turn"] == pytest.approx(0.5)


def test_policy_loss__sequence_level_is_one_ratio_per_episode():
    old = T([[0.0, -1.0, -2.0, 0.0, -1.0, -1.0], [0.0, -1.0, -1.0, -1.0, 0.0, 0.0]])
    logp = _logp(old, [[1.0, 1.1, 1.5, 1.0, 0.9, 1.0], [1.0, 2.0, 2.0, 2.0, 1.0, 1.0]])
    adv = T([[0.0, 2.0, 2.0, 0.0, -1.0, -1.0], [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]])
    mask = T([[0, 1, 1, 0, 1, 1], [0, 1, 1, 1, 0, 0]], dtype=torch.bool)
    turns = T([[0, 0, 0, 1, 1, 1], [0, 0, 1, 2, 2, -1]])
    w = (1.1 * 1.5 * 0.9 * 1.0) ** 0.25  # row 0: 1.1039, inside the clip range
    loss, m = policy_loss(logp, old, adv, mask, turns, ratio_level="sequence")
    # row 0: -(2w + 2w - w - w); row 1: ratio 2 > 1.2 with A = 1 -> clipped, -1.2 per token
    assert loss.item() == pytest.approx((-2 * w - 3 * 1.2) / 7, abs=1e-6)
    assert m["clipfrac"] == pytest.approx(3 / 7)


@pytest.mark.parametrize("level", ["token", "turn", "sequence"])
def test_policy_loss__on_policy_ratio_one_gives_minus_mean_advantage_and_no_clipping(level):
    old = torch.randn(3, 7)
    logp = old.clone().requires_grad_(True)
    adv = torch.randn(3, 7)
    mask = torch.rand(3, 7) < 0.6
    mask[:, 0] = True
    turns = torch.randint(0, 3, (3, 7)).sort(dim=1).values
    loss, m = policy_loss(logp, old, adv, mask, turns, ratio_level=level)
    assert loss.item() == pytest.approx(-float(adv[mask].mean()), abs=1e-5)
    assert m["clipfrac"] == 0 and m["approx_kl"] == pytest.approx(0.0, abs=1e-7)


# ---------------------------------------------------------------------- clipping-bias correction
class _Linear(torch.nn.Module):
    """logp[b, t] = log_softmax(W x_{b,t})[y_{b,t}]: a tiny differentiable policy."""

    def __init__(self, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.W = torch.nn.Parameter(torch.randn(5, 4, generator=g) * 0.5)
        self.x = torch.randn(2, 6, 4, generator=g)
        self.y = torch.randint(0, 5, (2, 6), generator=g)

    def forward(self):
        return torch.log_softmax(self.x @ self.W.T, -1).gather(-1, self.y[..., None]).squeeze(-1)


def _grad(model, level, correction, old, adv, mask, turns, eps=0.2):
    model.zero_grad()
    loss, m = policy_loss(
        model(),
        old,
        adv,
        mask,
        turns,
        ratio_level=level,
        clip_eps=eps,
        clip_bias_correction=correction,
        params=list(model.parameters()),
    )
    loss.backward()
    return model.W.grad.clone(), loss.detach(), m


@pytest.mark.parametrize("level", ["token", "turn", "sequence"])
@pytest.mark.parametrize("correction", ["max1", "additive"])
def test_clip_bias_correction__is_exactly_ppo_when_nothing_is_clipped(level, correction):
    model = _Linear()
    old = model().detach() - 0.01  # ratios ~1.01: inside any clip range
    adv = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 6, dtype=torch.bool)
    turns = T([[0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, 1]])
    g_ppo, l_ppo, _ = _grad(model, level, "none", old, adv, mask, turns)
    g_cor, l_cor, m = _grad(model, level, correction, old, adv, mask, turns)
    assert m["clipfrac"] == 0 and m["clip_bias_norm"] == 0
    assert torch.equal(g_ppo, g_cor) and torch.equal(l_ppo, l_cor)


@pytest.mark.parametrize("level", ["token", "turn"])
def test_clip_bias_correction__divides_the_gradient_by_the_clipped_gradient_mass(level):
    model = _Linear()
    old = model().detach() - T([[0.5, 0.5, 0.0, 0.0, -0.5, -0.5], [0.0, 0.0, 0.0, 0.5, 0.5, 0.5]])
    adv = T([[3.0, 3.0, 1.0, 1.0, -2.0, -2.0], [1.0, 1.0, 1.0, 4.0, 4.0, 4.0]])  # big: ||grad C|| > 1
    mask = torch.ones(2, 6, dtype=torch.bool)
    turns = T([[0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, 1]])
    g_ppo, _, m_ppo = _grad(model, level, "none", old, adv, mask, turns)
    g_cor, _, m = _grad(model, level, "max1", old, adv, mask, turns)
    assert m["clipfrac"] > 0
    # grad C by hand: (1/N) sum over clipped tokens of w_t A_t grad logp_t
    model.zero_grad()
    logp = model()
    w = torch.exp(log_ratios(logp.detach(), old, mask, turns, level))
    clipped = ((adv > 0) & (w > 1.2)) | ((adv < 0) & (w < 0.8))
    ((w * adv * clipped) * logp).sum().div(12).backward()
    norm = model.W.grad.norm().item()
    assert norm > 1 and m["clip_bias_norm"] == pytest.approx(norm, rel=1e-5)
    assert torch.allclose(g_cor, g_ppo / norm, atol=1e-6)
    g_add, _, _ = _grad(model, level, "additive", old, adv, mask, turns)
    assert torch.allclose(g_add, g_ppo / (norm + 1.0), atol=1e-6)


def test_clip_bias_scale__never_amplifies_in_the_default_form():
    assert clip_bias_scale(0.0) == 1.0 and clip_bias_scale(0.5) == 1.0 and clip_bias_scale(4.0) == 0.25
    assert clip_bias_scale(3.0, "additive", 1.0) == 0.25 and clip_bias_scale(3.0, "none") == 1.0
    with pytest.raises(ValueError):
        clip_bias_scale(1.0, "sometimes")


def test_policy_loss__correction_needs_params_when_something_is_clipped():
    old = T([[0.0, 0.0]])
    logp = _logp(old, [[1.0, 2.0]])
    with pytest.raises(ValueError, match="params"):
        policy_loss(logp, old, T([[0.0, 1.0]]), T([[0, 1]], dtype=torch.bool), T([[0, 0]]), clip_bias_correction="max1")


# ---------------------------------------------------------------------- degenerate inputs
@given(
    st.sampled_from(["token", "turn", "sequence"]),
    st.lists(st.floats(-60, 60, allow_nan=False, width=32), min_size=6, max_size=6),
    st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=6, max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_policy_loss__finite_for_any_log_ratio_advantage_and_mask(level, log_ratio, adv, mask):
    old = torch.zeros(1, 6)
    logp = T([log_ratio]).requires_grad_(True)
    loss, m = policy_loss(logp, old, T([adv]), T([mask]), T([[0, 0, 1, 1, 2, 2]]), ratio_level=level)
    loss.backward()
    assert math.isfinite(loss.item()) and torch.isfinite(logp.grad).all()
    assert all(math.isfinite(v) for v in m.values())


def test_policy_loss__empty_mask_is_zero_not_nan():
    logp = torch.zeros(2, 3, requires_grad=True)
    loss, m = policy_loss(
        logp,
        torch.zeros(2, 3),
        torch.ones(2, 3),
        torch.zeros(2, 3, dtype=torch.bool),
        torch.zeros(2, 3, dtype=torch.long),
    )
    loss.backward()
    assert loss.item() == 0 and (logp.grad == 0).all() and m["clipfrac"] == 0


# ---------------------------------------------------------------------- value, KL, metrics
def test_value_loss__clipped_hand_case():
    values = T([1.0, 0.0, 2.0]).requires_grad_(True)
    old = T([0.0, 0.0, 1.9])
    ret = T([2.0, 1.0, 0.0])
    mask = T([1, 0, 1], dtype=torch.bool)
    loss, m = value_loss(values, old, ret, mask, clip=0.5)
    # v0: unclipped (1-2)^2 = 1, clipped (0.5-2)^2 = 2.25 -> 2.25; v2: 4 vs (2.0-0)^2=4 -> 4
    assert loss.item() == pytest.approx(0.5 * (2.25 + 4.0) / 2)
    assert m["vf_clipfrac"] == pytest.approx(0.5)
    loss_plain, _ = value_loss(values, old, ret, mask, clip=None)
    assert loss_plain.item() == pytest.approx(0.5 * (1.0 + 4.0) / 2)


@given(st.integers(0, 2**31 - 1))
def test_value_loss__a_value_inside_the_clip_range_is_never_counted_clipped(seed):
    """Inside the range ``old + (V - old)`` equals V only up to rounding; that noise must not count as clipping."""
    g = torch.Generator().manual_seed(seed)
    old = torch.randn(256, generator=g) * 0.01  # V - old is inexact where |V| and |old| differ by more than 2x
    values = old + (torch.rand(256, generator=g) - 0.5) * 0.9  # |V - old| < 0.45 < clip
    returns = torch.randn(256, generator=g) * 3
    _, m = value_loss(values, old, returns, torch.ones(256, dtype=torch.bool), clip=0.5)
    assert m["vf_clipfrac"] == 0.0


def test_kl_penalty__k3_hand_case_and_zero_at_reference():
    logp = T([[-1.0, -2.0]])
    ref = T([[-1.5, -2.0]])
    d = -0.5
    assert kl_penalty(logp, ref, T([[1, 1]], dtype=torch.bool)).item() == pytest.approx((math.exp(d) - d - 1) / 2)
    assert kl_penalty(logp, logp, T([[1, 1]], dtype=torch.bool)).item() == 0


def test_explained_variance__perfect_useless_and_undefined():
    y = T([1.0, 2.0, 3.0, 4.0])
    mask = torch.ones(4, dtype=torch.bool)
    assert explained_variance(y, y, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 2.5), y, mask) == pytest.approx(0.0)
    assert math.isnan(explained_variance(y, torch.ones(4), mask))
    assert math.isnan(explained_variance(y, torch.full((4,), 0.1), mask))  # equal targets whose sums round
    # hand-computed: Var[y] = 1.25, residuals [0, 0, 0, 1] have Var = 0.1875, so 1 - 0.1875 / 1.25 = 0.85
    assert explained_variance(T([1.0, 2.0, 3.0, 3.0]), y, mask) == pytest.approx(0.85)


def test_statistics_with_a_reducer_see_every_ranks_batch():
    """A reducer that adds a second rank's sums gives the statistic of both batches together."""
    from reference_trainer.advantages import episode_weights, masked_mean

    x, other = T([[1.0, 2.0, 0.0]]), T([[3.0, 6.0, 9.0]])
    m, m2 = T([[1, 1, 0]], dtype=torch.bool), T([[1, 1, 1]], dtype=torch.bool)
    add = lambda *v: [a + b for a, b in zip(v, [(other * m2).sum(), m2.sum()])]  # noqa: E731
    assert masked_mean(x, m, add).item() == pytest.approx((1 + 2 + 3 + 6 + 9) / 5)
    lengths = lambda *v: [v[0] + 3, v[1] + 1]  # noqa: E731  (a rank with one episode of 3 action tokens)
    assert episode_weights(m, lengths)[0, 0].item() == pytest.approx(((2 + 3) / 2) / 2)


# ---------------------------------------------------------------------- the loss terms the trainer adds up
def _inputs(**over):
    """One episode of two action tokens (of four positions); the minibatch has N = 4 action tokens."""
    mask = T([[0, 1, 1, 0]], dtype=torch.bool)
    fields = dict(
        logp=T([[0.0, -1.0, -2.0, 0.0]]),
        entropy=T([[9.0, 0.5, 1.5, 9.0]]),
        values=T([[0.0, 1.0, 0.0, 0.0]]),
        old_logp=T([[0.0, -1.0, -2.0, 0.0]]),
        old_values=T([[0.0, 1.0, 0.0, 0.0]]),
        advantages=T([[0.0, 1.0, -1.0, 0.0]]),
        value_targets=T([[0.0, 3.0, 0.0, 0.0]]),
        value_mask=T([[0, 1, 0, 0]], dtype=torch.bool),
        ref_logp=T([[0.0, -1.5, -2.0, 0.0]]),
        action_mask=mask,
        turn_ids=T([[0, 0, 0, 0]]),
        num_tokens=T(4.0),
        num_values=T(2.0),
        actor_params=[],
        clip_bias_norm=None,
    )
    return LossInputs(**{**fields, **over})


ALGO = SimpleNamespace(
    ratio_level="token",
    clip_eps=0.2,
    clip_bias_correction="none",
    clip_bias_const=1.0,
    ent_coef=0.1,
    vf_coef=0.5,
    value_clip=None,
    kl_coef=0.2,
)


def test_loss_terms__hand_computed_weighted_losses_and_their_reductions():
    assert list(LOSSES) == ["policy", "entropy", "value", "kl"]  # the order the trainer adds them in
    x = _inputs()
    pg, m = LOSSES["policy"](x, ALGO)
    # on-policy: -(1 * 1 + 1 * -1) / N = 0
    assert pg.item() == pytest.approx(0.0) and m["pg_loss"] == Metric(pytest.approx(0.0), "sum")
    assert m["clipfrac"].reduce == m["approx_kl"].reduce == "share" and m["ratio_max"] == Metric(1.0, "max")
    assert m["clip_bias_scale"] == Metric(1.0, "minibatch")
    ent, m = LOSSES["entropy"](x, ALGO)
    assert ent.item() == pytest.approx(-0.1 * (0.5 + 1.5) / 4) and m == {"entropy": Metric(pytest.approx(0.5), "sum")}
    none, m = LOSSES["entropy"](x, SimpleNamespace(ent_coef=0.0))
    assert none is None and m["entropy"].value == pytest.approx(0.5)  # reported, not added
    vf, m = LOSSES["value"](x, ALGO)
    assert vf.item() == pytest.approx(0.5 * 0.5 * (1.0 - 3.0) ** 2 / 2) and m["vf_loss"].reduce == "sum"
    kl, m = LOSSES["kl"](x, ALGO)
    d = -0.5
    assert kl.item() == pytest.approx(0.2 * (math.exp(d) - d - 1) / 4) and m["kl_ref"] == Metric(
        pytest.approx((math.exp(d) - d - 1) / 4), "sum"
    )


def test_combine_parts_and_steps__hand_computed():
    part1 = {
        "loss": Metric(0.1, "sum"),
        "frac": Metric(0.4, "share"),
        "top": Metric(2.0, "max"),
        "norm": Metric(7.0, "minibatch"),
    }
    part2 = {
        "loss": Metric(0.2, "sum"),
        "frac": Metric(0.8, "share"),
        "top": Metric(3.0, "max"),
        "norm": Metric(7.0, "minibatch"),
    }
    step = combine_parts([(part1, 0.25), (part2, 0.75)])
    assert step["loss"].value == pytest.approx(0.3)  # sums over the minibatch's count add up
    assert step["frac"].value == pytest.approx(0.4 * 0.25 + 0.8 * 0.75)  # weighted by the share of action tokens
    assert step["top"] == Metric(3.0, "max") and step["norm"] == Metric(7.0, "minibatch")
    other = {
        "loss": Metric(0.5, "sum"),
        "frac": Metric(0.1, "share"),
        "top": Metric(1.5, "max"),
        "norm": Metric(1.0, "minibatch"),
    }
    it = combine_steps([step, other])
    assert it == {
        "loss": pytest.approx(0.4),
        "frac": pytest.approx((0.7 + 0.1) / 2),
        "top": 3.0,
        "norm": pytest.approx(4.0),
        "ratio_max": 1.0,
    }  # means over steps, the largest max, and the ratio a step without a policy loss has
    with pytest.raises(ValueError, match="unknown reduction"):
        combine_parts([({"x": Metric(1.0, "median")}, 1.0)])
