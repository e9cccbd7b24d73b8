"""``TurnWebShop-v0``: WebShop's shopping task as a turn environment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection

from ..core import BracketAction, InvalidAction, TurnEnv, TurnOutcome, find_tagged, parse_bracket_action, snippet
from ..core.args import is_int
from ..core.splits import content_key
from . import expert as _expert
from . import pages
from .product import Goal
from .nouns import noun_tagger
from .reward import REWARD_MODES, webshop_reward
from .source import TASK_KEYWORDS, ShopTasks, shared_shop, shop_tasks, split_task_keywords
from .text import OBSERVATION_MODES, page_text, with_history

_FIXED = {  # lower-cased button text -> role
    pages.BACK_TO_SEARCH.lower(): "back",
    pages.NEXT_PAGE.lower(): "next",
    pages.PREV_PAGE.lower(): "prev",
    pages.BUY_NOW.lower(): "buy",
    **{s.lower(): "sub" for s in pages.SUB_PAGES},
}
#: Names a product link never takes: every button's (``search`` is the search page's button).
RESERVED_NAMES = frozenset({*_FIXED, pages.SEARCH.lower()})
#: Suffix of a product link whose ASIN is a button's name (so a click can never open a decoy).
PRODUCT_SUFFIX = " (product)"


def product_link_name(asin: str) -> str:
    """The clickable name of a product link: its lower-cased ASIN, as in WebShop, unless that is a
    button's name (``"next >"``, ``"buy now"``...), then the ASIN plus :data:`PRODUCT_SUFFIX`."""
    name = asin.lower()
    return name + PRODUCT_SUFFIX if name in RESERVED_NAMES else name


#: The first message's preamble, before the search page (also the browser env's).
INTRO = (
    "You are shopping on WebShop. Find the product the instruction describes, choose its "
    "options and buy it.\n"
    "Each turn, write exactly one action, optionally inside <answer>...</answer>: "
    "search[your query] on the search page, or click[x] where x is one of the available "
    "actions (for example click[buy now] on a product page). You may think first inside "
    "<think>...</think>.\n\n"
)


#: ``observation_style`` values: WebShop's pages as they are, or the short pages of :func:`~.text.compact_page`.
OBSERVATION_STYLES = ("webshop", "compact")

#: The first message's preamble in ``observation_style="compact"`` (the instruction follows).
COMPACT_INTRO = (
    "One action per turn: search[query] or click[x], x: a result's number, an option, next >, < prev, "
    "back to search, buy now.\n"
)


def exact_click_name(response: str, names: Collection[str]) -> str | None:
    """The clickable of ``names`` that a whole response ``click[name]`` (alone, or alone inside one
    ``<answer>``) names exactly, as written, lower-cased or stripped and lower-cased; else None.
    ``parse_action`` tries it before the general ``search[...]``/``click[...]`` parser."""
    text = response.strip()
    tagged = find_tagged(text, ("answer",))
    if not isinstance(tagged, InvalidAction) and tagged.count == 1:
        text = tagged.content
    if len(text) > 7 and text[:6].lower() == "click[" and text.endswith("]"):
        inner = text[6:-1]
        for candidate in (inner, inner.lower(), inner.strip().lower()):
            if candidate in names:
                return candidate
    return None


@dataclass
class _State:
    page: str = "search"  # search | results | item | Description | Features | Reviews | Attributes | done
    keywords: list[str] = field(default_factory=list)
    results: list[int] = field(default_factory=list)
    page_no: int = 1
    product: int | None = None
    options: dict[str, str] = field(default_factory=dict)
    visited: list[str] = field(default_factory=list)
    score: float = 0.0
    breakdown: dict[str, Any] | None = None


