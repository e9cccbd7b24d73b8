"""The wire format of served envs (agentgym_turn/remote/protocol.py): pure functions, no server."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentgym_turn.remote.protocol import (
    ACTION_FIELD,
    ErrorCode,
    ProtocolError,
    build_schemas,
    dumps,
    observation_payload,
    parse_client_message,
    parse_observation_payload,
    served_spec_from_schemas,
)

#: Any Python string, lone surrogates and control characters included.
ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()), max_size=200)
JSON_DATA = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=20,
)
LIMIT = 1 << 20


@given(ANY_TEXT)
def test_every_text_action_arrives_unchanged(action):
    kind, data = parse_client_message(dumps({"type": "step", "data": {ACTION_FIELD: action}}), max_bytes=LIMIT)
    assert kind == "step" and data == {ACTION_FIELD: action, "metadata": {}}
    assert type(data[ACTION_FIELD]) is str


def _as_json_text(value):
    """``value`` as JSON carries it: a high surrogate followed by a low one (two code points, not text) arrives as the
    one character they encode, as every JSON decoder reads ``\\ud800\\udc00``; lone surrogates arrive as they are."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if isinstance(value, dict):
        return {_as_json_text(k): _as_json_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_json_text(v) for v in value]
    return value


@given(
    ANY_TEXT,
    st.floats(allow_nan=False) | st.none(),
    st.booleans(),
    st.booleans(),
    st.dictionaries(ANY_TEXT, JSON_DATA, max_size=6),
)
@example(
    "\udc00\ud800x\ud800\udc00", None, False, False, {"\ud800\udc00": None, "\ud800": "\udfff"}
)  # a pair joins; lone ones stay
def test_an_observation_round_trips_exactly(text, reward, terminated, truncated, info):
    payload = json.loads(dumps(observation_payload(text, reward, terminated, truncated, info)))
    got = parse_observation_payload(payload)
    assert repr(got) == repr((_as_json_text(text), reward, terminated, truncated, _as_json_text(info)))
    assert payload["done"] is (terminated or truncated)


@given(st.binary(max_size=300) | ANY_TEXT)
def test_any_frame_is_parsed_or_refused_with_an_openenv_code(raw):
    try:
        kind, data = parse_client_message(raw, max_bytes=LIMIT)
    except ProtocolError as err:
        frame = err.frame()
        assert frame["type"] == "error" and frame["data"]["code"] in vars(ErrorCode).values()
        json.loads(dumps(frame))  # the error frame itself is sendable
    else:
        assert kind in ("reset", "step", "state", "close", "expert") and isinstance(data, dict)


def test_messages_are_checked_field_by_field():
    def code(raw: str) -> str:
        with pytest.raises(ProtocolError) as err:
            parse_client_message(raw, max_bytes=LIMIT)
        return err.value.code

    assert code("nope") == ErrorCode.INVALID_JSON
    assert code('{"type": "teleport"}') == ErrorCode.UNKNOWN_TYPE
    assert code('{"type": 3}') == ErrorCode.UNKNOWN_TYPE
    assert code('{"type": "reset", "data": {"seed": true}}') == ErrorCode.VALIDATION_ERROR
    assert code('{"type": "reset", "data": {"episode_id": "' + "e" * 256 + '"}}') == ErrorCode.VALIDATION_ERROR
    assert code('{"type": "step", "data": {"message": "x", "metadata": 1}}') == ErrorCode.VALIDATION_ERROR
    assert code('{"type": "close", "data": {}}') == ErrorCode.VALIDATION_ERROR
    with pytest.raises(ProtocolError, match="the limit is 100 bytes") as err:
        parse_client_message('{"type": "state"}' + " " * 100, max_bytes=100)
    assert err.value.extra["max_bytes"] == 100
    assert parse_client_message('{"type": "reset"}', max_bytes=LIMIT) == ("reset", {})
    assert parse_client_message(
        '{"type": "reset", "data": {"seed": 3, "options": null, "other": 1}}', max_bytes=LIMIT
    ) == (
        "reset",
        {"seed": 3, "options": None},
    )
    assert parse_client_message('{"type": "step", "data": {"message": ["a"]}}', max_bytes=LIMIT)[1][ACTION_FIELD] == [
        "a"
    ]


def test_the_schemas_publish_what_the_client_needs_and_nothing_is_lost():
    schemas = build_schemas(
        env_id="X-v0",
        max_action_length=10,
        max_observation_length=20,
        max_episode_steps=5,
        render_modes=["ansi"],
        render_fps=4,
        config_digest="ab12",
    )
    assert set(schemas) == {"action", "observation", "state"}
    assert served_spec_from_schemas(json.loads(dumps(schemas))) == {
        "env_id": "X-v0",
        "max_action_length": 10,
        "max_observation_length": 20,
        "max_episode_steps": 5,
        "render_modes": ["ansi"],
        "render_fps": 4,
        "config_digest": "ab12",
    }
    older = json.loads(dumps(schemas))
    del older["state"]["properties"]["config_digest"]  # a server from before the digest: resumed as before
    assert served_spec_from_schemas(older)["config_digest"] is None
    del schemas["state"]["properties"]["env_id"]
    with pytest.raises(ValueError, match="lacks 'env_id'.*agentgym-turn serve env"):
        served_spec_from_schemas(schemas)


def test_a_malformed_observation_names_the_field():
    good = observation_payload("t", 1.0, False, False, {})
    for mutate, word in [
        (lambda p: p["observation"].pop("text"), "text"),
        (lambda p: p["observation"].update(info=[]), "info"),
        (lambda p: p["observation"].update(truncated=None), "truncated"),
        (lambda p: p.update(reward="1"), "reward"),
    ]:
        bad = json.loads(dumps(good))
        mutate(bad)
        with pytest.raises(ValueError, match=word):
            parse_observation_payload(bad)
    assert math.isnan(
        parse_observation_payload(json.loads(dumps(observation_payload("t", float("nan"), False, False, {}))))[1]
    )
