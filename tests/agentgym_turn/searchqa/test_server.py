"""The /retrieve server speaks Search-R1's protocol; the env is the same over HTTP and in-process."""

import json
import pickle
import re
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401
from agentgym_turn.cli import main as cli_main
from agentgym_turn.searchqa.retrieval import HTTPRetriever, RetrieverError, parse_retrieve_response
from agentgym_turn.searchqa.server import RetrievalServer
from agentgym_turn.searchqa.source import generated_source
from support.retriever_cli import start_retriever, write_corpus
from support.retrievers import bm25  # noqa: F401  (a fixture)


@pytest.fixture(scope="module")
def server(bm25):
    with RetrievalServer(bm25) as srv:
        yield srv


def post(url, payload, raw=None):
    body = raw if raw is not None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_server__answers_in_search_r1_format_to_a_plain_http_client(server, bm25):
    queries = ["Kalvoren novel", "In what year was the founder of a bank born?"]
    status, body = post(server.url, {"queries": queries, "topk": 3, "return_scores": True})
    assert status == 200 and set(body) == {"result"} and len(body["result"]) == 2
    expected = bm25.retrieve(queries, 3)
    for row, hits in zip(body["result"], expected):
        assert len(row) == len(hits) == 3
        for item, hit in zip(row, hits):
            assert set(item) == {"document", "score"} and set(item["document"]) == {"id", "contents"}
            assert item["document"] == {"id": hit.document.id, "contents": hit.document.contents}
            assert isinstance(item["score"], float) and item["score"] == pytest.approx(hit.score)
            assert re.match(r'^"[^\n]+"\n', item["document"]["contents"])
        assert [i["score"] for i in row] == sorted((i["score"] for i in row), reverse=True)


def test_server__without_scores_topk_defaults_and_health(server):
    status, body = post(server.url, {"queries": ["Press founded"]})  # return_scores defaults to false, topk to 3
    assert status == 200 and len(body["result"][0]) == 3 and set(body["result"][0][0]) == {"id", "contents"}
    for topk, n in ((0, 3), (None, 3), (5, 5)):
        status, body = post(
            server.url, {"queries": ["Press founded", "River city"], "topk": topk, "return_scores": True}
        )
        assert status == 200 and [len(r) for r in body["result"]] == [n, n]
    status, body = post(server.url, {"queries": []})
    assert (status, body) == (200, {"result": []})
    with urllib.request.urlopen(server.url.replace("/retrieve", "/health"), timeout=10) as resp:
        assert json.loads(resp.read())["num_docs"] == len(generated_source().corpus)


@pytest.mark.parametrize(
    "payload, raw, status",
    [
        (None, b"{not json", 400),
        ({"query": "x"}, None, 422),
        ({"queries": "x"}, None, 422),
        ({"queries": ["x", 3]}, None, 422),
        ({"queries": ["x"], "topk": -1}, None, 422),
        ({"queries": ["x"], "topk": "3"}, None, 422),
        ({"queries": ["x"], "return_scores": "yes"}, None, 422),
        ([1, 2], None, 422),
    ],
)
def test_server__rejects_malformed_requests_with_a_reason(server, payload, raw, status):
    got, body = post(server.url, payload, raw)
    assert got == status and isinstance(body["detail"], str) and body["detail"]


def test_server__unknown_paths_are_404(server):
    got, body = post(server.url.replace("/retrieve", "/search"), {"queries": ["x"]})
    assert got == 404
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(server.url.replace("/retrieve", "/nope"), timeout=10)
    assert err.value.code == 404


def test_server__concurrent_clients_get_their_own_answers(server, bm25):
    queries = [f"{c} city" for c in ("Press", "Bank", "River", "Museum", "Studios", "Records")]
    expected = {q: [h.document.id for h in bm25.retrieve([q], 3)[0]] for q in queries}
    errors = []

    def worker(q):
        client = HTTPRetriever(server.url)
        for _ in range(10):
            got = [h.document.id for h in client.retrieve([q], 3)[0]]
            if got != expected[q]:
                errors.append((q, got))

    threads = [threading.Thread(target=worker, args=(q,)) for q in queries]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_env__identical_episodes_in_process_and_over_http(server):
    local = gym.make("TurnSearchQA-v0", split="test")
    remote = gym.make("TurnSearchQA-v0", split="test", retriever_url=server.url)
    scripted = ["<search> founded by </search>", "not an action", "<answer> 1900 </answer>"]
    for i in range(40):
        for policy in ("expert", "scripted"):
            a = local.reset(seed=i, options={"question_index": i})
            b = remote.reset(seed=i, options={"question_index": i})
            assert a == b
            for t in range(5):
                response = local.unwrapped.expert_action() if policy == "expert" else scripted[t % 3]
                assert remote.unwrapped.expert_action() == local.unwrapped.expert_action()
                a, b = local.step(response), remote.step(response)
                assert a == b
                if a[2] or a[3]:
                    break
        assert a[4]["success"] or policy == "scripted"
    clone = pickle.loads(pickle.dumps(remote))  # the HTTP client pickles without its connection
    clone.reset(options={"question_index": 0})
    assert clone.step("<search> Press </search>")[4]["searches"] == 1


