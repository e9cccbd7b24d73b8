"""OpenEnv's wire protocol for text-turn envs: message shapes, validation and (de)serialisation.

Pure functions shared by the server (:mod:`agentgym_turn.remote.server`) and the Gymnasium client
(:mod:`agentgym_turn.remote.client`); nothing here does I/O. The shapes are OpenEnv's
(``openenv.core.env_server.types`` and ``serialization``):

WebSocket ``/ws`` (one session, one env, per connection), client to server::

    {"type": "reset", "data": {"seed": 0, "options": {...}, "episode_id": "..."}}
    {"type": "reset", "data": {"group_id": "step-7/prompt-3", "task_id": 0}}   (a group's task: see group_seed)
    {"type": "step",  "data": {"message": "<answer>Up</answer>"}}
    {"type": "state"}
    {"type": "close"}
    {"type": "expert"}                      (an extension: the env's expert_action())

server to client::

    {"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}
    {"type": "state",       "data": {"episode_id": ..., "step_count": n, ...}}
    {"type": "error",       "data": {"message": "...", "code": "VALIDATION_ERROR", ...}}
    {"type": "expert",      "data": {"message": "..."}}

An observation (OpenEnv's ``serialize_observation``: the observation's fields, then ``reward``
and ``done`` beside them) carries the env's text, ``terminated``, ``truncated`` and the whole
``info``; ``done = terminated or truncated``. The action is OpenEnv's text action, one field
``message`` (the field of OpenEnv's echo template and its text-game envs), plus OpenEnv's
optional ``metadata``. A ``message`` that is not a string is passed to the env as it is: by the
turn contract any value is a legal action, and the env answers with an invalid turn.

Groups: a reset that names a ``group_id`` (and a ``task_id``, 0 unless given) and no ``seed`` resets with
:func:`group_seed` of the two, so every member of a group plays the same task whichever server process or
machine serves it. A ``seed`` sent beside them wins (then every member must send the same one).

JSON is written with ``ensure_ascii=True`` so that every Python string, lone surrogates
included, survives the trip unchanged, but for one case JSON cannot tell apart: a high surrogate
followed by a low one (two code points, not text) arrives as the one character they encode.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from ..core.args import is_int, is_number
from ..serving import loads_strict

#: The action's text field (OpenEnv's echo template ``message: str``; its text-game envs use it too).
ACTION_FIELD = "message"
#: The step info key that carries the reward a chat view may show the agent (``TurnEnv.shown_reward``), so that
#: ``ChatView`` over ``agentgym_turn/Remote-v0`` shows what it shows over the env itself.
SHOWN_REWARD_KEY = "shown_reward"
#: Message types a client may send on ``/ws`` (``expert`` is this project's extension).
MESSAGE_TYPES = ("reset", "step", "state", "close", "expert")
#: Keys a reset message's ``data`` may hold that the server uses; others are dropped, as OpenEnv
#: drops keyword arguments the env's ``reset`` does not take.
RESET_KEYS = ("seed", "options", "episode_id", "group_id", "task_id")
#: Longest ``group_id`` (characters), as OpenEnv bounds ``episode_id``.
MAX_GROUP_ID_LENGTH = 255


class ErrorCode:
    """OpenEnv's ``WSErrorCode`` values (the ``code`` of an error frame)."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


class ProtocolError(Exception):
    """A message the server answers with an error frame (the session stays open)."""

    def __init__(self, code: str, message: str, **extra: Any):
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra

    def frame(self) -> dict[str, Any]:
        return error_frame(self.code, self.message, **self.extra)


#: ``json.dumps`` with these arguments builds a new encoder a call; one made once encodes the same.
_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


def dumps(obj: Any) -> str:
    """Compact JSON; ASCII-escaped so lone surrogates and every other character round-trip exactly."""
    return _ENCODER.encode(obj)


