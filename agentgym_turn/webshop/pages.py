"""The shop's pages as HTML: one template layer for the env and the HTTP site.

Each page is a pure function of its inputs returning an HTML string (``*_page``), or the same
HTML as a list of self-contained fragments (``*_fragments``: the page is their concatenation;
the env converts and caches text per fragment, since product blocks repeat across pages) with the structure of
WebShop's templates (``web_agent_site/templates/*.html``: element ids, the ``btn`` class on
buttons, ``product-link`` anchors, radio ``input`` + ``label`` pairs for options, the same
visible strings), without the external CSS/JS links, so the text modes derived from it read
like WebShop's. Every string that comes from the catalog or the agent is HTML-escaped
(``&``, ``<``, ``>``, quotes), so no product text can add an element to a page.

URLs follow WebShop's routes (``/search_results/<session>/<keywords>/<page>``...) with their
dynamic parts percent-encoded; the site can serve these strings as they are.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from html import escape
from typing import Any, Mapping, Sequence
from urllib.parse import quote

from .product import Product

BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"
SEARCH = "Search"
#: Item sub-pages, in the order of their buttons.
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")

_HEAD = (
    '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n<title>WebShop</title>\n'
    '<link rel="stylesheet" href="/static/style.css">\n</head>\n<body>\n<div class="container py-5">\n'
)
_TAIL = "</div>\n</body>\n</html>\n"


def _e(text: object) -> str:
    return escape(str(text), quote=True)


_SLOT_RE = re.compile("\ue000(\\d+)\ue001")


def _s(i: int) -> str:
    """Placeholder ``i`` of a fragment template (private-use characters no page text needs)."""
    return f"\ue000{i}\ue001"


class Fragment(str):
    """The HTML of one self-contained piece of a page, filled from a template.

    It *is* the HTML string (``"".join(fragments)`` is the page); ``template`` is the same HTML
    with placeholders where ``values`` (catalog or agent text, HTML-escaped when filled) go, so
    the text layer can parse each template once and place the values into the parsed strings.
    """

    template: str
    values: tuple[str, ...]

    def __new__(cls, template: str, *values: object) -> "Fragment":
        vals = tuple(str(v) for v in values)
        obj = super().__new__(cls, _SLOT_RE.sub(lambda m: _e(vals[int(m.group(1))]), template))
        obj.template = template
        obj.values = vals
        return obj

    def __reduce__(self):
        return (Fragment, (self.template, *self.values))


def _u(text: str) -> str:
    # a page quotes its session, product and keywords in every link: short ones are cached
    return _quote_short(text) if len(text) <= 256 else _quote(text)


def _quote(text: str) -> str:
    # surrogatepass: any agent string is a legal search, lone surrogates included
    return quote(text.encode("utf-8", errors="surrogatepass"), safe="")


_quote_short = lru_cache(maxsize=4096)(_quote)


def _instruction(instruction: str, *, search_page: bool = False) -> Fragment:
    # WebShop's search_page.html writes "Instruction: <br>", every other template "Instruction:<br>";
    # text_rich keeps that space
    label = "Instruction: " if search_page else "Instruction:"
    return Fragment(
        f'<div id="instruction-text" class="text-center">\n<h4>{label}<br>{_s(0)}</h4>\n</div>\n', instruction
    )


def _button(label: str, action: str, css: str = "btn btn-primary") -> Fragment:
    return Fragment(
        f'<div class="row top-buffer">\n<form method="post" action="{_s(0)}">\n'
        f'<button type="submit" class="{css}">{_e(label)}</button>\n</form>\n</div>\n',
        action,
    )


def _keywords_path(keywords: Sequence[str]) -> str:
    return _u("+".join(keywords))


def search_fragments(instruction: str, *, session_id: str = "session") -> list[str]:
    """The start page: the logo, the instruction and a search bar."""
    return [
        _HEAD,
        '<div id="logo" class="text-center">\n<h2>WebShop</h2>\n</div>\n',
        _instruction(instruction, search_page=True),
        Fragment(
            f'<form role="form" id="form-buscar" method="post" action="{_s(0)}">\n'
            '<div class="input-group">\n<input id="search_input" class="form-control" type="text" '
            'name="search_query" placeholder="Search..." required/>\n'
            f'<button class="btn btn-success" type="submit">{SEARCH}</button>\n</div>\n</form>\n',
            f"/{_u(session_id)}",
        ),
        _TAIL,
    ]


def results_fragments(
    instruction: str,
    keywords: Sequence[str],
    page: int,
    total: int,
    products: Sequence[Product],
    *,
    session_id: str = "session",
) -> list[str]:
    """A page of search results: ``Back to Search``, paging buttons and up to 10 products.

    As in WebShop's ``results_page.html``, ``< Prev`` shows from page 2 on and ``Next >`` always,
    even on the last page (it leads to an empty page).
    """
    base = f"/search_results/{_u(session_id)}/{_keywords_path(keywords)}"
    parts = [_HEAD, _instruction(instruction), _button(BACK_TO_SEARCH, f"/{_u(session_id)}", "btn btn-success")]
    parts.append(f'<div class="display-4">\n<h3>Page {int(page)} (Total results: {int(total)})</h3>\n</div>\n')
    if page > 1:
        parts.append(_button(PREV_PAGE, f"{base}/{page - 1}"))
    parts.append(_button(NEXT_PAGE, f"{base}/{page + 1}"))
    for p in products:
        url = f"/item_page/{_u(session_id)}/{_u(p.asin)}/{_keywords_path(keywords)}/{page}/%7B%7D"
        parts.append(_PRODUCT_BLOCK(url, p.asin, p.title, p.price_tag))
    parts.append(_TAIL)
    return parts


def _PRODUCT_BLOCK(url: str, asin: str, title: str, price_tag: str) -> Fragment:
    return Fragment(
        '<div class="list-group-item searched-product">\n'
        f'<h4 class="product-asin"><a class="product-link" href="{_s(0)}">{_s(1)}</a></h4>\n'
        f'<h4 class="product-title">{_s(2)}</h4>\n'
        f'<h5 class="product-price">{_s(3)}</h5>\n'
        "</div>\n",
        url,
        asin,
        title,
        price_tag,
    )


def _item_base(session_id: str, product: Product, keywords: Sequence[str], page: int) -> str:
    return f"{_u(session_id)}/{_u(product.asin)}/{_keywords_path(keywords)}/{page}"


def item_fragments(
    instruction: str,
    product: Product,
    keywords: Sequence[str],
    page: int,
    options: Mapping[str, str],
    *,
    show_attributes: bool = False,
    session_id: str = "session",
) -> list[str]:
    """A product page: option radios, title, price, rating, sub-page buttons and ``Buy Now``."""
    base = _item_base(session_id, product, keywords, page)
    chosen = json.dumps(dict(options), sort_keys=True)
    parts = [
        _HEAD,
        _instruction(instruction),
        _button(BACK_TO_SEARCH, f"/{_u(session_id)}", "btn btn-success"),
        _button(PREV_PAGE, f"/search_results/{_u(session_id)}/{_keywords_path(keywords)}/{page}"),
    ]
    for name, values in product.options.items():
        parts.append(Fragment(f'<div class="row top-buffer">\n<h4>{_s(0)}</h4>\n<div class="radio-toolbar">\n', name))
        for k, value in enumerate(values):
            picked = dict(options)
            picked[name] = value
            url = f"/item_page/{base}/{_u(json.dumps(picked, sort_keys=True))}"
            checked = " checked" if options.get(name) == value else ""
            radio_id = f"radio_{name}{k}"
            parts.append(
                Fragment(
                    f'<input type="radio" id="{_s(0)}" name="{_s(1)}" value="{_s(2)}" '
                    f'data-url="{_s(3)}"{checked}>\n<label for="{_s(0)}">{_s(2)}</label>\n',
                    radio_id,
                    name,
                    value,
                    url,
                )
            )
        parts.append("</div>\n</div>\n")
    parts.append(
        Fragment(
            f'<div class="col-md-6">\n<h2>{_s(0)}</h2>\n<h4>Price: {_s(1)}</h4>\n<h4>Rating: {_s(2)}</h4>\n',
            product.title,
            product.price_tag,
            product.rating,
        )
    )
    for name in SUB_PAGES:
        if name == "Attributes" and not show_attributes:
            continue
        parts.append(_button(name, f"/item_sub_page/{base}/{name}/{_u(chosen)}"))
    parts.append("</div>\n")
    parts.append(_button(BUY_NOW, f"/done/{_u(session_id)}/{_u(product.asin)}/{_u(chosen)}", "btn btn-lg purchase"))
    parts.append(_TAIL)
    return parts


def sub_fragments(
    instruction: str,
    which: str,
    product: Product,
    keywords: Sequence[str],
    page: int,
    options: Mapping[str, str],
    *,
    session_id: str = "session",
) -> list[str]:
    """A product's ``Description``, ``Features``, ``Reviews`` or ``Attributes`` page."""
    if which not in SUB_PAGES:
        raise ValueError(f"which must be one of {SUB_PAGES}, got {which!r}.")
    base = _item_base(session_id, product, keywords, page)
    parts = [
        _HEAD,
        _instruction(instruction),
        _button(BACK_TO_SEARCH, f"/{_u(session_id)}", "btn btn-success"),
        _button(PREV_PAGE, f"/item_page/{base}/{_u(json.dumps(dict(options), sort_keys=True))}"),
        f'<div class="card card-body" name="{which.lower()}">\n',
    ]
    # the visible text of WebShop's sub-page templates, quirks included: a leading space before
    # each feature and attribute, no placeholder for an empty description, features or reviews
    if which == "Description":
        parts.append(Fragment(f'<p class="product-info">{_s(0)}</p>\n', product.description))
    elif which == "Features":
        parts.append("<ul>\n")
        parts.extend(Fragment(f'<li><p class="product-info"> {_s(0)}</p></li>\n', b) for b in product.bullet_points)
        parts.append("</ul>\n")
    elif which == "Reviews":
        for r in product.reviews:
            stars = '<span class="fa fa-star star-active"></span>\n' * max(0, int(r.score))
            stars += '<span class="fa fa-star star-inactive"></span>\n' * max(0, 5 - int(r.score))
            parts.append(
                Fragment(
                    f'<div class="card">\n<h4 class="blue-text mt-3">"{_s(0)}"</h4>\n'
                    f'<p class="text-left">\n<span>{_s(1)}</span>\n{stars}</p>\n<p class="content">{_s(2)}</p>\n</div>\n',
                    r.title,
                    r.score,
                    r.body,
                )
            )
    else:  # Attributes
        parts.append("<ul>\n")
        parts.extend(Fragment(f'<li><p class="attribute"> {_s(0)}</p></li>\n', a) for a in product.attributes)
        parts.append("</ul>\n")
        parts.append(
            Fragment(
                f'<h5 class="product-category">{_s(0)}</h5>\n<h5 class="product-query">{_s(1)}</h5>\n'
                f'<h5 class="product-product_category">{_s(2)}</h5>\n',
                product.category,
                product.query,
                product.product_category,
            )
        )
    parts.append("</div>\n")
    parts.append(_TAIL)
    return parts


