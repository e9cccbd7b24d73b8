"""A chat view of any text-turn env: system prompt apart, messages with a history window, no torch.

:class:`ChatView` wraps an env made with ``gymnasium.make`` and returns, from ``reset`` and
``step``, the conversation a chat model should see next: a list of ``{"role", "content"}``
messages ready for ``tokenizer.apply_chat_template``::

    [{"role": "system", "content": <the env's task, rules and answer format>},
     {"role": "user", "content": <the first state>},
     {"role": "assistant", "content": <response 1>},
     {"role": "user", "content": <"Reward: -0.1\\n" if reward_template> + <observation 1>},
     ...]

The system prompt is split from the first state by :func:`split_first_message`: an env may say
where its instructions end with a ``split_first_message(message) -> (system_prompt, first_state)``
method on the unwrapped env; otherwise the split is found generically from the env's current state
text (see that function). The system message is always kept; ``history_window=k`` keeps the
last ``k`` user messages (the current one included) and the assistant responses between them,
as RAGEN's ``max_context_window`` keeps the last ``k`` turns after its fixed prefix;
``history_window="compact"`` keeps only the env's current state text (what ``render()`` shows).
Rewards, termination and ``info`` pass through unchanged.

With ``tokenizer=`` (any Hugging Face tokenizer with a chat template), :meth:`ChatView.tokens` also
gives the episode as token ids, per-token loss mask and turn ids, built by appending each env message's
tokens to the ids the policy sampled (pass those ids to ``step``), never by re-rendering the history:
the rules of :mod:`agentgym_turn.tokens`, which the reference trainer's rollouts use too.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
from gymnasium import spaces

from ..core.args import is_int
from ..core.spaces import TurnText
from .assembly import (
    COMPACT,
    KEEP,
    REASONING_POLICIES,
    STRIP,
    ChatFormat,
    ChatTemplateError,
    EpisodeTokens,
    TokenEpisode,
    as_token_ids,
    continues_with,
)

#: A chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = dict[str, str]

#: RAGEN's per-turn reward message, in one line: ``"Reward: -0.1\n"`` before the observation.
DEFAULT_REWARD_TEMPLATE = "Reward: {reward}\n"

_ROLES = ("system", "user", "assistant")
# Two-line headers RAGEN puts before a state ("Turn 1:\nState:") belong to the state, not the prompt.
_MAX_HEADER_LINES = 2


def split_first_message(env: gym.Env, message: str) -> tuple[str, str]:
    """Split an env's first message into ``(system_prompt, first_state)``.

    Args:
        env: The env (wrapped or not) whose ``reset`` just returned ``message``.
        message: The first observation of the episode.

    Returns:
        ``system_prompt`` (the task, rules and answer format; ``""`` when none can be told apart)
        and ``first_state``. Nothing is lost: ``message`` is ``system_prompt``, whitespace, then
        ``first_state``.

    Rules, first that applies:

    1. The unwrapped env defines ``split_first_message(message)``: its answer.
    2. The message ends with the env's state text (``_state_text()``, what ``render("ansi")``
       shows; for a served env, the server's render): the state is that suffix (Sokoban's full
       and compact styles, WebShop).
    3. The state text (else its first line) starts a line of the message: the state starts there, or
       at the blank line just before when at most two header lines lie between (RAGEN's
       ``Turn 1:`` / ``State:``; TurnSearchQA's ``Question:`` line).
    4. Otherwise the whole message is the first state and the system prompt is ``""``.
    """
    base = env.unwrapped
    hook = getattr(base, "split_first_message", None)
    if callable(hook):
        system_prompt, first_state = hook(message)
        return str(system_prompt), str(first_state)
    state = _state_text(base)
    state = state.strip("\n") if isinstance(state, str) else ""
    if not state:
        return "", message
    if message.endswith(state):
        return _parts(message, len(message) - len(state))
    at = message.rfind("\n" + state)
    if at < 0:
        at = message.rfind("\n" + state.split("\n", 1)[0])
    if at < 0:
        return "", message
    start = at + 1
    blank = message.rfind("\n\n", 0, start)
    if blank >= 0 and message.count("\n", blank + 2, start) <= _MAX_HEADER_LINES:
        start = blank + 2
    return _parts(message, start)


def _state_text(base: Any) -> str:
    """The env's current state as text: a ``TurnEnv``'s ``_state_text()``, or a served env's ``state()["render"]``."""
    state_of: Callable[[], Any] | None = getattr(base, "_state_text", None)
    if callable(state_of):
        return state_of()
    served_state = getattr(base, "state", None)  # agentgym_turn/Remote-v0: the server renders the state
    if callable(served_state) and getattr(base, "served_env_id", None):
        return (served_state() or {}).get("render") or ""
    return ""


def _parts(message: str, start: int) -> tuple[str, str]:
    """``(message[:start] without trailing whitespace, message[start:] without leading newlines)``."""
    system_prompt = message[:start].rstrip()
    first_state = message[start:].lstrip("\n")
    return (system_prompt, first_state) if system_prompt else ("", message)


class ChatSpace(spaces.Sequence):
    """Lists (or tuples) of messages ``{"role": "system" | "user" | "assistant", "content": text}``."""

    def __init__(self, max_content_length: int, seed: Any = None):
        role = spaces.Text(9, min_length=4, charset="abcdefghijklmnopqrstuvwxyz")
        super().__init__(spaces.Dict({"role": role, "content": TurnText(max_content_length)}), seed=seed)
        self.max_content_length = max_content_length

    def contains(self, x: Any) -> bool:
        return isinstance(x, (list, tuple)) and all(
            isinstance(m, dict)
            and set(m) == {"role", "content"}
            and m["role"] in _ROLES
            and isinstance(m["content"], str)
            and len(m["content"]) <= self.max_content_length
            for m in x
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChatSpace) and other.max_content_length == self.max_content_length

    def __hash__(self) -> int:
        return hash(("ChatSpace", self.max_content_length))


class ChatView(gym.Wrapper):
    """Observations become the chat messages a model should answer next (see the module docstring).

    Args:
        env: A text-turn env (any registered id, a served env, or your own ``TurnEnv``).
        history_window: Keep the last ``history_window`` user messages (the current one
            included) and the responses between them, after the system message. ``None`` keeps
            the whole episode; ``1`` gives a Markov view (system + current observation);
            ``"compact"`` the system message and one user message holding the env's current state
            text (``render()``: the board, the page, the question with the searches made).
        reward_template: When set, each observation after a step starts with this template
            filled with the turn's reward as the env lets an agent see it (``TurnEnv.shown_reward``: search
            QA shows a hidden answer's score only at the end) (``DEFAULT_REWARD_TEMPLATE`` gives
            ``"Reward: -0.1\\n"``, RAGEN's reward message). ``None`` (default) adds nothing.
        system_prompt: When set, the system message is this text followed by a blank line and the
            env's instructions (e.g. RAGEN's ``"You're a helpful assistant."``); when ``None`` it
            is the env's instructions alone, and left out when the env has none.
        tokenizer: A Hugging Face tokenizer with a chat template: :meth:`tokens` and :meth:`samples`
            then give the episode's exact token ids, and ``step`` also takes the ids the policy
            sampled (a list of ints, ending with the end-of-turn token when the policy emitted it).
        split_system_prompt: Split the env's first message into instructions (the system message)
            and the first state (default); ``False`` makes the whole first message the first user
            message (the reference trainer's default, ``--split-system-prompt`` off).
        reasoning: With a tokenizer, how :meth:`tokens` shows earlier responses: ``"keep"`` (default) as sampled,
            ``"strip"`` as the chat template writes them in the history (earlier reasoning dropped, a new sequence
            at each rewrite; see :class:`~agentgym_turn.tokens.TokenEpisode`). The messages are the same either way:
            the template itself strips them.

    Attributes (updated on every ``reset`` and ``step``):
        system_prompt: The system message's content (``""`` when there is none).
        instructions: The env's part of it, split from the first message.
        first_state: The first state, the first user message.
        messages: The whole episode's messages, unwindowed.
        episode_tokens: With a tokenizer, the episode's :class:`~agentgym_turn.tokens.TokenEpisode`
            (``tokens_per_turn``, ``new_tokens_per_turn``, the whole ``conversation``).
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        history_window: int | None = None,
        reward_template: str | None = None,
        system_prompt: str | None = None,
        tokenizer: Any = None,
        split_system_prompt: bool = True,
        reasoning: str = KEEP,
    ):
        super().__init__(env)
        if reasoning not in REASONING_POLICIES:
            raise ValueError(f"ChatView: reasoning must be one of {REASONING_POLICIES}, got {reasoning!r}.")
        if history_window is not None and history_window != COMPACT and not is_int(history_window, 1):
            raise ValueError(
                f"ChatView: history_window must be None, an integer >= 1 or {COMPACT!r}, got {history_window!r}."
            )
        if reward_template is not None:
            if not isinstance(reward_template, str):
                raise TypeError(
                    f"ChatView: reward_template must be a str or None, got {type(reward_template).__name__}."
                )
            try:
                reward_template.format(reward=0.0)
            except (KeyError, IndexError, ValueError) as err:
                raise ValueError(
                    f"ChatView: reward_template={reward_template!r} must be a str.format template with only "
                    f"the field {{reward}} ({err!r})."
                ) from None
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise TypeError(f"ChatView: system_prompt must be a str or None, got {type(system_prompt).__name__}.")
        self.history_window = history_window
        self.reward_template = reward_template
        self.extra_system_prompt = system_prompt
        self.split_system_prompt = bool(split_system_prompt)
        self.reasoning = reasoning
        self.format = ChatFormat(tokenizer, system_prompt=system_prompt) if tokenizer is not None else None
        if self.format is not None and reasoning == STRIP and self.format.strip_problem:
            raise ChatTemplateError(self.format.strip_problem)
        self.episode_tokens: TokenEpisode | None = None
        self._states: list[str | None] = []
        inner = env.observation_space
        limit = getattr(inner, "max_length", 65_536)
        # Room for a system prompt and reward line on top of an observation of the env's length.
        self.observation_space = ChatSpace(2 * int(limit) + 4096)
        self.system_prompt = ""
        self.instructions = ""
        self.first_state = ""
        self.messages: list[Message] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        if self.split_system_prompt:
            self.instructions, self.first_state = split_first_message(self.env, observation)
        else:
            self.instructions, self.first_state = "", observation
        parts = [p for p in (self.extra_system_prompt, self.instructions) if p]
        self.system_prompt = "\n\n".join(parts)
        self.messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        self.messages.append({"role": "user", "content": self.first_state})
        self._states = [self._current_state(self.first_state)]
        if self.format is not None:
            self.episode_tokens = TokenEpisode(self.format, self.history_window, reasoning=self.reasoning)
            self.episode_tokens.open(self.first_state, self.instructions or None, state=self._states[-1])
        return self.view(), info

    def _current_state(self, observation: str) -> str | None:
        """The env's state text now (``"compact"`` only; the observation when the env shows none)."""
        if self.history_window != COMPACT:
            return None
        return _state_text(self.env.unwrapped) or observation

    def step(self, action: Any) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        """Play one response: its text, or (with a tokenizer) the ids the policy sampled, which are decoded for
        the env and kept as they are in :meth:`tokens` (a text response is encoded canonically and closed with
        the template's end-of-turn token)."""
        ids = self._response_ids(action)
        if ids is not None:
            text = self.format.decode_response(ids)
        else:
            text = (
                action
                if isinstance(action, str)
                else action.decode("utf-8", "replace")
                if isinstance(action, bytes)
                else str(action)
            )
            if self.format is not None:
                ids = self.format.encode_response(text)
        observation, reward, terminated, truncated, info = self.env.step(text)
        self.messages.append({"role": "assistant", "content": text})
        show = getattr(self.env.unwrapped, "shown_reward", None)  # what the env lets an agent see mid-episode
        shown = show(reward, terminated, truncated, info) if callable(show) else reward
        prefix = self.reward_template.format(reward=shown) if self.reward_template is not None else ""
        self.messages.append({"role": "user", "content": prefix + observation})
        self._states.append(self._current_state(prefix + observation))
        if self.episode_tokens is not None:
            self.episode_tokens.respond(ids, text)
            if continues_with(terminated, info):
                self.episode_tokens.observe(prefix + observation, state=self._states[-1])
        return self.view(), reward, terminated, truncated, info

    def _response_ids(self, action: Any) -> list[int] | None:
        """``action`` as token ids (:func:`~agentgym_turn.tokens.as_token_ids`), or ``None`` for a text response."""
        values = as_token_ids(action)
        if values is not None and self.format is None:
            raise ValueError("ChatView: a response given as token ids needs ChatView(env, tokenizer=...).")
        return values

    def tokens(self) -> EpisodeTokens:
        """The model's input now, as exact token ids: ``ids``, ``mask`` (1 on the policy's sampled ids only),
        ``roles``, ``turn_ids`` and per-turn spans, under the history window, ending with the generation prompt.
        Sample the next response from ``ids`` and pass the sampled ids to :meth:`step`."""
        return self._tokens().view()

    def samples(self) -> list[EpisodeTokens]:
        """The episode's sequences to train on (see :meth:`agentgym_turn.tokens.TokenEpisode.samples`): one
        sequence for the whole episode without a history window (and with ``reasoning="keep"``), one per turn once a
        window slides, one per rewrite under ``reasoning="strip"``."""
        return self._tokens().samples()

    def _tokens(self) -> TokenEpisode:
        if self.format is None:
            raise ValueError("ChatView.tokens: make the view with a tokenizer, ChatView(env, tokenizer=tokenizer).")
        if self.episode_tokens is None:
            raise ValueError("ChatView.tokens: call reset first.")
        return self.episode_tokens

    def view(self) -> list[Message]:
        """The messages the model sees now: the system message and the history window (new dicts)."""
        head = 1 if self.messages and self.messages[0]["role"] == "system" else 0
        body = self.messages[head:]
        if self.history_window == COMPACT:
            body = [{"role": "user", "content": self._states[-1] or body[-1]["content"]}]
        elif self.history_window is not None:
            # body alternates user, assistant, ..., user: the last k users are its last 2k-1 messages.
            body = body[-(2 * self.history_window - 1) :]
        return [dict(m) for m in self.messages[:head] + body]
