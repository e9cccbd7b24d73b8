"""Play any text-turn env through TRL's ``GRPOTrainer(environment_factory=...)``.

TRL's environment integration (TRL >= 1.0, ``environment_factory``) drives a class with a
``reset(**row)`` method and *tool methods*: the model calls a tool, TRL runs the method and
feeds its return value back as a tool message, until the model answers without a tool call;
``get_reward()`` then scores the rollout. :func:`trl_environment` builds such a class for an env
id: each tool call becomes one turn of the env (its text action), the tool's answer is the env's
next message, and ``get_reward()`` is the episode's return (the sum of the turn rewards), so
the rewards TRL logs are the env's returns.

The tools, per env family (the names and arguments a model learns to call):

* TurnSokoban: ``move(moves)`` plays ``<answer>{moves}</answer>`` (``moves``: ``"Up || Left"``).
* TurnWebShop: ``search(query)`` plays ``search[{query}]``, ``click(button)`` plays ``click[{button}]``.
* TurnSearchQA: ``search(query)`` plays ``<search> {query} </search>``, ``answer(answer)`` plays
  ``<answer> {answer} </answer>``.
* any other env: ``respond(response)`` plays ``response`` as is.

A row of the training dataset may carry ``seed`` (and ``options``): ``reset`` passes them to the
env, so the ``num_generations`` rollouts of one row play the same task (GRPO's group). A tool
called after the episode ended raises ``ValueError`` (TRL shows the message to the model, as its
docs recommend). This module does not import TRL: the classes only need its calling convention.

The turn contract's fields travel with each rollout's :class:`EpisodeRecord`: every turn's
``info["reward_components"]`` (:attr:`EpisodeRecord.reward_components`, summed by
:attr:`EpisodeRecord.component_returns`), the last turn's ``exit_status`` and ``reward_valid``
(False once a turn said so). **Faulted episodes**: a turn with ``reward_valid=False`` (the env's
code or a service it needs failed: ``exit_status`` ``env_error``/``infra_error``) ends the episode,
and ``get_reward()`` returns :attr:`TurnEnvironment.fault_reward`, ``None`` by default: TRL counts a
``None`` as NaN, so when no other reward function scores the rollout it is left out of its group's
mean and standard deviation and gets advantage 0 (its tokens still count in TRL's loss
normalisation). The record still goes to ``history``, flagged by ``reward_valid``.

**Token-exact multi-turn** (:func:`token_rollout`): instead of TRL's tool loop, a
``GRPOTrainer(rollout_func=...)`` that plays the env turn by turn through
:class:`agentgym_turn.chat.ChatView` with the trainer's tokenizer, sampling each response with the trainer's
model from the view's exact ids, and hands TRL the episode as those same ids: ``prompt_ids`` (the first
turn's input), ``completion_ids`` (every response as sampled and every env message as the view appended it),
``env_mask`` (1 on sampled ids) and the sampled tokens' ``logprobs``. Nothing is decoded and re-encoded.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

from ..core.args import is_int
from ..core.contract import FAULT_STATUSES, FaultGuard

import gymnasium as gym

__all__ = [
    "TurnEnvironment",
    "EpisodeRecord",
    "TokenEpisodeRecord",
    "trl_environment",
    "token_rollout",
    "env_return_reward",
    "completion_of",
    "seed_from_prompt",
    "play_token_episodes",
    "sample_batch",
]


@dataclass
class EpisodeRecord:
    """One rollout as the env saw it: the reset seed, the text actions played, their rewards and the turn
    contract's fields (``reward_components`` per turn; ``exit_status`` of the last turn; ``reward_valid``: no
    fault ended the episode, so its return scores the policy)."""

    env_id: str
    seed: int | None
    options: dict[str, Any] | None
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    done: bool = False
    reward_components: list[dict[str, float]] = field(default_factory=list)
    exit_status: str = "ok"
    reward_valid: bool = True

    @property
    def episode_return(self) -> float:
        """The sum of the turn rewards (0.0 before any turn)."""
        return float(sum(self.rewards))

    @property
    def component_returns(self) -> dict[str, float]:
        """Each reward component summed over the turns (they add up to :attr:`episode_return`)."""
        totals: dict[str, float] = {}
        for turn in self.reward_components:
            for name, value in turn.items():
                totals[name] = totals.get(name, 0.0) + value
        return totals


class TurnEnvironment:
    """Base of the classes :func:`trl_environment` builds (use those: they carry the env id and tools).

    Attributes:
        env: The Gymnasium env (``gymnasium.make(env_id, **env_kwargs)``), built once per instance.
        episode: The current rollout's :class:`EpisodeRecord`.
        history: Class attribute; when a list, every scored rollout's record is appended to it
            (in the order TRL scores them), e.g. to check the logged rewards.
        fault_reward: Class attribute; what :meth:`get_reward` returns for a faulted episode
            (``reward_valid`` False): ``None`` (default; TRL leaves the rollout unscored) or a number.
    """

    env_id: ClassVar[str] = ""
    env_kwargs: ClassVar[dict[str, Any]] = {}
    history: ClassVar[list[EpisodeRecord] | None] = None
    fault_reward: ClassVar[float | None] = None

    def __init__(self) -> None:
        import agentgym_turn  # noqa: F401  (registers the ids in TRL's process)

        self.env = FaultGuard(
            gym.make(self.env_id, **self.env_kwargs)
        )  # an env that raises ends its episode as faulted
        self.episode = EpisodeRecord(self.env_id, None, None, done=True)

    def reset(self, **row: Any) -> str:
        """Start an episode; ``row`` is the dataset row (``seed`` and ``options`` are used). Returns the first message."""
        seed = row.get("seed")
        seed = None if seed is None else int(seed)
        options = row.get("options") or None
        observation, _ = self.env.reset(seed=seed, options=options)
        self.episode = EpisodeRecord(self.env_id, seed, options)
        return observation

    def get_reward(self) -> float | None:
        """The episode's return so far (TRL calls this once per finished rollout), or :attr:`fault_reward` when a
        fault ended it: its return is not the policy's."""
        if self.history is not None:
            self.history.append(self.episode)
        return self.episode.episode_return if self.episode.reward_valid else self.fault_reward

    def _turn(self, action: str) -> str:
        """Play one turn with the env's text action; return the env's next message."""
        if self.episode.done:
            raise ValueError("The episode is over: give your final answer without calling a tool.")
        observation, reward, terminated, truncated, info = self.env.step(action)
        episode = self.episode
        episode.actions.append(action)
        episode.rewards.append(float(reward))
        episode.reward_components.append({str(k): float(v) for k, v in (info.get("reward_components") or {}).items()})
        episode.exit_status = str(info.get("exit_status") or ("truncated" if truncated and not terminated else "ok"))
        episode.reward_valid = episode.reward_valid and bool(
            info.get("reward_valid", episode.exit_status not in FAULT_STATUSES)
        )
        episode.done = (
            bool(terminated or truncated) or not episode.reward_valid
        )  # nothing after a fault is the policy's
        return observation + ("\n(The episode is over.)" if episode.done else "")


