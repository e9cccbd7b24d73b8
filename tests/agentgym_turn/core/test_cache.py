"""agentgym_turn.core.cache.ProcessCache: built once per key, different keys in parallel, bounded LRU."""

import threading

import pytest

from agentgym_turn.core.cache import ProcessCache


def test_cache__builds_a_key_once_and_returns_the_same_object():
    cache = ProcessCache("test", 4)
    built = []
    first = cache.get("a", lambda: built.append(1) or object())
    assert cache.get("a", lambda: built.append(2) or object()) is first
    assert built == [1] and "a" in cache and len(cache) == 1


def test_cache__concurrent_callers_of_one_key_share_one_build():
    cache = ProcessCache("test", 4)
    release = threading.Event()
    calls = []

    def build():
        calls.append(threading.get_ident())
        assert release.wait(30)
        return object()

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("k", build))) for _ in range(8)]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(results) == 8 and all(r is results[0] for r in results)


def test_cache__two_keys_build_at_the_same_time():
    # Each build waits for the other to have started: a cache that built under one lock would
    # leave the second build waiting, and the first one's wait would come back False.
    cache = ProcessCache("test", 4)
    started = {"a": threading.Event(), "b": threading.Event()}
    saw_other = {}

    def build(me, other):
        started[me].set()
        saw_other[me] = started[other].wait(30)
        return me

    threads = [
        threading.Thread(target=cache.get, args=(k, lambda k=k, o=o: build(k, o))) for k, o in (("a", "b"), ("b", "a"))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert saw_other == {"a": True, "b": True}
    assert cache.get("a", lambda: "x") == "a" and cache.get("b", lambda: "x") == "b"


def test_cache__a_build_may_use_the_cache_for_another_key():
    cache = ProcessCache("test", 4)
    assert cache.get("outer", lambda: cache.get("inner", lambda: 1) + 1) == 2
    assert "inner" in cache


def test_cache__drops_the_least_recently_used_entry_beyond_its_bound():
    cache = ProcessCache("test", 2)
    cache.get("a", lambda: 1)
    cache.get("b", lambda: 2)
    cache.get("a", lambda: 0)  # touch "a": "b" is now the oldest
    cache.get("c", lambda: 3)
    assert "a" in cache and "c" in cache and "b" not in cache and len(cache) == 2
    cache.put("d", 4)
    assert "a" not in cache and cache.get("d", lambda: 0) == 4


def test_cache__a_failed_build_caches_nothing_and_the_next_call_retries():
    cache = ProcessCache("test", 2)

    def fail():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        cache.get("k", fail)
    assert "k" not in cache
    assert cache.get("k", lambda: 5) == 5


def test_cache__clear_empties_it():
    cache = ProcessCache("test", 2)
    cache.get("a", lambda: 1)
    cache.clear()
    assert len(cache) == 0 and cache.get("a", lambda: 2) == 2


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, None])
def test_cache__rejects_a_bound_that_is_not_a_positive_int(bad):
    with pytest.raises(ValueError, match="max_entries"):
        ProcessCache("test", bad)


# ---------------------------------------------------------------------- the envs' caches


def test_sokoban__envs_share_generated_levels_through_one_cache():
    import gymnasium as gym

    from agentgym_turn.sokoban.source import GENERATED_LEVELS

    a, b = gym.make("TurnSokoban-v0").unwrapped, gym.make("TurnSokoban-v0").unwrapped
    a.reset(seed=11)
    size = len(GENERATED_LEVELS)
    b.reset(seed=11)
    assert len(GENERATED_LEVELS) == size and a.level is b.level


def test_sokoban__a_split_reset_remembers_the_levels_of_other_splits_it_drew_and_plays_as_without(monkeypatch):
    """A test-split reset draws about ten level seeds; replayed, it generates only the level it plays (when that
    one left the level cache), and the remembered splits change no level."""
    import gymnasium as gym

    from agentgym_turn.sokoban import source

    def keys():
        env = gym.make("TurnSokoban-v0", split="test")
        return [env.reset(seed=s)[1]["state_key"] for s in range(40)]

    source.LEVEL_SPLITS.clear()
    source.GENERATED_LEVELS.clear()
    fresh = keys()
    assert len(source.LEVEL_SPLITS) > 2 * 40  # most draws fell in other splits
    made = []
    real = source.generate_level
    monkeypatch.setattr(source, "generate_level", lambda *a, **k: made.append(1) or real(*a, **k))
    source.GENERATED_LEVELS.clear()  # the levels are gone, their splits are remembered
    assert keys() == fresh and len(made) == 40
    source.LEVEL_SPLITS.clear()
    source.GENERATED_LEVELS.clear()
    assert keys() == fresh


def test_webshop__envs_of_one_catalog_share_one_shop():
    import gymnasium as gym

    from agentgym_turn.webshop.source import SHOPS, ShopSource

    a = gym.make("TurnWebShop-v0", num_products=50).unwrapped
    b = gym.make("TurnWebShop-v0", num_products=50).unwrapped
    assert a.shop is b.shop and ShopSource("generated", 50, 0) in SHOPS
    assert gym.make("TurnWebShop-v0", num_products=50, catalog_seed=1).unwrapped.shop is not a.shop


def test_searchqa__envs_of_one_world_share_one_source():
    import gymnasium as gym

    from agentgym_turn.searchqa.source import SOURCES

    a = gym.make("TurnSearchQA-v0", split="test", world_scale=0.05).unwrapped
    size = len(SOURCES)
    b = gym.make("TurnSearchQA-MCQ-v0", split="test", world_scale=0.05).unwrapped
    assert ("generated", 0, 0.05) in SOURCES and len(SOURCES) == size
    assert [q.id for q in a.questions] == [q.id for q in b.questions] and a.questions[0] is b.questions[0]
