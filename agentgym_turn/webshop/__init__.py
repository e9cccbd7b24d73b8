"""TurnWebShop: an offline, faithful and light WebShop simulator (see ``docs/envs/webshop.md``).

Importing this package is light: the catalog, the search index and BeautifulSoup load when an
env is made (``gymnasium.make("TurnWebShop-v0")``) and are shared by every env of the process.
"""

__all__ = ["TurnWebShopEnv"]


def __getattr__(name: str):
    if name == "TurnWebShopEnv":
        from .env import TurnWebShopEnv

        return TurnWebShopEnv
    raise AttributeError(name)