class _SokobanTools(TurnEnvironment):
    def move(self, moves: str) -> str:
        """
        Move the player in the Sokoban puzzle.

        Args:
            moves: One or more moves among Up, Down, Left and Right, separated by ||, e.g. "Up || Left".

        Returns:
            What happened and the new grid.
        """
        return self._turn(f"<answer>{moves}</answer>")


class _WebShopTools(TurnEnvironment):
    def search(self, query: str) -> str:
        """
        Search the shop.

        Args:
            query: The search keywords.

        Returns:
            The results page.
        """
        return self._turn(f"search[{query}]")

    def click(self, button: str) -> str:
        """
        Click a button or link of the current page.

        Args:
            button: The button's text, one of the available actions, e.g. "buy now".

        Returns:
            The next page.
        """
        return self._turn(f"click[{button}]")


class _SearchQATools(TurnEnvironment):
    def search(self, query: str) -> str:
        """
        Search the knowledge base.

        Args:
            query: The search query.

        Returns:
            The top passages.
        """
        return self._turn(f"<search> {query} </search>")

    def answer(self, answer: str) -> str:
        """
        Give the final answer to the question.

        Args:
            answer: The answer, a short phrase (or the option letter for a multiple-choice question).

        Returns:
            Whether the answer was right.
        """
        return self._turn(f"<answer> {answer} </answer>")


