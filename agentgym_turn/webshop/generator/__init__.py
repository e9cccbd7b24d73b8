"""WebShop's generated tasks: a seeded catalog of any size and its goals.

* :mod:`.catalog` – :class:`GeneratedShop` (products as integer columns, goals made on demand).
* :mod:`.vocab` – the shop's language: departments, product types, attributes, options, brands.

Which shop an env plays in (generated, or WebShop's files) is :mod:`agentgym_turn.webshop.source`.
"""
