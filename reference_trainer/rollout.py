"""Batched multi-turn rollouts over Gymnasium envs, token-in/token-out.

:func:`collect` plays one episode per seed: at every turn it samples a response for every
active episode in one batch (:meth:`Policy.generate`), decodes it for the env, and appends
the *sampled ids* to the episode's :class:`~agentgym_turn.tokens.Conversation`;
each observation is tokenised once. :func:`make_batch` pads finished episodes into the
tensors the trainer uses. :func:`expert_episodes` assembles the env's expert play the same
way (the SFT data), and :func:`episode_metrics` summarises a list of episodes.

Context policy: before a turn, if the state plus ``max_new_tokens`` (and the end-of-turn
template) would exceed ``max_context_tokens``, the episode ends as **truncated**
(``truncation="context"``); the state is still appended when it fits, so the critic can
bootstrap from it, otherwise the episode is bootstrapped with 0 and counted in the
``context_overflow`` metric. Nothing is ever cut silently. An env step that overruns
``step_timeout_s`` (env modes ``threads``/``processes``: a :class:`~agentgym_turn.pools.ConcurrentPool` over
:class:`~agentgym_turn.async_pool.AsyncTurnEnvPool`) ends its episode as truncated
(``truncation="timeout"``) with no final state (bootstrapped with 0).

Faults: a turn whose ``info["reward_valid"]`` is False (``exit_status`` ``env_error`` or
``infra_error``: the episode ended without the policy's doing) ends its episode as **faulted**
(:attr:`Episode.fault`). :func:`make_batch` keeps a faulted episode's row but masks it out of
every loss and of GRPO's group statistics, and :func:`episode_metrics` counts it apart. An env
that raises from ``reset`` or ``step`` despite the contract does not stop the rollout:
:class:`~agentgym_turn.core.contract.FaultGuard` (around every env of :func:`agentgym_turn.pools.make` and
:class:`~agentgym_turn.pools.SerialPool`) turns the
exception into such a faulted turn and logs it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import gymnasium as gym
import torch

from agentgym_turn.async_pool import STEP_TIMEOUT_KEY
from agentgym_turn.chat import split_first_message
from agentgym_turn.core import EXIT_STATUSES
from agentgym_turn.core.contract import InfraError
from agentgym_turn.pools import EnvPool

from .policy import TurnCache
from agentgym_turn.tokens import COMPACT, ROLE_ACTION, ChatFormat, Conversation, TokenEpisode, continues_with
from agentgym_turn.tokens.chat import _state_text as state_text


@dataclass
class Episode:
    """A finished episode: its tokens and what the env said at every turn."""

    conversation: Conversation
    seed: int
    group: int
    rewards: list[float] = field(default_factory=list)  # per turn
    infos: list[dict[str, Any]] = field(default_factory=list)  # per turn
    sampled_logp: list[float] = field(default_factory=list)  # per action token, as sampled
    terminated: bool = False
    truncated: bool = False
    truncation: str | None = (
        None  # "env" (turn limit), "context", "timeout" (the env's step overran step_timeout_s) or "fault"
    )
    bootstrap_pos: int | None = None  # last token of the final state when truncated
    fault: str | None = (
        None  # "env_error"/"infra_error": a turn said reward_valid=False; the episode is not the policy's to score
    )
    #: The episode's tokens by turn, under the rollout's history policy (its ``samples()`` are the rows to train on).
    tokens: TokenEpisode | None = field(default=None, repr=False, compare=False)

    @property
    def ret(self) -> float:
        """Undiscounted episode return."""
        return float(sum(self.rewards))

    @property
    def success(self) -> bool:
        return bool(self.infos and self.infos[-1].get("success", False))

    @property
    def score(self) -> float:
        return float(self.infos[-1].get("score", self.ret)) if self.infos else 0.0

    @property
    def num_turns(self) -> int:
        return len(self.rewards)

    @property
    def reward_valid(self) -> bool:
        """No fault ended the episode: its reward scores the policy (False: it is left out of training and of averages)."""
        return self.fault is None

    @property
    def exit_status(self) -> str:
        """The final turn's ``info["exit_status"]`` (the fault's, when one ended the episode; ``"truncated"`` or
        ``"ok"`` for an env that does not report one)."""
        if self.fault is not None:
            return self.fault
        status = self.infos[-1].get("exit_status") if self.infos else None
        return str(status) if status else ("truncated" if self.truncated else "ok")

    def note_fault(self, info: dict[str, Any]) -> bool:
        """Mark the episode faulted when ``info`` (a turn's) says its reward is not valid; returns whether it is."""
        if info.get("reward_valid") is False and self.fault is None:
            self.fault = str(info.get("exit_status") or "env_error")
        return self.fault is not None


def _split_first(envs: EnvPool) -> Callable[[int, str], tuple[str, str]]:
    """``split(index, observation)`` for :func:`open_episode`: the env's own split, asked where the env lives; a
    fault there (a Ray actor gone) leaves the whole message as the first state."""

    def split(index: int, observation: str) -> tuple[str, str]:
        try:
            return envs.call(index, split_first_message, observation)
        except InfraError:
            return "", observation

    return split


def collect(
    policy: Any,
    fmt: ChatFormat,
    envs: EnvPool,
    seeds: Sequence[int],
    *,
    generator: torch.Generator,
    max_new_tokens: int = 64,
    max_context_tokens: int = 2048,
    temperature: float = 1.0,
    groups: Sequence[int] | None = None,
    split_system_prompt: bool = False,
    reuse_cache: bool = True,
    history: int | str | None = None,
    reasoning: str = "keep",
) -> list[Episode]:
    """Play one episode per seed (``envs.num_envs`` at a time) and return them in seed order.

    Args:
        policy: A :class:`~reference_trainer.policy.Policy` (anything with its ``generate``).
        fmt: The tokenizer's chat format.
        envs: At least one env; episodes run ``envs.num_envs`` at a time.
        seeds: One reset seed per episode (equal seeds: the same task, e.g. a GRPO group).
        generator: Seeds the token sampling.
        temperature: 1.0 samples from the policy, 0 is greedy.
        groups: Group id per episode (default: the index).
        split_system_prompt: Open each conversation with the env's instructions as a system
            message and its first state as the first user message
            (``agentgym_turn.chat.split_first_message``) instead of one user message.
        reuse_cache: Keep each conversation's keys and values from one turn to the next
            (:class:`~reference_trainer.policy.TurnCache`), so a turn runs only its new tokens through
            the model; for a policy whose ``generate`` takes ``turn_cache``.
        history, reasoning: What the model is shown at each turn (:class:`~agentgym_turn.tokens.TokenEpisode`'s
            history policy: every turn, the last ``k`` user messages or ``"compact"``; earlier reasoning kept or
            stripped). The policy samples from that input; :attr:`Episode.tokens` keeps the sequences to train on.
    """
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be at least 1.")
    groups = list(groups) if groups is not None else list(range(len(seeds)))
    episodes: list[Episode] = []
    for lo in range(0, len(seeds), envs.num_envs):
        chunk = list(seeds[lo : lo + envs.num_envs])
        episodes += _collect_chunk(
            policy,
            fmt,
            envs,
            chunk,
            groups[lo : lo + len(chunk)],
            generator,
            max_new_tokens,
            max_context_tokens,
            temperature,
            split_system_prompt,
            reuse_cache and _takes_turn_cache(policy),
            (history, reasoning),
        )
    return episodes


def _takes_turn_cache(policy: Any) -> bool:
    return "turn_cache" in inspect.signature(policy.generate).parameters


def _collect_chunk(
    policy,
    fmt,
    envs,
    seeds,
    groups,
    generator,
    max_new_tokens,
    max_context_tokens,
    temperature,
    split_system_prompt,
    reuse_cache=False,
    policy_of_history=(None, "keep"),
):
    pad_id = fmt.tokenizer.pad_token_id if fmt.tokenizer.pad_token_id is not None else 0
    tail_room = len(fmt.assistant_suffix)
    tokens = [new_token_episode(fmt, *policy_of_history) for _ in seeds]  # as ChatView(env, tokenizer=...) does
    eps = [Episode(t.conversation, int(s), int(g), tokens=t) for t, s, g in zip(tokens, seeds, groups)]
    windowed = is_windowed(*policy_of_history)
    if split_system_prompt:  # the message is split before it is tokenised
        observations, contents = [obs for obs, _ in envs.reset(seeds)], [None] * len(eps)
    else:
        observations, contents = _reset_tokenised(envs, seeds, fmt)
    for index, (ep, obs) in enumerate(zip(eps, observations)):
        state = state_of(envs, index, obs, policy_of_history[0])
        open_episode(
            tokens[index], obs, _split_first(envs) if split_system_prompt else None, index, contents[index], state
        )
        if len(ep.conversation) + max_new_tokens + tail_room > max_context_tokens:
            raise ValueError(
                f"The first message takes {len(ep.conversation)} tokens; with max_new_tokens="
                f"{max_new_tokens} it does not fit max_context_tokens={max_context_tokens}. Raise "
                "max_context_tokens, lower max_new_tokens, or use a more compact prompt style."
            )
    active = list(range(len(eps)))
    cache = {"turn_cache": TurnCache()} if reuse_cache else {}
    while active:
        prompts = [tokens[i].view().ids if windowed else eps[i].conversation.ids for i in active]
        responses, logps = policy.generate(
            prompts,
            max_new_tokens=max_new_tokens,
            stop_ids=fmt.stop_ids,
            pad_id=pad_id,
            generator=generator,
            temperature=temperature,
            **cache,
            **({"keys": active} if cache else {}),
        )
        actions = {}
        for i, ids, lp in zip(active, responses, logps):
            text = fmt.decode_response(ids)
            tokens[i].respond(ids, text)
            eps[i].sampled_logp.extend(lp)
            actions[i] = text
        results, contents = _step_tokenised(envs, actions, fmt)
        still = []
        for i in active:
            obs, reward, terminated, truncated, info = results[i]
            ep = eps[i]
            ep.rewards.append(reward)
            ep.infos.append(info)
            conv = ep.conversation
            if ep.note_fault(info):  # nothing after a fault is the policy's doing: the episode ends here
                ep.terminated, ep.truncated, ep.truncation = terminated, not terminated, None if terminated else "fault"
                continue
            if not continues_with(terminated, info):
                ep.terminated = True
                continue
            if info.get(STEP_TIMEOUT_KEY):  # the env did not answer in time: no final state to bootstrap from
                ep.truncated, ep.truncation = True, "timeout"
                continue
            if contents[i] is None:
                contents[i] = fmt.encode_content(obs)
            if windowed:  # the input is a window of the episode: it is measured once the state is in it
                tokens[i].observe(obs, content_ids=contents[i], state=state_of(envs, i, obs, policy_of_history[0]))
                length = len(tokens[i].view())
                if truncated or length + max_new_tokens + tail_room > max_context_tokens:
                    ep.truncated, ep.truncation = True, "env" if truncated else "context"
                    ep.bootstrap_pos = length - 1 if length <= max_context_tokens else None
                    continue
                still.append(i)
                continue
            need = fmt.observation_length(
                contents[i]
            )  # the observation is tokenised once, for this check and the conversation
            fits = len(conv) + need <= max_context_tokens
            if truncated or len(conv) + need + max_new_tokens + tail_room > max_context_tokens:
                ep.truncated = True
                ep.truncation = "env" if truncated else "context"
                if fits:  # the final state, for the critic's bootstrap value
                    tokens[i].observe(obs, content_ids=contents[i])
                    ep.bootstrap_pos = len(conv) - 1
                continue
            tokens[i].observe(obs, content_ids=contents[i])
            still.append(i)
        active = still
    return eps


# Observations are tokenised once, where it costs the rollout least: by the worker thread that stepped the env
# (a ConcurrentPool of threads: overlapping the other envs' waits), else in one batch call (a fast tokenizer's
# native threads).
def _goes_on(result: tuple) -> bool:
    """Whether a step's observation is appended to its episode (it did not end it, nor time out)."""
    return not result[2] and not result[4].get(STEP_TIMEOUT_KEY)


def _reset_tokenised(envs: EnvPool, seeds: Sequence[int], fmt: ChatFormat) -> tuple[list[str], list[list[int]]]:
    """``envs.reset(seeds)``'s first messages and each one's ``fmt.encode_content``."""
    if getattr(envs, "in_threads", False):
        pairs = envs.reset_then(seeds, fmt.encode_content)
        return [obs for obs, _ in pairs], [ids for _, ids in pairs]
    observations = [obs for obs, _ in envs.reset(seeds)]
    return observations, fmt.encode_contents(observations)


def _step_tokenised(
    envs: EnvPool, actions: dict[int, str], fmt: ChatFormat
) -> tuple[dict[int, tuple], dict[int, list[int] | None]]:
    """``envs.step(actions)`` and the ``fmt.encode_content`` of every observation that goes on (``None`` for the others)."""
    if getattr(envs, "in_threads", False):
        stepped = envs.step_then(actions, lambda r: fmt.encode_content(r[0]) if _goes_on(r) else None)
        return {i: r for i, (r, _) in stepped.items()}, {i: ids for i, (_, ids) in stepped.items()}
    results = envs.step(actions)
    going_on = [i for i in actions if _goes_on(results[i])]
    return results, dict(zip(going_on, fmt.encode_contents([results[i][0] for i in going_on])))


@dataclass
class RolloutBatch:
    """Episodes padded into tensors. ``B`` rows (one per episode, or one per sequence of an episode played under a
    history policy: ``episode_index``), ``L`` tokens, ``K`` turns (turn ``k`` is the episode's, in every row).

    Token tensors are right-padded (``attention_mask`` 0, ``turn_ids`` -1 on padding).
    ``token_rewards`` carries turn ``k``'s reward on its last action token; ``value_pos[b, k]``
    is the index of the last token of state ``s_k`` (0 on padded turns);
    ``bootstrap_pos[b]`` is the last token of the final state of a truncated episode, -1 when
    there is none (terminated, or the final state did not fit the context).

    A row outside ``in_loss`` (a faulted episode, see :func:`loss_rows`) keeps its tokens but no
    action tokens, turns, rewards or bootstrap, and a group id of its own (negative): every
    estimator and loss term then gives it, and takes from it, nothing. Rows are kept rather than
    dropped so every rank of a data-parallel run keeps the same number of rows (and optimizer steps).
    """

    ids: torch.Tensor  # [B, L] long
    attention_mask: torch.Tensor  # [B, L] long
    action_mask: torch.Tensor  # [B, L] bool
    turn_ids: torch.Tensor  # [B, L] long
    roles: torch.Tensor  # [B, L] long
    token_rewards: torch.Tensor  # [B, L] float
    sampled_logp: torch.Tensor  # [B, L] float, log-probs recorded while sampling
    turn_rewards: torch.Tensor  # [B, K] float
    turn_mask: torch.Tensor  # [B, K] bool
    value_pos: torch.Tensor  # [B, K] long
    bootstrap_pos: torch.Tensor  # [B] long
    terminated: torch.Tensor  # [B] bool
    truncated: torch.Tensor  # [B] bool
    scores: torch.Tensor  # [B] float, episode returns
    success: torch.Tensor  # [B] bool
    group_ids: torch.Tensor  # [B] long
    in_loss: torch.Tensor  # [B] bool, the rows training sees (see loss_rows)
    episode_index: torch.Tensor  # [B] long, the episode each row is a sequence of (0..E-1, rows of one adjacent)
    ends_episode: torch.Tensor  # [B] bool, the row trains its episode's last turn (where an outcome reward goes)

    def __len__(self) -> int:
        return self.ids.shape[0]

    def to(self, device: str | torch.device) -> "RolloutBatch":
        return RolloutBatch(**{k: v.to(device) for k, v in self.__dict__.items()})

    def select(self, index: torch.Tensor) -> "RolloutBatch":
        """Rows ``index``, trimmed to their longest sequence and turn count."""
        rows = {k: v[index] for k, v in self.__dict__.items()}
        L = int(rows["attention_mask"].sum(1).max()) if len(index) else 0
        turn_numbers = torch.arange(1, rows["turn_mask"].shape[1] + 1, device=rows["turn_mask"].device)
        K = int((rows["turn_mask"] * turn_numbers).max()) if len(index) and rows["turn_mask"].numel() else 0
        for k in ("ids", "attention_mask", "action_mask", "turn_ids", "roles", "token_rewards", "sampled_logp"):
            rows[k] = rows[k][:, :L]
        for k in ("turn_rewards", "turn_mask", "value_pos"):
            rows[k] = rows[k][:, : max(K, 1)]
        return RolloutBatch(**rows)


def loss_rows(episodes: Sequence[Episode], min_group: int = 1) -> list[bool]:
    """Which episodes training sees: not faulted, and not in a group that faults left with fewer than
    ``min_group`` valid members (GRPO: 2, it compares a group's members; a group without faults is kept as is)."""
    valid: dict[int, int] = {}
    faulted: set[int] = set()
    for e in episodes:
        if e.reward_valid:
            valid[e.group] = valid.get(e.group, 0) + 1
        else:
            faulted.add(e.group)
    return [e.reward_valid and (e.group not in faulted or valid[e.group] >= min_group) for e in episodes]


@dataclass
class _Row:
    """One training row: a token sequence of an episode and the turns trained in it."""

    episode: int
    ids: list[int]
    roles: list[int]
    turn_ids: list[int]
    trained: list[int]  # positions of the action tokens trained in this row
    logp: list[float]  # their log-probs as sampled
    turns: list[tuple[int, int, int]]  # (turn k, value position: last token of state s_k, end of response k)
    bootstrap: int | None = None  # last token of the final state of a truncated episode, when this row holds it


def _whole_row(b: int, ep: Episode) -> _Row:
    c = ep.conversation
    trained = [t for t, r in enumerate(c.roles) if r == ROLE_ACTION]
    turns = [(k, start - 1, end) for k, (start, end) in enumerate(c.action_spans)]
    return _Row(b, c.ids, c.roles, c.turn_ids, trained, list(ep.sampled_logp), turns, ep.bootstrap_pos)


def _window_rows(b: int, ep: Episode) -> list[_Row]:
    """An episode played under a history policy: one row per sequence of ``ep.tokens.samples()`` (each response
    trained in the sequence it was sampled in), and a row of the final state alone when a truncated episode's
    bootstrap state starts a sequence of its own."""
    tokens = ep.tokens
    assert tokens is not None
    spans = ep.conversation.action_spans
    logp_of, at = [], 0
    for start, end in spans:
        logp_of.append(ep.sampled_logp[at : at + end - start])
        at += end - start
    rows, sequences = [], tokens.samples()
    for seq in sequences:
        turns = [s for s in seq.turns if s.response is not None and s.response[1] > s.response[0]]
        turns = [s for s in turns if seq.mask[s.response[0]]]
        trained = [t for t, m in enumerate(seq.mask) if m]
        logp = [x for s in turns for x in logp_of[s.turn]]
        rows.append(
            _Row(
                b,
                seq.ids,
                seq.roles,
                seq.turn_ids,
                trained,
                logp,
                [(s.turn, s.response[0] - 1, s.response[1]) for s in turns],
            )
        )
    if ep.bootstrap_pos is not None:
        final = ep.num_turns
        last = rows[-1] if rows else None
        held = [s for s in sequences[-1].turns if s.turn == final] if last is not None else []
        if held:
            last.bootstrap = held[0].observation[1] - 1
        else:
            view = tokens.view(final)
            rows.append(_Row(b, view.ids, view.roles, view.turn_ids, [], [], [], len(view.ids) - 1))
    return rows


def make_batch(episodes: Sequence[Episode], pad_id: int, *, min_group: int = 1) -> RolloutBatch:
    """Pad ``episodes`` into a :class:`RolloutBatch` (on CPU); the rows :func:`loss_rows` leaves out
    (``min_group``: see there) carry no action tokens, turns or rewards.

    An episode played under a history policy (:func:`is_windowed`) gives one row per sequence its responses were
    sampled in (``episode_index`` says whose); any other, one row holding the whole conversation."""
    keep = loss_rows(episodes, min_group)
    rows: list[_Row] = []
    for b, ep in enumerate(episodes):
        windowed = ep.tokens is not None and is_windowed(ep.tokens.history, getattr(ep.tokens, "reasoning", "keep"))
        rows += _window_rows(b, ep) if windowed else [_whole_row(b, ep)]
    B = len(rows)
    L = max(len(r.ids) for r in rows)
    K = max(max(e.num_turns for e in episodes), 1)
    ids = torch.full((B, L), pad_id, dtype=torch.long)
    attn = torch.zeros((B, L), dtype=torch.long)
    turn_ids = torch.full((B, L), -1, dtype=torch.long)
    roles = torch.full((B, L), -1, dtype=torch.long)
    trained = torch.zeros((B, L), dtype=torch.bool)
    token_rewards = torch.zeros((B, L))
    sampled_logp = torch.zeros((B, L))
    turn_rewards = torch.zeros((B, K))
    turn_mask = torch.zeros((B, K), dtype=torch.bool)
    value_pos = torch.zeros((B, K), dtype=torch.long)
    ends = torch.zeros(B, dtype=torch.bool)
    for b, row in enumerate(rows):
        ep = episodes[row.episode]
        n = len(row.ids)
        ids[b, :n] = torch.tensor(row.ids, dtype=torch.long)
        attn[b, :n] = 1
        turn_ids[b, :n] = torch.tensor(row.turn_ids, dtype=torch.long)
        roles[b, :n] = torch.tensor(row.roles, dtype=torch.long)
        if row.trained:
            trained[b, row.trained] = True
            sampled_logp[b, row.trained] = torch.tensor(row.logp, dtype=torch.float32)
        if not keep[row.episode]:
            continue
        for k, pos, end in row.turns:
            turn_rewards[b, k] = ep.rewards[k]
            turn_mask[b, k] = True
            value_pos[b, k] = pos
            if end > pos + 1:
                token_rewards[b, end - 1] += ep.rewards[k]
        ends[b] = any(k == ep.num_turns - 1 for k, _, _ in row.turns)
    kept = torch.tensor([keep[r.episode] for r in rows], dtype=torch.bool)
    of = [episodes[r.episode] for r in rows]
    return RolloutBatch(
        ids=ids,
        attention_mask=attn,
        action_mask=trained & kept[:, None],
        turn_ids=turn_ids,
        roles=roles,
        token_rewards=token_rewards,
        sampled_logp=sampled_logp,
        turn_rewards=turn_rewards,
        turn_mask=turn_mask,
        value_pos=value_pos,
        bootstrap_pos=torch.tensor(
            [r.bootstrap if r.bootstrap is not None and keep[r.episode] else -1 for r in rows], dtype=torch.long
        ),
        terminated=torch.tensor([e.terminated for e in of], dtype=torch.bool),
        truncated=torch.tensor([e.truncated for e in of], dtype=torch.bool),
        scores=torch.tensor([e.ret if keep[r.episode] else 0.0 for e, r in zip(of, rows)], dtype=torch.float32),
        success=torch.tensor([e.success and keep[r.episode] for e, r in zip(of, rows)], dtype=torch.bool),
        # a left-out row is a group of its own: GRPO's statistics of the others never see it
        group_ids=torch.tensor(
            [e.group if keep[r.episode] else -1 - r.episode for e, r in zip(of, rows)], dtype=torch.long
        ),
        in_loss=kept,
        episode_index=torch.tensor([r.episode for r in rows], dtype=torch.long),
        ends_episode=ends,
    )


# ---------------------------------------------------------------------- SFT data and episode metrics
def open_episode(
    tokens: TokenEpisode,
    observation: str,
    split: Any,
    index: int = 0,
    content_ids: list[int] | None = None,
    state: str | None = None,
) -> None:
    """Start ``tokens`` with the env's first message, split by ``split(index, observation)``
    into a system message and the first state when ``split`` is given; ``content_ids``: the unsplit
    message's ``fmt.encode_content`` when the caller has it already; ``state``: the env's state text
    (``history="compact"``)."""
    if split is None:
        tokens.open(observation, content_ids=content_ids, state=state)
        return
    system_prompt, first_state = split(index, observation)
    tokens.open(first_state, system_prompt or None, state=state)


def new_token_episode(fmt: ChatFormat, history: int | str | None = None, reasoning: str = "keep") -> TokenEpisode:
    """An episode's token assembly under a history policy (``reasoning`` is passed on only when not ``"keep"``)."""
    return TokenEpisode(fmt, history, **({} if reasoning == "keep" else {"reasoning": reasoning}))


def longest_input(ep: Episode) -> int:
    """Tokens of the longest sequence ``ep`` is trained in: its whole conversation, or under a history policy
    its longest sequence."""
    t = ep.tokens
    if t is None or not is_windowed(t.history, getattr(t, "reasoning", "keep")):
        return len(ep.conversation)
    return max(len(seq) for seq in t.samples())


def is_windowed(history: int | str | None = None, reasoning: str = "keep") -> bool:
    """Whether the model's input at a turn can be other than the whole conversation so far."""
    return history is not None or reasoning != "keep"


def state_of(envs: EnvPool, index: int, observation: str, history: int | str | None) -> str | None:
    """The env's state text for ``history="compact"`` (what ``render()`` shows; the observation when the env
    shows none), asked where the env lives; ``None`` under any other history policy."""
    if history != COMPACT:
        return None
    return envs.call(index, _state_or, observation)


def _state_or(env: Any, observation: str) -> str:
    return state_text(env.unwrapped) or observation


def expert_episodes(
    env_id: str,
    fmt: ChatFormat,
    seeds: list[int],
    env_kwargs: dict[str, Any] | None = None,
    split_system_prompt: bool = False,
    *,
    history: int | str | None = None,
    reasoning: str = "keep",
) -> list[Episode]:
    """Episodes played by ``env.unwrapped.expert_action()``, assembled like rollouts (under the history policy
    ``history``/``reasoning``, as :func:`collect`).

    Each response is the canonical encoding of the expert's text followed by the template's
    end-of-turn token, so SFT teaches the model to stop.
    """
    env = gym.make(env_id, **(env_kwargs or {}))
    episodes = []
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=int(seed))
            tokens = new_token_episode(fmt, history, reasoning)
            ep = Episode(tokens.conversation, int(seed), len(episodes), tokens=tokens)
            state = (lambda o: _state_or(env, o)) if history == COMPACT else (lambda o: None)
            split = (lambda _, o: split_first_message(env, o)) if split_system_prompt else None
            open_episode(tokens, obs, split, state=state(obs))
            while True:
                text = env.unwrapped.expert_action()
                ids = fmt.encode_response(text)
                tokens.respond(ids, text)
                ep.sampled_logp.extend([0.0] * len(ids))
                obs, reward, terminated, truncated, info = env.step(text)
                ep.rewards.append(float(reward))
                ep.infos.append(info)
                if ep.note_fault(info) or terminated or truncated:
                    ep.terminated, ep.truncated = bool(terminated), bool(truncated and not terminated)
                    break
                tokens.observe(obs, state=state(obs))
            episodes.append(ep)
    finally:
        env.close()
    return episodes


