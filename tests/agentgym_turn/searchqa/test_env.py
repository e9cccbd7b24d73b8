"""TurnSearchQA-v0 / -MCQ-v0: search is needed, the oracle succeeds, the protocol is Search-R1's."""

import gzip
import json
import pickle
import re
from collections import Counter, defaultdict

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401
from agentgym_turn.searchqa.loader import export_world, load_flashrag
from agentgym_turn.searchqa.env import MAX_QUERY_CHARS, TurnSearchQAEnv, TurnSearchQAMCQEnv
from agentgym_turn.searchqa.reward import exact_match
from agentgym_turn.searchqa.generator.questions import split_questions
from agentgym_turn.searchqa.retrieval import HashingEncoder, SentenceTransformerEncoder
from agentgym_turn.searchqa.source import generated_source
from agentgym_turn.searchqa.generator.world import WorldConfig
from agentgym_turn.testing import strategies as st_turn

INFO_OPEN = re.compile(r"^\n\n<information>(.*)</information>\n\n$", re.S)


class RecordingRetriever:
    """Wraps a retriever and records every query (picklable: a module-level class)."""

    def __init__(self, inner):
        self.inner = inner
        self.queries = []

    def retrieve(self, queries, topk):
        self.queries.extend(queries)
        return self.inner.retrieve(queries, topk)


def play(env, question_index, policy):
    """One episode on question ``question_index``; returns (final info, observations)."""
    obs, info = env.reset(seed=question_index, options={"question_index": question_index})
    observations = [obs]
    for _ in range(env.spec.max_episode_steps if env.spec else 5):
        obs, _, terminated, truncated, info = env.step(policy(env))
        observations.append(obs)
        if terminated or truncated:
            break
    return info, observations


@pytest.fixture(scope="module")
def env_on_test_split():
    return gym.make("TurnSearchQA-v0", split="test")


def expert(env):
    return env.unwrapped.expert_action()


def test_expert__answers_at_least_98_percent_of_500_test_questions_from_retrieved_evidence(env_on_test_split):
    by_type = defaultdict(list)
    for i in range(500):
        info, observations = play(env_on_test_split, i, expert)
        q = env_on_test_split.unwrapped.question
        shown = "".join(observations[1:-1])
        # grounded: the answer was in the retrieved passages, not only in the oracle's head
        grounded = any(g in shown for g in q.golden_answers) or q.template == "founded_gap"
        by_type[q.type].append(info["em"] == 1.0 and info["success"] and grounded)
        assert 1 <= info["searches"] <= 4
    total = sum(sum(v) for v in by_type.values())
    assert total >= 0.98 * 500, {t: sum(v) / len(v) for t, v in by_type.items()}
    assert set(by_type) == {"single_hop", "bridge", "comparison"}
    for t, v in by_type.items():
        assert sum(v) >= 0.97 * len(v), t


def test_expert__multiple_choice_answers_at_least_98_percent_of_500_test_questions():
    env = gym.make("TurnSearchQA-MCQ-v0", split="test")
    wins = sum(play(env, i, expert)[0]["success"] for i in range(500))
    assert wins >= 490


def _quoted_or_capitalised(question):
    m = re.search(r'"([^"]+)"', question)
    if m:
        return m.group(1)
    caps = re.findall(r"(?:[A-Z][a-z]+(?: [A-Z][a-z]+)*)", question[1:])
    return caps[0] if caps else question


def _last_capitalised(question):
    caps = re.findall(r"[A-Z][a-z]+", question[1:])
    return caps[-1] if caps else question


def test_no_search_baselines__score_under_10_percent_em(env_on_test_split):
    """Answering from the question alone: copying a name, or the train split's most common answer."""
    train = split_questions(generated_source().questions, "train")
    majority = {}
    for template in {q.template for q in train}:
        counts = Counter(q.golden_answers[0] for q in train if q.template == template)
        majority[template] = counts.most_common(1)[0][0]
    baselines = {
        "copy a name from the question": lambda q: _quoted_or_capitalised(q.question),
        "copy the last capitalised word": lambda q: _last_capitalised(q.question),
        "most common train answer of the template": lambda q: majority.get(q.template, "1900"),
        "the question itself": lambda q: q.question,
    }
    for name, guess in baselines.items():
        wins = 0
        for i in range(500):
            env_on_test_split.reset(options={"question_index": i})
            q = env_on_test_split.unwrapped.question
            _, reward, terminated, _, info = env_on_test_split.step(f"<answer> {guess(q)} </answer>")
            assert terminated and info["searches"] == 0
            wins += reward
        assert wins < 0.10 * 500, (name, wins)


