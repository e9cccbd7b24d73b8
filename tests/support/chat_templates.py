"""Chat templates in the public formats of the main model families, built offline on the tiny tokenizer.

Each function returns a copy of a tokenizer with the family's special tokens added, its end-of-turn token as
``eos_token`` and a Jinja chat template written in that family's format (our own text, without tool calls):

* :func:`qwen25_tokenizer`: ChatML as Qwen2.5 uses it, with Qwen2.5's default system message;
* :func:`qwen3_tokenizer`: Qwen3's format, which drops the ``<think>...</think>`` block of every assistant
  message before the last user message; ``official=True`` also renders the assistant messages after it as
  Qwen3 does (reasoning reformatted, an empty ``<think>`` block on the final one);
* :func:`llama3_tokenizer`: Llama 3's header format, each message's content trimmed as Llama 3's template does;
* :func:`r1_tokenizer`: DeepSeek-R1-distill's format: a generation prompt that opens a ``<think>`` block, and every
  earlier assistant message cut to what follows its last ``</think>`` (whitespace kept);
* :func:`harmony_tokenizer`: gpt-oss's harmony format: the model writes an ``analysis`` message, then a ``final``
  one ending with ``<|return|>``; in the history an assistant message is its final message alone, ending ``<|end|>``;
* :func:`think_special_tokenizer`: ChatML with ``<think>``/``</think>`` as special tokens.

Every maker takes the tokenizer to copy: the tiny one (:func:`tiny_tokenizer`) or a real one (SmolLM2's,
``support.real_model.smollm2_tokenizer``), whose own template is swapped for the family's.

And two constructed cases: :func:`whitespace_merging_tokenizer` (a byte-level BPE whose pre-tokenizer groups
whitespace runs as Qwen2's does, so ``"user\\n" + "\\n\\n..."`` is tokenised across the boundary) and
:func:`turn_numbered_tokenizer` (a generation prompt that numbers the turns, with or without the assistant
messages numbered alike).
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Iterable, Sequence

TINY_ENVS = ("TurnSokoban-v0", "TurnWebShop-v0", "TurnSearchQA-v0")

#: Qwen2.5's ChatML (no tools): a default system message when the conversation has none.
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) or message.role == 'assistant' %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_QWEN3_HEAD = (
    "{%- if messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
    "{%- for message in messages[::-1] %}"
    "{%- set index = (messages|length - 1) - loop.index0 %}"
    "{%- if ns.multi_step_tool and message.role == 'user' and message.content is string"
    " and not (message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}"
    "{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- for message in messages %}"
    "{%- set content = message.content if message.content is string else '' %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{%- set reasoning_content = '' %}"
    "{%- if message.reasoning_content is string %}{%- set reasoning_content = message.reasoning_content %}"
    "{%- elif '</think>' in content %}"
    "{%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
)
# After the last user message Qwen3 puts the reasoning back in a <think> block, and gives the final assistant
# message an empty one; the simpler variant leaves those messages as written (the audit never renders one).
_QWEN3_AFTER_LAST_QUERY_OFFICIAL = (
    "{%- if loop.last or reasoning_content %}"
    "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n'"
    " + content.lstrip('\\n') }}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + content }}{%- endif %}"
)
_QWEN3_AFTER_LAST_QUERY_KEPT = "{{- '<|im_start|>' + message.role + '\\n' + message.content }}"
_QWEN3_TAIL = (
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + content }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)


def qwen3_template(official: bool = False) -> str:
    """Qwen3's format (no tools): earlier assistant messages lose their ``<think>`` block (see the module doc)."""
    after = _QWEN3_AFTER_LAST_QUERY_OFFICIAL if official else _QWEN3_AFTER_LAST_QUERY_KEPT
    return _QWEN3_HEAD + "{%- if loop.index0 > ns.last_query_index %}" + after + _QWEN3_TAIL


#: DeepSeek-R1-distill (the newer template): bos, the system text bare, then ``<｜User｜>``/``<｜Assistant｜>`` turns;
#: the generation prompt opens a think block, and an earlier answer keeps only what follows its last ``</think>``.
R1_TEMPLATE = (
    "{%- set ns = namespace(system='') %}"
    "{%- for message in messages if message.role == 'system' %}{%- set ns.system = message.content %}{%- endfor %}"
    "{{- bos_token + ns.system }}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}{{- '<｜User｜>' + message.content }}"
    "{%- elif message.role == 'assistant' %}"
    "{%- set content = message.content %}"
    "{%- if '</think>' in content %}{%- set content = content.split('</think>')[-1] %}{%- endif %}"
    "{{- '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<｜Assistant｜><think>\\n' }}{%- endif %}"
)

