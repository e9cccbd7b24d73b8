"""Generated catalog, WebShop-file loader, pages and text modes."""

import itertools
import json
import os
import random

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym_turn.bm25 import tokenize_many
from agentgym_turn.core.files import DataFileError
from agentgym_turn.webshop import pages
from agentgym_turn.webshop.generator.catalog import GeneratedShop, asin_for, index_for_asin
from agentgym_turn.webshop.goals import GoalPool, draw_limited, goal_record, goal_weights, rarity_weights, select_goals
from agentgym_turn.webshop.loader import LoadedShop, parse_pricing, review_score
from agentgym_turn.webshop.product import split_range
from agentgym_turn.webshop.search import ANALYZER, LENGTH_NORM, ProductSearch
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
    stems = tokenize_many(pieces, analyzer=ANALYZER)
    for i in range(0, 2000, 37):
        composed = [t for p in slots[i] if p >= 0 for t in stems[p]]
        assert composed == tokenize_many([texts[i]], analyzer=ANALYZER)[0]
    search = ProductSearch(shop)
    from agentgym_turn.bm25 import BM25Index

    reference = BM25Index.build(texts, analyzer=ANALYZER, length_norm=LENGTH_NORM)
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
        "asin": asin,
        "name": name,
        "category": "fashion",
        "query": query,
        "product_category": "A › B › C",
        "full_description": "A shoe.",
        "small_description": ["Comfy sole", "Lace up"],
        "pricing": pricing,
        "customization_options": options
        if options is not None
        else {"Color": [{"value": "Navy/White", "image": None}], "Size": [{"value": "9"}, {"value": "10"}]},
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
    attrs = {
        "B000000001": {
            "attributes": ["lace up"],
            "instruction": "i need a shoe",
            "instruction_attributes": ["lace up"],
        },
        "B000000003": {"attributes": ["a"], "instruction": "i want a thing", "instruction_attributes": ["a"]},
    }
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
    human = {
        f"B00000000{i}": [{"instruction": f"goal {i}.", "instruction_attributes": ["x"], "instruction_options": ["9"]}]
        for i in range(5)
    }
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
            assert (
                format_strings(
                    fragments_strings(fragments), mode, chosen_options=chosen.values(), visited_asins=[p.asin]
                )
                == whole
            )
    done = html_to_text(pages.done_page(p.asin, chosen, 0.5), "text")
    assert g.instruction_text not in done and "Thank you for shopping with us!" in done and "0.5" in done


def test_text_modes__webshop_formats():
    shop = GeneratedShop(50, seed=0)
    html = pages.results_page("buy it", ["x"], 1, 25, [shop.product(0)])
    assert html_to_text(html, "text").startswith(
        "Instruction: [SEP] buy it [SEP] Back to Search [SEP] Page 1 (Total results: 25) [SEP] Next > [SEP] "
    )
    rich = html_to_text(html, "text_rich", visited_asins=[shop.product(0).asin])
    assert (
        "[button] Back to Search [button_]" in rich
        and f"[clicked button] {shop.product(0).asin} [clicked button_]" in rich
    )


@settings(max_examples=60)
@given(st.text(max_size=40), st.sampled_from(["[button]", "[Clicked  Button_]", "[ SEP ]", "[button_]", "[[button]]"]))
def test_defang__no_marker_survives(text, marker):
    assert _MARKER.search(defang(text + marker + text)) is None


_ANY = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)


@settings(max_examples=80, deadline=None)
@given(title=_ANY, desc=_ANY, feature=_ANY, value=_ANY, instruction=_ANY, asin=_ANY)
def test_fragment_templates__give_the_strings_of_parsing_the_filled_page(
    title, desc, feature, value, instruction, asin
):
    from agentgym_turn.webshop.product import Product, Review

    p = Product(
        asin=asin or "A",
        name=title,
        title=title,
        category=desc,
        query=value,
        product_category=title,
        description=desc,
        bullet_points=(feature, title),
        attributes=(value, feature),
        pricing=(1.0,),
        price_tag=value,
        price=1.0,
        options={value or "o": (value or "v", "x")},
        rating=feature,
        reviews=(Review(title, 3, desc),),
    )
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
            assert format_strings(fragments_strings(fragments), mode, **kw) == html_to_text(
                "".join(fragments), mode, **kw
            )


