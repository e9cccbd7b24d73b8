"""Who answers the turns of an evaluation: a :class:`Player` takes a batch of chats and returns one :class:`Reply` each.

:class:`EndpointPlayer` asks an OpenAI-compatible ``/v1/chat/completions`` server (vLLM, SGLang, llama.cpp's
server, llama-cpp-python's ``python -m llama_cpp.server``) with the standard library's HTTP client, a thread per
request in flight. A request that fails for a reason outside the model (connection refused or reset, a timeout,
HTTP 5xx or 429, a body that is not the API's JSON) is retried ``retries`` times with exponential backoff; then
the reply is an ``infra_error`` and the harness ends that episode as one, counted apart from the model's scores.
A local Hugging Face model plays through :class:`reference_trainer.players.LocalPlayer` (torch, the ``train`` extra).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

#: Bounds on what one endpoint reply may be: a body larger than this is refused as malformed.
MAX_REPLY_BYTES = 4 << 20


@dataclass
class Reply:
    """One turn's answer: ``action`` goes to the env's ``step`` (text, or the sampled token ids of a local model),
    ``text`` is its text; ``status`` is ``"ok"`` or ``"infra_error"`` (then ``error`` says why and no step is played)."""

    action: Any = ""
    text: str = ""
    completion_tokens: int = 0
    prompt_tokens: int = 0
    status: str = "ok"
    error: str | None = None


class Player(Protocol):
    """What the harness needs from a model."""

    #: A tokenizer for :class:`~agentgym_turn.chat.ChatView` (exact ids, local models), or ``None`` (messages).
    tokenizer: Any

    def describe(self) -> dict[str, Any]:
        """What the card says of the model: kind, name or path, weights and template digests, where known."""
        ...

    def respond(
        self, chats: Sequence[Any], *, temperature: float, top_p: float, max_new_tokens: int, seeds: Sequence[int]
    ) -> list[Reply]:
        """One reply per chat (a :class:`~agentgym_turn.chat.ChatView` after ``reset`` or ``step``); ``seeds`` seed each
        reply's sampling where the backend takes a seed."""
        ...


class EndpointError(RuntimeError):
    """A chat-completions request that failed for a reason outside the model (retried, then an ``infra_error``)."""


def chat_completions_url(url: str) -> str:
    """``url`` as the chat-completions address: a server root (``http://127.0.0.1:8000``), its ``/v1`` or the full path."""
    url = url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    return url + "/v1/chat/completions"


class EndpointPlayer:
    """A model behind an OpenAI-compatible chat-completions endpoint.

    Args:
        url: The server (``http://HOST:PORT``, ``.../v1`` or ``.../v1/chat/completions``).
        model: The ``"model"`` field sent (servers of one model ignore it).
        api_key_env: Name of an environment variable holding the key, sent as ``Authorization: Bearer``.
        concurrency: Requests in flight at once.
        timeout_s: Seconds one request may take (connect and read).
        retries: Further tries of a request that failed outside the model; the ``k``-th waits ``backoff_s * 2**k`` s
            (a 429's ``Retry-After`` when it says longer, up to ``max_backoff_s``).
    """

    tokenizer = None

    def __init__(
        self,
        url: str,
        *,
        model: str = "default",
        api_key_env: str | None = None,
        concurrency: int = 4,
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
    ):
        if concurrency < 1 or retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise ValueError("concurrency >= 1, retries >= 0, timeout_s > 0 and backoff_s >= 0 are required.")
        self.url = chat_completions_url(url)
        self.model = model
        self.api_key_env = api_key_env
        self._key = None
        if api_key_env:
            self._key = os.environ.get(api_key_env)
            if not self._key:
                raise ValueError(f"--api-key-env {api_key_env}: that environment variable is not set.")
        self.concurrency = int(concurrency)
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="agentgym-eval")

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "endpoint",
            "url": self.url,
            "model": self.model,
            "template": "the server's own",
            "retries": self.retries,
            "timeout_s": self.timeout_s,
            "concurrency": self.concurrency,
        }

    def respond(
        self, chats: Sequence[Any], *, temperature: float, top_p: float, max_new_tokens: int, seeds: Sequence[int]
    ) -> list[Reply]:
        bodies = [
            {
                "model": self.model,
                "messages": chat.view(),
                "max_tokens": int(max_new_tokens),
                "temperature": float(temperature),
                "top_p": float(top_p),
                "seed": int(seed) % (2**31),
                "stream": False,
            }
            for chat, seed in zip(chats, seeds)
        ]
        return list(self._pool.map(self._ask, bodies))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _ask(self, body: dict[str, Any]) -> Reply:
        """POST one request with the retries; never raises."""
        error = ""
        for attempt in range(self.retries + 1):
            wait = self.backoff_s * (2**attempt)
            try:
                return self._post(body)
            except EndpointError as e:
                error = str(e)
                wait = max(wait, getattr(e, "retry_after", 0.0))
            if attempt < self.retries:
                time.sleep(min(wait, self.max_backoff_s))
        return Reply(status="infra_error", error=f"{error} (after {self.retries + 1} tries)")

    def _post(self, body: dict[str, Any]) -> Reply:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as e:
            err = EndpointError(f"HTTP {e.code} from {self.url}: {_snippet(e)}")
            if e.code == 429:
                err.retry_after = _retry_after(e.headers.get("Retry-After"))  # type: ignore[attr-defined]
            raise err from None
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            reason = getattr(e, "reason", e)
            raise EndpointError(f"{self.url} unreachable: {type(reason).__name__}: {reason}") from None
        if len(raw) > MAX_REPLY_BYTES:
            raise EndpointError(f"{self.url} sent a reply over {MAX_REPLY_BYTES} bytes")
        try:
            payload = json.loads(raw)
            message = payload["choices"][0]["message"]
            text = message.get("content") or ""
            if not isinstance(text, str):
                raise TypeError("content is not a string")
            usage = payload.get("usage") or {}
            completion = int(usage.get("completion_tokens") or 0)
            prompt = int(usage.get("prompt_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise EndpointError(
                f"{self.url} sent a body that is not a chat completion ({type(e).__name__}: {e})"
            ) from None
        return Reply(action=text, text=text, completion_tokens=completion, prompt_tokens=prompt)


def _snippet(error: urllib.error.HTTPError, limit: int = 200) -> str:
    try:
        text = error.read(limit).decode("utf-8", "replace")
    except Exception:  # a body that cannot be read says nothing more
        text = ""
    return " ".join(text.split())[:limit] or error.reason


def _retry_after(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0
