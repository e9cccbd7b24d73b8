"""The WebShop expert's option choice (``agentgym_turn/webshop/expert.py``)."""

from agentgym_turn.webshop.expert import best_options
from support.webshop_items import goal, product

SHOP = dict(asin="B000TEST01", name="Oat Granola", query="granola", category="grocery", product_category="Grocery")
GOAL = goal(
    **SHOP,
    instruction_text="i need oat granola, and flavor name: cinnamon, and size: large, and price lower than 20.00 dollars",
    goal_options={"flavor name": "cinnamon", "size": "large"},
    price_upper=20.0,
)


def test_the_value_asked_for_comes_before_one_the_fuzzy_rule_only_accepts():
    """`apple cinnamon` passes the reward's token-set rule for `cinnamon` but is not what was asked: the expert
    validate found clicking it bought at R = 0.75."""
    options = {"flavor name": ("apple cinnamon", "cinnamon"), "size": ("x-large", "large")}
    assert best_options(product(**SHOP, options=options), GOAL) == {"flavor name": "cinnamon", "size": "large"}


def test_a_resembling_value_is_chosen_only_where_none_is_exact_and_never_for_size():
    options = {"flavor name": ("vanilla", "apple cinnamon"), "size": ("x-large",)}
    # size matches exactly or not at all, as in the reward
    assert best_options(product(**SHOP, options=options), GOAL) == {"flavor name": "apple cinnamon"}
