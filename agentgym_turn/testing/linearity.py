"""Work counters that show a parser is linear in its input's length, with no clock.

Two deterministic counters:

* :func:`regex_steps` runs a compiled ``re`` pattern on a backtracking matcher written here,
  over the pattern's own parse tree (``re._parser``), and counts node attempts. Python's engine
  is a backtracking engine too, so a pattern that backtracks quadratically there
  (``\\s*[:\\-]?\\s*`` on a run of spaces) or exponentially (``(a+)+$``) does here, while the
  count itself does not depend on the machine or its load. ``finditer`` mode (the default)
  tries every start position, which is the worst case of ``search``, ``findall``, ``sub`` and
  ``split``; ``match`` tries position 0 only.
* :func:`python_steps` counts the Python line events of a call (``sys.settrace``) in files
  under a chosen directory: the loops of a hand-written parser.

:func:`growth` turns counts at sizes ``n, 2n, 4n`` into the ratio of successive increments:
about 2 for linear work, 4 for quadratic, 0 for constant. :func:`regex_growth` pumps a
pattern with inputs built from its own literals (``"option" + " " * k + "!"`` and the like) and
reports the worst. Used by ``tests/agentgym_turn/core/test_parsing.py``; usable on your own parsers.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

try:  # Python 3.11+
    from re import _constants as C
    from re import _parser as P
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse as P  # type: ignore[no-redef]

#: Step cap of one :func:`regex_steps` call; exponential patterns hit it instead of hanging.
DEFAULT_MAX_STEPS = 3_000_000
#: Input sizes for growth checks: three doublings.
DEFAULT_SIZES = (32, 64, 128)


class TooMuchWork(Exception):
    """A counted run passed its step cap."""


class _Matcher:
    """A backtracking matcher over ``re._parser`` trees that counts node attempts."""

    def __init__(self, text: str, flags: int, max_steps: int):
        self.text = text
        self.n = len(text)
        self.ignorecase = bool(flags & re.IGNORECASE)
        self.multiline = bool(flags & re.MULTILINE)
        self.dotall = bool(flags & re.DOTALL)
        self.steps = 0
        self.max_steps = max_steps
        self.set_cache: dict[tuple[int, str], bool] = {}

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise TooMuchWork

    # ---------------------------------------------------------------- single characters
    def same(self, c: str, code: int) -> bool:
        if ord(c) == code:
            return True
        return self.ignorecase and c.lower() == chr(code).lower()

    def category(self, c: str, cat: Any) -> bool:
        name = str(cat)
        negate = "NOT_" in name
        if "DIGIT" in name:
            hit = c.isdecimal()
        elif "SPACE" in name:
            hit = c.isspace()
        elif "WORD" in name:
            hit = c.isalnum() or c == "_"
        elif "LINEBREAK" in name:
            hit = c == "\n"
        else:
            raise ValueError(f"unsupported category {name}")
        return hit != negate

    def in_set(self, c: str, items: list) -> bool:
        key = (id(items), c)  # pumped inputs repeat a few characters: remember each answer
        if key not in self.set_cache:
            self.set_cache[key] = self._in_set(c, items)
        return self.set_cache[key]

    def _in_set(self, c: str, items: list) -> bool:
        negate = bool(items) and items[0][0] is C.NEGATE
        hit = False
        variants = {c, c.lower(), c.upper()} if self.ignorecase else {c}
        for op, av in items:
            if op is C.NEGATE:
                continue
            if op is C.LITERAL:
                hit = any(ord(v) == av for v in variants)
            elif op is C.RANGE:
                hit = any(av[0] <= ord(v) <= av[1] for v in variants)
            elif op is C.CATEGORY:
                hit = self.category(c, av)
            else:
                raise ValueError(f"unsupported set item {op}")
            if hit:
                break
        return hit != negate

    def at(self, i: int, code: Any) -> bool:
        t, n = self.text, self.n
        if code is C.AT_BEGINNING:
            return i == 0 or (self.multiline and t[i - 1] == "\n")
        if code is C.AT_BEGINNING_STRING:
            return i == 0
        if code is C.AT_END:
            return i == n or (i == n - 1 and t[i] == "\n") or (self.multiline and i < n and t[i] == "\n")
        if code is C.AT_END_STRING:
            return i == n
        if code in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
            before = i > 0 and (t[i - 1].isalnum() or t[i - 1] == "_")
            after = i < n and (t[i].isalnum() or t[i] == "_")
            return (before != after) == (code is C.AT_BOUNDARY)
        raise ValueError(f"unsupported anchor {code}")

    # ---------------------------------------------------------------- sequences (continuation passing)
    def seq(self, items: Any, idx: int, i: int, k: Callable[[int], bool]) -> bool:
        if idx == len(items):
            return k(i)
        self.tick()
        op, av = items[idx]
        t, n = self.text, self.n

        def nxt(j: int) -> bool:
            return self.seq(items, idx + 1, j, k)

        if op is C.LITERAL:
            return i < n and self.same(t[i], av) and nxt(i + 1)
        if op is C.NOT_LITERAL:
            return i < n and not self.same(t[i], av) and nxt(i + 1)
        if op is C.ANY:
            return i < n and (self.dotall or t[i] != "\n") and nxt(i + 1)
        if op is C.IN:
            return i < n and self.in_set(t[i], av) and nxt(i + 1)
        if op is C.AT:
            return self.at(i, av) and nxt(i)
        if op is C.BRANCH:
            return any(self.seq(alt, 0, i, nxt) for alt in av[1])
        if op is C.SUBPATTERN:
            return self.seq(av[-1], 0, i, nxt)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, body = av
            return self.repeat(body, lo, hi, op is C.MAX_REPEAT, i, 0, nxt)
        if op is C.POSSESSIVE_REPEAT:
            lo, hi, body = av
            count, j = 0, i
            while count < hi:
                e = self.first_end(body, j)
                if e is None or (e == j and count >= lo):
                    break
                j, count = e, count + 1
            return count >= lo and nxt(j)
        if op is C.ATOMIC_GROUP:
            e = self.first_end(av, i)
            return e is not None and nxt(e)
        if op in (C.ASSERT, C.ASSERT_NOT):
            direction, body = av
            if direction == 1:
                ok = self.first_end(body, i) is not None
            else:
                width = body.getwidth()[0]
                start = i - width
                ok = start >= 0 and self.seq(body, 0, start, lambda j: j == i)
            return ok == (op is C.ASSERT) and nxt(i)
        raise ValueError(f"unsupported regex node {op}")

    def repeat(self, body: Any, lo: int, hi: int, greedy: bool, i: int, count: int, k: Callable[[int], bool]) -> bool:
        self.tick()

        def more(j: int) -> bool:
            if j == i and count >= lo:  # an empty iteration ends the loop, as in sre
                return False
            return self.repeat(body, lo, hi, greedy, j, count + 1, k)

        if greedy:
            if count < hi and self.seq(body, 0, i, more):
                return True
            return count >= lo and k(i)
        if count >= lo and k(i):
            return True
        return count < hi and self.seq(body, 0, i, more)

    def first_end(self, items: Any, i: int) -> int | None:
        found: list[int] = []

        def accept(j: int) -> bool:
            found.append(j)
            return True

        return found[0] if self.seq(items, 0, i, accept) else None


@functools.lru_cache(maxsize=256)
def _tree(pattern: str, flags: int) -> Any:
    return P.parse(pattern, flags)


def regex_steps(
    pattern: re.Pattern[str] | str, text: str, *, mode: str = "finditer", max_steps: int = DEFAULT_MAX_STEPS
) -> int:
    """Node attempts a backtracking engine makes running ``pattern`` over ``text``.

    ``mode``: ``"finditer"`` (every match, each search starting where the last match ended;
    the cost of ``search``/``findall``/``sub``/``split`` on a failing input) or ``"match"``
    (position 0 only). Raises :class:`TooMuchWork` past ``max_steps``.
    """
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
    tree = _tree(compiled.pattern, compiled.flags)
    m = _Matcher(text, compiled.flags, max_steps)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20 * len(text) + 2000))  # one frame chain per repeated character
    try:
        if mode == "match":
            m.first_end(tree, 0)
        elif mode == "finditer":
            pos = 0
            while pos <= m.n:
                end, start = None, pos
                for start in range(pos, m.n + 1):
                    end = m.first_end(tree, start)
                    if end is not None:
                        break
                if end is None:
                    break
                pos = end if end > start else start + 1
        else:
            raise ValueError(f"mode must be 'finditer' or 'match', got {mode!r}")
    finally:
        sys.setrecursionlimit(old)
    return m.steps


def emulated_match_end(pattern: re.Pattern[str] | str, text: str, pos: int = 0) -> int | None:
    """End of the match of ``pattern`` at ``pos`` found by the counting matcher (``None`` if
    none): the same as ``pattern.match(text, pos).end()`` when the matcher is faithful."""
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
    m = _Matcher(text, compiled.flags, DEFAULT_MAX_STEPS)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20 * len(text) + 2000))
    try:
        return m.first_end(_tree(compiled.pattern, compiled.flags), pos)
    finally:
        sys.setrecursionlimit(old)


def python_steps(fn: Callable[..., Any], *args: Any, under: str | None = None, **kwargs: Any) -> int:
    """Python line events executed by ``fn(*args, **kwargs)`` in files under directory ``under``
    (default: this package, ``agentgym_turn``). C code (``str`` methods, the regex engine) counts
    as one line of its caller: pair this with :func:`regex_steps` for the patterns it uses."""
    root = os.path.abspath(under or os.path.dirname(os.path.dirname(__file__)))
    count = 0
    inside: dict[Any, bool] = {}

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code not in inside:
            inside[code] = os.path.abspath(code.co_filename).startswith(root)
        return local if inside[code] else None

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn(*args, **kwargs)
    finally:
        sys.settrace(old)
    return count


@dataclass(frozen=True)
class Growth:
    """Counts of one input family at sizes ``n, 2n, 4n`` and their increment ratio."""

    name: str
    counts: tuple[int, ...]
    ratio: float  # (c[2] - c[1]) / (c[1] - c[0]); about 2 when linear, 4 when quadratic; inf when capped

    def superlinear(self, max_ratio: float = 3.0, slack: int = 50) -> bool:
        """Whether the work grows faster than linearly (``slack`` absorbs tiny constant noise)."""
        if self.ratio == float("inf"):
            return True
        c = self.counts
        return c[-1] - c[-2] > max_ratio * max(c[-2] - c[-3], 0) + slack


def growth(counts: Sequence[int]) -> float:
    """Ratio of the last two increments of counts taken at doubling sizes."""
    a, b, c = counts[-3:]
    if b - a <= 0:
        return 0.0 if c - b <= 0 else float(c - b)
    return (c - b) / (b - a)


def _literal_words(tree: Any) -> list[str]:
    """Runs of literal characters in a parse tree (``"option"``, ``"<"``, ``"search"``...)."""
    words: list[str] = []

    def walk(items: Any) -> None:
        run = ""
        for op, av in items:
            if op is C.LITERAL:
                run += chr(av)
                continue
            if run:
                words.append(run)
                run = ""
            if op is C.BRANCH:
                for alt in av[1]:
                    walk(alt)
            elif op is C.SUBPATTERN:
                walk(av[-1])
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                walk(av[2])
            elif op in (C.ASSERT, C.ASSERT_NOT):
                walk(av[1])
            elif op is C.ATOMIC_GROUP:
                walk(av)
            elif op is C.IN:
                for item_op, item_av in av[:3]:  # a few members of each set are enough to pump it
                    if item_op is C.LITERAL:
                        words.append(chr(item_av))
                    elif item_op is C.RANGE:
                        words.append(chr(item_av[0]))
        if run:
            words.append(run)

    walk(tree)
    return list(dict.fromkeys(words))


#: Caps on the literal runs taken from one pattern (longest first), and on those used as prefixes.
MAX_WORDS = 24
MAX_PREFIXES = 8

#: Pumps tried on every pattern besides its own literals: whitespace, word and non-word
#: characters, brackets, a surrogate.
GENERIC_PUMPS = (" ", "\t", "\n", "a", "A", "1", "_", "!", "-", "<", ">", "[", "]", "(", "\ud800", "é")


def pump_inputs(pattern: re.Pattern[str] | str, extra: Iterable[str] = ()) -> dict[str, Callable[[int], str]]:
    """Input families ``prefix + pump * k + suffix`` for a pattern, keyed by a readable name.

    Prefixes are ``""`` and the pattern's literal runs; pumps are its literal runs, each of them
    followed by a space, and :data:`GENERIC_PUMPS`; suffixes are ``""``, ``"!"`` and ``"\\x00"``
    (characters most patterns cannot finish on).
    """
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
    words = _literal_words(P.parse(compiled.pattern, compiled.flags))
    # bounded: a pattern with huge character classes would otherwise give thousands of families
    words = sorted(words, key=lambda w: -len(w))[:MAX_WORDS]
    pumps = list(
        dict.fromkeys(list(words) + [w + " " for w in words if len(w) > 1] + list(GENERIC_PUMPS) + list(extra))
    )
    prefixes = [""] + [w for w in words if len(w) > 1 or not w.isspace()][:MAX_PREFIXES]
    families: dict[str, Callable[[int], str]] = {}
    for prefix in prefixes:
        for pump in pumps:
            for suffix in ("", "!", "\x00"):
                name = f"{prefix!r} + {pump!r} * n + {suffix!r}"
                families[name] = lambda n, p=prefix, u=pump, s=suffix: p + u * n + s
    return families


def regex_growth(
    pattern: re.Pattern[str] | str,
    *,
    mode: str = "finditer",
    sizes: Sequence[int] = DEFAULT_SIZES,
    extra: Iterable[str] = (),
    max_steps: int = DEFAULT_MAX_STEPS,
    stop_on_superlinear: bool = False,
) -> list[Growth]:
    """:class:`Growth` of ``pattern`` on every family of :func:`pump_inputs`, worst first
    (only up to the first superlinear family with ``stop_on_superlinear``)."""
    out: list[Growth] = []
    for name, build in pump_inputs(pattern, extra).items():
        counts = []
        for n in sizes:
            try:
                counts.append(regex_steps(pattern, build(n), mode=mode, max_steps=max_steps))
            except TooMuchWork:
                counts.append(max_steps)
                break
        ratio = float("inf") if len(counts) < len(sizes) or counts[-1] >= max_steps else growth(counts)
        out.append(Growth(name, tuple(counts), ratio))
        if stop_on_superlinear and out[-1].superlinear():
            break
    return sorted(out, key=lambda g: (-g.ratio, -g.counts[-1]))


#: Response families ``head + unit * k + tail`` that make naive turn-env parsers backtrack or
#: rescan: runs of ``<``, ``[``, ``search[``, nested and unclosed tags, and near-misses of each
#: env's syntax. ``benchmarks/parsers.py`` times them at the action-length limit; the tests
#: count their work at small sizes.
WORST_RESPONSES: dict[str, tuple[str, str, str]] = {
    "mcq_option_spaces": ("<answer>option", " ", "!</answer>"),  # MCQ letter parsing: spaces between option and letter
    "plain_x": ("", "x", ""),
    "spaces": ("", " ", ""),
    "lt_run": ("", "<", ""),
    "lbracket_run": ("", "[", ""),
    "rbracket_run": ("", "]", ""),
    "search_bracket_run": ("", "search[", ""),
    "click_bracket_run": ("", "click[", ""),
    "open_answer_run": ("", "<answer>", ""),
    "open_think_run": ("", "<think>", ""),
    "close_answer_run": ("", "</answer>", ""),
    "nested_answer_search": ("", "<answer><search>", ""),
    "tag_with_spaces": ("< answer", " ", ">"),
    "unclosed_answer_spaces": ("<answer>", " ", ""),
    "answer_spaces_bang": ("<answer>", " ", "!</answer>"),
    "answer_option_dashes": ("<answer>option", "-", "B</answer>"),
    "answer_parens": ("<answer>", "(", "</answer>"),
    "answer_letter_spaces": ("<answer>B", " ", "x</answer>"),
    "answer_articles": ("<answer>", "the a an ", "</answer>"),
    "answer_punctuation": ("<answer>", "!?.,;:", "</answer>"),
    "think_then_answer": ("<think>", "x", "</think><answer>Up</answer>"),
    "sokoban_many_moves": ("<answer>", "Up || ", "Up</answer>"),
    "sokoban_bad_last_move": ("<answer>", "Up || ", "Upp</answer>"),
    "sokoban_separators": ("<answer>", "||", "</answer>"),
    "sokoban_spaces_in_move": ("<answer>U", " ", "p</answer>"),
    "webshop_click_long": ("click[", "x", "]"),
    "webshop_search_words": ("search[", "red shoe ", "]"),
    "webshop_nested_brackets": ("click[", "[x]", "]"),
    "webshop_open_brackets": ("click[", "[", "]"),
    "webshop_unbalanced_brackets": ("click[", "[a] [", ""),
    "webshop_button_markers": ("search[", "[button] x [button_] [SEP] ", "]"),
    "webshop_click_in_answer": ("<answer>click[", " ", "]</answer>"),
    "searchqa_long_query": ("<search>", "who is the ", "</search>"),
    "searchqa_surrogates": ("<search>", "\ud800", "</search>"),
    "searchqa_combining": ("<answer>", "e\u0301", "</answer>"),
    "searchqa_information_tags": ("<information>", "<search>x</information>", ""),
}


def worst_response(name: str, length: int) -> str:
    """The :data:`WORST_RESPONSES` family ``name`` at exactly ``length`` characters (head and
    tail kept whole, the run of units cut to fit)."""
    head, unit, tail = WORST_RESPONSES[name]
    body = max(length - len(head) - len(tail), 0)
    return head + (unit * (body // len(unit) + 1))[:body] + tail
