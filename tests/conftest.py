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


#: The background learning jobs of this session: their pool, pending result, recipe names and work dir.
_LEARNING: dict = {}


def _uses_learning_runs(item) -> bool:
    return "learning_runs" in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: only the tests that will run count
def pytest_collection_modifyitems(session, config, items):
    """Start the learning jobs at once, in the background, and run the tests that need them last.

    The jobs take minutes of one core each; started when collection ends, they overlap with the
    rest of the suite instead of leaving a core idle while the session waits for them."""
    learning = [item for item in items if _uses_learning_runs(item)]
    if not learning or config.option.collectonly:
        return
    items[:] = [item for item in items if not _uses_learning_runs(item)] + learning
    import multiprocessing as mp
    import tempfile

    from reference_trainer.recipes import RECIPES, learn

    work = tempfile.mkdtemp(prefix="agentgym-learning-")
    names = sorted(RECIPES, key=lambda n: -RECIPES[n].learn_minutes)  # the longest first
    jobs = [(name, "turn-ppo", 0, 0, 0, work) for name in names]
    # Two processes (CI has two cores). Measured on a clean clone with three jobs: two workers, 28.6 min of tests
    # (the third job ran alone for the last 5); one process per job, 32.2 min (four busy processes on two cores
    # cost more CPU time than three).
    pool = mp.get_context("spawn").Pool(min(2, max(1, len(jobs))), maxtasksperchild=1)
    _LEARNING.update(pool=pool, result=pool.map_async(learn, jobs, chunksize=1), names=names, work=work)


def pytest_sessionfinish(session, exitstatus):
    """Stop the learning jobs (finished, or abandoned by a failed or interrupted session) and remove their files."""
    import shutil

    pool = _LEARNING.pop("pool", None)
    if pool is not None:
        pool.terminate()
        pool.join()
    if "work" in _LEARNING:
        shutil.rmtree(_LEARNING.pop("work"), ignore_errors=True)


@pytest.fixture(scope="session")
def learning_runs():
    """Every recipe of ``reference_trainer.recipes`` end to end, once per session: its SFT start, then
    one Turn-PPO run (seed 0, the recipe's full RL budget, evaluated before and after only), each
    in its own single-thread process, two at a time (CI has two cores), started in the background
    when collection ends (see :func:`pytest_collection_modifyitems`). ``{recipe name: result of
    reference_trainer.recipes.learn}``; the learning tests (``tests/test_learning_*.py``) assert on
    their env's entry. The benchmark (``benchmarks/learning.py``) runs the same function on three seeds."""
    if "result" not in _LEARNING:
        pytest.fail("the learning jobs were not started: learning_runs is requested by a test the collection hook did not see")
    return dict(zip(_LEARNING["names"], _LEARNING["result"].get()))
