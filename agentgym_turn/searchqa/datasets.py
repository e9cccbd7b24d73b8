"""FlashRAG-style question files: load them, and export a generated world in the same formats.

A dataset line is FlashRAG's (and Search-R1's data-preparation input)::

    {"id": "test_0", "question": "who sings ...", "golden_answers": ["...", "..."], "metadata": {...}}

Multiple-choice sets add ``"choices": ["...", "...", ...]``; the correct option is read from
``metadata["answer_letter"]`` when present, else from the first gold answer, which may be an
option index (``0``-based integer), a letter (``"B"``) or the option's text.

As in Search-R1's data preparation, a question is stripped and gets a ``?`` appended when it
does not end with one. :func:`export_world` writes a generated world as ``corpus.jsonl`` plus
``train.jsonl``, ``dev.jsonl`` and ``test.jsonl``, so Search-R1 or FlashRAG can run on it too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .corpus import open_text, render_corpus
from .normalize import LETTERS, normalize_answer
from .questions import SPLITS, Question, generate_questions, split_questions
from .world import WorldConfig, generate_world

__all__ = ["load_flashrag", "write_flashrag", "export_world"]


def _answer_index(row: dict, choices: list[str], where: str) -> int:
    meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    letter = meta.get("answer_letter")
    if isinstance(letter, str) and len(letter) == 1 and 0 <= LETTERS.find(letter.upper()) < len(choices):
        return LETTERS.find(letter.upper())
    golds = row.get("golden_answers")
    first = golds[0] if isinstance(golds, list) and golds else golds
    if isinstance(first, int) and not isinstance(first, bool) and 0 <= first < len(choices):
        return first
    if isinstance(first, str):
        s = first.strip()
        if len(s) == 1 and 0 <= LETTERS.find(s.upper()) < len(choices):
            return LETTERS.find(s.upper())
        norm = normalize_answer(s)
        for k, c in enumerate(choices):
            if normalize_answer(c) == norm:
                return k
    raise ValueError(f"{where}: cannot tell which choice is correct from golden_answers={golds!r}")


def load_flashrag(path: str | os.PathLike, *, limit: int | None = None) -> list[Question]:
    """Read a FlashRAG jsonl file (``.gz`` allowed) into :class:`Question` objects.

    Raises ``ValueError`` naming the file and line of the first malformed record.
    """
    path = Path(path)
    out: list[Question] = []
    with open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict) or not isinstance(row.get("question"), str):
                raise ValueError(f"{where}: a record needs a string 'question'")
            golds = row.get("golden_answers")
            if isinstance(golds, (str, int, float)) and not isinstance(golds, bool):
                golds = [golds]
            if not isinstance(golds, list) or not golds:
                raise ValueError(f"{where}: a record needs a non-empty 'golden_answers' list")
            question = row["question"].strip()
            if not question.endswith("?"):
                question += "?"
            choices = row.get("choices") or []
            if not isinstance(choices, list) or not all(isinstance(c, (str, int, float)) for c in choices):
                raise ValueError(f"{where}: 'choices' must be a list of strings")
            choices = [str(c) for c in choices]
            answer_index = _answer_index(row, choices, where) if choices else -1
            metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
            out.append(
                Question(
                    id=str(row.get("id", f"{path.stem}-{lineno - 1}")),
                    question=question,
                    golden_answers=tuple(str(g) for g in golds),
                    type="dataset",
                    template=path.name.split(".")[0],
                    choices=tuple(choices),
                    answer_index=answer_index,
                    metadata=metadata,
                )
            )
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise ValueError(f"{path} holds no questions")
    return out


def write_flashrag(questions: list[Question], path: str | os.PathLike) -> None:
    """Write questions as FlashRAG jsonl; generated questions keep their type and supporting ids in ``metadata``."""
    with open_text(path, "w") as f:
        for q in questions:
            meta = dict(q.metadata)
            meta.update({"type": q.type, "template": q.template})
            if q.hops:
                meta["supporting_ids"] = [str(h.passage) for h in q.hops]
            row: dict = {"id": q.id, "question": q.question, "golden_answers": list(q.golden_answers)}
            if q.choices:
                row["choices"] = list(q.choices)
                meta["answer_letter"] = q.answer_letter
            row["metadata"] = meta
            f.write(json.dumps(row, ensure_ascii=False))
            f.write("\n")


def export_world(directory: str | os.PathLike, config: WorldConfig | None = None) -> dict[str, Path]:
    """Write a generated world's ``corpus.jsonl`` and its ``train/dev/test.jsonl``; return the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    world = generate_world(config)
    rendered = render_corpus(world)
    questions = generate_questions(world, rendered)
    paths = {"corpus": directory / "corpus.jsonl"}
    rendered.corpus.to_jsonl(paths["corpus"])
    for split in SPLITS:
        paths[split] = directory / f"{split}.jsonl"
        write_flashrag(split_questions(questions, split), paths[split])
    return paths