def episode_metrics(episodes: list[Episode]) -> dict[str, float]:
    """Success rate, mean return/score/turns/response length, truncation and invalid-turn rates, and the mean
    per-episode sum of each reward component (``reward_<name>``), over the episodes no fault ended (0 without any);
    ``episodes`` (all played), ``faulted_episodes`` and ``exit_<status>`` (episodes by final exit status) count them all."""
    everyone = episodes
    episodes = [e for e in everyone if e.reward_valid]
    n = max(len(episodes), 1)
    turns = sum(e.num_turns for e in episodes)
    action_tokens = sum(sum(end - start for start, end in e.conversation.action_spans) for e in episodes)
    invalid = sum(1 for e in episodes for i in e.infos if i.get("action_is_valid") is False)
    return {
        "success": sum(e.success for e in episodes) / n,
        "return": sum(e.ret for e in episodes) / n,
        "score": sum(e.score for e in episodes) / n,
        "turns": turns / n,
        "response_tokens": action_tokens / max(turns, 1),
        "tokens": sum(len(e.conversation) for e in episodes) / n,
        "truncated": sum(e.truncated for e in episodes) / n,
        "context_overflow": sum(e.truncation == "context" and e.bootstrap_pos is None for e in episodes) / n,
        "invalid_turns": invalid / max(turns, 1),
        **{f"reward_{name}": total / n for name, total in _component_totals(episodes).items()},
        "episodes": float(len(everyone)),
        "faulted_episodes": float(sum(not e.reward_valid for e in everyone)),
        **{
            f"exit_{status}": float(sum(e.exit_status == status for e in everyone))
            for status in dict.fromkeys([*EXIT_STATUSES, *(e.exit_status for e in everyone)])
        },
    }


def _component_totals(episodes: list[Episode]) -> dict[str, float]:
    """Each reward component's sum over every turn of ``episodes`` (names as the infos give them, first seen first)."""
    totals: dict[str, float] = {}
    for e in episodes:
        for info in e.infos:
            for name, value in (info.get("reward_components") or {}).items():
                totals[str(name)] = totals.get(str(name), 0.0) + float(value)
    return totals