class _RespondTools(TurnEnvironment):
    def respond(self, response: str) -> str:
        """
        Play one turn of the environment.

        Args:
            response: The whole response of the turn, in the format the environment asked for.

        Returns:
            The environment's next message.
        """
        return self._turn(response)


_FAMILIES = {"TurnSokoban": _SokobanTools, "TurnWebShop": _WebShopTools, "TurnSearchQA": _SearchQATools}


def trl_environment(env_id: str, /, *, tools: str = "auto", **env_kwargs: Any) -> type[TurnEnvironment]:
    """A class to pass as ``GRPOTrainer(environment_factory=...)`` that plays ``env_id``.

    Args:
        env_id: A registered id (also ``"agentgym_turn/Remote-v0"`` with ``base_url``/``env_id``
            keywords for a served env).
        tools: ``"auto"`` (the env family's tools, see the module docstring) or ``"respond"`` (one
            ``respond(response)`` tool that plays the whole response as is).
        **env_kwargs: Passed to ``gymnasium.make`` (e.g. ``prompt_style="compact"``).

    Returns:
        A subclass of :class:`TurnEnvironment` named after the env (TRL logs its reward as
        ``rewards/<that name>/mean``).
    """
    _check_env_id(env_id, "trl_environment")
    if tools not in ("auto", "respond"):
        raise ValueError(f"trl_environment: tools must be 'auto' or 'respond', got {tools!r}.")
    family = env_id.split("/")[-1].split("-")[0]
    base = _FAMILIES.get(family, _RespondTools) if tools == "auto" else _RespondTools
    name = "".join(ch for ch in env_id.split("/")[-1].replace("-", "_") if ch.isalnum() or ch == "_") + "Environment"
    return type(name, (base,), {"env_id": env_id, "env_kwargs": dict(env_kwargs), "__module__": __name__})


# --------------------------------------------------------------------------- token-exact multi-turn


@dataclass
class TokenEpisodeRecord(EpisodeRecord):
    """A :class:`EpisodeRecord` of :func:`token_rollout`: also each response's sampled ids and their log-probs."""

    response_ids: list[list[int]] = field(default_factory=list)
    logprobs: list[list[float]] = field(default_factory=list)
    success: bool = False


def completion_of(view: Any) -> tuple[list[int], list[int], list[int]]:
    """``(prompt_ids, completion_ids, mask)`` of a :class:`~agentgym_turn.chat.ChatView` episode kept whole
    (``history_window=None``): the first turn's input, then everything after it up to the end of the last
    response, exactly the view's ids; ``mask`` is the view's, 1 on sampled ids and 0 on env/template tokens.

    The completion ends with the last response as sampled (its end-of-turn token when the policy emitted it,
    none when ``max_new_tokens`` cut it: trainers read that as a cut completion), so the template's tail after
    it and a final observation nobody answered are left out. Needs at least one response.
    """
    samples = view.samples()
    if len(samples) != 1:
        raise ValueError(
            "completion_of: the episode has several training sequences (a history window slid); "
            "one prompt and one completion need ChatView(history_window=None)."
        )
    sequence = samples[0]
    spans = [t.response for t in sequence.turns if t.response is not None]
    if not spans:
        raise ValueError("completion_of: the episode has no response yet.")
    start, end = spans[0][0], spans[-1][1]
    return list(sequence.ids[:start]), list(sequence.ids[start:end]), list(sequence.mask[start:end])


