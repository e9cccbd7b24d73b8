"""HTML pages to observations, in WebShop's modes, with BeautifulSoup.

* ``text``: the visible strings of the page, stripped, joined by ``" [SEP] "`` (WebShop's
  ``convert_html_to_text(simple=True)``).
* ``text_rich``: one line per visible string; buttons as ``[button] x [button_]``, option
  labels as ``[button] x [button_]`` or, when chosen, ``[clicked button] x [clicked
  button_]`` (and a first line ``You have clicked x.``), product links likewise, marked
  clicked once visited (WebShop's ``simple=False``).
* ``html``: the page itself.

An env's observation is built here too: :func:`page_text` (the page of an env's state in its
mode, or in ``observation_style="compact"`` the short page of :func:`compact_page`, then the
list of actions of :func:`actions_line`) and :func:`with_history` (WebShop's earlier turns).

Visible strings are those outside ``head``, ``title``, ``script``, ``style`` and ``meta`` and not
comments (WebShop's ``tag_visible``). A marker inside a string (``[button]``, ``[button_]``,
``[clicked button]``, ``[clicked button_]``, ``[SEP]``, any case or spacing) is written with
round brackets instead, so catalog text can never look like a control of the page.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

from ..core.parsing import break_control_tokens
from .pages import page_fragments
from .product import Product

#: The observation modes an env accepts.
OBSERVATION_MODES = ("text", "text_rich", "html")
_IGNORED = frozenset({"style", "script", "head", "title", "meta", "[document]"})
_MARKER = re.compile(r"\[(\s*(?:clicked\s+)?button_?\s*|\s*sep\s*)\]", re.IGNORECASE)


def defang(text: str) -> str:
    """``text`` with every page marker's square brackets turned into round ones."""
    if "[" not in text:
        return text
    return _MARKER.sub(lambda m: f"({m.group(1)})", text)


def visible_strings(html: str) -> tuple[tuple[str, str], ...]:
    """``(string, kind)`` for every visible string of ``html`` in document order, where ``kind`` is
    ``"button"``, ``"label"`` (an option), ``"link"`` (a product link) or ``"text"``."""
    from bs4 import BeautifulSoup
    from bs4.element import Comment

    out = []
    for s in BeautifulSoup(html, "html.parser").find_all(string=True):
        parent = s.parent
        if parent is None or parent.name in _IGNORED or isinstance(s, Comment):
            continue
        if parent.name == "button":
            kind = "button"
        elif parent.name == "label":
            kind = "label"
        elif parent.get("class") == ["product-link"]:
            kind = "link"
        else:
            kind = "text"
        out.append((str(s), kind))
    return tuple(out)


_cached_strings = lru_cache(maxsize=1_024)(visible_strings)  # templates and constant fragments only
_SLOT = re.compile("\ue000(\\d+)\ue001")


def fragments_strings(fragments: Sequence[str]) -> list[tuple[str, str]]:
    """:func:`visible_strings` of the page ``"".join(fragments)``, parsed fragment by fragment.

    A :class:`~agentgym_turn.webshop.pages.Fragment` is parsed once per *template* (a few dozen
    exist) and its values are placed into the parsed strings: escaped text parses back to
    itself, so this equals parsing the filled HTML (property-tested), at a fraction of the cost.
    """
    out: list[tuple[str, str]] = []
    for fragment in fragments:
        template = getattr(fragment, "template", None)
        if template is None:
            out.extend(_cached_strings(fragment))
            continue
        values = fragment.values
        fill = lambda m: values[int(m.group(1))]  # noqa: E731
        out.extend((_SLOT.sub(fill, s) if "\ue000" in s else s, kind) for s, kind in _cached_strings(template))
    return out


def format_strings(
    strings: Sequence[tuple[str, str]],
    mode: str,
    *,
    chosen_options: Collection[str] = (),
    visited_asins: Collection[str] = (),
    selection_url: str | None = None,
) -> str:
    """The observation of ``mode`` ("text" or "text_rich") from a page's visible strings.

    In ``text_rich`` an option label is marked clicked when it is one of ``chosen_options``, or,
    when ``selection_url`` is given, by WebShop's own rule (``convert_html_to_text``): when the
    label in double quotes occurs in the page URL, whose last part is the chosen options as JSON;
    so a label with ``"`` or non-ASCII text, which JSON escapes, is never marked. A product link is
    marked when its text is one of ``visited_asins`` (exactly, as WebShop compares).
    """
    if mode == "text":
        pieces = []
        for s, _ in strings:
            if s == "\n":
                continue
            t = s.strip()
            if t:
                pieces.append(defang(t))
        return " [SEP] ".join(pieces)
    if mode != "text_rich":
        raise ValueError(f"observation_mode must be one of {OBSERVATION_MODES}, got {mode!r}.")
    chosen = set(chosen_options)
    visited = set(visited_asins)
    head: list[str] = []
    lines: list[str] = []
    for s, kind in strings:
        if s == "\n" or not s.strip():
            continue
        t = defang(s)
        if kind == "button":
            lines.append(f"[button] {t} [button_]")
        elif kind == "label":
            marked = f'"{s}"' in selection_url if selection_url is not None else s in chosen
            if marked:
                lines.append(f"  [clicked button] {t} [clicked button_]")
                head.append(f"You have clicked {t}.")
            else:
                lines.append(f"  [button] {t} [button_]")
        elif kind == "link":
            mark = "clicked button" if s in visited else "button"
            lines.append(f"\n[{mark}] {t} [{mark}_]")
        else:
            lines.append(t)
    prefix = "".join(f"{h}\n" for h in reversed(head))
    return prefix + "\n".join(lines) + "\n"