def test_search__returns_search_r1_information_block(env_on_test_split):
    env_on_test_split.reset(options={"question_index": 7})
    q = env_on_test_split.unwrapped.question
    query = q.hops[0].queries[0]
    obs, reward, terminated, truncated, info = env_on_test_split.step(
        f"<think>let me look</think>\n<search> {query} </search>"
    )
    hits = env_on_test_split.unwrapped._retriever.retrieve([query], 3)[0]
    lines = []
    for k, h in enumerate(hits, 1):
        title, _, text = h.document.contents.partition("\n")
        lines.append(f"Doc {k}(Title: {title}) {text}\n")
    assert obs == "\n\n<information>" + "".join(lines).strip() + "</information>\n\n"
    assert obs.count("Doc ") == 3 and '(Title: "' in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["action_is_valid"] and info["action_is_effective"] and info["searches"] == 1
    assert info["retrieved_ids"] == [h.document.id for h in hits]


def test_invalid_turn__search_r1_style_message_and_penalty():
    env = gym.make("TurnSearchQA-v0", format_penalty=-0.3)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("I think the answer is Paris.")
    assert obs.startswith("\nMy previous action is invalid") and obs.endswith("Let me try again.\n")
    assert "between <search> and </search>" in obs and "between <answer> and </answer>" in obs
    assert reward == -0.3 and not terminated and not info["action_is_valid"] and info["turn"] == 1


def test_answer__terminates_with_em_reward_and_f1(env_on_test_split):
    env_on_test_split.reset(options={"question_index": 0})
    q = env_on_test_split.unwrapped.question
    _, reward, terminated, _, info = env_on_test_split.step(f"<answer>  The {q.golden_answers[0]}!! </answer>")
    assert (reward, terminated, info["em"], info["f1"], info["success"], info["score"]) == (
        1.0,
        True,
        1.0,
        1.0,
        True,
        1.0,
    )
    env_on_test_split.reset(options={"question_index": 0})
    _, reward, terminated, _, info = env_on_test_split.step(f"<answer>{q.golden_answers[0]} and more words</answer>")
    assert reward == 0.0 and terminated and 0 < info["f1"] < 1 and not info["success"]
    assert info["prediction"] == f"{q.golden_answers[0]} and more words"


def test_search_budget__strict_refuses_searches_past_max_searches_and_truncates_at_the_turn_limit():
    env = gym.make("TurnSearchQA-v0", max_searches=2, max_episode_steps=4, protocol="strict")
    env.reset(seed=0)
    for k in (1, 2):
        _, _, _, _, info = env.step(f"<search> query {k} </search>")
        assert info["searches"] == k and info["action_is_effective"]
    obs, reward, terminated, truncated, info = env.step("<search> one more </search>")
    assert "<answer>" in obs and "<information>" not in obs
    assert info["action_is_valid"] and not info["action_is_effective"] and reward == 0.0 and info["searches"] == 2
    obs, reward, terminated, truncated, info = env.step("<search> and again </search>")
    assert truncated and not terminated
    assert gym.spec("TurnSearchQA-v0").max_episode_steps == 5 == TurnSearchQAEnv().max_searches + 1


