"""How well can TurnSearchQA-MCQ be answered from its options alone? (Chance is 25%.)

A strategy sees a question's four options, never its question, its gold or the corpus. It may
also use what the options of every question of the same world show (how often a string or a
word appears among them, where numbers fall among them): an attacker holding the whole MCQ set
has that. The trained strategies learn from full questions (options and gold) of *other* world
seeds and are scored on held-out ones.

Rule strategies:

* ``longest`` / ``shortest``: the longest / shortest option (characters);
* ``within_40``: the option that every other option lies within 40 of (numeric options);
* ``median``: the lower of the two middle numeric options; ``lowest`` / ``highest`` number;
* ``most_shared_words``: the option sharing the most words with the other options;
* ``closest_characters``: the option with the most character-trigram overlap with the others;
* ``most_frequent`` / ``least_frequent``: the option whose string appears most / least often
  among the options of all questions of the world;
* ``densest_number``: the numeric option where the world's numeric options are densest;
* ``odd_one_out``: the option whose shape (words as ``W``, digits as ``D``, connecting words
  kept) no other option shares, when exactly one is so.

Trained strategies, on :func:`option_features` (each option relative to the other three: length
and word-count rank, shared words and trigram overlap, capitalisation and digit patterns, numeric
rank and distance to the median and mean, shape matches, frequency of the string and its words
among the world's options, density and percentile of a number among the world's numbers):

* ``logistic``: a conditional logit (softmax over the four options) fitted by gradient descent;
* ``boosted_trees``: gradient-boosted depth-3 trees on the same softmax loss (numpy, histogram
  splits).

A rule that does not apply (no numeric options) answers A, and a tie goes to the first option.
``--scan`` also reports each feature alone (the better of "pick the highest" and "pick the
lowest", ties broken at random) on every question of the test seeds, to show which features
carry signal: against the earlier generator the frequency of the option string among the
world's options alone picked the gold 33% of the time.

    python benchmarks/searchqa_mcq_leak.py                      # 1,000 questions, seeds 0 1 2; trained on 3 4 5
    python benchmarks/searchqa_mcq_leak.py --scan --out benchmarks/results/searchqa_mcq_leak.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from agentgym_turn.searchqa.generator.questions import Question
from agentgym_turn.searchqa.source import generated_source

try:  # python -m benchmarks.searchqa_mcq_leak, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/searchqa_mcq_leak.py: this folder comes first on the import path
    import common


def _number(option: str) -> float | None:
    try:
        return float(option)
    except ValueError:
        return None


def _words(option: str) -> set[str]:
    return set(option.lower().split())


def _trigrams(option: str) -> set[str]:
    s = f"  {option.lower()} "
    return {s[i : i + 3] for i in range(len(s) - 2)}


_SMALL_WORDS = {"of", "and", "the", "a", "for", "in", "none", "others"}


def _shape(option: str) -> str:
    """Words as ``W`` (kept when a connecting word or a type word such as ``Press``), digits as ``D``."""
    out = []
    for w in option.split():
        if w.isdigit():
            out.append("D" * len(w))
        elif w.lower() in _SMALL_WORDS or w in _TYPE_WORDS:
            out.append(w.lower())
        else:
            out.append("W")
    return " ".join(out)


#: Words that name a kind of organisation (their presence is visible to anyone reading the options).
_TYPE_WORDS = {
    "Press",
    "Books",
    "Publishers",
    "Pictures",
    "Studios",
    "Film",
    "Company",
    "Records",
    "Sound",
    "Music",
    "Group",
    "Museum",
    "Art",
    "Gallery",
    "University",
    "College",
    "Institute",
    "Technology",
    "Observatory",
    "Astronomical",
    "Society",
    "Trading",
    "Merchants",
    "Shipyards",
    "Shipbuilding",
    "Bank",
    "Engineering",
    "Works",
}


class WorldOptions:
    """What the options of every question of one world show (no question text, no gold)."""

    def __init__(self, questions: Sequence[Question]):
        options = [o for q in questions for o in q.choices]
        self.count = Counter(options)
        self.words = Counter(w for o in options for w in o.lower().split())
        nums = np.array(sorted(n for n in map(_number, options) if n is not None), dtype=float)
        self.years = nums[nums >= 1000]
        self.small = nums[nums < 1000]

    def numbers_like(self, value: float) -> np.ndarray:
        return self.years if value >= 1000 else self.small

    def percentile(self, value: float) -> float:
        pool = self.numbers_like(value)
        if len(pool) == 0:
            return 0.5
        return float((np.searchsorted(pool, value, "left") + np.searchsorted(pool, value, "right")) / (2 * len(pool)))

    def density(self, value: float, width: float = 3.0) -> float:
        pool = self.numbers_like(value)
        return float(np.searchsorted(pool, value + width, "right") - np.searchsorted(pool, value - width, "left"))


Strategy = Callable[[Sequence[str], WorldOptions], int]


# ------------------------------------------------------------------------------------ rule strategies
def longest(options: Sequence[str], world: WorldOptions) -> int:
    return int(np.argmax([len(o) for o in options]))


def shortest(options: Sequence[str], world: WorldOptions) -> int:
    return int(np.argmin([len(o) for o in options]))


def _numbers(options: Sequence[str]) -> list[float] | None:
    nums = [_number(o) for o in options]
    return None if any(n is None for n in nums) else nums  # type: ignore[return-value]


def within_40(options: Sequence[str], world: WorldOptions) -> int:
    nums = _numbers(options)
    if nums is None:
        return 0
    spread = [max(abs(a - b) for b in nums) for a in nums]
    return int(np.argmin(spread)) if min(spread) <= 40 else 0


def median(options: Sequence[str], world: WorldOptions) -> int:
    nums = _numbers(options)
    if nums is None:
        return 0
    order = np.argsort(nums, kind="stable")
    return int(order[(len(nums) - 1) // 2])


def lowest(options: Sequence[str], world: WorldOptions) -> int:
    nums = _numbers(options)
    return 0 if nums is None else int(np.argmin(nums))


def highest(options: Sequence[str], world: WorldOptions) -> int:
    nums = _numbers(options)
    return 0 if nums is None else int(np.argmax(nums))


def most_shared_words(options: Sequence[str], world: WorldOptions) -> int:
    words = [_words(o) for o in options]
    shared = [sum(len(w & v) for j, v in enumerate(words) if j != i) for i, w in enumerate(words)]
    return int(np.argmax(shared))


def closest_characters(options: Sequence[str], world: WorldOptions) -> int:
    grams = [_trigrams(o) for o in options]
    overlap = [sum(len(g & h) / max(1, len(g | h)) for j, h in enumerate(grams) if j != i) for i, g in enumerate(grams)]
    return int(np.argmax(overlap))


def most_frequent(options: Sequence[str], world: WorldOptions) -> int:
    return int(np.argmax([world.count[o] for o in options]))


def least_frequent(options: Sequence[str], world: WorldOptions) -> int:
    return int(np.argmin([world.count[o] for o in options]))


def densest_number(options: Sequence[str], world: WorldOptions) -> int:
    nums = _numbers(options)
    return 0 if nums is None else int(np.argmax([world.density(n) for n in nums]))


def odd_one_out(options: Sequence[str], world: WorldOptions) -> int:
    shapes = [_shape(o) for o in options]
    alone = [i for i, s in enumerate(shapes) if shapes.count(s) == 1]
    return alone[0] if len(alone) == 1 else 0


STRATEGIES: dict[str, Strategy] = {
    "longest": longest,
    "shortest": shortest,
    "within_40": within_40,
    "median": median,
    "lowest": lowest,
    "highest": highest,
    "most_shared_words": most_shared_words,
    "closest_characters": closest_characters,
    "most_frequent": most_frequent,
    "least_frequent": least_frequent,
    "densest_number": densest_number,
    "odd_one_out": odd_one_out,
}


# ------------------------------------------------------------------------------------ features
FEATURES = (
    "length_z",
    "length_rank",
    "is_longest",
    "is_shortest",
    "words_minus_mean",
    "words_rank",
    "shared_words",
    "max_shared_words",
    "trigram_overlap",
    "max_trigram_overlap",
    "capitals_minus_mean",
    "digits_minus_mean",
    "small_words_minus_mean",
    "has_middle_word",
    "same_shape",
    "same_last_word",
    "same_first_word",
    "log_count",
    "log_count_minus_mean",
    "count_rank",
    "word_log_count_minus_mean",
    "numeric",
    "number_rank",
    "number_z",
    "to_median",
    "nearest_gap",
    "is_lowest",
    "is_highest",
    "world_percentile",
    "world_extremeness",
    "world_log_density_minus_mean",
    "round_10",
    "round_5",
)


def _rank(values: Sequence[float], i: int) -> float:
    v = np.asarray(values, dtype=float)
    return float((v < v[i]).sum() + 0.5 * ((v == v[i]).sum() - 1)) / max(1, len(v) - 1)


def option_features(options: Sequence[str], world: WorldOptions) -> np.ndarray:
    """Per-option features, shape ``(len(options), len(FEATURES))``: each option against the others and its world."""
    n = len(options)
    lengths = np.array([len(o) for o in options], dtype=float)
    nwords = np.array([len(o.split()) for o in options], dtype=float)
    words = [_words(o) for o in options]
    grams = [_trigrams(o) for o in options]
    capitals = np.array([sum(w[:1].isupper() for w in o.split()) for o in options], dtype=float)
    digits = np.array([sum(c.isdigit() for c in o) for o in options], dtype=float)
    small = np.array([sum(w.lower() in _SMALL_WORDS for w in o.split()) for o in options], dtype=float)
    shapes = [_shape(o) for o in options]
    lasts = [o.split()[-1].lower() if o.split() else "" for o in options]
    firsts = [o.split()[0].lower() if o.split() else "" for o in options]
    counts = np.log1p([world.count[o] for o in options])
    word_counts = np.array([np.mean([np.log1p(world.words[w]) for w in o.lower().split()] or [0.0]) for o in options])
    nums = _numbers(options)
    rows = []
    for i, o in enumerate(options):
        others = [j for j in range(n) if j != i]
        shared = [len(words[i] & words[j]) for j in others]
        overlap = [len(grams[i] & grams[j]) / max(1, len(grams[i] | grams[j])) for j in others]
        row = [
            (lengths[i] - lengths.mean()) / (lengths.std() + 1.0),
            _rank(lengths, i),
            float(lengths[i] == lengths.max()),
            float(lengths[i] == lengths.min()),
            nwords[i] - nwords.mean(),
            _rank(nwords, i),
            float(sum(shared)),
            float(max(shared)),
            float(sum(overlap)),
            float(max(overlap)),
            capitals[i] - capitals.mean(),
            digits[i] - digits.mean(),
            small[i] - small.mean(),
            float(nwords[i] == 3 and small[i] == 0),
            float(sum(shapes[j] == shapes[i] for j in others)),
            float(sum(lasts[j] == lasts[i] for j in others)),
            float(sum(firsts[j] == firsts[i] for j in others)),
            counts[i],
            counts[i] - counts.mean(),
            _rank(counts, i),
            word_counts[i] - word_counts.mean(),
        ]
        if nums is not None:
            vals = np.asarray(nums, dtype=float)
            spread = vals.max() - vals.min() + 1.0
            gaps = np.abs(vals[others] - vals[i])
            pct = world.percentile(vals[i])
            dens = np.log1p([world.density(v) for v in vals])
            row += [
                1.0,
                _rank(vals, i),
                (vals[i] - vals.mean()) / spread,
                abs(vals[i] - np.median(vals)) / spread,
                gaps.min() / spread,
                float(vals[i] == vals.min()),
                float(vals[i] == vals.max()),
                pct,
                abs(pct - 0.5),
                dens[i] - dens.mean(),
                float(vals[i] % 10 == 0),
                float(vals[i] % 5 == 0),
            ]
        else:
            row += [0.0] * 12
        rows.append(row)
    return np.asarray(rows, dtype=float)


def _design(questions: Sequence[Question], world: WorldOptions) -> tuple[np.ndarray, np.ndarray]:
    """Stacked features ``(4 * len(questions), F)`` and one-hot gold labels."""
    x = np.concatenate([option_features(q.choices, world) for q in questions])
    y = np.concatenate([np.arange(len(q.choices)) == q.answer_index for q in questions]).astype(float)
    return x, y


def _softmax4(scores: np.ndarray) -> np.ndarray:
    s = scores.reshape(-1, 4)
    e = np.exp(s - s.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)).reshape(-1)


class _Trained:
    """A scorer of options learnt from full questions of other worlds; answers the highest-scored option."""

    def fit(self, worlds: Sequence[Sequence[Question]]) -> "_Trained":
        """Fit on the questions of each world in ``worlds`` (each with its own :class:`WorldOptions`)."""
        parts = [_design(qs, WorldOptions(qs)) for qs in worlds]
        return self.fit_design(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))

    def fit_design(self, x: np.ndarray, y: np.ndarray) -> "_Trained":
        self._fit(x, y)
        return self

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        raise NotImplementedError

    def scores(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def picks(self, x: np.ndarray) -> np.ndarray:
        """The chosen option of each question of a stacked design (four rows per question)."""
        return self.scores(x).reshape(-1, 4).argmax(1)

    def __call__(self, options: Sequence[str], world: WorldOptions) -> int:
        return int(np.argmax(self.scores(option_features(options, world))))


class OptionClassifier(_Trained):
    """Conditional logit: a linear score per option, softmax over the four, L2, full-batch gradient descent."""

    def __init__(self, l2: float = 1e-3, steps: int = 300, lr: float = 0.5):
        self.l2, self.steps, self.lr = l2, steps, lr

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        self.mu, self.sd = x.mean(0), x.std(0) + 1e-9
        z = (x - self.mu) / self.sd
        w = np.zeros(z.shape[1])
        groups = len(y) // 4
        for _ in range(self.steps):  # deterministic
            p = _softmax4(z @ w)
            w -= self.lr * (z.T @ (p - y) / groups + self.l2 * w)
        self.w = w

    def scores(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mu) / self.sd) @ self.w


class BoostedTrees(_Trained):
    """Gradient-boosted regression trees on the softmax-over-four loss (Newton leaves, histogram splits)."""

    def __init__(
        self, rounds: int = 60, depth: int = 3, lr: float = 0.2, bins: int = 32, min_leaf: int = 40, l2: float = 1.0
    ):
        self.rounds, self.depth, self.lr, self.bins, self.min_leaf, self.l2 = rounds, depth, lr, bins, min_leaf, l2

    def _bin(self, x: np.ndarray) -> np.ndarray:
        return np.stack([np.searchsorted(e, x[:, f], "right") for f, e in enumerate(self.edges)], 1).astype(np.int64)

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        qs = np.linspace(0, 1, self.bins + 1)[1:-1]
        self.edges = [np.unique(np.quantile(x[:, f], qs)) for f in range(x.shape[1])]
        b = self._bin(x)
        score = np.zeros(len(y))
        self.trees: list[list] = []
        for _ in range(self.rounds):
            p = _softmax4(score)
            g, h = p - y, np.maximum(p * (1 - p), 1e-6)
            tree: list = []
            self._grow(tree, b, g, h, np.arange(len(y)), 0)
            self.trees.append(tree)
            score += self.lr * self._predict_tree(tree, b)

    def _grow(self, tree: list, b: np.ndarray, g: np.ndarray, h: np.ndarray, idx: np.ndarray, depth: int) -> int:
        node = len(tree)
        G, H = g[idx].sum(), h[idx].sum()
        tree.append(["leaf", -G / (H + self.l2)])
        if depth >= self.depth or len(idx) < 2 * self.min_leaf:
            return node
        nf, nb = b.shape[1], self.bins
        flat = (b[idx] + np.arange(nf) * nb).ravel()
        hg = np.bincount(flat, np.repeat(g[idx], nf), nf * nb).reshape(nf, nb).cumsum(1)
        hh = np.bincount(flat, np.repeat(h[idx], nf), nf * nb).reshape(nf, nb).cumsum(1)
        hn = np.bincount(flat, None, nf * nb).reshape(nf, nb).cumsum(1)
        gain = hg**2 / (hh + self.l2) + (G - hg) ** 2 / (H - hh + self.l2) - G**2 / (H + self.l2)
        gain[(hn < self.min_leaf) | (len(idx) - hn < self.min_leaf)] = -np.inf
        f, t = np.unravel_index(int(np.argmax(gain)), gain.shape)
        if not gain[f, t] > 1e-9:
            return node
        left = b[idx, f] <= t
        tree[node] = ["split", int(f), int(t), 0, 0]
        tree[node][3] = self._grow(tree, b, g, h, idx[left], depth + 1)
        tree[node][4] = self._grow(tree, b, g, h, idx[~left], depth + 1)
        return node

    @staticmethod
    def _predict_tree(tree: list, b: np.ndarray) -> np.ndarray:
        out = np.empty(len(b))
        stack = [(0, np.arange(len(b)))]
        while stack:
            node, idx = stack.pop()
            kind = tree[node]
            if kind[0] == "leaf":
                out[idx] = kind[1]
                continue
            left = b[idx, kind[1]] <= kind[2]
            stack += [(kind[3], idx[left]), (kind[4], idx[~left])]
        return out

    def scores(self, x: np.ndarray) -> np.ndarray:
        b = self._bin(x)
        return self.lr * sum(self._predict_tree(t, b) for t in self.trees)


TRAINED: dict[str, Callable[[], _Trained]] = {"logistic": OptionClassifier, "boosted_trees": BoostedTrees}


# ------------------------------------------------------------------------------------ measurement
def accuracy(
    strategy: Strategy,
    questions: Sequence[Question],
    world: WorldOptions | None = None,
    design: np.ndarray | None = None,
) -> float:
    """Share of ``questions`` a strategy answers right (``world``: the world's options; default: these questions').

    A trained strategy scores all questions at once (``design``: their stacked features, if already computed).
    """
    world = world if world is not None else WorldOptions(questions)
    gold = np.array([q.answer_index for q in questions])
    if isinstance(strategy, _Trained):
        x = design if design is not None else _design(questions, world)[0]
        return float(np.mean(strategy.picks(x) == gold))
    return float(np.mean([strategy(q.choices, world) == g for q, g in zip(questions, gold)]))


def world_questions(seed: int, scale: float = 1.0) -> list[Question]:
    """Every multiple-choice question of a generated world, in generation order."""
    return [q for q in generated_source(seed, scale).questions if q.choices]


def feature_scan(questions_by_seed: dict[int, list[Question]]) -> dict[str, float]:
    """Each feature alone as a strategy (pick its highest, or its lowest, whichever scores more) on every question."""
    hits = np.zeros((len(FEATURES), 2))
    n = 0
    for qs in questions_by_seed.values():
        x, y = _design(qs, WorldOptions(qs))
        x = x.reshape(len(qs), 4, -1)
        gold = y.reshape(len(qs), 4).argmax(1)
        noise = np.random.default_rng(0).random(x.shape[:2])[..., None] * 1e-9  # break ties at random, not toward A
        hits[:, 0] += (np.argmax(x + noise, 1) == gold[:, None]).sum(0)
        hits[:, 1] += (np.argmin(x + noise, 1) == gold[:, None]).sum(0)
        n += len(qs)
    best = hits.max(1) / n
    return {name: round(float(v), 4) for name, v in sorted(zip(FEATURES, best), key=lambda kv: -kv[1])}


def measure(
    seeds: Sequence[int] = (0, 1, 2),
    n: int = 1000,
    scale: float = 1.0,
    train_seeds: Sequence[int] | None = None,
    train_questions: int = 8000,
    scan: bool = False,
) -> dict:
    """Accuracy of every strategy on the first ``n`` questions of each world seed.

    The trained strategies learn from the first ``train_questions`` questions of each of
    ``train_seeds``; ``None`` trains each test seed's models on the *other* test seeds (so a test
    world is never trained on either way). World statistics come from all of a world's questions.
    """
    everything = {s: world_questions(s, scale) for s in seeds}
    worlds = {s: WorldOptions(qs) for s, qs in everything.items()}
    m = max(n, train_questions) if train_seeds is None else n
    designs = {s: _design(everything[s][:m], worlds[s]) for s in seeds}  # features of each seed, computed once
    out: dict = {"questions_per_seed": n, "seeds": list(seeds), "chance": 0.25, "by_seed": {}}
    fixed = None
    if train_seeds is not None:
        parts = []
        for t in train_seeds:
            qs = world_questions(t, scale)
            parts.append(_design(qs[:train_questions], WorldOptions(qs)))
        x, y = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        fixed = {name: make().fit_design(x, y) for name, make in TRAINED.items()}
        out["train_seeds"] = list(train_seeds)
    out["train_questions_per_seed"] = train_questions
    for s in seeds:
        test = everything[s][:n]
        row = {name: round(accuracy(f, test, worlds[s]), 4) for name, f in STRATEGIES.items()}
        others = [t for t in seeds if t != s]
        if fixed is not None:
            models = fixed
        else:
            x = np.concatenate([designs[t][0][: 4 * train_questions] for t in others])
            y = np.concatenate([designs[t][1][: 4 * train_questions] for t in others])
            models = {name: make().fit_design(x, y) for name, make in TRAINED.items()}
            row["trained_on_seeds"] = others
        for name, model in models.items():
            row[name] = round(accuracy(model, test, worlds[s], designs[s][0][: 4 * n]), 4)
        row["numeric_questions"] = sum(_numbers(q.choices) is not None for q in test)
        row["answer_letter_counts"] = [sum(q.answer_index == i for q in test) for i in range(4)]
        out["by_seed"][str(s)] = row
    names = (*STRATEGIES, *TRAINED)
    out["best"] = max(row[k] for row in out["by_seed"].values() for k in names)
    out["best_strategy"] = max(((row[k], k, seed) for seed, row in out["by_seed"].items() for k in names))[1:]
    if scan:
        out["feature_scan_all_questions"] = {
            "questions": sum(len(v) for v in everything.values()),
            "accuracy": feature_scan(everything),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--train-seeds", type=int, nargs="+", default=[3, 4, 5])
    p.add_argument("--questions", type=int, default=1000)
    p.add_argument("--train-questions", type=int, default=8000)
    p.add_argument(
        "--scan", action="store_true", help="also score each feature alone on every question of the test seeds"
    )
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    result = {
        "benchmark": "searchqa_mcq_leak",
        **measure(
            args.seeds,
            args.questions,
            train_seeds=args.train_seeds,
            train_questions=args.train_questions,
            scan=args.scan,
        ),
    }
    if args.out is not None:
        common.write_json(args.out, result)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
