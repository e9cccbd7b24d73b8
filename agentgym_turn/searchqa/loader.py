"""Question files: FlashRAG jsonl and Search-R1's processed parquet; export a generated world in the same formats.

A FlashRAG dataset line (Search-R1's data-preparation input)::

    {"id": "test_0", "question": "who sings ...", "golden_answers": ["...", "..."], "metadata": {...}}

Search-R1's processed files (``scripts/data_process/nq_search.py``, ``qa_search_*_merge.py``)
are parquet tables with the FlashRAG columns kept (``id``, ``question``, ``golden_answers``)
plus ``data_source``, ``prompt`` (the chat messages holding Search-R1's own prompt),
``ability``, ``reward_model`` (``{"style": "rule", "ground_truth": {"target": [...]}}``) and
``extra_info`` (``{"split", "index"}``). A parquet row's gold answers are
``reward_model.ground_truth.target`` (what Search-R1 scores against), else ``golden_answers``;
its id is ``id``, else ``"<data_source>-<split>-<index>"``; the env writes its own prompt
around ``question``. Reading parquet needs pyarrow, the optional extra ``parquet``.

Multiple-choice sets add ``"choices": [...]`` (at most 26, one per letter); the correct option is
read from ``metadata["answer_letter"]`` when present, else from the first gold answer, which may
be an option index (``0``-based integer), a letter (``"B"``) or the option's text.

Every record is checked, and a bad one is an error naming the file and line (row for
parquet): a missing question, a question over :data:`MAX_QUESTION_CHARS`, no gold answer (an
empty list, ``[null]``, empty strings: ``null`` entries are dropped, never read as
``"None"``), a gold that is not text or a number (nested lists are flattened), a duplicate
id, more than 26 choices. As in Search-R1's data preparation, a question is stripped and gets a
``?`` appended when it does not end with one. :func:`export_world` writes a generated world as
``corpus.jsonl`` plus ``train.jsonl``, ``dev.jsonl`` and ``test.jsonl``, so Search-R1 or
FlashRAG can run on it too.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

from ..core.args import is_int, is_number
from ..core.files import DataFileError, check_data_path
from ..extras import require
from .corpus import iter_json_objects, open_text, render_corpus
from .generator.questions import SPLITS, Question, generate_questions, split_questions
from .generator.world import WorldConfig, generate_world
from .reward import LETTERS, normalize_answer

#: Longest question accepted, in characters (a longer one is refused at load, never cut).
MAX_QUESTION_CHARS = 16_000
#: Largest question file read (uncompressed bytes).
MAX_QUESTION_FILE_BYTES = 4 << 30
_MAX_LINE_CHARS = 4 * MAX_QUESTION_CHARS + 1_000_000  # a record: question, golds, choices, metadata


def _flatten_golds(value: Any, where: str, depth: int = 0) -> Iterator[str]:
    if value is None:  # [null]: dropped (an answer "None" must not score)
        return
    if isinstance(value, bool):
        raise DataFileError(f"{where}: a gold answer is a boolean ({value!r}); write it as text.")
    if isinstance(value, str):
        yield value
    elif isinstance(value, int):
        yield str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise DataFileError(f"{where}: a gold answer is {value!r}; write gold answers as text.")
        yield str(int(value)) if value.is_integer() else str(value)
    elif isinstance(value, (list, tuple)) and depth < 4:
        for item in value:
            yield from _flatten_golds(item, where, depth + 1)
    elif hasattr(value, "tolist") and depth < 4:  # a numpy array from parquet
        yield from _flatten_golds(value.tolist(), where, depth + 1)
    else:
        raise DataFileError(f"{where}: a gold answer must be text or a number, got {type(value).__name__}.")


def _golds(raw: Any, where: str) -> tuple[str, ...]:
    golds = tuple(dict.fromkeys(g for g in _flatten_golds(raw, where) if g.strip()))
    if not golds:
        raise DataFileError(
            f"{where}: no gold answer (golden_answers={raw!r}); every question needs at least one non-empty answer."
        )
    return golds


def _answer_index(row: dict, choices: list[str], where: str) -> int:
    meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    letter = meta.get("answer_letter")
    if isinstance(letter, str) and len(letter) == 1 and 0 <= LETTERS.find(letter.upper()) < len(choices):
        return LETTERS.find(letter.upper())
    golds = row.get("golden_answers")
    first = golds[0] if isinstance(golds, list) and golds else golds
    if is_int(first, 0, len(choices) - 1):
        return first
    if isinstance(first, str):
        s = first.strip()
        if len(s) == 1 and 0 <= LETTERS.find(s.upper()) < len(choices):
            return LETTERS.find(s.upper())
        norm = normalize_answer(s)
        for k, c in enumerate(choices):
            if normalize_answer(c) == norm:
                return k
    raise DataFileError(f"{where}: cannot tell which choice is correct from golden_answers={golds!r}")


def _question(row: dict, where: str, default_id: str, template: str) -> Question:
    """One checked :class:`Question` from a record (``where`` is ``FILE:LINE`` for errors)."""
    if not isinstance(row.get("question"), str) or not row["question"].strip():
        raise DataFileError(f"{where}: a record needs a non-empty string 'question'.")
    question = row["question"].strip()
    if len(question) > MAX_QUESTION_CHARS:
        raise DataFileError(
            f"{where}: the question is {len(question):,} characters long; the limit is {MAX_QUESTION_CHARS:,} "
            "(MAX_QUESTION_CHARS). Shorten it: it would not fit the observation."
        )
    if not question.endswith("?"):
        question += "?"
    golds = _golds(row.get("golden_answers"), where)
    choices = row.get("choices")
    choices = [] if choices is None else choices
    if hasattr(choices, "tolist"):
        choices = choices.tolist()
    if not isinstance(choices, list) or not all(isinstance(c, str) or is_number(c) for c in choices):
        raise DataFileError(f"{where}: 'choices' must be a list of strings.")
    if len(choices) > len(LETTERS):
        raise DataFileError(
            f"{where}: {len(choices)} choices; the limit is {len(LETTERS)} (one per letter A-Z). Split the question."
        )
    choices = [str(c) for c in choices]
    answer_index = _answer_index(row, choices, where) if choices else -1
    metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    qid = row.get("id")
    return Question(
        id=str(qid) if qid is not None else default_id,
        question=question,
        golden_answers=golds,
        type="dataset",
        template=template,
        choices=tuple(choices),
        answer_index=answer_index,
        metadata=metadata,
    )


def _check_ids(questions: list[Question], wheres: list[str]) -> None:
    first: dict[str, str] = {}
    for q, where in zip(questions, wheres):
        if q.id in first:
            raise DataFileError(
                f"{where}: duplicate question id {q.id!r} (first at {first[q.id]}); ids must be unique."
            )
        first[q.id] = where


def load_flashrag(path: str | os.PathLike, *, limit: int | None = None) -> list[Question]:
    """Read a FlashRAG jsonl file (``.gz`` allowed) into :class:`Question` objects.

    Raises ``DataFileError`` (a ``ValueError``) naming the file and line of the first bad record
    (see the module docstring), of invalid UTF-8 or a corrupt ``.gz``; special files (FIFOs,
    devices) are refused.
    """
    path = Path(path)
    out: list[Question] = []
    wheres: list[str] = []
    rows = iter_json_objects(
        path,
        max_bytes=MAX_QUESTION_FILE_BYTES,
        max_line_chars=_MAX_LINE_CHARS,
        what="question file",
        fields="'question' and 'golden_answers'",
    )
    for lineno, row in rows:
        where = f"{path}:{lineno}"
        out.append(_question(row, where, f"{path.stem}-{lineno - 1}", path.name.split(".")[0]))
        wheres.append(where)
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise DataFileError(f"{path}: holds no questions; give a jsonl file with one question per line.")
    _check_ids(out, wheres)
    return out


def load_search_r1_parquet(path: str | os.PathLike, *, limit: int | None = None) -> list[Question]:
    """Read one of Search-R1's processed parquet files (``train.parquet``, ``test.parquet``).

    Raises ``DataFileError`` naming the file and row (1-based) of the first bad record, or the
    file when it is not a readable parquet table; ``MissingExtraError`` naming the ``parquet``
    extra when pyarrow is not installed.
    """
    path = check_data_path(path, what="question file")
    if path.stat().st_size > MAX_QUESTION_FILE_BYTES:
        raise DataFileError(f"{path}: more than {MAX_QUESTION_FILE_BYTES:,} bytes, the limit; split the file.")
    require("parquet", f"the parquet question file {path.name}")
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several types for a damaged file
        raise DataFileError(f"{path}: not a readable parquet file ({err}); re-create it.") from None
    names = set(table.column_names)
    if "question" not in names:
        raise DataFileError(f"{path}: a Search-R1 parquet file needs a 'question' column; it has {sorted(names)}.")
    out: list[Question] = []
    wheres: list[str] = []
    for k, row in enumerate(table.to_pylist(), 1):
        where = f"{path}:row {k}"
        reward_model = row.get("reward_model") if isinstance(row.get("reward_model"), dict) else {}
        truth = reward_model.get("ground_truth") if isinstance(reward_model.get("ground_truth"), dict) else {}
        if truth.get("target") is not None:
            row = dict(row, golden_answers=truth["target"])
        extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
        default_id = f"{row.get('data_source') or path.stem}-{extra.get('split', 'row')}-{extra.get('index', k - 1)}"
        out.append(_question(row, where, default_id, str(row.get("data_source") or path.stem)))
        wheres.append(where)
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise DataFileError(f"{path}: holds no questions.")
    _check_ids(out, wheres)
    return out


def load_questions(path: str | os.PathLike, *, limit: int | None = None) -> list[Question]:
    """Questions from a FlashRAG jsonl (``.jsonl``, ``.json``, ``.gz``) or Search-R1 parquet (``.parquet``) file."""
    if Path(path).suffix == ".parquet":
        return load_search_r1_parquet(path, limit=limit)
    return load_flashrag(path, limit=limit)


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