@pytest.mark.parametrize("env_id", ["TurnSearchQA-v0", "TurnSearchQA-MCQ-v0"])
@pytest.mark.parametrize("searches_before", [0, 4])
def test_final_turn__search_r1_runs_no_search_and_ends_the_episode(env_id, searches_before):
    """Turn max_searches + 1 is Search-R1's final rollout (do_search=False): no query, the empty block, truncated."""
    env = gym.make(env_id, split="test")
    env.reset(seed=0)
    for k in range(4):
        env.step(f"<search> query {k} </search>" if k < searches_before else "no tags")
    assert "<search>" not in env.unwrapped.expert_action()  # the expert knows the final turn cannot search
    queries = list(env.unwrapped._queries)
    obs, reward, terminated, truncated, info = env.step("<search> late </search>")
    assert obs == "\n\n<information></information>\n\n" and env.unwrapped._queries == queries
    assert truncated and not terminated and info["action_is_valid"] and not info["action_is_effective"]
    assert info["searches"] == searches_before and info["retrieved_ids"] == [] and reward == 0.0


@pytest.mark.parametrize(
    "response, expected",
    [
        ("<search>alpha</search><search>beta</search>", ("search", "alpha")),  # first pair wins
        ("<answer>Paris</answer><search>beta</search>", ("answer", "Paris")),
        ("<think><search>hidden</search></think><search>shown</search>", ("search", "shown")),
        ("<think>unclosed thought <search>q</search>", ("search", "q")),
        ("<SEARCH> q </Search>", ("search", "q")),
        ("<search>a<search>b</search>", "invalid"),  # nested
        ("<search>q</answer>", "invalid"),  # closed by the other tag
        ("<search>never closed", "invalid"),
        ("<search>   </search>", "invalid"),
        ("</search>stray closing then <answer>x</answer>", ("answer", "x")),
        ("<search>" + "q" * (MAX_QUERY_CHARS + 1) + "</search>", "invalid"),
        ("<information>fake</information>", "invalid"),
    ],
)
def test_strict_tags__first_complete_pair_nested_unbalanced_and_repeated(response, expected):
    env = TurnSearchQAEnv(protocol="strict")
    recorder = RecordingRetriever(env._retriever)
    env._retriever = recorder
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(response)
    if expected == "invalid":
        assert not info["action_is_valid"] and reward == env.format_penalty and recorder.queries == []
    elif expected[0] == "search":
        assert info["action_is_valid"] and recorder.queries == [expected[1]] and not terminated
    else:
        assert terminated and info["prediction"] == expected[1] and recorder.queries == []


@settings(max_examples=150)
@given(st.data())
def test_any_response__never_raises_and_stays_in_the_spaces(data):
    env = _fuzz_envs[data.draw(st.integers(0, 3))]
    env.reset(seed=data.draw(st.integers(0, 50)))
    for _ in range(data.draw(st.integers(1, 3))):
        response = data.draw(
            st.one_of(
                st_turn.responses(tags=("search", "answer", "think", "information")),
                st_turn.tagged(("search", "answer")),
            )
        )
        obs, reward, terminated, truncated, info = env.step(response)
        assert obs in env.observation_space
        assert reward in (env.unwrapped.format_penalty, 0.0, 1.0)
        assert info["score"] in (0.0, 1.0)
        if terminated or truncated:
            break


_fuzz_envs = [
    gym.make("TurnSearchQA-v0"),
    gym.make("TurnSearchQA-MCQ-v0"),
    gym.make("TurnSearchQA-v0", protocol="strict"),
    gym.make("TurnSearchQA-MCQ-v0", protocol="strict"),
]

_recording = TurnSearchQAEnv(protocol="strict")
_recording._retriever = RecordingRetriever(_recording._retriever)

_plain = st.text(alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=40)


@given(_plain, _plain.filter(lambda x: x.strip()), st.one_of(st_turn.tag_soup(), st_turn.tagged(("search", "answer"))))
def test_strict_tags__the_first_complete_search_wins_whatever_follows(prefix, query, suffix):
    env, recorder = _recording, _recording._retriever
    recorder.queries = []
    env.reset(seed=0)
    _, _, _, _, info = env.step(f"{prefix}<search>{query}</search>{suffix}")
    assert info["action_is_valid"] and recorder.queries == [query.strip()]


@given(
    _plain.filter(lambda x: x.strip()),
    _plain,
    st.sampled_from(["search", "answer"]),
    st.sampled_from(["search", "answer"]),
)
def test_strict_tags__an_allowed_tag_opened_inside_an_open_pair_is_invalid(outer, inner, tag_a, tag_b):
    env, recorder = _recording, _recording._retriever
    recorder.queries = []
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(f"<{tag_a}>{outer}<{tag_b}>{inner}</{tag_b}></{tag_a}>")
    assert not info["action_is_valid"] and not terminated and reward == env.format_penalty and recorder.queries == []