def error_frame(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """OpenEnv's ``WSErrorResponse``: ``{"type": "error", "data": {"message", "code", ...}}``."""
    return {"type": "error", "data": {"message": message, "code": code, **extra}}


def _field_error(kind: str, loc: list[Any], msg: str, value: Any) -> dict[str, Any]:
    """One entry of a validation error's ``errors`` list, in pydantic's shape (as OpenEnv sends it)."""
    return {"type": kind, "loc": loc, "msg": msg, "input": json_safe(value)}


def _invalid(errors: list[dict[str, Any]]) -> ProtocolError:
    return ProtocolError(ErrorCode.VALIDATION_ERROR, "Invalid message", errors=errors)


def parse_client_message(raw: str | bytes, *, max_bytes: int) -> tuple[str, dict[str, Any]]:
    """Decode and validate one ``/ws`` message; return ``(type, data)`` or raise :class:`ProtocolError`.

    ``data`` is ``{}`` for ``state``/``close``/``expert``; for ``reset`` it holds the known
    :data:`RESET_KEYS` that were given; for ``step`` it is ``{"message": value, "metadata": {...}}``.
    ``max_bytes`` bounds the encoded message (UTF-8 bytes).
    """
    size = len(raw.encode("utf-8", "surrogatepass")) if isinstance(raw, str) else len(raw)
    if size > max_bytes:
        raise ProtocolError(
            ErrorCode.VALIDATION_ERROR,
            f"the message is {size:,} bytes; the limit is {max_bytes:,} bytes. Send a shorter action.",
            size=size,
            max_bytes=max_bytes,
        )
    try:
        message = loads_strict(raw)
    except RecursionError:
        raise ProtocolError(ErrorCode.INVALID_JSON, "Invalid JSON: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"Invalid JSON: {err}") from None
    if not isinstance(message, dict):
        raise _invalid([_field_error("model_type", [], "a message must be a JSON object with a 'type'", message)])
    kind = message.get("type", "")
    if not isinstance(kind, str) or kind not in MESSAGE_TYPES:
        raise ProtocolError(
            ErrorCode.UNKNOWN_TYPE,
            f"Unknown message type: {kind}; the types are {', '.join(MESSAGE_TYPES)}",
        )
    allowed = {"type", "data"} if kind in ("reset", "step") else {"type"}
    errors = [
        _field_error("extra_forbidden", [key], "Extra inputs are not permitted", message[key])
        for key in message
        if key not in allowed
    ]
    if kind == "step" and "data" not in message:
        errors.append(_field_error("missing", ["data"], "Field required", message))
    data = message.get("data", {})
    if "data" in message and not isinstance(data, dict):
        errors.append(_field_error("dict_type", ["data"], "Input should be a valid dictionary", data))
    if errors:
        raise _invalid(errors)
    if kind == "reset":
        return kind, _check_reset(data)
    if kind == "step":
        return kind, _check_step(data)
    return kind, {}


def _check_reset(data: dict[str, Any]) -> dict[str, Any]:
    errors = []
    seed = data.get("seed")
    if seed is not None and not is_int(seed, 0):
        errors.append(_field_error("int_type", ["data", "seed"], "seed must be a non-negative integer or null", seed))
    options = data.get("options")
    if options is not None and not isinstance(options, dict):
        errors.append(_field_error("dict_type", ["data", "options"], "options must be an object or null", options))
    episode_id = data.get("episode_id")
    if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > 255):
        errors.append(
            _field_error(
                "string_type",
                ["data", "episode_id"],
                "episode_id must be a string of at most 255 characters",
                episode_id,
            )
        )
    group_id, task_id = data.get("group_id"), data.get("task_id")
    if group_id is not None and (not isinstance(group_id, str) or not 0 < len(group_id) <= MAX_GROUP_ID_LENGTH):
        errors.append(
            _field_error(
                "string_type",
                ["data", "group_id"],
                f"group_id must be a non-empty string of at most {MAX_GROUP_ID_LENGTH} characters or null",
                group_id,
            )
        )
    if task_id is not None and not is_int(task_id, 0):
        errors.append(
            _field_error("int_type", ["data", "task_id"], "task_id must be a non-negative integer or null", task_id)
        )
    elif task_id is not None and group_id is None:
        errors.append(
            _field_error(
                "missing", ["data", "group_id"], "task_id numbers a group's tasks: send it with a group_id", task_id
            )
        )
    if errors:
        raise _invalid(errors)
    return {key: data[key] for key in RESET_KEYS if key in data}


def group_seed(group_id: str, task_id: int = 0) -> int:
    """The reset seed of task ``task_id`` of group ``group_id``: a 63-bit integer from SHA-256, the same in every
    process, on every machine and in every release (never Python's salted ``hash()``). A local env reset with it
    plays the task the group's served members play."""
    if not isinstance(group_id, str) or not is_int(task_id, 0):
        raise ValueError(
            f"a group is a string group_id and a non-negative integer task_id, got {group_id!r}, {task_id!r}."
        )
    text = dumps(["agentgym-turn/group-seed/v1", group_id, int(task_id)])
    digest = hashlib.sha256(text.encode("ascii")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def reset_seed(data: dict[str, Any]) -> int | None:
    """The seed a validated reset message resets with: its ``seed`` if it sends one, else :func:`group_seed` of its
    ``group_id`` and ``task_id`` (0 unless given) if it names a group, else ``None`` (the env's own stream)."""
    if data.get("seed") is not None:
        return int(data["seed"])
    if data.get("group_id") is not None:
        return group_seed(data["group_id"], data.get("task_id") or 0)
    return None


def _check_step(data: dict[str, Any]) -> dict[str, Any]:
    errors = [
        _field_error("extra_forbidden", ["data", key], "Extra inputs are not permitted", data[key])
        for key in data
        if key not in (ACTION_FIELD, "metadata")
    ]
    if ACTION_FIELD not in data:
        errors.append(_field_error("missing", ["data", ACTION_FIELD], "Field required", data))
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        errors.append(_field_error("dict_type", ["data", "metadata"], "Input should be a valid dictionary", metadata))
    if errors:
        raise _invalid(errors)
    return {ACTION_FIELD: data[ACTION_FIELD], "metadata": metadata}


_JSON_SCALARS = frozenset({str, bool, int, float, type(None)})


def _json_key(key: Any) -> str:
    return key if isinstance(key, str) else str(key)


def json_safe(value: Any) -> Any:
    """``value`` as JSON-native data: dicts with string keys, lists, str, int, float, bool, None.

    Already-native data is returned equal (the envs of this suite put only such data in ``info``).
    Tuples become lists, NumPy scalars and arrays their Python values, non-string keys strings,
    anything else its ``str``.
    """
    # Every served turn's info passes here: exact built-in types take a path without isinstance chains.
    kind = type(value)
    if kind in _JSON_SCALARS:
        return value
    if kind is dict:
        return {
            (k if type(k) is str else _json_key(k)): (v if type(v) in _JSON_SCALARS else json_safe(v))
            for k, v in value.items()
        }
    if kind is list or kind is tuple:
        return [v if type(v) in _JSON_SCALARS else json_safe(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {_json_key(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    item = getattr(value, "tolist", None)  # NumPy scalars and arrays
    if callable(item):
        return json_safe(item())
    return str(value)


def observation_payload(
    text: str, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]
) -> dict[str, Any]:
    """OpenEnv's ``serialize_observation`` of one reset (``reward=None``) or step result."""
    return {
        "observation": {
            "text": text,
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": json_safe(info),
            "metadata": {},
        },
        "reward": None if reward is None else float(reward),
        "done": bool(terminated or truncated),
    }


def parse_observation_payload(data: Any) -> tuple[str, float | None, bool, bool, dict[str, Any]]:
    """``(text, reward, terminated, truncated, info)`` of an observation frame's ``data``; a
    malformed payload is a ``ValueError`` that names the missing or mistyped field."""
    if not isinstance(data, dict) or not isinstance(data.get("observation"), dict):
        raise ValueError(f"the server's observation has no 'observation' object: {str(data)[:200]}")
    obs = data["observation"]
    text, info = obs.get("text"), obs.get("info")
    terminated, truncated = obs.get("terminated"), obs.get("truncated")
    reward = data.get("reward")
    if not isinstance(text, str):
        raise ValueError("the server's observation has no 'text' string")
    if not isinstance(info, dict):
        raise ValueError("the server's observation has no 'info' object")
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        raise ValueError("the server's observation lacks boolean 'terminated' and 'truncated'")
    if reward is not None and not is_number(reward):
        raise ValueError(f"the server's reward is not a number: {reward!r}")
    return text, (None if reward is None else float(reward)), terminated, truncated, info


def build_schemas(
    *,
    env_id: str,
    max_action_length: int,
    max_observation_length: int,
    max_episode_steps: int | None,
    render_modes: list[str],
    render_fps: int | float | None,
    config_digest: str | None = None,
) -> dict[str, Any]:
    """The ``/schema`` answer: JSON Schemas of the action, the observation and the state.

    The spaces' lengths are JSON Schema ``maxLength`` (code points, as Python's ``len``); what the
    Gymnasium client needs beyond them (id, turn limit, render modes) are ``const`` properties
    of the state schema, so the answer keeps OpenEnv's three keys and nothing else.
    """
    action = {
        "title": "TurnTextAction",
        "description": "The whole response of one turn. Any value is a legal action: one the env cannot use is an invalid turn.",
        "type": "object",
        "properties": {
            ACTION_FIELD: {"type": "string", "maxLength": max_action_length, "description": "The response text"},
            "metadata": {"type": "object", "description": "Additional metadata for the action (unused)"},
        },
        "required": [ACTION_FIELD],
        "additionalProperties": False,
    }
    observation = {
        "title": "TurnTextObservation",
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "maxLength": max_observation_length,
                "description": "The env's message (reset: the task; step: the next message)",
            },
            "terminated": {"type": "boolean", "description": "The task is over (solved, bought, answered or failed)"},
            "truncated": {"type": "boolean", "description": "The turn limit was reached"},
            "info": {
                "type": "object",
                "description": "The env's info dict (turn, action_is_valid, action_is_effective, success, score, ...)",
            },
            "metadata": {"type": "object"},
            "done": {"type": "boolean", "description": "terminated or truncated"},
            "reward": {"type": ["number", "null"], "description": "The turn's reward (null at reset)"},
        },
        "required": ["text", "terminated", "truncated", "info"],
    }
    state = {
        "title": "TurnTextState",
        "type": "object",
        "properties": {
            "episode_id": {"type": ["string", "null"]},
            "step_count": {"type": "integer", "minimum": 0, "description": "Steps since the last reset"},
            "env_id": {"type": "string", "const": env_id},
            "max_episode_steps": {"type": ["integer", "null"], "const": max_episode_steps},
            "render_modes": {"type": "array", "const": list(render_modes)},
            "render_fps": {"type": ["number", "null"], "const": render_fps},
            "config_digest": {
                "type": ["string", "null"],
                "const": config_digest,
                "description": "A digest of the id, --kwarg values and turn limit: changes when the configuration does",
            },
            "render": {
                "type": ["string", "null"],
                "description": "render() of the env in ansi mode (null before the first reset)",
            },
        },
    }
    return {"action": action, "observation": observation, "state": state}


def served_spec_from_schemas(schemas: Any) -> dict[str, Any]:
    """Read back what :func:`build_schemas` published: ``env_id``, ``max_action_length``,
    ``max_observation_length``, ``max_episode_steps``, ``render_modes``, ``render_fps``, ``config_digest``.
    A server that does not publish them is a ``ValueError`` saying which field is missing."""
    try:
        props = schemas["state"]["properties"]
        spec = {
            "env_id": props["env_id"]["const"],
            "max_action_length": schemas["action"]["properties"][ACTION_FIELD]["maxLength"],
            "max_observation_length": schemas["observation"]["properties"]["text"]["maxLength"],
            "max_episode_steps": props["max_episode_steps"]["const"],
            "render_modes": list(props["render_modes"]["const"]),
            "render_fps": props["render_fps"]["const"],
            "config_digest": props.get("config_digest", {}).get(
                "const"
            ),  # None from a server that does not publish one
        }
    except (KeyError, TypeError) as err:
        raise ValueError(
            f"the /schema answer lacks {err}; is this an agentgym-turn env server (`agentgym-turn serve env ID`)?"
        ) from None
    for key in ("max_action_length", "max_observation_length"):
        if not is_int(spec[key], 0):
            raise ValueError(f"the /schema answer's {key} is not a non-negative integer: {spec[key]!r}")
    if isinstance(spec["render_fps"], float) and not math.isfinite(spec["render_fps"]):
        spec["render_fps"] = None
    return spec
