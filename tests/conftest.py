import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

# `make test` uses "default"; `pytest --hypothesis-profile=ci` runs more examples, "dev" fewer.
_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("default", max_examples=60, **_common)
settings.register_profile("ci", max_examples=300, **_common)
settings.register_profile("dev", max_examples=15, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def learning_runs(tmp_path_factory):
    """Every recipe of ``reference_trainer.recipes`` end to end, once per session: its SFT start, then
    one Turn-PPO run (seed 0, the recipe's full RL budget, evaluated before and after only), each
    in its own single-thread process, two at a time (CI has two cores). ``{recipe name: result
    of reference_trainer.recipes.learn}``; the learning tests (``tests/test_learning_*.py``) assert
    on their env's entry. The benchmark (``benchmarks/learning.py``) runs the same function on three seeds."""
    import multiprocessing as mp

    from reference_trainer.recipes import RECIPES, learn

    work = str(tmp_path_factory.mktemp("learning"))
    names = sorted(RECIPES, key=lambda n: -RECIPES[n].rl_iterations)  # the longest first
    jobs = [(name, "turn-ppo", 0, 0, 0, work) for name in names]
    with mp.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        results = pool.map(learn, jobs, chunksize=1)
    return dict(zip(names, results))