def check_settings(
    *,
    observation_mode: Any,
    observation_style: Any,
    results_per_page: Any,
    num_prev_obs: Any,
    num_prev_actions: Any,
    reward_mode: Any,
    expert_query: Any,
    expert_browse: Any,
) -> None:
    """Raise a ValueError naming the first of ``TurnWebShopEnv``'s settings that is out of its range."""
    for name, value, allowed in (
        ("observation_mode", observation_mode, OBSERVATION_MODES),
        ("observation_style", observation_style, OBSERVATION_STYLES),
        ("reward_mode", reward_mode, REWARD_MODES),
        ("expert_query", expert_query, _expert.EXPERT_QUERIES),
        ("expert_browse", expert_browse, _expert.EXPERT_BROWSING),
    ):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
    if not is_int(results_per_page, 1):
        raise ValueError(f"results_per_page must be a positive int (WebShop's is 10), got {results_per_page!r}.")
    for name, value in (("num_prev_obs", num_prev_obs), ("num_prev_actions", num_prev_actions)):
        if not is_int(value, 0):
            raise ValueError(f"{name} must be a non-negative int (WebShop's default is 0), got {value!r}.")


class TurnWebShopEnv(TurnEnv):
    """Buy the product an instruction describes, in a simulated WebShop (Yao et al., 2022).

    ## Description

    The agent reads a shopping instruction ("i need a long lasting deodorant with scent:
    bright citrus, and price lower than 20.00 dollars"), searches a catalog, opens products,
    picks options and buys. The pages, buttons, text modes, action syntax and reward are
    WebShop's (``princeton-nlp/WebShop``, ``web_agent_site``); the catalog is generated from a
    seed at any size, or loaded from WebShop's own ``items_*.json`` files with ``data_path``.

    ## Action Space

    One response per turn (``TurnText``, any string). It holds one action, optionally inside
    ``<answer>...</answer>`` and after ``<think>...</think>``: ``search[query]`` on any page (as
    in WebShop), or ``click[x]`` where ``x`` is one of ``info["available_actions"]`` (lower-cased,
    as in WebShop; ``click[search]`` on the search page is listed and ignored, as in WebShop).
    Anything else is an invalid turn: the page stays, the message says why.

    ## Observation Space

    ``TurnText``. The first message holds the task, the action format and the search page;
    later ones hold the page the action led to, in ``observation_mode`` ``"text"`` (visible
    strings joined by ``[SEP]``), ``"text_rich"`` (``[button] x [button_]`` markers) or
    ``"html"``, followed by the list of available actions when ``list_actions``; pages, text
    modes and action lists equal WebShop's ``WebAgentTextEnv`` (measured in lock step). With
    ``num_prev_obs`` / ``num_prev_actions`` earlier observations and actions come first, joined
    by ``" [SEP] "`` as WebShop does.

    ## Starting State

    The search page with a goal drawn uniformly from ``goal_split``, or the goal
    ``options={"goal_index": i}`` asks for. With ``goal_from_seed=True`` the reset seed ``s`` picks
    goal ``s mod n`` of the split's ``n`` goals instead, so seeds ``k .. k + n - 1`` visit every
    goal of the split exactly once (an evaluation that covers the split).

    ## Rewards

    0 for every turn until ``Buy Now``; then WebShop's reward
    ``R = r_type * (n_attr_matched + n_opt_matched + 1[price <= price_upper]) / (n_attrs + n_opts + 1)``
    (see :mod:`agentgym_turn.webshop.reward`). ``format_penalty`` (default -0.1) on an invalid turn.

    ## Episode End

    Terminates when the agent clicks ``Buy Now``. Truncates at the turn limit (15, the papers'
    cap; ``gymnasium.make(..., max_episode_steps=N)`` changes it).

    ## Information

    The common keys `turn`, `action_is_valid`, `action_is_effective`, `success` (``R >= 1``, i.e.
    ``R == 1``: ``R`` never exceeds 1), `score` (``R`` once bought,
    else 0) and `available_actions` (the clickables of the page in WebShop's order; ``["search"]``
    on the search page, where `has_search_bar` is true; empty on the done page), plus `page` (the page
    kind: ``search``, ``results``, ``item``, ``Description``, ``Features``, ``Reviews``, ``Attributes``
    or ``done``), `goal_index`
    (the goal's index, which fixes its split: test 0-499, eval 500-1499, train the rest; it gives the
    goal away, so a served env and the site's
    ``/state`` send it only with ``--expert``), `purchased_asin` and `reward_breakdown` (what was
    bought and every term of ``R``; ``""`` and ``{}`` until then, also after the episode ends), and
    the fields RL infrastructure
    reads (``docs/turn-contract.md``): `exit_status`, `reward_valid`, `state_key` and
    `reward_components` (``R`` as `attributes`, `options` and `price`, plus `format`). The key set is
    the same on every reset and step.

    ## Arguments

    ```python
    import gymnasium as gym
    import agentgym_turn

    env = gym.make("TurnWebShop-v0", num_products=1000, observation_mode="text", goal_split="train")
    ```

    * ``source``: the shop and its goals as one object (the first positional argument of the class):
      ``ShopTasks(num_products=5000, goal_split="test", content_split="test")``; the task keywords
      below (``num_products``, ``data_path``, ``human_goals``, ``catalog_seed``, ``goal_split``,
      ``content_split``, ``filter_goals``, ``limit_goals``, ``goal_weighting``) build it when it is not
      given, and giving both is an error naming them.
    * ``observation_mode``: ``"text"``, ``"text_rich"`` or ``"html"``.
    * ``num_products``: catalog size (generated: 10 to millions, default 1,000; with ``data_path``:
      keep the first N products, default all).
    * ``goal_split``: ``"train"`` (goals 1500+), ``"eval"`` (500-1499), ``"test"`` (0-499) or ``"all"``.
    * ``content_split``: ``None`` (default), ``"train"``, ``"validation"`` or ``"test"``: keep only the
      goals of ``goal_split`` whose instruction falls in that split by its text (80/10/10,
      :mod:`agentgym_turn.core.splits`), the same in every catalog: held out by content, not position.
    * ``data_path``: WebShop's ``data/`` folder (or an ``items_shuffle*.json``) to load instead of generating.
    * ``human_goals``: with ``data_path``, human goals from ``items_human_ins.json`` (``True``) or
      synthetic ones from ``items_ins_v2*.json`` (``False``); default human when the file is there.
    * ``catalog_seed``: seed of the generated catalog (and of the price draws of loaded files).
    * ``show_attributes``: show WebShop's hidden ``Attributes`` button (default off, as in WebShop).
    * ``list_actions``: append the available actions to each observation (default on).
    * ``search_backend``: ``"auto"``, ``"numpy"`` or ``"numba"`` for the BM25 index (``"auto"``: numba
      from 50,000 products with the ``fast-search`` extra, compiled once per process; numpy below or without it).
    * ``num_prev_obs``, ``num_prev_actions``: WebShop's observation history (default 0, 0).
    * ``reward_mode``: ``"original"`` (WebShop's ``get_reward``, default) or ``"strict"`` (see :mod:`.reward`).
    * ``title_nouns``: what finds the title nouns of the type reward: ``"auto"`` (default: spaCy's
      ``en_core_web_sm`` when the ``spacy`` extra is installed, as WebShop does, else the light rule),
      ``"spacy"`` or ``"rule"`` (:mod:`.nouns`); ``noun_tagger`` on the env and in the reward
      breakdown names the one used, since the two agree on 99.0% of purchases, not all.
    * ``filter_goals``, ``limit_goals``: WebShop's goal options, same semantics (see :mod:`.goals`).
    * ``goal_weighting``: ``"uniform"`` (default) or ``"weighted"`` (WebShop's server: by attribute rarity).
    * ``observation_style``: ``"webshop"`` (default: WebShop's pages, as above) or ``"compact"``, short
      pages for small context windows (:func:`compact_page`): the first message is a two-line
      preamble and the instruction; a results page is one ``n: title price`` line per product,
      whose link is its number ``n`` on the page (``click[1]``), not its ASIN;
      an item page is the title and price and one line per option group (its values, or its
      chosen value once chosen); no
      page repeats the instruction or lists the actions (``info["available_actions"]`` still
      does); ``observation_mode``, ``list_actions`` and the history options do not apply.
    * ``results_per_page``: products per results page (default 10, WebShop's), over the same top 50.
    * ``goal_from_seed``: the reset seed picks the goal (``seed mod n`` in the split) instead of a
      uniform draw (default off); ``options={"goal_index": i}`` still wins.
    * ``expert_query``: what ``expert_action()`` searches first: ``"instruction"`` (default: the
      instruction without its price clause) or ``"product"``, the words that name the product
      (:func:`~.expert.product_phrase`, e.g. ``makeup brush set``), short enough for a small model
      to copy, or ``"clause"``, the instruction up to its option and price clauses
      (:func:`~.expert.instruction_clause`, e.g. ``find me dermatologist tested makeup brush set``: a
      copy of the instruction's start, whose hits hold a product that earns ``R = 1`` on the first
      page far more often); each falls back to the instruction, then the title, when no hit can earn ``R = 1``.
    * ``expert_browse``: which result ``expert_action()`` opens: ``"target"`` (default: the goal's
      product when listed, else the first that earns ``R = 1``) or ``"first_match"``: the first
      result, in the order listed, that earns ``R = 1`` with the goal's options, paging only past
      pages without one. Both always earn ``R = 1``; with ``"first_match"`` every choice can be read
      off the page in view (the target is not, among equals), for a small model to imitate.
    * ``format_penalty``, ``render_mode``, ``max_action_length``, ``max_observation_length``: see ``TurnEnv``.

    ## Version History

    * v0: initial version."""

    #: ``reward_components``: WebShop's reward ``r_type * (n_att + n_opt + price_ok) / (|att| + |opt| + 1)`` split
    #: into its three matched terms (each times ``r_type``), and the invalid-turn penalty.
    metadata = {
        "render_modes": ["ansi"],
        "render_fps": 4,
        "reward_components": ("attributes", "options", "price", "format"),
    }
    #: The goal pool: read-only, shared by forks and left out of snapshots (the catalog and its index already are).
    shared_attributes = ("source", "_goals")
    reset_options = frozenset({"goal_index"})
    external_kwargs = frozenset({"data_path"})
    source_keywords = tuple(TASK_KEYWORDS)
    #: Keys of :meth:`_extra_info`, in every ``info``.
    #: Sent by a served env only with --expert: the goal's index gives the goal's attributes, options and price away.
    oracle_info_keys = ("goal_index",)
    #: The catalog, its index and the pages are this process's: a step is under a millisecond (a search of a
    #: catalog of a million products about one).
    quick_calls = frozenset({"reset", "step", "render"})
    EXTRA_INFO_KEYS = ("page", "goal_index", "has_search_bar", "purchased_asin", "reward_breakdown")

    def __init__(
        self,
        source: ShopTasks | None = None,
        *,
        observation_mode: str = "text",
        observation_style: str = "webshop",
        show_attributes: bool = False,
        list_actions: bool = True,
        results_per_page: int = 10,
        num_prev_obs: int = 0,
        num_prev_actions: int = 0,
        search_backend: str = "auto",
        reward_mode: str = "original",
        title_nouns: str = "auto",
        goal_from_seed: bool = False,
        expert_query: str = "instruction",
        expert_browse: str = "target",
        **kwargs: Any,
    ):
        #: The shop and its goals: a :class:`ShopTasks` (built from the task keywords when not given).
        self.source = shop_tasks(source, split_task_keywords(kwargs), type(self).__name__)
        super().__init__(**kwargs)
        check_settings(
            observation_mode=observation_mode,
            observation_style=observation_style,
            results_per_page=results_per_page,
            num_prev_obs=num_prev_obs,
            num_prev_actions=num_prev_actions,
            reward_mode=reward_mode,
            expert_query=expert_query,
            expert_browse=expert_browse,
        )
        self.observation_mode, self.observation_style, self.results_per_page = (
            observation_mode,
            observation_style,
            results_per_page,
        )
        self.show_attributes, self.list_actions, self.search_backend = (
            bool(show_attributes),
            bool(list_actions),
            search_backend,
        )
        self.num_prev_obs, self.num_prev_actions, self.reward_mode = num_prev_obs, num_prev_actions, reward_mode
        self.goal_from_seed, self.expert_query, self.expert_browse = bool(goal_from_seed), expert_query, expert_browse
        #: The title-noun function of the type reward and its name (:func:`~.nouns.noun_tagger`).
        self._nouns, self.noun_tagger = noun_tagger(title_nouns)
        self._attach()
        self._goals = self.source.goals(self.shop)
        #: The instruction the pages show; ``None``: the goal's (a dialog's assistant must not see the goal).
        self.shown_instruction: str | None = None
        self._clear_episode()

    def _clear_episode(self) -> None:
        """The episode's state before the first reset."""
        self._reset_seed: int | None = None
        self._prev_obs: list[str] = []
        self._prev_actions: list[str] = []
        self.goal: Goal | None = None
        self.state = _State()
        self._plan: tuple | None = None

    @property
    def goal_split(self) -> str:
        """The goal split drawn from (:attr:`ShopTasks.goal_split`)."""
        return self.source.goal_split

    # ------------------------------------------------------------ shared catalog
    def _attach(self) -> None:
        from .search import search_for

        self.shop = shared_shop(self.source.shop)
        self.search_engine = search_for(self.shop, backend=self.search_backend)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("shop", None)
        state.pop("search_engine", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._attach()

    # ------------------------------------------------------------ pages
    def _clickables(self) -> dict[str, tuple[str, Any]]:
        """Lower-cased clickable text -> (role, value), in the order of WebShop's available actions
        (``WebAgentTextEnv.get_available_actions``: buttons, then product links, then options)."""
        s = self.state
        out: dict[str, tuple[str, Any]] = {}
        if s.page == "search":
            out[pages.SEARCH.lower()] = ("noop", None)  # listed by WebShop, which ignores its click
        elif s.page == "results":
            out[pages.BACK_TO_SEARCH.lower()] = ("back", None)
            if s.page_no > 1:
                out[pages.PREV_PAGE.lower()] = ("prev", None)
            out[pages.NEXT_PAGE.lower()] = ("next", None)
            start = (s.page_no - 1) * self.results_per_page
            for k, i in enumerate(s.results[start : start + self.results_per_page], 1):
                name = str(k) if self.observation_style == "compact" else product_link_name(self.shop.product(i).asin)
                out.setdefault(name, ("product", i))
        elif s.page == "item":
            product = self.shop.product(s.product)
            fixed = [
                pages.BACK_TO_SEARCH,
                pages.PREV_PAGE,
                *(p for p in pages.SUB_PAGES if p != "Attributes" or self.show_attributes),
                pages.BUY_NOW,
            ]
            for key in fixed:
                out[key.lower()] = (_FIXED[key.lower()], key)
            for name, values in product.options.items():
                for value in values:
                    if out.get(value, ("option",))[0] == "option":  # a button wins its name, as WebShop routes by name
                        out[value] = ("option", name)  # a later group wins a shared value, as in WebShop
        elif s.page in pages.SUB_PAGES:
            out[pages.BACK_TO_SEARCH.lower()] = ("back", None)
            out[pages.PREV_PAGE.lower()] = ("prev", None)
        return out

    def _page_text(self) -> str:
        """The observation of the current page (:func:`~.text.page_text`), without the history."""
        goal = self.goal
        instruction = (
            self.shown_instruction if self.shown_instruction is not None else goal.instruction_text if goal else ""
        )
        return page_text(
            self.state,
            self.shop,
            instruction,
            style=self.observation_style,
            mode=self.observation_mode,
            results_per_page=self.results_per_page,
            show_attributes=self.show_attributes,
            clickables=self._clickables if self.list_actions else None,
        )

    # ------------------------------------------------------------ TurnEnv API
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if "goal_index" in options:
            index = options["goal_index"]
            if not is_int(index, numpy=True):  # 1.5, "1" and True are no goal's index
                raise ValueError(f"goal_index must be an integer, got {index!r}.")
            if not 0 <= index < self.shop.num_goals:
                raise ValueError(f"goal_index must lie in [0, {self.shop.num_goals}), got {index}.")
        else:
            index = self._goals.draw(self.np_random)
            if self.goal_from_seed and self._reset_seed is not None:
                index = int(self._goals.indices[self._reset_seed % len(self._goals)])
        self.goal = self.shop.goal(int(index))
        self.state = _State()
        self._plan = None
        self._prev_obs, self._prev_actions = [self._page_text()], []
        return (COMPACT_INTRO if self.observation_style == "compact" else INTRO) + self._page_text(), {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._reset_seed = None if seed is None else int(seed)  # goal_from_seed reads it
        return super().reset(seed=seed, options=options)

    def _extra_info(self) -> dict[str, Any]:
        s = self.state
        bought = s.page == "done" and s.product is not None
        return {
            "page": s.page,
            "goal_index": int(self.goal.index) if self.goal else -1,
            "has_search_bar": s.page == "search",
            "purchased_asin": self.shop.product(s.product).asin if bought else "",
            "reward_breakdown": dict(s.breakdown) if bought and s.breakdown else {},
        }

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        active = self.has_started and not self.episode_over
        observation, reward, terminated, truncated, info = super().step(action)
        if active and (self.num_prev_obs or self.num_prev_actions) and self.observation_style == "webshop":
            text = (
                action
                if isinstance(action, str)
                else action.decode("utf-8", "replace")
                if isinstance(action, bytes)
                else repr(action)
            )
            self._prev_actions.append(text)
            current = observation
            observation = self._observe(
                with_history(current, self._prev_actions, self._prev_obs, self.num_prev_obs, self.num_prev_actions)
            )
            self._prev_obs.append(current)
        return observation, reward, terminated, truncated, info

    def parse_action(self, response: str) -> Any:
        s = self.state
        clickables = self._clickables()
        exact = exact_click_name(response, clickables)
        if exact is not None:
            return ("click", exact)
        action = parse_bracket_action(response, ("search", "click"))
        if isinstance(action, InvalidAction):
            return InvalidAction(action.message + self._hint())
        assert isinstance(action, BracketAction)
        if action.verb == "search":
            return ("search", action.argument)  # from any page, as in WebShop
        name = action.argument.lower()
        if name in clickables:
            return ("click", name)
        greedy = self._greedy_argument(response)
        if greedy is not None and greedy in clickables:
            return ("click", greedy)
        if s.page == "search":
            return InvalidAction(
                "There is nothing to click on the search page; write search[your query]." + self._hint()
            )
        return InvalidAction(f"click[{snippet(action.argument)}] is not on this page." + self._hint())

    @staticmethod
    def _greedy_argument(response: str) -> str | None:
        low = response.lower()
        start = low.find("click[")
        end = low.rfind("]")
        if start < 0 or end <= start + 6:
            return None
        return response[start + 6 : end].strip().lower()

    def _hint(self) -> str:
        if self.state.page == "search":
            return " Allowed now: search[your query]."
        names = list(self._clickables())
        shown = ", ".join(f"click[{snippet(n, 40)}]" for n in names[:12])
        more = f" and {len(names) - 12} more" if len(names) > 12 else ""
        return f" Allowed now: {shown}{more}."

    def _act(self, action: tuple[str, Any]) -> TurnOutcome:
        s = self.state
        before = (s.page, s.page_no, s.product, tuple(sorted(s.options.items())), tuple(s.keywords))
        verb, arg = action
        reward, terminated = 0.0, False
        if verb == "search":
            keywords = arg.lower().split(" ")
            s.keywords = keywords
            s.results = self.search_engine.search(" ".join(keywords))
            s.page, s.page_no, s.product, s.options = "results", 1, None, {}
        else:
            role, value = self._clickables()[arg]
            if role == "noop":
                pass
            elif role == "back":
                self.state = s = _State()  # WebShop starts the session over: visited marks go too
            elif role == "next":
                s.page_no += 1
            elif role == "prev":
                if s.page == "results":
                    s.page_no -= 1
                elif s.page == "item":
                    s.page, s.product, s.options = "results", None, {}
                else:
                    s.page = "item"
            elif role == "product":
                s.page, s.product, s.options = "item", value, {}
                clicked = self.shop.product(value).asin.lower().upper()  # WebShop records the clicked name upper-cased
                if clicked not in s.visited:
                    s.visited.append(clicked)
            elif role == "option":
                s.options[value] = arg
            elif role == "sub":
                s.page = value
            elif role == "buy":
                product = self.shop.product(s.product)
                s.score, s.breakdown = webshop_reward(
                    product, self.goal, product.price, s.options, nouns=self._nouns, mode=self.reward_mode
                )
                s.breakdown["noun_tagger"] = self.noun_tagger
                s.page = "done"
                reward, terminated = s.score, True
                return TurnOutcome(
                    self._page_text(), reward, terminated, True, components=purchase_components(s.breakdown)
                )
        after = (s.page, s.page_no, s.product, tuple(sorted(s.options.items())), tuple(s.keywords))
        return TurnOutcome(self._page_text(), reward, terminated, after != before)

    def _state_text(self) -> str:
        return self._page_text()

    def _success(self) -> bool:
        return self.state.score >= 1.0

    def _score(self) -> float:
        return float(self.state.score)

    def _available_actions(self) -> list[str]:
        return list(self._clickables()) if self.has_started else []

    # ------------------------------------------------------------ expert
    def _state_fields(self) -> Any:
        """The goal, the page (its query, results, page number, product, chosen options, visited links, the
        purchase's score) and, when observations repeat them, the recent pages and actions."""
        if self.goal is None:
            return None
        s = self.state
        history = None
        if (self.num_prev_obs or self.num_prev_actions) and self.observation_style == "webshop":
            # the next observation repeats the last num_prev_obs pages and, after the next action, num_prev_actions - 1 earlier ones
            history = [_tail(self._prev_obs, self.num_prev_obs), _tail(self._prev_actions, self.num_prev_actions - 1)]
        return [
            int(self.goal.index),
            s.page,
            s.keywords,
            s.results,
            s.page_no,
            s.product,
            sorted(s.options.items()),
            s.visited,
            s.score,
            history,
        ]

    def task_key(self) -> str | None:
        """The current goal's instruction (:func:`~agentgym_turn.core.splits.content_key`): equal for two
        resets that pose the same goal, whatever their seeds or catalogs; ``None`` before a reset."""
        return None if self.goal is None else content_key(self.goal.instruction_text)

    def expert_action(self) -> str:
        """The oracle shopper's next action (see :mod:`agentgym_turn.webshop.expert`)."""
        s, goal, shop = self.state, self.goal, self.shop
        if goal is None or s.page == "done":
            return "click[buy now]"
        target = shop.index_of(goal.asin)
        if s.page == "search":
            queries = _expert.expert_queries(goal, self.expert_query)
            query = next(
                (
                    q
                    for q in queries[:-1]
                    if _expert.pick(self.search_engine.search(q), shop, goal, target, self._nouns) is not None
                ),
                queries[-1],
            )
            return f"search[{query}]"
        if s.page in pages.SUB_PAGES:
            return "click[< prev]"
        if s.page == "item":
            product = shop.product(s.product)
            if s.product != target and _expert.best_reward(product, goal, self._nouns)[0] < 1.0:
                return "click[< prev]"
            todo = _expert.options_to_click(product, goal, s.options)
            return f"click[{todo[0]}]" if todo else "click[buy now]"
        # results page
        pos = _expert.pick(s.results, shop, goal, target if self.expert_browse == "target" else None, self._nouns)
        if pos is None:
            return "click[back to search]"
        wanted_page = pos // self.results_per_page + 1
        if wanted_page > s.page_no:
            return "click[next >]"
        if wanted_page < s.page_no:
            return "click[< prev]"
        if self.observation_style == "compact":
            return f"click[{pos % self.results_per_page + 1}]"
        return f"click[{shop.product(s.results[pos]).asin.lower()}]"


def _tail(items: list[str], k: int) -> list[str]:
    return items[max(len(items) - k, 0) :] if k > 0 else []


def purchase_components(breakdown: dict[str, Any]) -> dict[str, float]:
    """A purchase's reward as its three terms (``info["reward_components"]``), from ``webshop_reward``'s
    breakdown: each matched count (attributes, options, price within budget) over the goal's
    ``|att| + |opt| + 1``, times ``r_type``; they sum to the reward."""
    unit = breakdown["r_type"] * breakdown["w_price"]
    return {
        "attributes": unit * breakdown["n_attr_matched"],
        "options": unit * breakdown["n_opt_matched"],
        "price": unit * int(breakdown["r_price"]),
    }
