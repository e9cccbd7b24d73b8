"""``webshop_dialog_v0``: a customer who knows the goal and an assistant who operates the shop.

A PettingZoo AEC env (strict turn-taking: exactly one agent acts at a time). See
:class:`WebShopDialogEnv` for roles, spaces, rewards and info keys, and ``docs/envs/webshop_dialog.md``.
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Any, Sequence

from gymnasium.utils import seeding
from pettingzoo import AECEnv

from ..core import InvalidAction, TurnText, find_tagged, sanitize_text, snippet, strip_think
from ..core.args import is_int
from ..core.turn_env import DEFAULT_MAX_ACTION_LENGTH, DEFAULT_MAX_OBSERVATION_LENGTH
from ..webshop.env import TurnWebShopEnv
from .customer import TERSENESS, GoalFacts, customer_answer, disclosed, goal_facts, opening_request

CUSTOMER, ASSISTANT = "customer", "assistant"
#: The agents, in the order of ``possible_agents``; the customer moves first.
AGENTS = (CUSTOMER, ASSISTANT)
#: The ``info`` keys of both agents after every reset and step.
INFO_KEYS = (
    "turn",
    "action_is_valid",
    "action_is_effective",
    "success",
    "score",
    "page",
    "goal_index",
    "messages",
    "facts_disclosed",
    "facts_total",
    "purchased_asin",
    "shop_actions",
    "active_agent",
)
#: What the shop's pages show where TurnWebShop shows the instruction: the assistant must ask.
SHOWN_INSTRUCTION = "Ask the customer what they want."

_DONE = re.compile(r"<\s*done\s*/\s*>", re.IGNORECASE)
_SAY_OPEN = re.compile(r"<\s*(?:/\s*)?say\b", re.IGNORECASE)  # no two adjacent \s*: linear
_CUSTOMER_HINT = "Write <say>your message</say> to answer the assistant, or <done/> to end the conversation."
_ASSISTANT_HINT = " Or write <say>your message</say> to talk to the customer."

_CUSTOMER_INTRO = (
    "You are a customer of an online shop, talking to a shopping assistant. The assistant can "
    "search the shop and buy for you, but does not know what you want: answer its questions "
    "truthfully. Each turn, write <say>your message</say>, or <done/> to end the conversation "
    "(if nothing was bought, the purchase scores 0).\n\n"
    "What you want: {instruction}\n"
    "Product: {product}\nAttributes: {attributes}\nOptions: {options}\nPrice limit: {price}\n\n"
    "Start with a short request, for example: {opening}"
)
_ASSISTANT_INTRO = (
    "You are a shopping assistant on WebShop. A customer wants a product that only they know: "
    "ask them about it, then find it, choose its options and buy it. Each turn, write exactly "
    "one of: a shop action, search[your query] or click[x] with x one of the available actions; "
    "or <say>your message</say> to talk to the customer. You may think first inside "
    "<think>...</think>.\n\nThe shop:\n"
)


def next_agent(mover: str, move: Any) -> str:
    """Who moves after ``mover`` played ``move`` (a parsed move or an :class:`InvalidAction`): a
    message passes the turn to the other agent; a shop action or an invalid move keeps it."""
    if isinstance(move, tuple) and move[0] == "say":
        return ASSISTANT if mover == CUSTOMER else CUSTOMER
    return mover


def parse_customer_move(response: str) -> tuple[str, str] | InvalidAction:
    """``("say", text)`` for ``<say>text</say>``, ``("done", "")`` for ``<done/>``, else why not."""
    if _SAY_OPEN.search(response):
        tagged = find_tagged(response, ("say",))
        return tagged if isinstance(tagged, InvalidAction) else ("say", tagged.content)
    if _DONE.search(strip_think(response)):
        return ("done", "")
    return InvalidAction("No move found.")


def assistant_question(missing: str, terseness: str = "full") -> str:
    """The expert assistant's question for the first fact it lacks (names as in ``GoalFacts.fact_names``)."""
    kind = missing.partition(":")[0]
    if kind == "product":
        return "What kind of product are you looking for?"
    if kind == "attribute":
        return "Which features must it have?" if terseness == "full" else "Which other feature must it have?"
    if kind == "option":
        return "Which options do you want?" if terseness == "full" else "Which other option do you want?"
    return "What is your price limit?"


def learnt_query(facts: GoalFacts) -> str:
    """The expert assistant's first search, from what the customer said: the product and the option values."""
    return " ".join([facts.product, *(value for _, value in facts.options)])


