"""TurnWebShop: an offline, faithful and light WebShop simulator (see ``docs/envs/webshop.md``).

* :mod:`.generator` – the generated catalog and goals;
* :mod:`.source` – which shop an env plays in (:class:`ShopSource`) and the per-process shop cache;
* :mod:`.loader` – WebShop's own files (``items_shuffle*.json``, human goals);
* :mod:`.reward` – WebShop's purchase reward; :mod:`.nouns` – its title nouns (spaCy when installed, else a
  rule); :mod:`.expert` – the oracle shopper;
* :mod:`.goals`, :mod:`.product` – goal splits and weights, the product and goal records;
* :mod:`.search`, :mod:`.pages`, :mod:`.text` – the search engine, WebShop's pages and their text;
* :mod:`.env` – :class:`TurnWebShopEnv`, registered as ``TurnWebShop-v0``;
* :mod:`.server` – the HTTP site (:class:`WebShopServer`); :mod:`.browser` – :class:`TurnWebShopBrowserEnv`,
  registered as ``TurnWebShopBrowser-v0`` (Selenium in headless Chromium against the site).

Importing this package is light: the catalog, the search index and BeautifulSoup load when an
env is made (``gymnasium.make("TurnWebShop-v0")``) and are shared by every env of the process.
"""

from ..core.exports import lazy_exports

_EXPORTS = {
    "TurnWebShopEnv": ".env",
    "shared_shop": ".source",
    "GeneratedShop": ".generator.catalog",
    "ShopTasks": ".source",
    "ShopSource": ".source",
    "LoadedShop": ".loader",
    "webshop_reward": ".reward",
    "Goal": ".product",
    "Product": ".product",
    "WebShopServer": ".server",
    "WebShopSite": ".server",
    "TurnWebShopBrowserEnv": ".browser",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
