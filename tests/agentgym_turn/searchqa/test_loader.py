"""Search-QA loaders: Search-R1 parquet loads; every bad file is an error naming file and line; indexes match their corpus."""

import gzip
import json
import os

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401
from agentgym_turn.core.files import DataFileError
from agentgym_turn.searchqa.corpus import Corpus
from agentgym_turn.searchqa.loader import MAX_QUESTION_CHARS, load_flashrag, load_questions
from agentgym_turn.searchqa.retrieval import BM25Retriever, DenseRetriever, HashingEncoder

PROMPT = "Answer the given question. ... For example, <answer> Beijing </answer>. Question: {}\n"


def write_search_r1_parquet(path, rows, *, with_id=True):
    """A parquet table in the column layout of Search-R1's scripts/data_process/nq_search.py."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = []
    for k, (question, golds) in enumerate(rows):
        q = question.strip() + ("" if question.strip().endswith("?") else "?")
        record = {
            "question": q,
            "golden_answers": golds,
            "data_source": "nq",
            "prompt": [{"role": "user", "content": PROMPT.format(q)}],
            "ability": "fact-reasoning",
            "reward_model": {"style": "rule", "ground_truth": {"target": golds}},
            "extra_info": {"split": "test", "index": k},
        }
        if with_id:
            record = {"id": f"test_{k}", **record}
        records.append(record)
    pq.write_table(pa.Table.from_pylist(records), path)


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


CORPUS = [
    {"id": "0", "contents": '"Zebra"\nThe zebra is a striped animal of Varnora.'},
    {"id": "1", "contents": '"Kiwi"\nThe kiwi is a bird.'},
    {"id": "2", "contents": '"Skisjosk"\nSkisjosk is a port city.'},
]


# ------------------------------------------------------------------------- parquet
def test_search_r1_parquet__loads_with_its_golds_ids_and_runs_in_the_env(tmp_path):
    path = tmp_path / "test.parquet"
    write_search_r1_parquet(
        path, [("what striped animal lives in varnora", ["zebra", "zebras"]), ("which bird?", ["kiwi"])]
    )
    qs = load_questions(path)
    assert [(q.id, q.question, q.golden_answers) for q in qs] == [
        ("test_0", "what striped animal lives in varnora?", ("zebra", "zebras")),
        ("test_1", "which bird?", ("kiwi",)),
    ]
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    env = gym.make("TurnSearchQA-v0", dataset_path=str(path), corpus_path=str(corpus))
    obs, info = env.reset(options={"question_id": "test_0"})
    assert "what striped animal lives in varnora?" in obs and info["golden_answers"] == ["zebra", "zebras"]
    obs, *_ = env.step("<search>striped animal</search>")
    assert '(Title: "Zebra")' in obs
    _, reward, terminated, _, _ = env.step("<answer>Zebra</answer>")
    assert reward == 1.0 and terminated


def test_search_r1_parquet__without_ids_and_damaged(tmp_path):
    path = tmp_path / "train.parquet"
    write_search_r1_parquet(path, [("q one", ["a1"]), ("q two", ["a2"])], with_id=False)
    assert [q.id for q in load_questions(path)] == ["nq-test-0", "nq-test-1"]
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(DataFileError, match="bad.parquet: not a readable parquet file"):
        load_questions(bad)
    nulls = tmp_path / "nulls.parquet"
    write_search_r1_parquet(nulls, [("q", [None])])
    with pytest.raises(DataFileError, match=r"nulls.parquet:row 1: no gold answer"):
        load_questions(nulls)


# ------------------------------------------------------------------------- gold answers and ids
def test_golds__null_dropped_nested_flattened_empty_refused(tmp_path):
    path = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"id": "a", "question": "q1", "golden_answers": [None, "Paris"]},
            {"id": "b", "question": "q2", "golden_answers": [["x", "y"], "z", 1987]},
        ],
    )
    a, b = load_flashrag(path)
    assert a.golden_answers == ("Paris",) and b.golden_answers == ("x", "y", "z", "1987")
    for golds in ([None], [], [""], ["  "], None):
        bad = write_jsonl(
            tmp_path / "bad.jsonl",
            [
                {"id": "ok", "question": "q", "golden_answers": ["y"]},
                {"id": "c", "question": "q3", "golden_answers": golds},
            ],
        )
        with pytest.raises(DataFileError, match=r"bad\.jsonl:2: no gold answer"):
            load_flashrag(bad)
    for golds in ([{"a": 1}], [True]):
        bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "c", "question": "q3", "golden_answers": golds}])
        with pytest.raises(DataFileError, match=r"bad\.jsonl:1: a gold answer"):
            load_flashrag(bad)


def test_null_gold__an_answer_none_does_not_score(tmp_path):
    questions = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": "q", "golden_answers": [None, "kiwi"]}])
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    env = gym.make("TurnSearchQA-v0", dataset_path=str(questions), corpus_path=str(corpus))
    env.reset()
    _, reward, terminated, _, _ = env.step("<answer>None</answer>")
    assert terminated and reward == 0.0


def test_duplicate_ids__refused_naming_both_lines(tmp_path):
    path = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"id": "a", "question": "q1", "golden_answers": ["x"]},
            {"id": "b", "question": "q2", "golden_answers": ["x"]},
            {"id": "a", "question": "q3", "golden_answers": ["x"]},
        ],
    )
    with pytest.raises(DataFileError, match=r"q\.jsonl:3: duplicate question id 'a' \(first at .*q\.jsonl:1\)"):
        load_flashrag(path)


def test_over_long_question__refused_not_cut(tmp_path):
    path = write_jsonl(
        tmp_path / "q.jsonl", [{"id": "a", "question": "x" * (MAX_QUESTION_CHARS + 1), "golden_answers": ["y"]}]
    )
    with pytest.raises(
        DataFileError, match=rf"q\.jsonl:1: the question is {MAX_QUESTION_CHARS + 1:,} characters long; the limit is"
    ):
        load_flashrag(path)


# ------------------------------------------------------------------------- bytes, gzip, special files
@pytest.mark.parametrize("loader", ["questions", "corpus"])
def test_bad_bytes__non_utf8_and_corrupt_gzip_name_file_and_line(tmp_path, loader):
    load = load_flashrag if loader == "questions" else Corpus.from_jsonl
    good = json.dumps({"id": "a", "question": "q", "golden_answers": ["x"], "contents": '"T"\ntext'})
    path = tmp_path / "data.jsonl"
    path.write_bytes((good + "\n").encode() + b'{"id": "b", "question": "caf\xe9", "contents": "x"}\n')
    with pytest.raises(DataFileError, match=r"data\.jsonl:2: not valid UTF-8"):
        load(path)
    gz = tmp_path / "data.jsonl.gz"
    gz.write_bytes(gzip.compress((good + "\n").encode() * 50)[:-20])
    with pytest.raises(DataFileError, match=r"data\.jsonl\.gz.*(corrupt|truncated)"):
        load(gz)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_special_files__refused_for_questions_and_corpus(tmp_path, kind):
    path = tmp_path / "data.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    for load in (load_flashrag, load_questions, Corpus.from_jsonl):
        with pytest.raises(DataFileError, match="not a regular file"):
            load(path)
    with pytest.raises(DataFileError, match="not a regular file"):
        gym.make("TurnSearchQA-v0", dataset_path=str(path), retriever_url="http://127.0.0.1:9/retrieve")


# ------------------------------------------------------------------------- saved indexes
def test_index_dir__never_reused_for_another_corpus_of_the_same_size(tmp_path):
    index_dir = tmp_path / "index"
    first = Corpus([r["id"] for r in CORPUS], [r["contents"] for r in CORPUS])
    BM25Retriever.build(first, index_dir=index_dir)
    again = BM25Retriever.build(
        Corpus(list(first.ids), list(first.contents)), index_dir=index_dir
    )  # same corpus: loaded
    assert again.retrieve(["zebra"], 1)[0][0].document.contents.startswith('"Zebra"')
    changed = Corpus(list(first.ids), ['"Kiwi"\nThe kiwi is a bird.', '"Zebra"\nA zebra.', first.contents[2]])
    with pytest.raises(ValueError, match=r"index_dir .*index: holds the BM25 index of another corpus"):
        BM25Retriever.build(changed, index_dir=index_dir)
    # and through the env: the changed corpus file with the old index_dir is refused, not served
    questions = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": "zebra?", "golden_answers": ["zebra"]}])
    corpus_file = write_jsonl(
        tmp_path / "corpus.jsonl", [{"id": i, "contents": c} for i, c in zip(changed.ids, changed.contents)]
    )
    with pytest.raises(ValueError, match="another corpus"):
        gym.make("TurnSearchQA-v0", dataset_path=str(questions), corpus_path=str(corpus_file), index_dir=str(index_dir))


def test_index_dir__an_index_without_fingerprint_is_refused(tmp_path):
    from agentgym_turn.bm25 import BM25Index

    corpus = Corpus(["0", "1"], ['"A"\nalpha', '"B"\nbeta'])
    BM25Index.build(corpus.contents).save(tmp_path / "bare")
    with pytest.raises(ValueError, match="without a readable corpus fingerprint"):
        BM25Retriever.build(corpus, index_dir=tmp_path / "bare")


def test_embeddings_cache__checked_against_corpus_and_encoder(tmp_path):
    cache = tmp_path / "emb" / "embeddings.npy"
    cache.parent.mkdir()
    corpus = Corpus(["0", "1"], ['"A"\nalpha', '"B"\nbeta'])
    DenseRetriever.build(corpus, HashingEncoder(64), cache_path=cache)
    DenseRetriever.build(corpus, HashingEncoder(64), cache_path=cache)  # same: loaded
    with pytest.raises(ValueError, match="another corpus or encoder"):
        DenseRetriever.build(Corpus(["0", "1"], ['"A"\nalpha', '"C"\ngamma']), HashingEncoder(64), cache_path=cache)
    with pytest.raises(ValueError, match="another corpus or encoder"):
        DenseRetriever.build(corpus, HashingEncoder(32), cache_path=cache)


# ------------------------------------------------------------------------- warm-up at make time
def test_make__warms_the_retriever_so_the_first_search_compiles_nothing():
    env = gym.make("TurnSearchQA-v0", world_seed=3)
    assert env.unwrapped._retriever.index._warm


@pytest.mark.parametrize("loader", ["questions", "corpus"])
@pytest.mark.parametrize("line", ["[" * 200_000, '{"id": ' + "9" * 5000 + "}"], ids=["nested", "huge_int"])
def test_hostile_json_lines__a_clear_error_with_file_and_line(tmp_path, loader, line):
    load = load_flashrag if loader == "questions" else Corpus.from_jsonl
    good = json.dumps({"id": "a", "question": "q", "golden_answers": ["x"], "contents": '"T"\ntext'})
    path = tmp_path / "data.jsonl"
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(DataFileError, match=r"data\.jsonl:2: "):
        load(path)
