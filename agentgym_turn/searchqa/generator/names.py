"""Coined words for fictional names: pronounceable, unique, and never an English word.

Every proper name in the generated world (people, cities, countries, rivers, organisations and
some titles) is built from coined words, so a model cannot know or guess them: the only way to
learn a fact is to retrieve the passage that states it. :class:`Coiner` guarantees that

* no two coined words are equal, or equal after dropping a plural/verb ending (``Tavesk`` and
  ``Tavesks`` would share a BM25 stem),
* no coined word is a common English word, a stopword, or a word of the passage templates
  (see :data:`RESERVED`), so names never collide with the text around them,
* the sequence of words depends only on the random generator it is given (numpy's PCG64 is
  the same on every platform and process).
"""

from __future__ import annotations

import numpy as np

_ONSETS = (
    "b",
    "br",
    "bl",
    "c",
    "ch",
    "d",
    "dr",
    "f",
    "fl",
    "g",
    "gr",
    "gl",
    "h",
    "k",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "pr",
    "r",
    "s",
    "sk",
    "sl",
    "st",
    "t",
    "th",
    "tr",
    "v",
    "w",
    "z",
    "j",
    "qu",
)
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "a", "ai", "ei", "ou", "y", "ia")
_MEDIAL_CODAS = ("", "", "", "", "n", "r", "l", "s", "m")
_FINAL_CODAS = (
    "",
    "n",
    "r",
    "l",
    "s",
    "th",
    "nd",
    "rk",
    "st",
    "m",
    "v",
    "x",
    "sk",
    "rn",
    "ld",
    "ck",
    "ss",
    "rt",
    "sh",
    "nt",
    "ll",
    "rd",
)

#: Common English words (stopwords and the vocabulary of the passage templates) that a coined
#: word must never equal. Lower-case.
RESERVED: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    born died city country capital river founded founder museum press books records pictures
    studio studios bank college university institute observatory company works engineering
    shipyards shipbuilding gallery sound music group film novel poem poetry album painting
    house firm trading merchants exhibition festival fair salon show surname people person
    year years many most later early known work worked wrote written directed painted
    recorded released published produced held collection lived life death city town region
    north south east west old new great little river lake hill mount port bay stone silver
    golden iron glass salt winter summer autumn spring night day morning evening light dark
    red blue green black white grey gray long short high low last first second third
    rose star sea sky sun moon rain snow wind fire water road bridge garden tower gate
    """.split()
)


def skeleton(word: str) -> str:
    """A crude stem used to keep coined words apart: lower-case, common endings dropped."""
    w = word.lower()
    for ending in ("ing", "ies", "es", "ed", "s", "e", "y"):
        if len(w) > len(ending) + 2 and w.endswith(ending):
            return w[: -len(ending)]
    return w


class Coiner:
    """Draws unique, pronounceable coined words from a numpy generator.

    Args:
        rng: The generator every word is drawn from (the only source of randomness).
        min_length: Shortest word, in letters (at least 4, so BM25 keeps it and it is no article).
        max_length: Longest word, in letters.
    """

    def __init__(self, rng: np.random.Generator, *, min_length: int = 4, max_length: int = 9):
        if min_length < 4:
            raise ValueError("coined words need at least 4 letters")
        self.rng = rng
        self.min_length = min_length
        self.max_length = max_length
        self._taken: set[str] = set()  # skeletons, for membership only (never iterated)

    def reserve(self, words: list[str]) -> None:
        """Mark ``words`` (and their skeletons) as unavailable."""
        for w in words:
            self._taken.add(skeleton(w))

    def _candidates(self, n: int) -> list[str]:
        rng = self.rng
        syllables = rng.choice(np.array([2, 2, 2, 2, 3]), size=n)
        total = int(syllables.sum())
        onsets = rng.integers(0, len(_ONSETS), size=total)
        no_onset = rng.random(total) < 0.12
        vowels = rng.integers(0, len(_VOWELS), size=total)
        medial = rng.integers(0, len(_MEDIAL_CODAS), size=total)
        final = rng.integers(0, len(_FINAL_CODAS), size=n)
        out = []
        k = 0
        for i in range(n):
            parts = []
            m = int(syllables[i])
            for j in range(m):
                if not (j == 0 and no_onset[k]):
                    parts.append(_ONSETS[onsets[k]])
                parts.append(_VOWELS[vowels[k]])
                parts.append(_FINAL_CODAS[final[i]] if j == m - 1 else _MEDIAL_CODAS[medial[k]])
                k += 1
            out.append("".join(parts))
        return out

    def words(self, n: int) -> list[str]:
        """``n`` new coined words, capitalised, in a deterministic order."""
        out: list[str] = []
        while len(out) < n:
            need = n - len(out)
            for w in self._candidates(int(need * 1.3) + 8):
                if not (self.min_length <= len(w) <= self.max_length):
                    continue
                if w in RESERVED:
                    continue
                key = skeleton(w)
                if key in self._taken or key in RESERVED:
                    continue
                self._taken.add(key)
                out.append(w.capitalize())
                if len(out) == n:
                    break
        return out
