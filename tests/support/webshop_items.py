"""Hand-built WebShop products and goals for tests: every field set, the ones a test names overridden."""

from agentgym_turn.webshop.product import Goal, Product


def product(**kw) -> Product:
    """A product with placeholder fields; ``title`` follows ``name`` unless given."""
    base = dict(
        asin="B000000001",
        name="",
        title="",
        category="c",
        query="q",
        product_category="a › b › c",
        description="",
        bullet_points=(),
        attributes=(),
        pricing=(10.0,),
        price_tag="$10.0",
        price=10.0,
    )
    base.update(kw)
    if "title" not in kw and "name" in kw:
        base["title"] = kw["name"]
    return Product(**base)


def goal(**kw) -> Goal:
    """A goal with placeholder fields and a price bound of 40."""
    base = dict(
        index=0,
        asin="B000000001",
        instruction_text="",
        attributes=(),
        goal_options={},
        price_upper=40.0,
        query="q",
        category="c",
        product_category="a › b › c",
        name="",
    )
    base.update(kw)
    return Goal(**base)
