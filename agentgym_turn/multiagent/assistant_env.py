"""``TurnWebShopDialog-v0``: the shopping dialog's assistant against the scripted customer."""

from __future__ import annotations

from typing import Any

from ..core import InvalidAction, TurnEnv, TurnOutcome
from ..core.snapshots import seal, unseal
from ..webshop.source import TASK_KEYWORDS, ShopTasks, shop_tasks, split_task_keywords
from .webshop_dialog import ASSISTANT, CUSTOMER, WebShopDialogEnv

# The dialog inside never truncates: the turn limit is the registered max_episode_steps.
_NO_CYCLE_LIMIT = 1 << 30


class TurnWebShopDialogEnv(TurnEnv):
    """Help a customer buy what they want: ask them, then shop (``webshop_dialog_v0``'s assistant).

    ## Description

    The assistant's side of :class:`~agentgym_turn.multiagent.webshop_dialog.WebShopDialogEnv`,
    with the customer played by the scripted customer (truthful answers to questions about the
    product, its attributes, options and price; a vague question gets a vague answer). The first
    message holds only a vague request (the goal's category), so asking pays.

    ## Action Space

    ``TurnText`` (any string): a shop action (``search[query]``, ``click[x]``, as TurnWebShop-v0)
    or ``<say>message</say>`` to the customer. Anything else is an invalid turn.

    ## Observation Space

    ``TurnText``: the rules, the search page and the customer's request first; then the page a
    shop action led to, or the customer's answer to a message.

    ## Starting State

    A goal drawn from ``goal_split`` (or ``options={"goal_index": i}``), the search page, and
    the customer's opening request.

    ## Rewards

    WebShop's score of the purchase on ``Buy Now``; ``-message_cost`` (default 0.01) per
    message to the customer; ``format_penalty`` (default -0.1) on an invalid turn. The return
    equals the shared return of the same dialog in ``webshop_dialog_v0``.

    ## Episode End

    Terminates on a purchase. Truncates at the turn limit: 20 (the papers' 15 WebShop turns plus
    5 questions; ``gymnasium.make(..., max_episode_steps=N)`` changes it).

    ## Information

    The common keys `turn`, `action_is_valid`, `action_is_effective`, `success` (score == 1),
    `score` (the purchase's score, 0 before), plus `page` (the shop's page kind), `goal_index` (sent by a served env only with ``--expert``),
    `messages` (messages sent to the customer), `facts_disclosed` / `facts_total` (goal facts
    the customer has stated / there are) and `purchased_asin` (``""`` until a purchase), and the
    fields RL infrastructure reads (``docs/turn-contract.md``): `exit_status`, `reward_valid`,
    `state_key` and `reward_components` (`attributes`, `options`, `price`, `message`, `format`). The
    key set is the same on every reset and step.

    ## Arguments

    ```python
    import gymnasium as gym
    import agentgym_turn
    env = gym.make("TurnWebShopDialog-v0", terseness="terse", message_cost=0.02, goal_split="test")
    ```

    * ``terseness``: the scripted customer's, ``"full"`` (default) or ``"terse"`` (one list item
      per answer).
    * ``message_cost``: cost of a message to the customer (default 0.01).
    * ``source`` (a ``ShopTasks``) or its keywords (``num_products``, ``goal_split``, ``data_path``,
      ``catalog_seed``...), ``observation_mode``, ``search_backend``: as ``TurnWebShop-v0``; ``format_penalty``, ``render_mode``,
      ``max_action_length``, ``max_observation_length``: see ``TurnEnv``.

    ## Version History

    * v0: initial version.
    """

    reset_options = frozenset({"goal_index"})
    external_kwargs = frozenset({"data_path"})
    source_keywords = tuple(TASK_KEYWORDS)
    #: Sent by a served env only with --expert (the goal's index gives the customer's wishes away).
    oracle_info_keys = ("goal_index",)
    #: ``reward_components``: the purchase's WebShop terms, the cost of the assistant's messages, invalid turns.
    metadata = {**TurnEnv.metadata, "reward_components": ("attributes", "options", "price", "message", "format")}
    #: The dialog is snapshotted by parts (:meth:`snapshot`): its shop by the shop's own snapshot, the rest but its
    #: fixed settings and spaces by pickle.
    shared_attributes = ("dialog",)

    def __init__(
        self,
        source: ShopTasks | None = None,
        *,
        terseness: str = "full",
        message_cost: float = 0.01,
        observation_mode: str = "text",
        search_backend: str = "auto",
        **kwargs: Any,
    ):
        tasks = shop_tasks(source, split_task_keywords(kwargs), type(self).__name__)
        super().__init__(**kwargs)
        self.dialog = WebShopDialogEnv(
            source=tasks,
            max_cycles=_NO_CYCLE_LIMIT,
            message_cost=message_cost,
            terseness=terseness,
            format_penalty=self.format_penalty,
            max_action_length=self.action_space.max_length,
            max_observation_length=self.observation_space.max_length,
            observation_mode=observation_mode,
            search_backend=search_backend,
        )

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.dialog.reset(seed=int(self.np_random.integers(2**31 - 1)), options=options)
        self._customer_moves()
        return self.dialog.observe(ASSISTANT), {}

    def _customer_moves(self) -> float:
        """Let the scripted customer move while it is its turn; return the rewards of its moves."""
        total = 0.0
        while self.dialog.agents and self.dialog.agent_selection == CUSTOMER and not self.dialog.terminations[CUSTOMER]:
            total += self.dialog._apply(CUSTOMER, self.dialog._parse(CUSTOMER, self.dialog.expert_action(CUSTOMER)))
        return total

    def parse_action(self, response: str) -> Any:
        return self.dialog._parse(ASSISTANT, response)

    def _advance(self, move: Any) -> TurnOutcome:
        reward = self.dialog._apply(ASSISTANT, move)
        if isinstance(move, InvalidAction):
            components = {"format": reward}
        elif move[0] == "say":
            components = {"message": reward}
        elif move[0] == "shop":
            components = dict(self.dialog._shop_info.get("reward_components", {}))
        else:
            components = {}
        customer = self._customer_moves()  # the scripted customer's moves pay nothing unless one is invalid
        components["format"] = components.get("format", 0.0) + customer
        return TurnOutcome(
            self.dialog.observe(ASSISTANT),
            reward + customer,
            bool(self.dialog.terminations[ASSISTANT]),
            bool(self.dialog.infos[ASSISTANT]["action_is_effective"]),
            components=components,
        )

    def _act(self, action: Any) -> TurnOutcome:
        return self._advance(action)

    def _invalid_outcome(self, problem: InvalidAction) -> TurnOutcome:
        # the dialog records the invalid move (transcript, move count) and writes its message
        return self._advance(problem)

    def _state_text(self) -> str:
        return self.dialog.shop.render() or ""

    def snapshot(self) -> bytes:
        """The episode's state: this env's, the shop's own snapshot and the dialog's changing fields (its RNG included)."""
        d = self.dialog
        parts = {k: v for k, v in d.__dict__.items() if k not in _DIALOG_FIXED}
        return seal((super().snapshot(), d.shop.snapshot(), parts))

    def restore(self, snapshot: bytes) -> None:
        own, shop_state, parts = unseal(snapshot)
        super().restore(own)
        # new dialog and shop objects (shallow copies sharing the fixed parts), so forks never share a turn's state
        dialog = object.__new__(type(self.dialog))
        dialog.__dict__.update(self.dialog.__dict__)
        shop = object.__new__(type(dialog.shop))
        shop.__dict__.update(dialog.shop.__dict__)
        shop.restore(shop_state)
        dialog.__dict__.update(parts)
        dialog.shop = shop
        self.dialog = dialog

    def _state_fields(self) -> Any:
        """Both sides' histories (what each said, the facts disclosed, the messages waiting for each side, whose
        move it is) and the shop's own state key."""
        d = self.dialog
        if not self.has_started or d.facts is None:
            return None
        return [
            d.shop.state_key(),
            d._said,
            d._disclosed,
            d._pending,
            d._searched,
            d.moves,
            d.messages,
            d.agent_selection,
            sorted(d.terminations.items()),
            sorted(d.truncations.items()),
        ]

    def _success(self) -> bool:
        return bool(self.dialog.infos[ASSISTANT]["success"]) if self.has_started else False

    def _score(self) -> float:
        return float(self.dialog.infos[ASSISTANT]["score"]) if self.has_started else 0.0

    def _extra_info(self) -> dict[str, Any]:
        keys = ("page", "goal_index", "messages", "facts_disclosed", "facts_total", "purchased_asin")
        if not self.has_started:
            return {
                "page": "search",
                "goal_index": -1,
                "messages": 0,
                "facts_disclosed": 0,
                "facts_total": 0,
                "purchased_asin": "",
            }
        info = self.dialog.infos[ASSISTANT]
        return {k: info[k] for k in keys}

    def expert_action(self) -> str:
        """Ask for the first goal fact not yet disclosed; with every fact known, TurnWebShop's oracle."""
        return self.dialog.expert_action(ASSISTANT)

    def transcript(self) -> str:
        """The dialog so far, one move a line (also ``dialog.render()`` with ``render_mode="ansi"``)."""
        return "\n".join(self.dialog._transcript)


#: What a dialog's turn never changes: left out of :meth:`TurnWebShopDialogEnv.snapshot` (the shop has its own).
_DIALOG_FIXED = frozenset(
    {
        "shop",
        "observation_spaces",
        "action_spaces",
        "possible_agents",
        "max_cycles",
        "message_cost",
        "terseness",
        "render_mode",
        "format_penalty",
    }
)


def silent_assistant_action(env: TurnWebShopDialogEnv) -> str:
    """A baseline that never asks: it searches the opening request's category, opens the first
    result and buys it with no option chosen."""
    dialog = env.unwrapped.dialog if hasattr(env, "unwrapped") else env.dialog
    info = dialog.infos[ASSISTANT]
    page, actions = info["page"], info["shop_actions"]
    if page == "search":
        return f"search[{dialog.facts.category}]"
    if page == "results":
        products = [a for a in actions if a not in ("back to search", "next >", "< prev")]
        return f"click[{products[0]}]" if products else "click[back to search]"
    if page == "item":
        return "click[buy now]"
    return "click[< prev]"