# ---------------------------------------------------------------- data limits


def test_loader__8_groups_of_10_values_make_a_bounded_sample_of_goals(tmp_path):
    groups = {f"G{g}": [{"value": f"v{g}{k}"} for k in range(10)] for g in range(8)}  # 1e8 combinations
    attrs = {"B000000001": {"attributes": ["a"], "instruction": "i need it", "instruction_attributes": ["a"]}}
    folder = _write_webshop_files(tmp_path, [_raw_product("B000000001", options=groups)], attrs)
    with pytest.warns(
        UserWarning, match=r"items_shuffle_1000\.json.*100,000,000 option combinations.*max_goal_combinations=10,000"
    ):
        shop = LoadedShop(folder, human_goals=False)
    assert shop.num_goals == 10_000
    combos = {tuple(sorted(shop.goal(i).goal_options.items())) for i in range(shop.num_goals)}
    assert len(combos) == 10_000 and all(len(c) == 8 for c in combos)
    with pytest.warns(UserWarning):
        again = LoadedShop(folder, human_goals=False)
    assert [again.goal(i) for i in range(0, 10_000, 999)] == [shop.goal(i) for i in range(0, 10_000, 999)]
    with pytest.raises(DataFileError, match=r"items_ins_v2_1000\.json.*max_goals=500.*num_products"):
        with pytest.warns(UserWarning):
            LoadedShop(folder, human_goals=False, max_goals=500)


def test_loader__combinations_under_the_limit_are_all_of_them_in_webshops_order(tmp_path):
    from agentgym_turn.webshop.loader import _combinations

    groups = [("a", "b"), ("x", "y", "z")]
    assert _combinations(groups, 6, random.Random(0)) == (list(itertools.product(*groups)), 6)
    sample, total = _combinations(groups, 4, random.Random(0))
    assert total == 6 and len(set(sample)) == 4 and sample == sorted(sample, key=list(itertools.product(*groups)).index)


def test_review_score__inf_nan_and_garbage_never_raise():
    assert [
        review_score(x) for x in ("inf", "-inf", "nan", float("inf"), "great", None, [], "4.7", 9, -2, "1e999")
    ] == [0, 0, 0, 0, 0, 0, 0, 4, 5, 0, 0]


def test_loader__reviews_with_inf_scores_load(tmp_path):
    folder = _write_webshop_files(
        tmp_path,
        [_raw_product("B000000001")],
        human={"B000000001": [{"instruction": "x", "instruction_attributes": ["a"], "instruction_options": []}]},
    )
    (folder / "reviews.json").write_text(
        json.dumps(
            [
                {
                    "asin": "B000000001",
                    "average_rating": "inf",
                    "reviews": [
                        {"title": "t", "score": "inf", "review": "b"},
                        {"title": "u", "stars": "NaN", "body": "c"},
                        {"title": "v", "score": 4},
                    ],
                }
            ]
        )
    )
    shop = LoadedShop(folder)
    assert [r.score for r in shop.product(0).reviews] == [0, 0, 4]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_loader__refuses_fifos_devices_and_oversized_files(tmp_path):
    fifo = tmp_path / "items_shuffle.json"
    os.mkfifo(fifo)
    with pytest.raises(DataFileError, match="not a regular file"):
        LoadedShop(fifo)
    with pytest.raises(DataFileError, match="not a regular file"):
        LoadedShop(tmp_path)  # the folder's products file is that FIFO
    link_dir = tmp_path / "zero"
    link_dir.mkdir()
    (link_dir / "items_shuffle.json").symlink_to("/dev/zero")
    with pytest.raises(DataFileError, match="not a regular file"):
        LoadedShop(link_dir)
    big = tmp_path / "big"
    big.mkdir()
    _write_webshop_files(big, [_raw_product(f"B00000000{i}") for i in range(5)], human={})
    with pytest.raises(DataFileError, match=r"items_shuffle_1000\.json.*more than 100 bytes"):
        LoadedShop(big, max_file_bytes=100)