def options_json(options: Mapping[str, str]) -> str:
    """``options`` as Flask's ``tojson`` filter writes them on WebShop's done page (sorted keys,
    ASCII only, ``< > & '`` as ``\\u`` escapes)."""
    text = json.dumps(dict(options), sort_keys=True, ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("'", "\\u0027")


def done_fragments(asin: str, options: Mapping[str, str], reward: float) -> list[str]:
    """The thank-you page after ``Buy Now``, with the visible text of WebShop's ``done_page.html``
    as its text env renders it: the purchase (ASIN, options), the score, and the labels of the
    hidden debugging fields, which the text env leaves empty or ``None``, so the goal never shows."""
    return [
        _HEAD,
        Fragment(
            '<div id="thankyou" class="text-center">\n<h1>Thank you for shopping with us!</h1>\n</div>\n'
            '<div id="stats" class="text-center">\n'
            "<h3>Your code: </h3>\n<p><pre>None</pre> (Paste it in your MTurk interface.)</p>\n"
            '<div style="display:none">\n<h2>Purchased</h2>\n'
            f'<h4 id="asin">asin<pre>{_s(0)}</pre></h4>\n<h4 id="options">options<pre>{_s(1)}</pre></h4>\n'
            "<h4>attrs<pre>None</pre></h4>\n<h4>category<pre>None</pre></h4>\n<h4>query<pre>None</pre></h4>\n"
            "<h4>product category<pre>None</pre></h4>\n<h2>Target</h2>\n"
            "<h4>asin<pre></pre></h4>\n<h4>options<pre></pre></h4>\n<h4>attrs<pre></pre></h4>\n"
            "<h4>price upper<pre></pre></h4>\n<h4>instuction text<pre></pre></h4>\n<h4>category<pre></pre></h4>\n"
            "<h4>product category<pre></pre></h4>\n<h4>query<pre></pre></h4>\n"
            '<h4>Goal <div id="goal"><pre>None</pre></div></h4>\n<h2>Reward</h2>\n</div>\n'
            f'<h3 id="reward">Your score (min 0.0, max 1.0)<pre>{_s(2)}</pre></h3>\n'
            '<h4 hidden>Reward Details <div id="reward_info"><pre>None</pre></div></h4>\n'
            "</div>\n",
            asin,
            options_json(options),
            reward,
        ),
        _TAIL,
    ]


def page_fragments(
    state: Any, shop: Any, instruction: str, results_per_page: int, *, show_attributes: bool
) -> list[str]:
    """The fragments of the page an env's session shows: ``state`` is the env's page state (page
    kind, keywords, results, page number, product, options, score) and ``shop`` its catalog."""
    s = state
    if s.page == "search":
        return search_fragments(instruction)
    if s.page == "results":
        start = (s.page_no - 1) * results_per_page
        shown = [shop.product(i) for i in s.results[start : start + results_per_page]]
        return results_fragments(instruction, s.keywords, s.page_no, len(s.results), shown)
    if s.page == "done":
        asin = shop.product(s.product).asin if s.product is not None else ""
        return done_fragments(asin, s.options, s.score)
    product = shop.product(s.product)
    if s.page == "item":
        return item_fragments(instruction, product, s.keywords, s.page_no, s.options, show_attributes=show_attributes)
    return sub_fragments(instruction, s.page, product, s.keywords, s.page_no, s.options)


def _joined(fragments_fn):
    def page(*args, **kwargs) -> str:
        return "".join(fragments_fn(*args, **kwargs))

    page.__name__ = fragments_fn.__name__.replace("_fragments", "_page")
    page.__doc__ = (fragments_fn.__doc__ or "") + " Returns the page's HTML."
    return page


search_page = _joined(search_fragments)
results_page = _joined(results_fragments)
item_page = _joined(item_fragments)
sub_page = _joined(sub_fragments)
done_page = _joined(done_fragments)