def seed_from_prompt(prompt: Any) -> int | None:
    """The default ``seed_of`` of :func:`token_rollout`: a prompt that is the seed (an int, or its text, e.g. the
    dataset column ``"prompt": [str(s) for s in seeds]``), or a chat prompt whose last message's content is;
    ``None`` for an empty prompt (the env draws a task of its own)."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        prompt = prompt[-1].get("content")
    if is_int(prompt):
        return int(prompt)
    if isinstance(prompt, str):
        text = prompt.strip()
        if not text:
            return None
        try:
            return int(text)
        except ValueError:
            pass
    raise ValueError(
        f"token_rollout: cannot read a seed from the prompt {prompt!r}; make the dataset's prompt the seed "
        'as text ("prompt": [str(s) for s in seeds]) or pass seed_of=a function of the prompt.'
    )


def env_return_reward(
    completions: Sequence[Any],
    env_return: Sequence[float],
    env_reward_valid: Sequence[bool] | None = None,
    **kwargs: Any,
) -> list[float | None]:
    """A reward function for ``GRPOTrainer(reward_funcs=[env_return_reward])`` with :func:`token_rollout`: each
    episode's return (the sum of its turn rewards); ``None`` for an episode a fault ended (``reward_valid``
    False: its return is not the policy's), which TRL leaves out of its group's statistics. TRL logs it as
    ``rewards/env_return_reward/mean``."""
    valid = [True] * len(env_return) if env_reward_valid is None else env_reward_valid
    return [float(r) if ok else None for r, ok in zip(env_return, valid)]


def token_rollout(
    env_id: str,
    /,
    *,
    max_turns: int = 8,
    max_new_tokens: int = 64,
    temperature: float | None = None,
    seed_of: Callable[[Any], int | None] | None = None,
    history_window: int | str | None = None,
    system_prompt: str | None = None,
    split_system_prompt: bool = True,
    max_length: int | None = None,
    **env_kwargs: Any,
) -> Callable[[list[Any], Any], dict[str, list[Any]]]:
    """A ``rollout_func`` for TRL's ``GRPOTrainer`` that plays ``env_id`` token-exactly, several turns an episode.

    For each prompt it receives, it plays one episode (TRL >= 1.16 passes each dataset row ``num_generations``
    times in a row, ``num_generations_eval`` in evaluation, and wants one completion per prompt it passed: the
    copies of a row form GRPO's group). The env is reset with ``seed_of(prompt)`` (default
    :func:`seed_from_prompt`: the prompt is the seed as text), so a group plays one task. Each turn, the active
    episodes' inputs (:meth:`ChatView.tokens` ``.ids``) are sampled in one batch with the trainer's model, left
    padded with explicit position ids, until an end-of-turn id (``view.format.stop_ids``) or ``max_new_tokens``;
    the sampled ids go to :meth:`ChatView.step` as they are. An episode ends when the env terminates or
    truncates, a fault ends it, it has played ``max_turns`` turns, or its next input leaves no room under
    ``max_length`` (default: the model's ``max_position_embeddings``).

    Returns a function ``(prompts, trainer) -> dict`` with TRL's fields: ``prompt_ids`` (the first turn's input),
    ``completion_ids`` (:func:`completion_of`: responses and env messages, exactly the view's ids),
    ``env_mask`` (1 on sampled ids, 0 on env and template tokens: TRL's loss mask), ``logprobs`` (each sampled
    id's log-probability under the sampling distribution, ``log_softmax(logits / temperature)``, as TRL
    computes its own; 0.0 on env tokens, which every use of them in TRL masks out), and fields the reward
    functions receive by name: ``env_return``, ``env_reward_valid``, ``env_success``, ``env_turns``,
    ``env_seed`` (see :func:`env_return_reward`). Its attribute ``history`` (``None``; set a list to keep them)
    collects a :class:`TokenEpisodeRecord` per episode.

    Args:
        env_id: A registered id.
        max_turns: Turns an episode plays at most.
        max_new_tokens: Tokens a response has at most.
        temperature: Sampling temperature; ``None`` uses the trainer's (``GRPOConfig.temperature``), which TRL
            also divides its logits by when it scores the completions.
        seed_of: The env's reset seed for a prompt (see above).
        history_window: Only ``None``: TRL trains one prompt and one completion per episode, which is the context
            every response was sampled in only when the episode is kept whole.
        system_prompt, split_system_prompt: Passed to :class:`~agentgym_turn.chat.ChatView`.
        max_length: Tokens an episode's sequence (prompt and completion) has at most.
        **env_kwargs: Passed to ``gymnasium.make``.
    """
    _check_env_id(env_id, "token_rollout")
    if history_window is not None:
        raise ValueError(
            "token_rollout: history_window must be None: TRL trains each episode as one prompt and one "
            "completion, the context its responses were sampled in only when no turn is dropped."
        )
    for name, value in (("max_turns", max_turns), ("max_new_tokens", max_new_tokens)):
        if not is_int(value, 1):
            raise ValueError(f"token_rollout: {name} must be an integer >= 1, got {value!r}.")
    if max_length is not None and not is_int(max_length, 2):
        raise ValueError(f"token_rollout: max_length must be None or an integer >= 2, got {max_length!r}.")
    if temperature is not None and not (isinstance(temperature, (int, float)) and temperature > 0):
        raise ValueError(f"token_rollout: temperature must be None or > 0, got {temperature!r}.")
    read_seed = seed_of or seed_from_prompt
    settings = dict(max_turns=max_turns, max_new_tokens=max_new_tokens, max_length=max_length)
    view_kwargs = dict(system_prompt=system_prompt, split_system_prompt=split_system_prompt)

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        tokenizer = getattr(trainer, "_tokenizer", None) or trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model) if hasattr(trainer, "accelerator") else trainer.model
        temp = float(temperature if temperature is not None else getattr(trainer, "temperature", 1.0))
        seeds = [read_seed(p) for p in prompts]
        records = play_token_episodes(
            env_id,
            model,
            tokenizer,
            seeds,
            temperature=temp,
            env_kwargs=env_kwargs,
            view_kwargs=view_kwargs,
            **settings,
        )
        out: dict[str, list[Any]] = {
            k: []
            for k in (
                "prompt_ids",
                "completion_ids",
                "logprobs",
                "env_mask",
                "env_return",
                "env_reward_valid",
                "env_success",
                "env_turns",
                "env_seed",
            )
        }
        for view, record in records:
            prompt_ids, completion_ids, mask = completion_of(view)
            out["prompt_ids"].append(prompt_ids)
            out["completion_ids"].append(completion_ids)
            out["env_mask"].append(mask)
            out["logprobs"].append(_aligned_logprobs(view, len(prompt_ids), len(completion_ids), record.logprobs))
            out["env_return"].append(record.episode_return)
            out["env_reward_valid"].append(record.reward_valid)
            out["env_success"].append(record.success)
            out["env_turns"].append(len(record.response_ids))
            out["env_seed"].append(record.seed)
            if rollout.history is not None:
                rollout.history.append(record)
        return out

    rollout.history = None  # type: ignore[attr-defined]
    rollout.__name__ = f"token_rollout_{env_id.split('/')[-1]}"
    return rollout


def _check_env_id(env_id: Any, who: str) -> None:
    """Raise naming ``who`` unless ``env_id`` is registered (after importing the suite, which registers its ids)."""
    if not isinstance(env_id, str) or env_id not in gym.registry:
        import agentgym_turn  # noqa: F401

        if not isinstance(env_id, str) or env_id not in gym.registry:
            raise ValueError(f"{who}: env_id={env_id!r} is not a registered id; see agentgym_turn.env_ids().")


def _aligned_logprobs(
    view: Any, prompt_length: int, completion_length: int, logprobs: list[list[float]]
) -> list[float]:
    """Per completion token: the sampled id's log-prob on each response's ids, 0.0 elsewhere."""
    out = [0.0] * completion_length
    spans = [t.response for t in view.samples()[0].turns if t.response is not None]
    for (start, end), values in zip(spans, logprobs):
        out[start - prompt_length : end - prompt_length] = values
    return out


def play_token_episodes(
    env_id: str,
    model: Any,
    tokenizer: Any,
    seeds: Sequence[int | None],
    *,
    max_turns: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    max_length: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    view_kwargs: dict[str, Any] | None = None,
) -> list[tuple[Any, TokenEpisodeRecord]]:
    """Play one episode per seed, all turns batched, sampling from each :class:`ChatView`'s exact ids (see
    :func:`token_rollout`); returns each episode's view and record."""
    from ..chat import ChatView

    import agentgym_turn  # noqa: F401  (registers the ids)

    views = [
        ChatView(FaultGuard(gym.make(env_id, **(env_kwargs or {}))), tokenizer=tokenizer, **(view_kwargs or {}))
        for _ in seeds
    ]
    records = []
    for view, seed in zip(views, seeds):
        view.reset(seed=None if seed is None else int(seed))
        records.append(TokenEpisodeRecord(env_id, None if seed is None else int(seed), None, done=False))
    limit = max_length or int(getattr(model.config, "max_position_embeddings", 0) or 0) or None
    stop_ids = views[0].format.stop_ids if views else frozenset()
    active = list(range(len(views)))
    while active:
        inputs = [views[i].tokens().ids for i in active]
        caps = [max_new_tokens if limit is None else min(max_new_tokens, limit - len(ids)) for ids in inputs]
        for i, ids, cap in zip(active, inputs, caps):
            if cap < 1 and not records[i].response_ids:
                raise ValueError(
                    f"token_rollout: the first input of {env_id} ({len(ids)} tokens) leaves no room for a "
                    f"response under max_length={limit}."
                )
        playing = [(i, ids, cap) for i, ids, cap in zip(active, inputs, caps) if cap >= 1]
        sampled = (
            sample_batch(
                model,
                [ids for _, ids, _ in playing],
                [cap for *_, cap in playing],
                stop_ids,
                temperature=temperature,
                vocab_size=len(tokenizer),
                pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
            )
            if playing
            else []
        )
        for (i, _, _), (ids, logps) in zip(playing, sampled):
            _, reward, terminated, truncated, info = views[i].step(ids)
            record = records[i]
            record.response_ids.append(ids)
            record.logprobs.append(logps)
            record.actions.append(views[i].messages[-2]["content"])
            record.rewards.append(float(reward))
            record.reward_components.append(
                {str(k): float(v) for k, v in (info.get("reward_components") or {}).items()}
            )
            record.exit_status = str(info.get("exit_status") or ("truncated" if truncated and not terminated else "ok"))
            record.reward_valid = record.reward_valid and bool(
                info.get("reward_valid", record.exit_status not in FAULT_STATUSES)
            )
            record.success = bool(info.get("success", False))
            record.done = bool(terminated or truncated) or not record.reward_valid
        active = [i for i, _, _ in playing if not records[i].done and len(records[i].response_ids) < max_turns]
    for view in views:
        view.close()
    return list(zip(views, records))


