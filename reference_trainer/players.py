"""A local Hugging Face model as an evaluation player (``agentgym-turn eval --model NAME|DIR|GGUF``).

The model reads each chat's exact token ids (:meth:`agentgym_turn.chat.ChatView.tokens`: the history as sampled,
each observation encoded once, never a re-rendered transcript) and answers with sampled ids, which the chat decodes
for the env: the same token-in/token-out path the trainer's rollouts take. A batch of chats is one
:meth:`~reference_trainer.policy.Policy.generate` call per turn, with the keys and values of each episode's earlier
turns kept between calls (:class:`~reference_trainer.policy.TurnCache`).
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any, Sequence

import torch

from agentgym_turn.core.files import file_sha256
from agentgym_turn.evaluation.players import Reply

from .models import resolve_model
from .policy import TurnCache, load_policy


class LocalPlayer:
    """``model``: a name of :data:`reference_trainer.models.MODELS`, a ``.gguf`` file or a checkpoint directory.

    ``max_context_tokens`` (default: the model's ``max_position_embeddings``) bounds a prompt plus its response; an
    episode that would pass it ends with status ``context_overflow`` (the model's failure, scored as played).
    """

    def __init__(
        self,
        model: str,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        seed: int = 0,
        max_context_tokens: int | None = None,
    ):
        self.spec = str(model)
        self.path = resolve_model(model)
        self.policy, self.tokenizer = load_policy(self.path, device=device, dtype=dtype)
        self.policy.eval()
        self.device, self.dtype = device, dtype
        self.max_context = int(max_context_tokens or getattr(self.policy.lm.config, "max_position_embeddings", 4096))
        self.generator = torch.Generator().manual_seed(int(seed))
        self.seed = int(seed)
        self._cache = TurnCache()
        self._keys: dict[int, int] = {}  # id(chat) -> episode key, renewed at each reset (a new episode's first turn)
        self._counter = itertools.count()

    def describe(self) -> dict[str, Any]:
        template = getattr(self.tokenizer, "chat_template", None) or ""
        weights = self.path / "model.safetensors"
        return {
            "kind": "local",
            "name": self.spec,
            "weights_sha256": file_sha256(weights) if weights.is_file() else None,
            "template_sha256": hashlib.sha256(template.encode()).hexdigest(),
            "device": self.device,
            "dtype": self.dtype,
            "seed": self.seed,
        }

    def _key(self, chat: Any) -> int:
        """One TurnCache key per episode: a chat whose episode is at its first turn gets a new one."""
        if len(chat.messages) <= 2 or id(chat) not in self._keys:
            self._keys[id(chat)] = next(self._counter)
        return self._keys[id(chat)]

    @torch.no_grad()
    def respond(
        self, chats: Sequence[Any], *, temperature: float, top_p: float, max_new_tokens: int, seeds: Sequence[int]
    ) -> list[Reply]:
        replies: list[Reply | None] = [None] * len(chats)
        prompts, rows = [], []
        for i, chat in enumerate(chats):
            ids = list(chat.tokens().ids)
            if len(ids) + max_new_tokens > self.max_context:
                replies[i] = Reply(
                    status="context_overflow",
                    prompt_tokens=len(ids),
                    error=f"{len(ids)} prompt tokens + {max_new_tokens} new exceed the model's {self.max_context}",
                )
                continue
            prompts.append(ids)
            rows.append(i)
        if prompts:
            fmt = chats[rows[0]].format
            keys = [self._key(chats[i]) for i in rows]
            pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
            out, _ = self.policy.generate(
                prompts,
                max_new_tokens=int(max_new_tokens),
                stop_ids=fmt.stop_ids,
                pad_id=pad,
                generator=self.generator,
                temperature=float(temperature),
                top_p=float(top_p),
                turn_cache=self._cache,
                keys=keys,
            )
            for i, prompt, ids in zip(rows, prompts, out):
                replies[i] = Reply(
                    action=list(ids),
                    text=fmt.decode_response(ids),
                    completion_tokens=len(ids),
                    prompt_tokens=len(prompt),
                )
        return replies  # type: ignore[return-value]