def test_loader__invalid_json_names_file_and_line(tmp_path):
    (tmp_path / "items_shuffle.json").write_text('[\n{"asin": "B000000001",\n oops}\n]')
    with pytest.raises(DataFileError, match=r"items_shuffle\.json:3: not valid JSON"):
        LoadedShop(tmp_path, human_goals=False)


def test_loader__asins_named_like_buttons_load_as_in_webshop(tmp_path):
    # the env keeps them from acting as buttons (tests/agentgym_turn/webshop/test_env.py, products_named_like_buttons)
    names = ["Next >", "< Prev", "buy now", "Features", "Reviews"]  # longer ones (Back to Search) exceed 10 characters
    products = [_raw_product(a) for a in names]
    human = {a: [{"instruction": "x", "instruction_attributes": ["a"], "instruction_options": []}] for a in names}
    shop = LoadedShop(_write_webshop_files(tmp_path, products, human=human))
    assert [shop.product(i).asin for i in range(shop.num_products)] == names and shop.num_goals == 5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_products="abc"), r"num_products must be a whole number \(e\.g\. num_products=1000\), got 'abc'"),
        (dict(num_products=3), "num_products must be at least 10"),
        (dict(catalog_seed="x"), "catalog_seed must be a whole number"),
        (dict(human_goals=True), "human_goals=True needs WebShop's files: pass data_path"),
        (dict(reward_mode="fuzzy"), "reward_mode must be one of"),
        (dict(limit_goals="10"), "limit_goals must be -1"),
        (dict(filter_goals=3), "filter_goals must be a function"),
        (dict(goal_weighting="rare"), "goal_weighting must be one of"),
    ],
)
def test_env_arguments__errors_name_the_parameter_and_the_fix(kwargs, message):
    import agentgym_turn  # noqa: F401

    with pytest.raises(ValueError, match=message):
        gym.make("TurnWebShop-v0", **{"num_products": 100, **kwargs})


# ---------------------------------------------------------------- goal selection (WebShop's options)
def test_rarity_weights__mean_inverse_attribute_count():
    w = rarity_weights([["a", "b"], ["a"], ["c"], []])
    assert w.tolist() == [(1 / 2 + 1) / 2, 1 / 2, 1.0, 0.0]


def _webshop_limited(weights, limit, num_goals):
    """WebShop's SimServer, restated: after seed 233 and a shuffle of all goals, draw by
    bisecting the cumulative weights (the insertion point, capped at n - 1), rejecting repeats."""
    rng = random.Random(233)
    rng.shuffle(list(range(num_goals)))
    cum = [0.0] + list(itertools.accumulate(weights))
    out = []
    while len(out) < limit:
        i = min(__import__("bisect").bisect(cum, rng.uniform(0, cum[-1])), len(cum) - 2)
        if i not in out:
            out.append(i)
    return out


def test_select_goals__filter_then_limit_as_webshop_does():
    shop = GeneratedShop(100, seed=2, num_goals=300)
    seen = []
    kept = select_goals(shop, filter_goals=lambda i, g: seen.append((i, g)) or i % 2 == 0)
    assert list(kept) == list(range(0, 300, 2)) and len(seen) == 300
    i, record = seen[7]
    assert record == goal_record(shop.goal(7), goal_weights(shop)[7])
    assert set(record) == {
        "asin",
        "category",
        "query",
        "name",
        "product_category",
        "instruction_text",
        "attributes",
        "price_upper",
        "goal_options",
        "weight",
    }
    weights = goal_weights(shop)
    evens = [weights[i] for i in range(0, 300, 2)]
    limited = select_goals(shop, filter_goals=lambda i, g: i % 2 == 0, limit_goals=40)
    assert list(limited) == [2 * p for p in _webshop_limited(evens, 40, 300)]
    assert 0 not in limited  # WebShop's draw never returns position 0
    with pytest.raises(ValueError, match="filter_goals kept none"):
        select_goals(shop, filter_goals=lambda i, g: False)
    with pytest.raises(ValueError, match="limit_goals=2 asks for more goals"):
        draw_limited([1.0, 0.0, 0.0], 2, random.Random(0))