def _append(pending: str, line: str) -> str:
    return f"{pending}\n\n{line}" if pending else line


def check_settings(
    max_cycles: Any, message_cost: Any, terseness: Any, render_mode: Any, render_modes: Sequence[str]
) -> None:
    """Raise a ``ValueError`` that says what to pass when a :class:`WebShopDialogEnv` setting is out of range."""
    if not is_int(max_cycles, 1):
        raise ValueError(f"max_cycles must be a positive int (moves of either agent), got {max_cycles!r}.")
    if not math.isfinite(message_cost):
        raise ValueError(f"message_cost must be a finite number, got {message_cost!r}.")
    if terseness not in TERSENESS:
        raise ValueError(f"terseness must be one of {TERSENESS}, got {terseness!r}.")
    if render_mode is not None and render_mode not in render_modes:
        raise ValueError(f"render_mode={render_mode!r} is not supported; choose 'ansi' or None.")


class WebShopDialogEnv(AECEnv):
    """A shopping dialog: the ``customer`` knows the goal, the ``assistant`` operates the shop.

    ## Description

    A WebShop goal (TurnWebShop-v0's catalog, goals and reward) is given to the customer only.
    The assistant sees the shop (TurnWebShop-v0's pages, actions and text, with the
    instruction replaced by "Ask the customer what they want.") and the customer's messages.
    The customer moves first (a short request), then the agents take turns: a message passes
    the turn to the other agent; the assistant keeps the turn while it acts in the shop.

    ## Action Space

    ``TurnText`` per agent (any string). Customer: ``<say>message</say>`` or ``<done/>`` (ends
    the episode). Assistant: a shop action (``search[query]``, ``click[x]``, as TurnWebShop-v0)
    or ``<say>message</say>``. Anything else is an invalid move: ``format_penalty``, a message
    saying what is allowed, and the same agent moves again. Never an exception.

    ## Observation Space

    ``TurnText`` per agent: what the agent has not seen yet. The customer's first observation
    holds the goal (instruction, product, attributes, options, price limit); later ones the
    assistant's messages. The assistant's first observation holds the rules, the search page and
    the customer's request; later ones the page a shop action led to, or the customer's reply.

    ## Rewards

    Shared by both agents: WebShop's score of the purchase when the assistant clicks
    ``Buy Now``; ``-message_cost`` for each assistant message (the customer's answers are free,
    so silence never pays the customer); ``format_penalty`` for an invalid move.

    ## Episode End

    Terminates on a purchase or the customer's ``<done/>``; truncates after ``max_cycles`` moves
    (of either agent, invalid ones included).

    ## Information

    Both agents, every reset and step: `turn` (moves so far), `action_is_valid`,
    `action_is_effective` (of the agent's own last move), `success` (score == 1), `score`
    (the purchase's score, 0 before), `page` (the shop's page kind), `goal_index`, `messages`
    (assistant messages so far), `facts_disclosed` / `facts_total` (goal facts the customer
    has stated / there are), `purchased_asin` (``""`` until a purchase), `shop_actions` (the
    shop page's clickables) and `active_agent` (whose move it is now).

    ## Arguments

    * ``max_cycles``: moves before truncation (default 40: about 8 questions and answers plus a
      WebShop episode's 15 shop turns, with room).
    * ``message_cost``: cost of an assistant message (default 0.01).
    * ``terseness``: the scripted customer's (``expert_action`` for the customer): ``"full"``
      or ``"terse"`` (one list item per answer).
    * ``format_penalty``, ``render_mode`` (``"ansi"``: the transcript), ``max_action_length``,
      ``max_observation_length``; other keywords go to ``TurnWebShopEnv`` (``num_products``,
      ``goal_split``, ``observation_mode``, ``data_path``...).

    ## Version History

    * v0: initial version.
    """

    metadata = {"name": "webshop_dialog_v0", "render_modes": ["ansi"], "render_fps": 4, "is_parallelizable": False}

    def __init__(
        self,
        *,
        max_cycles: int = 40,
        message_cost: float = 0.01,
        terseness: str = "full",
        format_penalty: float = -0.1,
        render_mode: str | None = None,
        max_action_length: int = DEFAULT_MAX_ACTION_LENGTH,
        max_observation_length: int = DEFAULT_MAX_OBSERVATION_LENGTH,
        **shop_kwargs: Any,
    ):
        super().__init__()
        check_settings(max_cycles, message_cost, terseness, render_mode, self.metadata["render_modes"])
        self.max_cycles, self.message_cost, self.terseness = max_cycles, float(message_cost), terseness
        self.render_mode = render_mode
        self.shop = TurnWebShopEnv(
            format_penalty=format_penalty,
            render_mode="ansi",
            max_action_length=max_action_length,
            max_observation_length=max_observation_length,
            **shop_kwargs,
        )
        self.shop.shown_instruction = SHOWN_INSTRUCTION
        self.format_penalty = self.shop.format_penalty
        self.possible_agents = list(AGENTS)
        self.agents = []
        self.observation_spaces = {a: TurnText(max_observation_length) for a in AGENTS}
        self.action_spaces = {a: TurnText(max_action_length) for a in AGENTS}
        self._np_random: Any = None
        self.facts: GoalFacts | None = None

    def observation_space(self, agent: str) -> TurnText:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> TurnText:
        return self.action_spaces[agent]

    # ------------------------------------------------------------------ PettingZoo API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Draw a goal (``options={"goal_index": i}`` picks one) and give the customer the turn."""
        if seed is not None or self._np_random is None:
            self._np_random, _ = seeding.np_random(seed)
        options = dict(options or {})
        unknown = sorted(set(options) - {"goal_index"}, key=str)
        if unknown:  # PettingZoo's own api tests pass made-up options, so warn instead of raising
            warnings.warn(
                f"WebShopDialogEnv.reset ignores unknown option(s) {unknown}; accepted options: goal_index.",
                stacklevel=2,
            )
        shop_options = {"goal_index": options["goal_index"]} if "goal_index" in options else {}
        _, self._shop_info = self.shop.reset(seed=int(self._np_random.integers(2**31 - 1)), options=shop_options)
        self.goal = self.shop.goal
        self.facts = goal_facts(self.goal)
        f = self.facts
        self.agents = list(AGENTS)
        self.rewards = {a: 0.0 for a in AGENTS}
        self._cumulative_rewards = {a: 0.0 for a in AGENTS}
        self.terminations = {a: False for a in AGENTS}
        self.truncations = {a: False for a in AGENTS}
        self.moves = self.messages = 0
        self._said: dict[str, list[str]] = {a: [] for a in AGENTS}
        self._disclosed: list[str] = []
        self._valid = {a: True for a in AGENTS}
        self._searched = False  # the assistant has acted in the shop (the expert's own query is used once)
        self._effective = {a: False for a in AGENTS}
        self._pending = {
            CUSTOMER: _CUSTOMER_INTRO.format(
                instruction=self.goal.instruction_text,
                product=f.product,
                attributes=", ".join(f.attributes) or "none",
                options=", ".join(f"{n}: {v}" for n, v in f.options) or "none",
                price=f"lower than {f.price_limit:.2f} dollars" if f.price_limit is not None else "none",
                opening=opening_request(f),
            ),
            ASSISTANT: _ASSISTANT_INTRO + self.shop.render(),
        }
        self._transcript = [f"[goal {self.goal.index}: {self.goal.instruction_text}]"]
        self.agent_selection = CUSTOMER
        self.infos = {a: self._info(a) for a in AGENTS}

    def observe(self, agent: str) -> str:
        text = sanitize_text(self._pending.get(agent, ""))
        limit = self.observation_spaces[agent].max_length
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def step(self, action: Any) -> None:
        """Play ``action`` (any value) for ``agent_selection``; a finished agent's step removes it."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(None)  # any action, not only None: a finished agent's move never raises
            return
        self._cumulative_rewards[agent] = 0.0
        self._apply(agent, self._parse(agent, action))

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(getattr(self, "_transcript", []))

    def close(self) -> None:
        self.shop.close()

    # ------------------------------------------------------------------ experts
    def expert_action(self, agent: str | None = None) -> str:
        """An expert's move for ``agent`` (default: the agent to move): the customer answers the
        assistant's last message truthfully (the scripted customer, at this env's ``terseness``);
        the assistant asks for the first goal fact not yet disclosed, then searches what it learnt
        (:func:`learnt_query`) and goes on with TurnWebShop's oracle, which picks the product and
        the options (once every fact is disclosed, the goal it has learnt is the goal)."""
        agent = agent or self.agent_selection
        if self.facts is None:
            return "<say>Hello!</say>"
        if agent == CUSTOMER:
            asked = self._said[ASSISTANT]
            if not asked:
                return f"<say>{opening_request(self.facts)}</say>"
            return f"<say>{customer_answer(asked[-1], self.facts, terseness=self.terseness, already=self._disclosed)}</say>"
        missing = [name for name in self.facts.fact_names() if name not in self._disclosed]
        if missing:
            return f"<say>{assistant_question(missing[0], self.terseness)}</say>"
        if self._shop_info["page"] == "search" and not self._searched:
            # the first search uses what the customer said; the oracle's own query is the fallback
            return f"search[{learnt_query(self.facts)}]"
        return self.shop.expert_action()

    # ------------------------------------------------------------------ internals
    def _parse(self, agent: str, action: Any) -> Any:
        if isinstance(action, bytes):
            action = action.decode("utf-8", errors="replace")
        if not isinstance(action, str):
            return InvalidAction(f"A move must be a string, got {type(action).__name__}.")
        limit = self.action_spaces[agent].max_length
        if len(action) > limit:
            return InvalidAction(f"The move is {len(action)} characters long; the limit is {limit}.")
        if agent == CUSTOMER:
            return parse_customer_move(action)
        if _SAY_OPEN.search(action):
            tagged = find_tagged(action, ("say",))
            return tagged if isinstance(tagged, InvalidAction) else ("say", tagged.content)
        parsed = self.shop.parse_action(action)
        return parsed if isinstance(parsed, InvalidAction) else ("shop", action)

    def _apply(self, agent: str, move: Any) -> float:
        """Play a parsed move (or an :class:`InvalidAction`) for ``agent``; return the shared reward."""
        other = ASSISTANT if agent == CUSTOMER else CUSTOMER
        self.moves += 1
        valid = not isinstance(move, InvalidAction)
        effective, reward, ended = False, 0.0, False
        if not valid:
            reward = self.format_penalty
            hint = _CUSTOMER_HINT if agent == CUSTOMER else _ASSISTANT_HINT
            self._pending[agent] = f"Invalid move: {move.message} {hint}".replace("  ", " ")
            self._transcript.append(f"{agent} (invalid): {snippet(move.message, 120)}")
        elif move[0] == "say":
            effective = True
            text = move[1]
            self._said[agent].append(text)
            if agent == ASSISTANT:
                self.messages += 1
                reward = -self.message_cost
            else:
                self._disclosed = disclosed(self.facts, self._said[CUSTOMER])
            self._pending[agent] = ""
            self._pending[other] = _append(self._pending[other], f"{agent.capitalize()}: {text}")
            self._transcript.append(f"{agent}: <say>{text}</say>")
        elif move[0] == "done":
            effective, ended = True, True
            self._pending[agent] = "You ended the conversation."
            self._pending[other] = _append(self._pending[other], "The customer ended the conversation.")
            self._transcript.append(f"{agent}: <done/>")
        else:
            self._searched = (
                self._searched or self._shop_info["page"] == "search" or move[1].lstrip().lower().startswith("search")
            )
            observation, reward, ended, _, self._shop_info = self.shop.step(move[1])
            effective = bool(self._shop_info["action_is_effective"])
            self._pending[agent] = observation
            self._transcript.append(f"{agent} -> shop: {move[1]}  [page: {self._shop_info['page']}]")
            if ended:
                asin, score = self._shop_info["purchased_asin"], float(self._shop_info["score"])
                self._pending[other] = _append(
                    self._pending[other], f"The assistant bought {asin} (score {score:.2f})."
                )
                self._transcript.append(f"[bought {asin}: score {score:.2f}]")
        self._valid[agent], self._effective[agent] = valid, effective
        self.rewards = {a: float(reward) for a in self.agents}
        if ended:
            self.terminations = {a: True for a in self.agents}
        elif self.moves >= self.max_cycles:
            self.truncations = {a: True for a in self.agents}
            self._transcript.append(f"[truncated after {self.moves} moves]")
        self.agent_selection = next_agent(agent, move)
        self.infos = {a: self._info(a) for a in self.agents}
        self._accumulate_rewards()
        return float(reward)

    def _info(self, agent: str) -> dict[str, Any]:
        shop = self._shop_info
        score = float(shop["score"])
        return {
            "turn": int(self.moves),
            "action_is_valid": bool(self._valid[agent]),
            "action_is_effective": bool(self._effective[agent]),
            "success": score >= 1.0,
            "score": score,
            "page": str(shop["page"]),
            "goal_index": int(shop["goal_index"]),
            "messages": int(self.messages),
            "facts_disclosed": len(self._disclosed),
            "facts_total": len(self.facts.fact_names()) if self.facts else 0,
            "purchased_asin": str(shop["purchased_asin"]),
            "shop_actions": list(shop.get("available_actions", [])),
            "active_agent": self.agent_selection,
        }