class _SearchR1StyleBM25(BaseHTTPRequestHandler):
    """Answers like Search-R1's BM25 server: documents with title/text/contents and no id."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        docs = [
            {
                "title": "Aldo Tavesk",
                "text": "Aldo Tavesk was born in 1873.",
                "contents": '"Aldo Tavesk"\nAldo Tavesk was born in 1873.',
            },
            {"title": "Kalvoren", "text": "A city.", "contents": '"Kalvoren"\nA city.'},
        ]
        row = [{"document": d, "score": 3.5 - k} for k, d in enumerate(docs)] if body.get("return_scores") else docs
        out = json.dumps({"result": [row[: body["topk"]] for _ in body["queries"]]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def test_http_retriever__works_with_search_r1_style_servers():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _SearchR1StyleBM25)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"  # no path: /retrieve is assumed
        env = gym.make("TurnSearchQA-v0", retriever_url=url, topk=2)
        env.reset(seed=0)
        obs, _, _, _, info = env.step("<search> Aldo </search>")
        assert (
            obs
            == '\n\n<information>Doc 1(Title: "Aldo Tavesk") Aldo Tavesk was born in 1873.\nDoc 2(Title: "Kalvoren") A city.</information>\n\n'
        )
        assert info["retrieved_ids"] == ["", ""]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_http_retriever__bare_documents_and_protocol_errors():
    hits = parse_retrieve_response({"result": [[{"id": "7", "contents": '"T"\nx'}]]}, 1)
    assert hits[0][0].document.id == "7" and hits[0][0].score == 0.0
    for bad in ({}, {"result": [[{"nothing": 1}]]}, {"result": [1]}, {"result": []}):
        with pytest.raises(RetrieverError):
            parse_retrieve_response(bad, 1)
    with pytest.raises(RetrieverError, match="cannot reach"):
        HTTPRetriever("http://127.0.0.1:9/retrieve", timeout=2, retries=0).retrieve(["x"], 3)
    with pytest.raises(ValueError):
        HTTPRetriever("ftp://example/retrieve")


def test_server__bad_retriever_output_is_a_500_not_a_crash():
    class Broken:
        def retrieve(self, queries, topk):
            raise RuntimeError("index missing")

    with RetrievalServer(Broken()) as srv:
        status, body = post(srv.url, {"queries": ["x"]})
        assert status == 500 and "index missing" in body["detail"]
        with pytest.raises(RetrieverError, match="HTTP 500"):
            HTTPRetriever(srv.url).retrieve(["x"], 3)


def test_cli__serve_retriever_help_and_a_real_process(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["serve", "retriever", "--help"])
    assert exit_info.value.code == 0 and "--corpus" in capsys.readouterr().out
    proc, url = start_retriever(write_corpus(tmp_path / "corpus.jsonl"))
    try:
        status, body = post(url, {"queries": ["word3"], "topk": 3, "return_scores": True})
        assert status == 200 and [d["document"]["id"] for d in body["result"][0]] == ["3"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_blocked_retrieval_does_not_stall_other_requests():
    """Retrieval runs on the server's threads, not its event loop: while one request's retriever is
    blocked, /health and other retrievals are answered (ordered by events, not timed)."""
    release = threading.Event()
    entered = threading.Event()

    class Gate:
        def retrieve(self, queries, topk):
            if queries == ["wait"]:
                entered.set()
                assert release.wait(30), "never released"
            from agentgym_turn.searchqa.retrieval import Document, Hit

            return [[Hit(Document("1", '"T"\nx'), 1.0)] for _ in queries]

    with RetrievalServer(Gate()) as srv:
        slow: dict = {}
        blocked = threading.Thread(target=lambda: slow.update(reply=post(srv.url, {"queries": ["wait"], "topk": 1})))
        blocked.start()
        try:
            assert entered.wait(30)
            with urllib.request.urlopen(f"{srv.base_url}/health", timeout=10) as resp:
                assert resp.status == 200
            assert post(srv.url, {"queries": ["other"], "topk": 1})[0] == 200
            assert not slow  # answered while the first retrieval was still blocked
        finally:
            release.set()
            blocked.join(30)
        assert slow["reply"][0] == 200