def test_goal_pool__splits_positions_of_the_selection_and_draws_by_weight():
    shop = GeneratedShop(100, seed=2, num_goals=3000)
    pool = GoalPool(shop, "eval", filter_goals=lambda i, g: i % 2 == 1)
    assert list(pool.indices) == [2 * p + 1 for p in range(500, 1500)]
    assert list(GoalPool(shop, "test").indices) == list(range(500))
    weighted = GoalPool(shop, "test", weighting="weighted")
    w = goal_weights(shop)[:500]
    rng = np.random.default_rng(0)
    counts = np.bincount([weighted.draw(rng) for _ in range(20_000)], minlength=500)
    heavy, light = np.argsort(w)[-50:], np.argsort(w)[:50]
    assert counts[heavy].sum() / counts[light].sum() > 0.8 * w[heavy].sum() / w[light].sum()
    uniform = GoalPool(shop, "test")
    assert uniform.draw(np.random.default_rng(5)) == int(
        np.random.default_rng(5).integers(0, 500)
    )  # same draws as before


def test_goal_pool__a_content_split_reads_each_shops_instructions_once():
    from agentgym_turn.core.splits import content_split
    from agentgym_turn.webshop.goals import SPLIT_GOALS

    SPLIT_GOALS.clear()
    shop = GeneratedShop(100, seed=7, num_goals=900)
    reads = []
    goal = shop.goal
    shop.goal = lambda i: reads.append(i) or goal(i)
    first = GoalPool(shop, "all", content_split="test")
    assert list(first.indices) == [i for i in range(900) if content_split(goal(i).instruction_text) == "test"]
    assert len(reads) == 900
    again = GoalPool(shop, "all", content_split="test")  # another env of the same shop
    assert again.indices == first.indices and len(reads) == 900
    filtered = GoalPool(shop, "all", content_split="test", filter_goals=lambda i, g: True)  # a filter is not cached
    assert filtered.indices == first.indices and len(reads) > 900
    assert GoalPool(shop, "test", content_split="test").indices == tuple(i for i in first.indices if i < 500)
    SPLIT_GOALS.clear()


def test_env__draws_only_the_goals_filter_and_limit_keep():
    import agentgym_turn  # noqa: F401

    env = gym.make(
        "TurnWebShop-v0",
        num_products=100,
        goal_split="all",
        filter_goals=lambda i, g: i % 7 == 3,
        limit_goals=20,
        goal_weighting="weighted",
    )
    kept = set(select_goals(env.unwrapped.shop, filter_goals=lambda i, g: i % 7 == 3, limit_goals=20))
    assert len(kept) == 20 and all(i % 7 == 3 for i in kept)
    drawn = {env.reset(seed=s)[1]["goal_index"] for s in range(60)}
    assert drawn <= kept and len(drawn) > 5


def test_item_record__a_generated_catalog_written_in_webshops_format_loads_back_the_same(tmp_path):
    import json

    from agentgym_turn.webshop.generator.catalog import GeneratedShop
    from agentgym_turn.webshop.loader import item_record

    shop = GeneratedShop(30, seed=0)
    products = [shop.product(i) for i in range(30)]
    (tmp_path / "items_shuffle_1000.json").write_text(json.dumps([item_record(p) for p in products]))
    attrs = {
        p.asin: {
            "attributes": list(p.attributes),
            "instruction": f"i want {p.query}",
            "instruction_attributes": list(p.attributes[:1]),
        }
        for p in products
    }
    (tmp_path / "items_ins_v2_1000.json").write_text(json.dumps(attrs))
    loaded = LoadedShop(str(tmp_path), human_goals=False, seed=0)
    for p in products:
        back = loaded.product(loaded.index_of(p.asin))
        assert (back.name, back.pricing, back.options, tuple(back.bullet_points)) == (
            p.name,
            p.pricing,
            p.options,
            tuple(p.bullet_points),
        )


@pytest.mark.parametrize("body", ["[" * 200_000, '[{"asin": ' + "9" * 5000 + "}]"], ids=["nested", "huge_int"])
def test_loader__a_hostile_json_file_is_a_clear_error_naming_the_file(tmp_path, body):
    (tmp_path / "items_shuffle_1000.json").write_text(body)
    with pytest.raises(DataFileError, match=r"items_shuffle_1000\.json: .*not a WebShop data file"):
        LoadedShop(tmp_path)
