"""TurnSearchQA-v0 against Search-R1's own rollout and scoring code, episode by episode.

Search-R1's pipeline for one question is: generate a response, cut it
(``LLMGenerationManager._postprocess_responses``), read its action
(``postprocess_predictions``), run it (``execute_predictions``: a search returns
``_passages2string`` of the hits in an ``<information>`` block, an answer ends the episode, no
pair gives the "My previous action is invalid" message), up to ``max_turns`` turns plus a final
turn that cannot search (``run_llm_loop``), then score the decoded prompt + response with
``compute_score_em``. This script runs those functions, taken from a Search-R1 checkout (the
methods are compiled out of ``generation.py`` with a stand-in tokenizer that returns text as is,
so torch and verl are not needed), on generated multi-turn episodes covering every case kind
of the protocol review (empty answers, answers and searches inside ``<think>``, drafts, tag case and
spaces, nesting, searches inside answers, ...). Both sides search through the same
deterministic :class:`FixtureRetriever`, whose passages hold no-break spaces, ZWJ/ZWNJ, soft
hyphens, a BOM, U+2028 and CRLF.

    python benchmarks/searchqa_protocol_agreement.py PATH/TO/Search-R1            # regenerate the fixture
    python benchmarks/searchqa_protocol_agreement.py PATH/TO/Search-R1 --report   # also print agreement

The fixture (``tests/data/searchqa_protocol_cases.json``) holds the questions, passages,
prompts, responses and Search-R1's outcome of every turn (the final turn's ``do_search=False``
step included: its observation, that no query was sent, the score of the sequence without its
observation); ``tests/agentgym_turn/searchqa/test_protocol.py`` replays it through the env. ``--report``
prints the agreement of both protocols (the default ``search_r1`` and ``strict``) per
episode, per response, on the final turn and per case kind.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import io
import json
import sys
import tempfile
import weakref
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agentgym_turn.searchqa.env import TurnSearchQAEnv
from agentgym_turn.searchqa.retrieval import Document, Hit

try:  # python -m benchmarks.searchqa_protocol_agreement, or imported by the tests
    from benchmarks import common
except (
    ModuleNotFoundError
):  # python benchmarks/searchqa_protocol_agreement.py: this folder comes first on the import path
    import common

FIXTURE = common.ROOT / "tests" / "data" / "searchqa_protocol_cases.json"
MAX_TURNS = 4  # Search-R1's max_turns; the env's turn limit is max_turns + 1 (the final turn cannot search)
TOPK = 3

#: Passages as corpus ``contents`` (first line the title): ordinary text and the characters real dumps hold.
PASSAGES = [
    '"Disceint"\nDisceint is a city in Varnora. It lies 10\u00a0km from the coast.',
    '"Jeinberk Eramhaisk"\nJeinberk Eramhaisk (born 1903) was a painter born in Disceint.',
    '"Skisjosk"\nSkisjosk is a port. Its name is written Skis\u00adjosk in old maps.',
    '"Family names"\nThe name is spelled \u200dKa\u200cri in the old script.\r\nSee also: Karri.',
    '"\ufeffBOM title"\nA passage that starts with a byte-order mark\u2028and has a line separator.',
    '"Paris (novel)"\nParis is a novel by Stusziv Warriar, published in 1987.',
    '"Tabs and spaces"\n  leading spaces,\ttabs,\u2003em space, trailing   ',
    '"Second line"\nfirst line of text\nsecond line of text\n',
    '"Quotes"\nHe said "and" <answer> inside a passage </answer> twice.',
    '"Empty text"\n',
]

#: Questions as FlashRAG records; golds include the prompt's example ("Paris") and "and" (found in the invalid message).
QUESTIONS = [
    {"id": "q0", "question": "In which city was Jeinberk Eramhaisk born?", "golden_answers": ["Disceint"]},
    {"id": "q1", "question": "Which novel did Stusziv Warriar write?", "golden_answers": ["Paris"]},
    {"id": "q2", "question": "Which word joins two nouns?", "golden_answers": ["and"]},
    {"id": "q3", "question": "In what year was Paris published?", "golden_answers": ["1987", "nineteen eighty-seven"]},
    {"id": "q4", "question": "Which band is it?", "golden_answers": ["The Beatles", "Beatles"]},
]


class FixtureRetriever:
    """Deterministic retrieval over :data:`PASSAGES`: 0-3 hits chosen from the query's CRC-32."""

    def __init__(self, passages: list[str] | None = None):
        self.passages = list(PASSAGES if passages is None else passages)
        self.queries: list[str] = []

    def hits(self, query: str, topk: int) -> list[str]:
        h = zlib.crc32(query.encode("utf-8", "surrogatepass"))
        n = min(topk, h % 4)
        return [self.passages[(h // 4 + k) % len(self.passages)] for k in range(n)]

    def retrieve(self, queries, topk):
        self.queries.extend(queries)
        return [[Hit(Document(str(self.passages.index(c)), c), 1.0) for c in self.hits(q, topk)] for q in queries]


# ---------------------------------------------------------------------------------------- responses
_THOUGHTS = ["I need to look this up.", "Let me think.", "", "The passage says so.\nOK.", "hmm \u00a0 \u200d"]
_QUERIES = [
    "Jeinberk Eramhaisk",
    "Disceint city",
    "Paris novel",
    "",
    "  spaced  query ",
    "Skis\u00adjosk",
    "who sang",
    "line\nbreak",
    "<b>bold</b>",
    "and",
]


def _answers(q: dict) -> list[str]:
    gold = q["golden_answers"][0]
    return [gold, f" The {gold}! ", gold.upper(), "Beijing", "Paris", "and", "", "wrong answer", f"{gold} and more"]


def _response(rng: np.random.Generator, kind: str, q: dict) -> str:
    def pick(xs: list[str]) -> str:
        return xs[int(rng.integers(0, len(xs)))]

    t, s, a, b = pick(_THOUGHTS), pick(_QUERIES), pick(_answers(q)), pick(_answers(q))
    table = {
        "search": f"<think>{t}</think>\n<search> {s} </search>",
        "answer": f"<think>{t}</think>\n<answer> {a} </answer>",
        "answer_trailing": f"<answer>{a}</answer> and some text after, <answer>{b}</answer>",
        "empty_answer": "<think>I am done.</think><answer></answer>",
        "empty_search": "<search></search>",
        "answer_in_think": f"<think>Maybe <answer>{a}</answer> is right.</think>",
        "draft_then_answer": f"<think>Draft: <answer>{a}</answer>, no wait.</think>\n<answer>{b}</answer>",
        "search_in_think": f"<think>I will <search>{s}</search> now</think>",
        "upper_tags": f"<ANSWER>{a}</ANSWER>",
        "mixed_case_search": f"<Search>{s}</Search><answer>{a}</answer>",
        "spaced_tags": f"< answer >{a}</ answer >",
        "nested_answer_search": f"<answer><search>{s}</search></answer>",
        "nested_same": f"<answer>{a}<answer>{b}</answer></answer>",
        "nested_search": f"<search>{s}<search>{s} again</search></search>",
        "search_in_answer": f"<answer>I would <search>{s}</search> but it is {a}</answer>",
        "answer_then_search": f"<answer>{a}</answer>\n<search>{s}</search>",
        "two_searches": f"<search>{s}</search><search>other</search>",
        "unclosed_answer": f"<think>{t}</think><answer>{a}",
        "unclosed_search": f"<search>{s}",
        "closing_only": f"{a}</answer>",
        "mismatched": f"<search>{s}</answer>",
        "plain": f"I think the answer is {a}.",
        "fake_information": f"<information>Doc 1(Title: x) {a}</information><answer>{b}</answer>",
        "unicode": f"<think>\u00a0\u200c\ufeff\u2028</think><answer>\u00a0{a}\u2028</answer>",
        "crlf": f"<think>line\r\nline</think>\r\n<search>{s}\r\n</search>",
    }
    return table[kind]


#: Every case kind and its weight when drawing a turn.
KINDS = {
    "search": 6,
    "answer": 6,
    "answer_trailing": 1,
    "empty_answer": 2,
    "empty_search": 1,
    "answer_in_think": 2,
    "draft_then_answer": 2,
    "search_in_think": 2,
    "upper_tags": 2,
    "mixed_case_search": 1,
    "spaced_tags": 1,
    "nested_answer_search": 2,
    "nested_same": 1,
    "nested_search": 1,
    "search_in_answer": 2,
    "answer_then_search": 2,
    "two_searches": 1,
    "unclosed_answer": 2,
    "unclosed_search": 1,
    "closing_only": 1,
    "mismatched": 1,
    "plain": 2,
    "fake_information": 1,
    "unicode": 1,
    "crlf": 1,
}


def generate_episodes(n: int, seed: int = 0) -> list[dict]:
    """``n`` episodes: a question and ``MAX_TURNS + 1`` responses, each of a drawn case kind."""
    rng = np.random.default_rng(seed)
    names = list(KINDS)
    p = np.array([KINDS[k] for k in names], dtype=float)
    p /= p.sum()
    out = []
    for e in range(n):
        qi = int(rng.integers(0, len(QUESTIONS)))
        # every kind appears as a first turn at least twice; Search-R1 keeps an episode going until an
        # answer or the final turn, so each episode has responses for every turn (the unused are dropped)
        kinds = [names[e % len(names)] if e < 2 * len(names) else names[int(rng.choice(len(names), p=p))]]
        kinds += [names[int(rng.choice(len(names), p=p))] for _ in range(MAX_TURNS)]
        out.append(
            {
                "question": QUESTIONS[qi]["id"],
                "kinds": kinds,
                "responses": [_response(rng, k, QUESTIONS[qi]) for k in kinds],
            }
        )
    return out


# ---------------------------------------------------------------------------------------- Search-R1's side
def load_peer(peer_root: Path) -> tuple[Any, type]:
    """``(qa_em module, manager class)`` from a Search-R1 checkout, without torch or verl."""
    spec = importlib.util.spec_from_file_location(
        "search_r1_qa_em", peer_root / "verl" / "utils" / "reward_score" / "qa_em.py"
    )
    qa_em = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(qa_em)
    source = (peer_root / "search_r1" / "llm_agent" / "generation.py").read_text()
    tree = ast.parse(source)
    wanted = {
        "_postprocess_responses",
        "execute_predictions",
        "postprocess_predictions",
        "batch_search",
        "_passages2string",
    }
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LLMGenerationManager")
    methods = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    assert {m.name for m in methods} == wanted, "generation.py changed: a needed method is missing"
    module = ast.Module(
        body=[ast.ClassDef(name="PeerMethods", bases=[], keywords=[], body=methods, decorator_list=[])], type_ignores=[]
    )
    import re
    from typing import Any as _Any, Dict, List, Tuple

    namespace: dict[str, Any] = {"re": re, "List": List, "Dict": Dict, "Any": _Any, "Tuple": Tuple, "torch": None}
    exec(
        compile(ast.fix_missing_locations(module), str(peer_root / "search_r1/llm_agent/generation.py"), "exec"),
        namespace,
    )
    return qa_em, namespace["PeerMethods"]


def make_peer_manager(methods: type, retriever: FixtureRetriever):
    class _Tokenizer:  # text in, text out: the cut then works on the response text itself
        pad_token = "<pad>"

        def batch_decode(self, responses, skip_special_tokens=True):
            return list(responses)

    class _Config:
        no_think_rl = False
        topk = TOPK

    class Manager(methods):
        tokenizer = _Tokenizer()
        config = _Config()

        def _batch_tokenize(self, responses):
            return responses

        sent: list[str] = []

        def _batch_search(self, queries):
            self.sent.extend(queries)
            return {
                "result": [
                    [{"document": {"contents": c}, "score": 1.0} for c in retriever.hits(q, TOPK)] for q in queries
                ]
            }

    return Manager()


def run_peer(qa_em, manager, prompt: str, golds: list[str], responses: list[str]) -> dict:
    """One episode as ``run_llm_loop`` runs it (batch of one), scored as ``compute_score_em``.

    Every turn records what ``execute_predictions`` returned, the final turn's too (its
    ``do_search=False`` observation, which ``run_llm_loop`` then drops from the sequence), the query
    sent to the retriever (``None`` when none was sent) and the score of the sequence so far
    (this turn's cut response counted, its observation not).
    """
    sequence = prompt
    turns = []
    for step in range(MAX_TURNS + 1):
        final = step == MAX_TURNS
        _, (cut,) = manager._postprocess_responses([responses[step]])
        (action,), (content,) = manager.postprocess_predictions([cut])
        manager.sent.clear()
        obs, dones, valid, is_search = manager.execute_predictions([cut], "<pad>", [True], do_search=not final)
        sequence += cut
        turns.append(
            {
                "cut": cut,
                "action": action,
                "content": content,
                "query": manager.sent[0] if manager.sent else None,
                "observation": obs[0],
                "final": final,
                "done": bool(dones[0]),
                "valid": bool(valid[0]),
                "score": _score(qa_em, sequence, golds),
            }
        )
        if not final:
            sequence += obs[0]
        if dones[0]:
            break
    return {"turns": turns, "score": _score(qa_em, sequence, golds)}


def _score(qa_em, sequence: str, golds: list[str]) -> float:
    with contextlib.redirect_stdout(io.StringIO()):  # compute_score_em prints one call in 64 at random
        return float(qa_em.compute_score_em(sequence, {"target": golds}))


def build_fixture(peer_root: Path, n: int) -> dict:
    qa_em, methods = load_peer(peer_root)
    retriever = FixtureRetriever()
    manager = make_peer_manager(methods, retriever)
    by_id = {q["id"]: q for q in QUESTIONS}
    episodes = generate_episodes(n)
    with tempfile.TemporaryDirectory() as tmp:
        env = make_env(Path(tmp), "search_r1")
        prompts = {q["id"]: env.reset(options={"question_id": q["id"]})[0] for q in QUESTIONS}
        for ep in episodes:
            prompt = prompts[ep["question"]]
            ep["search_r1"] = run_peer(qa_em, manager, prompt, by_id[ep["question"]]["golden_answers"], ep["responses"])
            ep["responses"] = ep["responses"][: len(ep["search_r1"]["turns"])]
            ep["kinds"] = ep["kinds"][: len(ep["responses"])]
    return {
        "max_turns": MAX_TURNS,
        "topk": TOPK,
        "passages": PASSAGES,
        "questions": QUESTIONS,
        "prompts": prompts,
        "episodes": episodes,
    }


# ---------------------------------------------------------------------------------------- our side
#: The :class:`FixtureRetriever` of each env :func:`make_env` built: :func:`replay` reads the queries the env sent it.
RETRIEVER_OF: weakref.WeakKeyDictionary[TurnSearchQAEnv, FixtureRetriever] = weakref.WeakKeyDictionary()


def make_env(
    workdir: Path, protocol: str, questions: list[dict] | None = None, passages: list[str] | None = None
) -> TurnSearchQAEnv:
    """The env over the fixture's questions and :class:`FixtureRetriever` (turn limit is the caller's: MAX_TURNS + 1)."""
    path = workdir / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in (questions or QUESTIONS)))
    retriever = FixtureRetriever(passages)
    env = TurnSearchQAEnv(
        dataset_path=str(path),
        retriever=retriever,
        topk=TOPK,
        max_searches=MAX_TURNS,
        protocol=protocol,
        format_penalty=0.0,
    )
    RETRIEVER_OF[env] = retriever
    return env


def replay(env: TurnSearchQAEnv, episode: dict) -> dict:
    """Our env's outcome of every turn of ``episode``, in the fixture's terms (under the registered turn limit, MAX_TURNS + 1)."""
    retriever = RETRIEVER_OF[env]
    limited = gym.wrappers.TimeLimit(env, max_episode_steps=MAX_TURNS + 1)
    prompt, _ = limited.reset(options={"question_id": episode["question"]})
    turns, total = [], 0.0
    info: dict = {}
    for response in episode["responses"]:
        before = len(retriever.queries)
        obs, reward, terminated, truncated, info = limited.step(response)
        total += reward
        searched = retriever.queries[before:]
        action = None if not info["action_is_valid"] else ("answer" if terminated else "search")
        turns.append(
            {
                "action": action,
                "query": searched[0] if searched else None,
                "observation": obs,
                "done": terminated,
                "ended": terminated or truncated,
                "reward": reward,
            }
        )
        if terminated or truncated:
            break
    return {"prompt": prompt, "turns": turns, "return": total, "score": info.get("score", 0.0)}


def turn_diffs(episode: dict, ours: dict, prompt: str) -> list[list[str]]:
    """What differs between Search-R1's outcome (on ``prompt``) and ours, per response of the episode (all empty: it agrees).

    Per turn: the action, the query sent to the retriever (none on Search-R1's final turn), the
    observation (the final turn's too: what ``execute_predictions`` returned, which Search-R1
    then drops), whether the episode ends there (terminated by an answer, or truncated after the
    final turn), and the reward (the change of Search-R1's score of the sequence so far); on the
    last response also the episode's score.
    """
    peer = episode["search_r1"]
    out: list[list[str]] = [[] for _ in peer["turns"]]
    if ours["prompt"] != prompt:
        out[0].append("prompt")
    if len(ours["turns"]) != len(peer["turns"]):
        out[min(len(ours["turns"]), len(peer["turns"])) - 1].append("episode end")
    before = 0.0
    for k, (p, o) in enumerate(zip(peer["turns"], ours["turns"])):
        d = out[k]
        if p["action"] != o["action"]:
            d.append(f"action {p['action']} vs {o['action']}")
        if p["query"] != o["query"]:
            d.append("query")
        if p["observation"] != o["observation"]:
            d.append("observation")
        if (p["done"], p["done"] or p["final"]) != (o["done"], o["ended"]):
            d.append("episode end")
        if o["reward"] != p["score"] - before:
            d.append("reward")
        before = p["score"]
    if ours["score"] != peer["score"] or ours["return"] != peer["score"]:
        out[-1].append("score")
    return out


def compare(episode: dict, ours: dict, prompt: str) -> list[str]:
    """What differs between Search-R1's outcome (on ``prompt``) and ours, as ``"turn k: what"`` (empty: the episode agrees)."""
    return [f"turn {k + 1}: {d}" for k, ds in enumerate(turn_diffs(episode, ours, prompt)) for d in ds]


def agreement(fixture: dict, protocol: str, workdir: Path) -> dict:
    """Agreement of ``protocol`` with Search-R1 on the fixture: per episode, per response, per case kind and on the final turn."""
    env = make_env(workdir, protocol, fixture["questions"], fixture["passages"])
    per_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    agree, decisions, what = 0, 0, defaultdict(int)
    responses, responses_agreeing, final, final_agreeing = 0, 0, 0, 0
    for ep in fixture["episodes"]:
        per_turn = turn_diffs(ep, replay(env, ep), fixture["prompts"][ep["question"]])
        diffs = [d for ds in per_turn for d in ds]
        agree += not diffs
        decisions += all(d == "observation" or d == "prompt" for d in diffs)
        for d in diffs:
            what[d.split(" ")[0] if d.startswith("action") else d] += 1
        for turn, kind, ds in zip(ep["search_r1"]["turns"], ep["kinds"], per_turn):
            responses += 1
            responses_agreeing += not ds
            per_kind[kind][0] += not ds
            per_kind[kind][1] += 1
            if turn["final"]:
                final += 1
                final_agreeing += not ds
    n = len(fixture["episodes"])
    return {
        "protocol": protocol,
        "episodes": n,
        "episodes_agreeing": agree,
        "agreement": round(agree / n, 4),
        "agreement_ignoring_message_text": round(decisions / n, 4),
        "responses": responses,
        "responses_agreeing": responses_agreeing,
        "final_turn_responses": final,
        "final_turn_responses_agreeing": final_agreeing,
        "differences": dict(what),
        "per_kind_responses": {k: f"{a}/{t}" for k, (a, t) in sorted(per_kind.items())},
    }


def dumps_fixture(fixture: dict) -> str:
    """JSON with one episode per line (readable diffs when the fixture is regenerated)."""
    head = {k: v for k, v in fixture.items() if k != "episodes"}
    lines = [json.dumps(ep, ensure_ascii=False) for ep in fixture["episodes"]]
    return json.dumps(head, ensure_ascii=False, indent=1)[:-2] + ',\n "episodes": [\n' + ",\n".join(lines) + "\n ]\n}\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("peer", type=Path, help="root of a Search-R1 checkout (holds search_r1/ and verl/)")
    p.add_argument("--episodes", type=int, default=400)
    p.add_argument("--out", type=Path, default=FIXTURE)
    p.add_argument("--report", action="store_true", help="print the agreement of both protocols")
    args = p.parse_args(argv)
    fixture = build_fixture(args.peer, args.episodes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps_fixture(fixture))
    turns = sum(len(ep["responses"]) for ep in fixture["episodes"])
    print(f"wrote {args.out.name}: {len(fixture['episodes'])} episodes, {turns} turns", file=sys.stderr)
    if args.report:
        with tempfile.TemporaryDirectory() as tmp:
            for protocol in ("search_r1", "strict"):
                print(json.dumps(agreement(fixture, protocol, Path(tmp)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
