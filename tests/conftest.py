import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))
# One intra-op thread for the tests' torch (set before torch loads): the models here are tiny, and beside the learning
# jobs (one thread each) a second thread only waits for a core; subprocesses inherit it unless a test sets its own.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# `make test` uses "default"; `pytest --hypothesis-profile=ci` runs more examples, "dev" fewer.
_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("default", max_examples=60, **_common)
settings.register_profile("ci", max_examples=300, **_common)
settings.register_profile("dev", max_examples=15, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


import pytest  # noqa: E402


#: Seconds a test that needs the learning jobs may take, its wait for them included (the others: pyproject's 900).
LEARNING_TIMEOUT_S = 2700

#: The background learning jobs of this session (``tests/support/learning_jobs.py``) and their work dir.
_LEARNING: dict = {}


def _uses_learning_runs(item) -> bool:
    return "learning_runs" in getattr(item, "fixturenames", ())


def _background_task(item) -> tuple | None:
    """``(function, args, minutes)`` of a test marked ``@pytest.mark.background(function, minutes=...)`` that takes
    ``background_result``: ``function(*the test's parameters)`` runs in the learning jobs' pool, and the test asserts
    on what it returned (its work done on the core the foreground would leave idle once the jobs end)."""
    marker = item.get_closest_marker("background")
    if marker is None or "background_result" not in getattr(item, "fixturenames", ()):
        return None
    params = getattr(item, "callspec", None)
    return marker.args[0], tuple(params.params.values()) if params else (), float(marker.kwargs.get("minutes", 1.0))


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: only the tests that will run count
def pytest_collection_modifyitems(session, config, items):
    """Start the learning jobs at once, in the background, and run the tests that need them last.

    The jobs take minutes of one core each; started when collection ends, they overlap with the
    rest of the suite instead of leaving a core idle while the session waits for them."""
    extras = {item.nodeid: task for item in items if (task := _background_task(item)) is not None}
    learning = [item for item in items if _uses_learning_runs(item) or item.nodeid in extras]
    for item in learning:  # the first waits for the jobs, which (niced) may end minutes after the other tests
        item.add_marker(pytest.mark.timeout(LEARNING_TIMEOUT_S))
    if not learning or config.option.collectonly:
        return
    waiting = set(map(id, learning))
    items[:] = [item for item in items if id(item) not in waiting] + learning
    import tempfile

    from support.learning_jobs import LearningJobs
    from reference_trainer.recipes import RECIPES

    work = tempfile.mkdtemp(prefix="agentgym-learning-")
    # Two processes (CI has two cores) beside this one. Measured on a clean clone: one process per whole job (three)
    # cost more CPU time than two workers (32.2 min of tests against 28.6); with two workers and whole jobs the
    # third ran alone at the end, hence each recipe in two tasks (with the shorter WebShop and search-QA budgets:
    # 16.6 min of tests, 31 CPU minutes).
    # every recipe's learning test also asserts a negative control (Turn-PPO paid shuffled rewards, from the same
    # start): one RL budget more of one core each
    names = sorted(n for n, r in RECIPES.items() if r.suite_learning)  # a real model's recipes are benchmarks
    if not any(map(_uses_learning_runs, learning)):  # only background tests chosen: their work alone
        names = []
    _LEARNING.update(jobs=LearningJobs(names, work, workers=2, controls=tuple(names), extras=extras).start(), work=work)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """When the learning jobs ran: when each of their tasks started and ended (where the suite's time went)."""
    report = _LEARNING.pop("report", "")  # kept by pytest_sessionfinish, which runs first
    if report:
        terminalreporter.write_sep("-", "learning jobs (seconds since they started)")
        terminalreporter.write_line(report)


def pytest_sessionfinish(session, exitstatus):
    """Stop the learning jobs (finished, or abandoned by a failed or interrupted session) and remove their files."""
    import shutil

    jobs = _LEARNING.pop("jobs", None)
    if jobs is not None:
        _LEARNING["report"] = jobs.report()
        jobs.stop()
    if "work" in _LEARNING:
        shutil.rmtree(_LEARNING.pop("work"), ignore_errors=True)


@pytest.fixture(scope="session")
def learning_runs():
    """Every recipe of ``reference_trainer.recipes`` end to end, once per session: its SFT start, then
    one Turn-PPO run (seed 0, the recipe's full RL budget, evaluated before and after only), each
    in its own single-thread process, two at a time (CI has two cores), started in the background
    when collection ends (see :func:`pytest_collection_modifyitems` and ``tests/support/learning_jobs.py``). ``{recipe name: result of
    reference_trainer.recipes.learn}``; the learning tests (``tests/reference_trainer/recipes/test_*_learning.py``) assert on
    their env's entry. The benchmark (``benchmarks/learning.py``) runs the same function on three seeds."""
    if "jobs" not in _LEARNING:
        pytest.fail(
            "the learning jobs were not started: learning_runs is requested by a test the collection hook did not see"
        )
    _LEARNING["jobs"].waited()
    return _LEARNING["jobs"].results()


@pytest.fixture
def background_result(request):
    """What the function of this test's ``background`` marker returned, run in the learning jobs' pool (see
    :func:`_background_task`)."""
    if "jobs" not in _LEARNING:
        pytest.fail("the background tasks were not started: the collection hook did not see this test")
    _LEARNING["jobs"].waited()
    result = _LEARNING["jobs"].results()[request.node.nodeid]
    if isinstance(result, BaseException):
        raise result
    return result