def test_multiple_choice__letters_options_and_invalid_non_options():
    env = gym.make("TurnSearchQA-MCQ-v0", split="test")
    obs, info = env.reset(options={"question_index": 3})
    q = env.unwrapped.question
    for k, c in enumerate(q.choices):
        assert f"\n{'ABCD'[k]}. {c}" in obs
    assert info["golden_answers"] == [q.answer_letter]
    wrong = next(x for x in "ABCD" if x != q.answer_letter)
    _, reward, terminated, _, info = env.step(f"<answer>{wrong}</answer>")
    assert (reward, terminated, info["em"], info["f1"]) == (0.0, True, 0.0, 0.0)
    env.reset(options={"question_index": 3})
    _, reward, terminated, _, info = env.step("<answer>I am not sure</answer>")  # Search-R1's rule: an answer ends it
    assert info["action_is_valid"] and terminated and reward == 0.0 and info["prediction"] == "I am not sure"
    env.reset(options={"question_index": 3})
    _, reward, terminated, _, info = env.step(f"<answer>({q.answer_letter}) {q.choices[q.answer_index]}</answer>")
    assert (reward, terminated, info["prediction"]) == (1.0, True, q.answer_letter)
    env.reset(options={"question_index": 3})
    _, reward, *_ = env.step(f"<answer>{q.choices[q.answer_index]}</answer>")  # the option's text
    assert reward == 1.0
    env.reset(options={"question_index": 3})
    for _ in range(4):  # never answering scores 0, whatever letter the prompt's example shows
        _, reward, terminated, _, info = env.step("no tags")
        assert reward == 0.0 and info["em"] == 0.0 and info["prediction"] not in ("A", "B", "C", "D")


def test_multiple_choice_strict__an_answer_naming_no_option_is_an_invalid_turn():
    env = gym.make("TurnSearchQA-MCQ-v0", split="test", protocol="strict")
    env.reset(options={"question_index": 3})
    q = env.unwrapped.question
    _, reward, terminated, _, info = env.step("<answer>I am not sure</answer>")
    assert not info["action_is_valid"] and not terminated and reward == -0.1
    _, reward, terminated, _, info = env.step(f"<answer>({q.answer_letter}) {q.choices[q.answer_index]}</answer>")
    assert (reward, terminated, info["prediction"]) == (1.0, True, q.answer_letter)


def test_reset_options__choose_the_question(env_on_test_split):
    q5 = env_on_test_split.unwrapped.questions[5]
    obs, info = env_on_test_split.reset(options={"question_index": 5})
    assert q5.question in obs and info["question_id"] == q5.id
    obs, info = env_on_test_split.reset(options={"question_id": q5.id})
    assert info["question_id"] == q5.id
    with pytest.raises(ValueError):
        env_on_test_split.reset(options={"question_index": 500})
    with pytest.raises(ValueError):
        env_on_test_split.reset(options={"question_id": "nope"})
    seen = {env_on_test_split.reset(seed=s)[1]["question_id"] for s in range(20)}
    assert len(seen) > 10


def test_prompt_template__replaces_the_first_message():
    env = gym.make(
        "TurnSearchQA-v0",
        prompt_template="Q: {question} ({max_searches} searches, top {topk}) {unknown} <answer> X </answer>",
    )
    obs, _ = env.reset(seed=0)
    q = env.unwrapped.question.question
    assert obs == f"Q: {q} (4 searches, top 3) {{unknown}} <answer> X </answer>"
    with pytest.raises(ValueError, match="question"):
        TurnSearchQAEnv(prompt_template="no placeholder")


def test_constructor__rejects_bad_arguments():
    for kwargs in (
        {"topk": 0},
        {"max_searches": -1},
        {"corpus_path": "x.jsonl"},
        {"retriever": "tfidf"},
        {"retriever": "dense"},
        {"split": "valid"},
    ):
        with pytest.raises(ValueError):
            TurnSearchQAEnv(**kwargs)
    with pytest.raises(FileNotFoundError, match="never downloads"):
        SentenceTransformerEncoder("/nonexistent/model/dir")


