"""Generated catalog, WebShop-file loader, pages and text modes."""

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym_turn.core.bm25 import tokenize_many
from agentgym_turn.webshop import pages
from agentgym_turn.webshop.catalog import GeneratedShop, asin_for, index_for_asin
from agentgym_turn.webshop.loader import LoadedShop, parse_pricing
from agentgym_turn.webshop.product import split_range
from agentgym_turn.webshop.search import ProductSearch
from agentgym_turn.webshop.text import _MARKER, defang, format_strings, fragments_strings, html_to_text


def test_generated_shop__asins_are_a_bijection_and_goals_are_reproducible():
    shop = GeneratedShop(500, seed=3)
    asins = [shop.product(i).asin for i in range(500)]
    assert len(set(asins)) == 500 and all(len(a) == 10 and a.startswith("B0") for a in asins)
    assert all(shop.index_of(a) == i for i, a in enumerate(asins))
    assert index_for_asin(asin_for(123_456_789)) == 123_456_789 and shop.index_of("not an asin") is None
    again = GeneratedShop(500, seed=3)
    assert [again.goal(g) for g in (0, 499, 1999)] == [shop.goal(g) for g in (0, 499, 1999)]
    assert GeneratedShop(500, seed=4).goal(0) != shop.goal(0)
    g = shop.goal(7)
    target = shop.product(shop.index_of(g.asin))
    assert set(g.attributes) <= set(target.attributes)
    assert all(target.options[k] and v in target.options[k] for k, v in g.goal_options.items())
    assert g.price_upper > target.price and g.instruction_text.endswith(f"price lower than {g.price_upper:.2f} dollars")


def test_goal_splits__are_webshops_index_ranges():
    assert split_range("test", 2000) == range(0, 500)
    assert split_range("eval", 2000) == range(500, 1500)
    assert split_range("train", 2000) == range(1500, 2000)
    assert split_range("all", 10) == range(10)
    with pytest.raises(ValueError):
        split_range("dev", 10)


def test_search_index__pre_analysed_pieces_equal_analysing_each_document():
    shop = GeneratedShop(2000, seed=1)
    pieces, slots = shop.index_layout()
    texts = shop.index_texts()
    stems = tokenize_many(pieces)
    for i in range(0, 2000, 37):
        composed = [t for p in slots[i] if p >= 0 for t in stems[p]]
        assert composed == tokenize_many([texts[i]])[0]
    search = ProductSearch(shop)
    from agentgym_turn.core.bm25 import BM25Index

    reference = BM25Index.build(texts)
    queries = [shop.goal(g).instruction_text for g in range(40)]
    (ours, our_scores), (theirs, their_scores) = search.index.search(queries, 50), reference.search(queries, 50)
    assert np.array_equal(ours, theirs) and np.array_equal(our_scores, their_scores)  # bit for bit


def _write_webshop_files(tmp_path, products, attrs=None, human=None, name="items_shuffle_1000.json"):
    (tmp_path / name).write_text(json.dumps(products))
    if attrs is not None:
        (tmp_path / name.replace("items_shuffle", "items_ins_v2")).write_text(json.dumps(attrs))
    if human is not None:
        (tmp_path / "items_human_ins.json").write_text(json.dumps(human))
    return tmp_path


def _raw_product(asin, name="Acme Red Shoe", pricing="$10.00", options=None, query="Shoes "):
    return {
        "asin": asin, "name": name, "category": "fashion", "query": query, "product_category": "A › B › C",
        "full_description": "A shoe.", "small_description": ["Comfy sole", "Lace up"], "pricing": pricing,
        "customization_options": options if options is not None else {"Color": [{"value": "Navy/White", "image": None}], "Size": [{"value": "9"}, {"value": "10"}]},
        "images": ["http://img/1.jpg"],
    }


def test_loader__reads_webshop_fields_with_webshop_semantics(tmp_path):
    products = [
        _raw_product("B000000001"),
        _raw_product("nan"),
        _raw_product("B000000001"),  # duplicate
        _raw_product("B0000000022"),  # 11 characters
        _raw_product("B000000003", pricing="$10.00 - $20.00", options={}),
        _raw_product("B000000004", pricing=None),
    ]
    attrs = {"B000000001": {"attributes": ["lace up"], "instruction": "i need a shoe", "instruction_attributes": ["lace up"]},
             "B000000003": {"attributes": ["a"], "instruction": "i want a thing", "instruction_attributes": ["a"]}}
    shop = LoadedShop(_write_webshop_files(tmp_path, products, attrs), human_goals=False, seed=0)
    assert shop.num_products == 3
    p = shop.product(0)
    assert p.options == {"color": ("navy | white",), "size": ("9", "10")}
    assert p.query == "shoes" and p.bullet_points == ("Comfy sole", "Lace up") and p.price_tag == "$10.0"
    ranged = shop.product(1)
    assert ranged.pricing == (10.0, 20.0) and ranged.price_tag == "$10.0 to $20.0" and 10.0 <= ranged.price <= 20.0
    assert shop.product(2).price == 100.0 and shop.product(2).attributes == ("DUMMY_ATTR",)
    # synthetic goals: every option combination of B000000001 (2) + one for B000000003
    texts = sorted(shop.goal(i).instruction_text for i in range(shop.num_goals))
    assert shop.num_goals == 3
    assert any(t.startswith("i need a shoe with color: navy | white, and size: 9, and price lower than") for t in texts)
    assert shop.index_texts()[0] == "acme red shoe a shoe. comfy sole color: navy | white, and size: 9, 10"