#: gpt-oss's harmony format (no tools, no dates): a fixed system message, the conversation's system message as the
#: developer's instructions, ``<|start|>role<|message|>...<|end|>`` messages. An assistant response is written as
#: ``<|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...<|return|>``; earlier
#: assistant messages keep their final message alone, closed by ``<|end|>``, and a final assistant message (no
#: generation prompt after it) keeps its analysis and ends with ``<|return|>``.
HARMONY_TEMPLATE = (
    "{{- '<|start|>system<|message|>You are a helpful assistant.\\nReasoning: medium\\n\\n"
    "# Valid channels: analysis, final. Channel must be included for every message.<|end|>' }}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}"
    "{{- '<|start|>developer<|message|># Instructions\\n\\n' + message.content + '<|end|>' }}"
    "{%- elif message.role == 'user' %}{{- '<|start|>user<|message|>' + message.content + '<|end|>' }}"
    "{%- elif message.role == 'assistant' %}"
    "{%- set content = message.content %}"
    "{%- if loop.last and not add_generation_prompt %}"
    "{%- if content.startswith('<|channel|>') %}{{- '<|start|>assistant' + content + '<|return|>' }}"
    "{%- else %}{{- '<|start|>assistant<|channel|>final<|message|>' + content + '<|return|>' }}{%- endif %}"
    "{%- else %}"
    "{%- if '<|channel|>final<|message|>' in content %}"
    "{%- set content = content.split('<|channel|>final<|message|>')[-1] %}{%- endif %}"
    "{{- '<|start|>assistant<|channel|>final<|message|>' + content + '<|end|>' }}"
    "{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start|>assistant' }}{%- endif %}"
)

#: Llama 3 (Meta-Llama-3-*-Instruct): bos, then a header per message, the content trimmed, <|eot_id|>.
LLAMA3_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
    " + '<|eot_id|>' %}"
    "{%- if loop.index0 == 0 %}{%- set content = bos_token + content %}{%- endif %}"
    "{{- content }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)

#: ChatML that numbers the turns from the second user message on: the generation prompt is
#: ``<|im_start|>assistant\nTurn 2:\n`` and so on, and so is the prefix of each assistant message answering it.
#: Consistent, but no longer a fixed piece of template: the generation prompt changes from turn to turn.
TURN_NUMBERED_TEMPLATE = (
    "{%- set ns = namespace(users=0) %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}{%- set ns.users = ns.users + 1 %}{%- endif %}"
    "{%- if message.role == 'assistant' and ns.users > 1 %}"
    "{{- '<|im_start|>assistant\\nTurn ' + ns.users | string + ':\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if ns.users > 1 %}{{- 'Turn ' + ns.users | string + ':\\n' }}{%- endif %}"
    "{%- endif %}"
)

#: The same generation prompt, but assistant messages rendered without the number: the prompt the model
#: answered is not the assistant message's prefix, so re-rendering drops it from the history.
PROMPT_NUMBERED_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- set users = messages | selectattr('role', 'equalto', 'user') | list %}"
    "{%- if users | length > 1 %}{{- 'Turn ' + (users | length) | string + ':\\n' }}{%- endif %}"
    "{%- endif %}"
)

#: Qwen2's pre-tokenizer pattern: whitespace runs are grouped (``\s*[\r\n]+``), across what a template joins.
QWEN2_PRETOKENIZER = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _add_special(tokenizer: Any, extra: Sequence[str], **named: str) -> None:
    """Add special tokens (kept beside the existing ones) and set named ones such as ``eos_token``."""
    try:
        tokenizer.add_special_tokens({"extra_special_tokens": list(extra), **named}, replace_extra_special_tokens=False)
    except TypeError:  # transformers 4
        tokenizer.add_special_tokens(
            {"additional_special_tokens": list(extra), **named}, replace_additional_special_tokens=False
        )


@functools.lru_cache(maxsize=4)
def _tiny(env_ids: tuple[str, ...], episodes: int, vocab_size: int) -> Any:
    import agentgym_turn  # noqa: F401 - registers the env ids
    from reference_trainer.tiny.model import env_corpus, train_tokenizer

    texts: list[str] = []
    for env_id in env_ids:
        texts += env_corpus(env_id, episodes)
    return train_tokenizer(texts, vocab_size)


def tiny_tokenizer(env_ids: Iterable[str] = TINY_ENVS, episodes: int = 3, vocab_size: int = 512) -> Any:
    """A fresh copy of the tiny ChatML tokenizer trained on expert play of ``env_ids`` (built once per process)."""
    return copy.deepcopy(_tiny(tuple(env_ids), int(episodes), int(vocab_size)))