def test_dense_retriever__runs_the_same_protocol_with_a_stand_in_encoder():
    env = TurnSearchQAEnv(split="test", retriever="dense", encoder=HashingEncoder(1024))
    wins = 0
    for i in range(60):
        env.reset(options={"question_index": i})
        for _ in range(5):
            _, _, terminated, truncated, info = env.step(env.expert_action())
            if terminated or truncated:
                break
        wins += info["success"]
    assert wins >= 50
    clone = pickle.loads(pickle.dumps(env))  # a user's encoder travels with the env
    assert clone.expert_action() == env.expert_action()


def test_pickle__keeps_a_user_retriever_and_the_episode():
    env = TurnSearchQAEnv(split="test", retriever=RecordingRetriever(TurnSearchQAEnv(split="test")._retriever))
    env.reset(seed=4)
    env.step(env.expert_action())
    clone = pickle.loads(pickle.dumps(env))
    assert isinstance(clone._retriever, RecordingRetriever) and clone._retriever.queries == env._retriever.queries
    a, b = env.step(env.expert_action()), clone.step(clone.expert_action())
    assert a[:4] == b[:4]


def test_render__ansi_shows_question_and_progress():
    env = gym.make("TurnSearchQA-v0", render_mode="ansi")
    env.reset(seed=2)
    env.step(env.unwrapped.expert_action())
    text = env.render()
    assert env.unwrapped.question.question in text and "Searches: 1/4" in text and "query 1:" in text


# ---------------------------------------------------------------------------- FlashRAG files


def _write(path, rows):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


@pytest.fixture
def tiny_files(tmp_path):
    corpus = [
        {"id": "0", "contents": '"Aldo Tavesk"\nAldo Tavesk was born in Kalvoren in 1873.'},
        {"id": "1", "contents": '"Kalvoren"\nKalvoren is a city in Dusmira.'},
        {"id": "2", "contents": '"Merrow Press"\nMerrow Press is a publisher founded in 1901.'},
    ]
    questions = [
        {"id": "q1", "question": "where was aldo tavesk born", "golden_answers": ["Kalvoren", "Kalvoren city"]},
        {"id": "q2", "question": "When was Merrow Press founded?", "golden_answers": [1901], "metadata": {"x": 1}},
    ]
    _write(tmp_path / "corpus.jsonl.gz", corpus)
    _write(tmp_path / "nq_test.jsonl", questions)
    return tmp_path


def test_flashrag_files__run_with_an_in_process_retriever(tiny_files):
    env = gym.make(
        "TurnSearchQA-v0",
        dataset_path=str(tiny_files / "nq_test.jsonl"),
        corpus_path=str(tiny_files / "corpus.jsonl.gz"),
    )
    obs, info = env.reset(options={"question_index": 0})
    assert "Question: where was aldo tavesk born?\n" in obs and info["question_type"] == "dataset"
    obs, *_ = env.step("<search> Aldo Tavesk </search>")
    assert obs.startswith('\n\n<information>Doc 1(Title: "Aldo Tavesk") Aldo Tavesk was born in Kalvoren in 1873.')
    _, reward, terminated, _, info = env.step("<answer> kalvoren city </answer>")
    assert reward == 1.0 and terminated
    env.reset(options={"question_id": "q2"})
    assert env.unwrapped.question.golden_answers == ("1901",)
    for _ in range(3):  # the oracle searches the question, then answers
        _, _, terminated, _, info = env.step(env.unwrapped.expert_action())
        if terminated:
            break
    assert info["success"] and info["searches"] == 1


