"""The WebShop expert's option choice (``agentgym_turn/webshop/expert.py``)."""

from agentgym_turn.webshop.expert import best_options
from agentgym_turn.webshop.product import Goal, Product


def _product(options: dict[str, tuple[str, ...]]) -> Product:
    return Product(
        asin="B000TEST01",
        name="Oat Granola",
        title="Oat Granola",
        category="grocery",
        query="granola",
        product_category="Grocery",
        description="",
        bullet_points=(),
        attributes=(),
        pricing=(10.0,),
        price_tag="$10.00",
        price=10.0,
        options=options,
    )


GOAL = Goal(
    index=0,
    asin="B000TEST01",
    instruction_text="i need oat granola, and flavor name: cinnamon, and size: large, and price lower than 20.00 dollars",
    attributes=(),
    goal_options={"flavor name": "cinnamon", "size": "large"},
    price_upper=20.0,
    query="granola",
    category="grocery",
    product_category="Grocery",
    name="Oat Granola",
)


def test_the_value_asked_for_comes_before_one_the_fuzzy_rule_only_accepts():
    """`apple cinnamon` passes the reward's token-set rule for `cinnamon` but is not what was asked: the expert
    validate found clicking it bought at R = 0.75."""
    chosen = best_options(_product({"flavor name": ("apple cinnamon", "cinnamon"), "size": ("x-large", "large")}), GOAL)
    assert chosen == {"flavor name": "cinnamon", "size": "large"}


def test_a_resembling_value_is_chosen_only_where_none_is_exact_and_never_for_size():
    chosen = best_options(_product({"flavor name": ("vanilla", "apple cinnamon"), "size": ("x-large",)}), GOAL)
    assert chosen == {"flavor name": "apple cinnamon"}  # size matches exactly or not at all, as in the reward