def qwen25_tokenizer(base: Any) -> Any:
    """``base`` copied, with Qwen2.5's ChatML template; eos ``<|im_end|>`` as Qwen2.5-Instruct."""
    tok = copy.deepcopy(base)
    _add_special(tok, ["<|im_start|>", "<|im_end|>"], eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.chat_template = QWEN25_TEMPLATE
    return tok


def qwen3_tokenizer(base: Any, official: bool = False) -> Any:
    """``base`` copied, with Qwen3's template format (:func:`qwen3_template`) and its ``<think>``/``</think>``
    added tokens (not special, as in Qwen3's tokenizer); eos ``<|im_end|>``."""
    tok = copy.deepcopy(base)
    _add_special(tok, ["<|im_start|>", "<|im_end|>"], eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.add_tokens(["<think>", "</think>"])
    tok.chat_template = qwen3_template(official)
    return tok


def llama3_tokenizer(base: Any) -> Any:
    """``base`` copied, with Llama 3's special tokens and header template; eos ``<|eot_id|>`` (the end of a
    turn, as Llama-3-Instruct's generation config stops on), bos ``<|begin_of_text|>``."""
    tok = copy.deepcopy(base)
    _add_special(
        tok,
        ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|end_of_text|>"],
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
    )
    tok.chat_template = LLAMA3_TEMPLATE
    return tok


def r1_tokenizer(base: Any) -> Any:
    """``base`` copied, with :data:`R1_TEMPLATE`, R1's special tokens (bos ``<｜begin▁of▁sentence｜>``, eos
    ``<｜end▁of▁sentence｜>``) and its ``<think>``/``</think>`` added tokens (not special, as in R1-distill's)."""
    tok = copy.deepcopy(base)
    _add_special(
        tok,
        ["<｜User｜>", "<｜Assistant｜>"],
        bos_token="<｜begin▁of▁sentence｜>",
        eos_token="<｜end▁of▁sentence｜>",
    )
    tok.add_tokens(["<think>", "</think>"])
    tok.chat_template = R1_TEMPLATE
    return tok


def harmony_tokenizer(base: Any) -> Any:
    """``base`` copied, with :data:`HARMONY_TEMPLATE` and harmony's special tokens; eos ``<|return|>`` (the end of a
    response: ``<|end|>`` ends the analysis message inside it, so it is no stop)."""
    tok = copy.deepcopy(base)
    _add_special(
        tok,
        ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|call|>"],
        eos_token="<|return|>",
    )
    tok.chat_template = HARMONY_TEMPLATE
    return tok


def think_special_tokenizer(base: Any) -> Any:
    """``base`` copied (ChatML), with ``<think>``/``</think>`` as special tokens: an observation that quotes them is
    encoded as plain text, while a re-render of the same text turns them into the special tokens."""
    tok = copy.deepcopy(base)
    _add_special(tok, ["<think>", "</think>"])
    return tok


def turn_numbered_tokenizer(base: Any, in_messages: bool = True) -> Any:
    """``base`` copied, with :data:`TURN_NUMBERED_TEMPLATE` (``in_messages=False``: :data:`PROMPT_NUMBERED_TEMPLATE`)."""
    tok = copy.deepcopy(base)
    tok.chat_template = TURN_NUMBERED_TEMPLATE if in_messages else PROMPT_NUMBERED_TEMPLATE
    return tok


@functools.lru_cache(maxsize=2)
def _merging(env_ids: tuple[str, ...], episodes: int, vocab_size: int) -> Any:
    import agentgym_turn  # noqa: F401 - registers the env ids
    from reference_trainer.tiny.model import env_corpus, train_tokenizer

    texts: list[str] = []
    for env_id in env_ids:
        texts += env_corpus(env_id, episodes)
    return train_tokenizer(texts, vocab_size, pattern=QWEN2_PRETOKENIZER)


def whitespace_merging_tokenizer(
    env_ids: Iterable[str] = ("TurnSearchQA-v0",), episodes: int = 3, vocab_size: int = 512
) -> Any:
    """A ChatML byte-level BPE trained on ``env_ids`` whose pre-tokenizer groups whitespace runs as Qwen2's does:
    ``"<|im_start|>user\\n"`` followed by content that starts with ``"\\n\\n"`` is tokenised as one run of three
    newlines when re-rendered, but as ``"\\n"`` then ``"\\n\\n"`` when assembled piece by piece."""
    return copy.deepcopy(_merging(tuple(env_ids), int(episodes), int(vocab_size)))