def sample_batch(
    model: Any,
    inputs: Sequence[Sequence[int]],
    caps: Sequence[int],
    stop_ids: Any,
    *,
    temperature: float = 1.0,
    vocab_size: int | None = None,
    pad_id: int = 0,
) -> list[tuple[list[int], list[float]]]:
    """Sample one response per input with a Hugging Face causal LM: ``(ids, logprobs)`` each, ending at the first
    id in ``stop_ids`` (kept) or after ``caps[k]`` ids. Inputs are left padded, with position ids counted from
    each row's first real token and a KV cache; ids at or above ``vocab_size`` (padding rows of the embedding)
    are never sampled. A log-prob is ``log_softmax(logits / temperature)`` at the sampled id."""
    import torch

    device = next(model.parameters()).device
    width = max(len(ids) for ids in inputs)
    input_ids = torch.tensor([[pad_id] * (width - len(ids)) + list(ids) for ids in inputs], device=device)
    attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in inputs], device=device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    stops = torch.tensor(sorted(stop_ids), device=device, dtype=torch.long)
    out_ids: list[list[int]] = [[] for _ in inputs]
    out_logps: list[list[float]] = [[] for _ in inputs]
    done = [False] * len(inputs)
    accepted = inspect.signature(model.forward).parameters
    cache_name = "cache" if "cache" in accepted else "past_key_values"  # transformers 5.2x renamed it
    extra = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            result = model(
                input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True, **extra
            )
            for _ in range(max(caps)):
                logits = result.logits[:, -1, :].float()
                if vocab_size is not None:
                    logits = logits[:, :vocab_size]
                logps = torch.log_softmax(logits / temperature, dim=-1)
                chosen = torch.multinomial(logps.exp(), 1)
                chosen_logps = logps.gather(-1, chosen).squeeze(-1).tolist()
                is_stop = torch.isin(chosen.squeeze(-1), stops).tolist()
                for row, (token, logp, stop) in enumerate(zip(chosen.squeeze(-1).tolist(), chosen_logps, is_stop)):
                    if done[row]:
                        continue
                    out_ids[row].append(int(token))
                    out_logps[row].append(float(logp))
                    done[row] = stop or len(out_ids[row]) >= caps[row]
                if all(done):
                    break
                attention = torch.cat([attention, attention.new_ones((len(inputs), 1))], dim=-1)
                positions = positions[:, -1:] + 1
                cache = getattr(result, "cache", None) or getattr(result, "past_key_values", None)
                result = model(
                    input_ids=chosen,
                    attention_mask=attention,
                    position_ids=positions,
                    use_cache=True,
                    **{cache_name: cache},
                    **extra,
                )
    finally:
        model.train(was_training)
    return list(zip(out_ids, out_logps))