def html_to_text(
    html: str,
    mode: str,
    *,
    chosen_options: Collection[str] = (),
    visited_asins: Collection[str] = (),
) -> str:
    """Turn a page into the observation of ``mode`` (see the module docstring).

    ``chosen_options`` are the option values picked on this product page and
    ``visited_asins`` the products already opened (both only matter in ``text_rich``).
    """
    if mode == "html":
        return html
    return format_strings(visible_strings(html), mode, chosen_options=chosen_options, visited_asins=visited_asins)


def selection_url(state: Any) -> str:
    """The variable part of WebShop's item-page URL: keywords, results page, options as JSON
    (``text_rich`` marks an option label by looking for it in this string, as WebShop does)."""
    s = state
    return f"{'+'.join(s.keywords)}/{s.page_no}/{json.dumps(s.options)}"


def compact_page(
    page: str,
    instruction: str,
    *,
    results: Sequence[Product] = (),
    first: int = 0,
    total: int = 0,
    page_no: int = 1,
    product: Product | None = None,
    options: Mapping[str, str] | None = None,
    score: float = 0.0,
) -> str:
    """One page in ``observation_style="compact"``: plain lines, no instruction after the first
    message, no list of actions (the page's clickables are its lines' ids, option values and the
    buttons :data:`COMPACT_INTRO` names). A result's link is its number on the page (``1``, ``2``...),
    not its ASIN: a short name a small model need not copy letter by letter.

    ``page`` is the page kind (``search``, ``results``, ``item``, a sub-page or ``done``);
    ``results`` the products shown on a results page and ``first`` the 0-based rank of the first
    of them among ``total`` hits; ``product`` and ``options`` (option name -> chosen value) the item.
    """
    if page == "search":
        return f"Instruction: {instruction}"
    if page == "results":
        if not results:
            return f"No results on page {page_no} ({total} in all)."
        lines = [f"Results {first + 1}-{first + len(results)} of {total}:"]
        lines += [f"{k}: {p.title} {p.price_tag}" for k, p in enumerate(results, 1)]
        return "\n".join(lines)
    if page == "done":
        return f"Bought {product.asin.lower() if product else ''}. Score: {score:.2f}"
    assert product is not None
    if page == "item":
        lines = [f"{product.title} {product.price_tag}"]
        chosen = options or {}
        # a chosen group shows only its choice: every option click re-sends the page, so it shrinks as it fills
        lines += [
            f"{name}: {chosen[name]} (chosen)" if name in chosen else f"{name}: {' | '.join(values)}"
            for name, values in product.options.items()
        ]
        return "\n".join(lines)
    texts = {
        "Description": product.description,
        "Features": " | ".join(product.bullet_points),
        "Reviews": f"{len(product.reviews)} reviews",
        "Attributes": ", ".join(product.attributes),
    }
    return f"{page}: {texts.get(page, '')}"


def compact_text(state: Any, shop: Any, instruction: str, results_per_page: int) -> str:
    """:func:`compact_page` of an env's page ``state`` over ``shop``."""
    s = state
    first = (s.page_no - 1) * results_per_page
    shown = [shop.product(i) for i in s.results[first : first + results_per_page]] if s.page == "results" else []
    product = shop.product(s.product) if s.product is not None else None
    return compact_page(
        s.page,
        instruction,
        results=shown,
        first=first,
        total=len(s.results),
        page_no=s.page_no,
        product=product,
        options=s.options,
        score=s.score,
    )


def actions_line(page: str, clickables: list[str]) -> str:
    """The list of available actions an observation ends with (``list_actions``), for page kind ``page``."""
    if page == "search":
        return "\n\nAvailable actions: search[<your query>]"
    return "\n\nAvailable actions: " + ", ".join(f"click[{c}]" for c in clickables)


def page_text(
    state: Any,
    shop: Any,
    instruction: str,
    *,
    style: str,
    mode: str,
    results_per_page: int,
    show_attributes: bool,
    clickables: Callable[[], Iterable[str]] | None = None,
) -> str:
    """The observation of an env's page ``state`` over ``shop``: :func:`compact_text` in the
    ``compact`` style, else the page in observation ``mode``, followed by :func:`actions_line`
    when ``clickables`` (called only then) gives the page's clickable names."""
    if style == "compact":
        return compact_text(state, shop, instruction, results_per_page)
    fragments = page_fragments(state, shop, instruction, results_per_page, show_attributes=show_attributes)
    if mode == "html":
        page = "".join(fragments)
    else:
        s = state
        product = shop.product(s.product) if s.product is not None else None
        url = selection_url(s) if product is not None and s.page == "item" else ""
        page = format_strings(fragments_strings(fragments), mode, visited_asins=s.visited, selection_url=url)
    if clickables is None or state.page == "done":
        return page
    return page + actions_line(state.page, list(clickables()))


def with_history(
    observation: str, actions: list[str], observations: list[str], num_prev_obs: int, num_prev_actions: int
) -> str:
    """WebShop's observation history (``WebAgentTextEnv.step``): the last ``num_prev_actions``
    actions (``actions[-1]`` is this turn's) and ``num_prev_obs`` earlier observations
    (``observations[-1]`` is the previous one), oldest first, then ``observation``, joined by
    ``" [SEP] "``. A repeated action is flattened to one line with control-token shapes broken
    (:func:`~agentgym_turn.core.parsing.break_control_tokens`): the agent's text never forges a line or a chat turn."""
    parts = [observation]
    for i in range(1, 1 + max(num_prev_obs, num_prev_actions)):
        if len(actions) >= i and num_prev_actions >= i:
            parts.append(break_control_tokens(" ".join(actions[-i].split())))
        if len(observations) >= i and num_prev_obs >= i:
            parts.append(observations[-i])
    return " [SEP] ".join(reversed(parts))