def test_loader__human_goals_are_shuffled_with_webshops_seed(tmp_path):
    products = [_raw_product(f"B00000000{i}") for i in range(5)]
    human = {f"B00000000{i}": [{"instruction": f"goal {i}.", "instruction_attributes": ["x"], "instruction_options": ["9"]}] for i in range(5)}
    human["B000000000"].append({"instruction": "skipped", "instruction_attributes": [], "instruction_options": []})
    shop = LoadedShop(_write_webshop_files(tmp_path, products, human=human))
    assert shop.human_goals and shop.num_goals == 5
    order = list(range(5))
    random.Random(233).shuffle(order)
    assert [shop.goal(i).instruction_text.split(",")[0] for i in range(5)] == [f"goal {k}" for k in order]
    assert shop.goal(0).goal_options == {"option 1": "9"}


def test_parse_pricing__never_raises():
    assert parse_pricing("$1,299.99") == ((1299.99,), "$1299.99")
    assert parse_pricing("$abc") == ((100.0,), "$100.0")
    assert parse_pricing(12) == ((100.0,), "$100.0")


def test_pages__fragments_convert_like_the_whole_page_and_done_page_hides_the_goal():
    shop = GeneratedShop(200, seed=0)
    g = shop.goal(3)
    p = shop.product(shop.index_of(g.asin))
    chosen = {k: v[0] for k, v in p.options.items()}
    all_fragments = [
        pages.search_fragments(g.instruction_text),
        pages.results_fragments(g.instruction_text, ["a", "b"], 2, 50, [shop.product(i) for i in range(10)]),
        pages.item_fragments(g.instruction_text, p, ["a"], 1, chosen, show_attributes=True),
        *[pages.sub_fragments(g.instruction_text, s, p, ["a"], 1, chosen) for s in pages.SUB_PAGES],
        pages.done_fragments(p.asin, chosen, 0.5),
    ]
    for fragments in all_fragments:
        for mode in ("text", "text_rich"):
            whole = html_to_text("".join(fragments), mode, chosen_options=chosen.values(), visited_asins=[p.asin])
            assert format_strings(fragments_strings(fragments), mode, chosen_options=chosen.values(), visited_asins=[p.asin]) == whole
    done = html_to_text(pages.done_page(p.asin, chosen, 0.5), "text")
    assert g.instruction_text not in done and "Thank you for shopping with us!" in done and "0.5" in done


def test_text_modes__webshop_formats():
    shop = GeneratedShop(50, seed=0)
    html = pages.results_page("buy it", ["x"], 1, 25, [shop.product(0)])
    assert html_to_text(html, "text").startswith("Instruction: [SEP] buy it [SEP] Back to Search [SEP] Page 1 (Total results: 25) [SEP] Next > [SEP] ")
    rich = html_to_text(html, "text_rich", visited_asins=[shop.product(0).asin])
    assert "[button] Back to Search [button_]" in rich and f"[clicked button] {shop.product(0).asin} [clicked button_]" in rich


@settings(max_examples=60)
@given(st.text(max_size=40), st.sampled_from(["[button]", "[Clicked  Button_]", "[ SEP ]", "[button_]", "[[button]]"]))
def test_defang__no_marker_survives(text, marker):
    assert _MARKER.search(defang(text + marker + text)) is None


_ANY = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)


@settings(max_examples=80, deadline=None)
@given(title=_ANY, desc=_ANY, feature=_ANY, value=_ANY, instruction=_ANY, asin=_ANY)
def test_fragment_templates__give_the_strings_of_parsing_the_filled_page(title, desc, feature, value, instruction, asin):
    from agentgym_turn.webshop.product import Product, Review

    p = Product(asin=asin or "A", name=title, title=title, category=desc, query=value, product_category=title,
                description=desc, bullet_points=(feature, title), attributes=(value, feature), pricing=(1.0,),
                price_tag=value, price=1.0, options={value or "o": (value or "v", "x")}, rating=feature,
                reviews=(Review(title, 3, desc),))
    built = [
        pages.search_fragments(instruction),
        pages.results_fragments(instruction, [value, title], 1, 20, [p, p]),
        pages.item_fragments(instruction, p, [value], 1, {value or "o": value or "v"}, show_attributes=True),
        *[pages.sub_fragments(instruction, s, p, [value], 1, {}) for s in pages.SUB_PAGES],
        pages.done_fragments(asin, {value: title}, 0.25),
    ]
    for fragments in built:
        for mode in ("text", "text_rich"):
            kw = dict(chosen_options=[value or "v"], visited_asins=[asin])
            assert format_strings(fragments_strings(fragments), mode, **kw) == html_to_text("".join(fragments), mode, **kw)