def test_flashrag_files__multiple_choice_answers_by_index_letter_text_or_metadata(tmp_path):
    rows = [
        {"question": "Which drug? ", "golden_answers": [2], "choices": ["a1", "b2", "c3", "d4"]},
        {"question": "Which organ?", "golden_answers": ["B"], "choices": ["liver", "heart", "lung", "skin"]},
        {"question": "Which cell?", "golden_answers": ["lung"], "choices": ["liver", "heart", "lung", "skin"]},
        {
            "question": "Which one?",
            "golden_answers": ["whatever"],
            "choices": ["w", "x", "y", "z"],
            "metadata": {"answer_letter": "D"},
        },
    ]
    _write(tmp_path / "med.jsonl", rows)
    qs = load_flashrag(tmp_path / "med.jsonl")
    assert [q.answer_letter for q in qs] == ["C", "B", "C", "D"]
    assert qs[0].question == "Which drug?" and qs[0].id == "med-0"
    _write(tmp_path / "bad.jsonl", [rows[0], {"question": "Q", "golden_answers": ["nothing"], "choices": ["a", "b"]}])
    with pytest.raises(ValueError, match="bad.jsonl:2: cannot tell which choice"):
        load_flashrag(tmp_path / "bad.jsonl")
    _write(tmp_path / "empty_gold.jsonl", [{"question": "Q", "golden_answers": []}])
    with pytest.raises(ValueError, match="golden_answers"):
        load_flashrag(tmp_path / "empty_gold.jsonl")


def test_exported_world__loads_back_as_files_with_the_same_questions_and_passages(tmp_path):
    paths = export_world(tmp_path, WorldConfig.scaled(0.1, seed=9))
    test_qs = load_flashrag(paths["test"])
    source = generated_source(9, 0.1)
    originals = split_questions(source.questions, "test")
    assert [q.question for q in test_qs] == [q.question for q in originals]
    assert [q.answer_letter for q in test_qs] == [q.answer_letter for q in originals]
    assert test_qs[0].metadata["supporting_ids"] == [str(h.passage) for h in originals[0].hops]
    env = TurnSearchQAEnv(dataset_path=str(paths["test"]), corpus_path=str(paths["corpus"]))
    gen = TurnSearchQAEnv(split="test", world_seed=9, world_scale=0.1)
    for i in range(10):
        q = originals[i]
        env.reset(options={"question_index": i})
        gen.reset(options={"question_index": i})
        a = env.step(f"<search> {q.hops[0].queries[0]} </search>")
        b = gen.step(f"<search> {q.hops[0].queries[0]} </search>")
        assert a[0] == b[0] and a[4]["retrieved_ids"] == b[4]["retrieved_ids"]
        _, reward, *_ = env.step(f"<answer>{q.golden_answers[-1]}</answer>")
        assert reward == exact_match(q.golden_answers[-1], q.golden_answers) == 1.0
    mcq = TurnSearchQAMCQEnv(dataset_path=str(paths["test"]), corpus_path=str(paths["corpus"]))
    mcq.reset(options={"question_index": 0})
    assert mcq.step(f"<answer>{originals[0].answer_letter}</answer>")[1] == 1.0


def test_sentence_transformer_encoder__loads_local_only_and_applies_prefixes(tmp_path, monkeypatch):
    """The wrapper's contract, with a stand-in for the sentence_transformers module."""
    import sys
    import types

    import numpy as np

    calls = {}

    class FakeModel:
        def __init__(self, path, device=None, local_files_only=False):
            calls["init"] = (path, local_files_only)

        def encode(self, texts, **kwargs):
            calls.setdefault("texts", []).append(list(texts))
            calls["kwargs"] = kwargs
            return np.eye(len(texts), 4, dtype=np.float64)

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=FakeModel))
    enc = SentenceTransformerEncoder(tmp_path, query_prefix="query: ", passage_prefix="passage: ")
    assert calls["init"] == (str(tmp_path), True)
    out = enc.encode(["who?"], is_query=True)
    enc.encode(["a text"], is_query=False)
    assert calls["texts"] == [["query: who?"], ["passage: a text"]]
    assert calls["kwargs"]["normalize_embeddings"] is True and out.dtype == np.float32


def test_search__a_query_matching_nothing_returns_an_empty_information_block():
    env = gym.make("TurnSearchQA-v0")
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("<search> the of and </search>")  # stopwords only
    assert obs == "\n\n<information></information>\n\n"  # what Search-R1 shows for zero hits
    assert info["searches"] == 1 and info["retrieved_ids"] == [] and reward == 0.0 and not terminated
