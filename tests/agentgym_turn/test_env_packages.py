"""Every env package has the same shape: the same module names for the same jobs, one lazy package
face, and envs that use only the base class's public state."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import agentgym_turn
from agentgym_turn.core import TurnEnv

PACKAGE = Path(agentgym_turn.__file__).parent
#: package -> the env classes its face exports
ENV_PACKAGES = {
    "sokoban": ["TurnSokobanEnv"],
    "webshop": ["TurnWebShopEnv"],
    "searchqa": ["TurnSearchQAEnv", "TurnSearchQAMCQEnv"],
}
JOBS = ("generator", "loader", "reward", "expert", "env")


@pytest.mark.parametrize("package", sorted(ENV_PACKAGES))
def test_env_package__has_one_module_per_job(package):
    for job in JOBS:
        importlib.import_module(f"agentgym_turn.{package}.{job}")


@pytest.mark.parametrize("package", sorted(ENV_PACKAGES))
def test_env_package__exports_its_env_classes_lazily(package):
    # A fresh interpreter: importing the package must not import its env module.
    code = (
        "import sys, agentgym_turn.{p} as pkg\n"
        "assert 'agentgym_turn.{p}.env' not in sys.modules, 'the package face imported env.py'\n"
        "for name in {names!r}:\n"
        "    cls = getattr(pkg, name)\n"
        "    assert cls.__name__ == name and cls.__module__ == 'agentgym_turn.{p}.env'\n"
        "assert set({names!r}) <= set(dir(pkg)) and set(pkg.__all__) == set(dir(pkg))\n"
        "for name in pkg.__all__:\n"
        "    getattr(pkg, name)\n"
    ).format(p=package, names=ENV_PACKAGES[package])
    subprocess.run([sys.executable, "-c", code], check=True)
    pkg = importlib.import_module(f"agentgym_turn.{package}")
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        pkg.Nope  # noqa: B018


def test_registered_entry_points__name_turn_classes():
    for env_id in agentgym_turn.env_ids():
        entry = gym.spec(env_id).entry_point
        assert entry.split(":")[1].startswith("Turn"), entry


@pytest.mark.parametrize("package", sorted(ENV_PACKAGES))
def test_env_module__reads_no_private_field_of_the_base_class(package):
    source = (PACKAGE / package / "env.py").read_text(encoding="utf-8")
    assert not re.findall(r"self\._(started|episode_over)\b", source)


def test_turn_env__exposes_started_and_episode_over_read_only():
    env = gym.make("TurnSokoban-v0").unwrapped
    assert isinstance(env, TurnEnv)
    assert (env.has_started, env.episode_over) == (False, True)
    env.reset(seed=0)
    assert (env.has_started, env.episode_over) == (True, False)
    while not env.step(env.expert_action())[2]:
        pass
    assert (env.has_started, env.episode_over) == (True, True)
    with pytest.raises(AttributeError):
        env.episode_over = False


# ---------------------------------------------------------------------- Sokoban's level sources


def _episode(env, seed=5):
    obs, info = env.reset(seed=seed)
    out = [obs, info]
    for _ in range(4):
        out.append(env.step(env.unwrapped.expert_action()))
    return out


def test_sokoban_source__plays_the_same_levels_as_the_level_keywords():
    from agentgym_turn.sokoban import SokobanGenerator

    by_keywords = gym.make("TurnSokoban-v0", dim=(7, 7), num_boxes=2, max_moves=20, max_actions_per_episode=20)
    by_object = gym.make(
        "TurnSokoban-v0", source=SokobanGenerator(dim=7, num_boxes=2, max_moves=20), max_actions_per_episode=20
    )
    assert by_object.unwrapped.source == by_keywords.unwrapped.source == SokobanGenerator((7, 7), 2, 1, 20)
    assert _episode(by_object) == _episode(by_keywords)


def test_level_file__plays_the_same_levels_as_levels_keyword():
    from agentgym_turn.sokoban import LevelFile, builtin_levels_path

    path = builtin_levels_path() / "handmade.txt"
    by_keyword = gym.make("TurnSokoban-v0", levels=str(path))
    by_object = gym.make(
        "TurnSokoban-v0", source=LevelFile.load(path, solver_budget=by_keyword.unwrapped.solver_budget)
    )
    assert by_object.unwrapped.levels == by_keyword.unwrapped.levels
    for seed in range(3):
        assert _episode(by_object, seed) == _episode(by_keyword, seed)


@pytest.mark.parametrize("kwargs", [{"dim": (8, 8)}, {"levels": "x.txt"}, {"num_boxes": 2, "max_moves": 5}])
def test_source__with_a_level_keyword_too_is_an_error_naming_it(kwargs):
    from agentgym_turn.sokoban import SokobanGenerator

    with pytest.raises(ValueError, match="source= replaces " + ", ".join(kwargs)):
        gym.make("TurnSokoban-v0", source=SokobanGenerator(), **kwargs)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"dim": (2, 9)}, "at least 3x3"),
        ({"num_boxes": 0}, "num_boxes must be >= 1"),
        ({"min_moves": 9, "max_moves": 3}, "min_moves=9 exceeds max_moves=3"),
        ({"solver_budget": -1}, "solver_budget must be >= 0"),
    ],
)
def test_sokoban_generator__checks_its_arguments(kwargs, needle):
    from agentgym_turn.sokoban import SokobanGenerator

    with pytest.raises(ValueError, match=re.escape(needle)):
        SokobanGenerator(**kwargs)


def test_source__of_another_type_is_an_error():
    with pytest.raises(ValueError, match="source must be a SokobanGenerator or a LevelFile"):
        gym.make("TurnSokoban-v0", source="levels.txt")


def test_sokoban_env__refuses_a_keyword_it_does_not_know():
    from agentgym_turn.sokoban import TurnSokobanEnv

    with pytest.raises(
        TypeError, match=r"TurnSokobanEnv got an unexpected keyword argument 'dims' \(did you mean 'dim'\?\)"
    ):
        TurnSokobanEnv(dims=(7, 7))


def test_question_source__asks_the_same_questions_as_the_question_keywords():
    from agentgym_turn.searchqa import QuestionSource

    kw = dict(split="test", world_seed=3, question_types=["single_hop"], content_split="test")
    by_keywords = gym.make("TurnSearchQA-v0", **kw)
    by_object = gym.make("TurnSearchQA-v0", source=QuestionSource(**kw))
    assert by_object.unwrapped.source == by_keywords.unwrapped.source and by_object.unwrapped.split == "test"
    assert [q.id for q in by_object.unwrapped.questions] == [q.id for q in by_keywords.unwrapped.questions]
    for seed in range(3):
        assert _episode(by_object, seed) == _episode(by_keywords, seed)


def test_question_source__with_a_question_keyword_too_is_an_error_naming_it():
    from agentgym_turn.searchqa import QuestionSource, TurnSearchQAEnv

    with pytest.raises(ValueError, match="source= replaces world_seed"):
        gym.make("TurnSearchQA-v0", source=QuestionSource(), world_seed=4)
    with pytest.raises(TypeError, match=r"TurnSearchQAEnv got an unexpected keyword argument 'world'"):
        TurnSearchQAEnv(world=4)


def test_shop_tasks__play_the_same_goals_as_the_task_keywords():
    from agentgym_turn.webshop import ShopTasks

    kw = dict(num_products=200, catalog_seed=3, goal_split="all", content_split="validation")
    by_keywords = gym.make("TurnWebShop-v0", **kw)
    by_object = gym.make("TurnWebShop-v0", source=ShopTasks(**kw))
    assert by_object.unwrapped.source == by_keywords.unwrapped.source and by_object.unwrapped.goal_split == "all"
    assert list(by_object.unwrapped._goals.indices) == list(by_keywords.unwrapped._goals.indices)
    for seed in range(3):
        assert _episode(by_object, seed) == _episode(by_keywords, seed)
    with pytest.raises(ValueError, match="source= replaces catalog_seed"):
        gym.make("TurnWebShop-v0", source=ShopTasks(), catalog_seed=4)
    with pytest.raises(ValueError, match="source= replaces goal_split"):
        gym.make("TurnWebShopDialog-v0", source=ShopTasks(), goal_split="test")
