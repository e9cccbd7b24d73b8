"""Checks of constructor arguments shared by every env, so each rule is written once.

A bool is an ``int`` in Python, so ``True`` would pass a plain ``isinstance(x, int)``: every
check here refuses bools where a number is asked for. The predicates (:func:`is_int`,
:func:`is_number`) let a caller keep its own message; :func:`int_arg`, :func:`bool_arg` and
:func:`whole_number` raise a ValueError naming the argument and an accepted value.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence, TypeVar

import numpy as np


def is_int(value: Any, minimum: int | None = None, maximum: int | None = None, *, numpy: bool = False) -> bool:
    """``value`` is an int (not a bool; a numpy integer too when ``numpy``) within ``[minimum, maximum]``."""
    kinds = (int, np.integer) if numpy else int
    if isinstance(value, bool) or not isinstance(value, kinds):
        return False
    return (minimum is None or value >= minimum) and (maximum is None or value <= maximum)


def is_number(value: Any, *, numpy: bool = False) -> bool:
    """``value`` is an int or a float (not a bool; numpy scalars too when ``numpy``)."""
    kinds = (int, float, np.integer, np.floating) if numpy else (int, float)
    return not isinstance(value, bool) and isinstance(value, kinds)


def int_arg(name: str, value: Any, minimum: int, *, allow_none: bool = False) -> int | None:
    """``value`` as an int >= ``minimum``, or a ValueError naming the parameter and the fix."""
    if value is None and allow_none:
        return None
    if not is_int(value, numpy=True):
        none = " or None" if allow_none else ""
        raise ValueError(f"{name} must be an integer >= {minimum}{none}, got {value!r}; e.g. {name}={max(minimum, 1)}.")
    if int(value) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return int(value)


def bool_arg(name: str, value: Any) -> bool:
    """``value`` as a bool, or a ValueError naming the parameter."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def whole_number(name: str, value: Any, example: str) -> int:
    """``value`` as an int (an int, or a string of one), else a ValueError naming ``name``."""
    if not (is_int(value, numpy=True) or isinstance(value, str)):
        raise ValueError(f"{name} must be a whole number (e.g. {name}={example}), got {value!r}.")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number (e.g. {name}={example}), got {value!r}.") from None


class CliError(Exception):
    """A user mistake the CLI reports as one line on stderr (exit status 2), never a traceback."""


def token_arg(token: Any, whose: str) -> str | None:
    """A client's bearer token for ``whose`` server (``None``: none), or a ValueError: it goes into an
    ``Authorization`` header, so it must be non-empty printable ASCII."""
    if token is not None and (
        not isinstance(token, str) or not token or not token.isascii() or not token.isprintable()
    ):
        raise ValueError(f"token must be a non-empty string of printable ASCII characters ({whose}).")
    return token


S = TypeVar("S")


def source_arg(
    source: S | None,
    keywords: Mapping[str, Any],
    *,
    defaults: Mapping[str, Any],
    build: Callable[..., S],
    kinds: type | tuple[type, ...],
    env: str,
) -> S:
    """An env's task source (Jumanji's ``generator=``): ``source`` as given, else ``build(**keywords)``, where
    ``keywords`` are the env's source keywords (names of ``defaults``) as ``gymnasium.make`` passed them.

    ``source`` of another type, or given beside a keyword set to other than its default, is a ValueError naming
    what to change (``env`` names the env in it)."""
    if source is None:
        return build(**keywords)
    names = kinds.__name__ if isinstance(kinds, type) else " or a ".join(k.__name__ for k in kinds)
    if not isinstance(source, kinds):
        raise ValueError(f"source must be a {names}, got {type(source).__name__}.")
    clash = [name for name, value in keywords.items() if value is not defaults[name] and value != defaults[name]]
    if clash:
        raise ValueError(f"source= replaces {', '.join(clash)}: set them on the {names}, not here.")
    return source


def parse_kwargs(pairs: Sequence[str]) -> dict:
    """``["num_products=1000", "observation_mode=text"]`` -> kwargs, numbers parsed (``--kwarg`` of the CLI and the
    servers); :class:`CliError` for a pair without ``=``."""
    kwargs = {}
    for pair in pairs:
        if "=" not in pair:
            raise CliError(f"--kwarg takes NAME=VALUE, got {pair!r}.")
        name, value = pair.split("=", 1)
        for cast in (int, float):
            try:
                kwargs[name] = cast(value)
                break
            except ValueError:
                continue
        else:
            kwargs[name] = {"true": True, "false": False, "none": None}.get(value.lower(), value)
    return kwargs
