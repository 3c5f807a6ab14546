"""The small pieces under the output layer: the one token estimator, JSON text, schema
inference and record shrinking."""

from __future__ import annotations

import json

import pytest

from server.output import estimate_tokens, fit
from server.output.fit import clip_strings, shrink_to_fit
from server.output.jsontext import byte_size, dumps, dumps_bytes, dumps_lines
from server.output.schema import infer_schema, leaf_fields


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("é", 1), ("abcdé", 2), ("日本語", 3), ("ab日本", 3), ("\udcff", 1)],
)
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens
    if text != "\udcff":  # a lone surrogate has no UTF-8 encoding
        # a backend's raw JSON is measured as bytes by the same rule
        assert estimate_tokens(text.encode("utf-8")) == tokens


def test_json_text_is_compact_unescaped_and_always_valid() -> None:
    assert dumps({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'
    assert dumps({"n": float("nan"), "big": 2**70}) == '{"n":null,"big":1180591620717411303424}'
    text = dumps({"content": "bad \udcff byte", "é": 1})
    assert text == '{"content":"bad \\udcff byte","é":1}'
    assert json.loads(text) == {"content": "bad \udcff byte", "é": 1}
    assert dumps_bytes({"content": "x\udcff"}).decode("utf-8") == dumps({"content": "x\udcff"})
    assert dumps_lines([{"a": "é"}, 2]) == '{"a":"é"}\n2\n'.encode()
    assert dumps_lines(iter([{"a": "x\udcff"}, 2])) == b'{"a":"x\\udcff"}\n2\n'
    assert byte_size("é") == 2 and byte_size("ab") == 2
    assert byte_size("a\udcff") == 4  # a lone surrogate counts the bytes it is written in
    with pytest.raises(TypeError):
        dumps({"x": object()})


def test_schema_describes_optional_keys_and_mixed_types() -> None:
    schema = infer_schema([{"a": 1, "b": "x", "c": [{"d": None}]}, {"a": 2.5, "c": []}])
    assert schema["type"] == "object" and schema["required"] == ["a", "c"]
    assert schema["properties"]["a"] == {"type": "number"}
    assert schema["properties"]["c"]["items"]["properties"]["d"] == {"type": "null"}
    assert leaf_fields(schema) == ["a", "b", "c[].d"]
    assert infer_schema(["x", 1])["type"] == ["integer", "string"]


def test_shrink_cuts_the_largest_fields_first_and_marks_them() -> None:
    record = {"small": "keep me", "big": "y" * 50_000, "lines": ["z" * 100] * 300}
    shrunk, changed = shrink_to_fit(record, 2000, 10**6)
    assert changed and estimate_tokens(dumps(shrunk)) <= 2000
    assert shrunk["small"] == "keep me" and record["big"] == "y" * 50_000  # input untouched
    assert "…[cut " in shrunk["big"] or shrunk["lines"][-1].startswith("…[cut ")
    assert shrink_to_fit({"a": "b"}, 100, 100) == ({"a": "b"}, False)
    root, _ = shrink_to_fit("q" * 10_000, 200, 10**6)
    assert root.startswith("qqq") and "…[cut " in root and estimate_tokens(dumps(root)) <= 200
    by_bytes, _ = shrink_to_fit({"t": "é" * 5000}, 10**6, 2000)
    assert byte_size(dumps(by_bytes)) <= 2000


def test_shrink_of_many_short_members_is_not_quadratic_and_cuts_the_widest_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: every cut re-listed and re-measured every leaf, and only strings and lists could
    be cut, so one SQL row holding a map of 5,000 short values took 22 s (20,000: 414 s) of a
    server thread, and still did not fit. Now sizes are kept by difference (work counted
    here: measurements per member, not per member squared) and the map is cut to its first
    members, marked with how many were left out."""
    measured = 0
    real_size = fit._size

    def counting(value: object) -> tuple[int, int]:
        nonlocal measured
        measured += 1
        return real_size(value)

    monkeypatch.setattr(fit, "_size", counting)
    n = 5000
    row = {"id": 7, "m": {str(i): "x" * 20 for i in range(n)}}
    shrunk, changed = shrink_to_fit(row, 2000, 10**6, objects=True)
    assert changed and estimate_tokens(dumps(shrunk)) <= 2000
    assert measured <= 10 * n, measured
    assert shrunk["id"] == 7 and list(shrunk["m"])[:3] == ["0", "1", "2"]
    assert shrunk["m"][fit.CUT_KEY].startswith("…[cut ") and "members" in shrunk["m"][fit.CUT_KEY]
    kept = len(shrunk["m"]) - 1
    assert shrunk["m"][fit.CUT_KEY] == f"…[cut {n - kept} members to fit the output limit]"
    # without `objects` (the proxy's envelope) objects stay whole: a note replaces the envelope
    assert estimate_tokens(dumps(shrink_to_fit(row, 2000, 10**6)[0])) > 2000


def test_the_widest_object_is_cut_first_whatever_its_place() -> None:
    """Found in review: objects were cut in tree order, so a small object listed before the
    wide one lost every member though cutting the wide one alone fitted."""
    info = {f"field{i}": i for i in range(12)}
    wide = {f"k{i}": i for i in range(5000)}
    for record in ({"path": "p", "info": info, "wide": wide}, {"path": "p", "wide": wide, "info": info}):
        shrunk, _ = shrink_to_fit(record, 500, 2000, uncut=frozenset({"path"}), objects=True)
        assert shrunk["info"] == info and fit.CUT_KEY in shrunk["wide"]
        assert estimate_tokens(dumps(shrunk)) <= 500 and byte_size(dumps(shrunk)) <= 2000


def test_clip_strings_bounds_every_string() -> None:
    clipped = clip_strings({"a": ["x" * 500, "short"], "b": 3}, 10)
    assert clipped["a"][0].startswith("x" * 10) and "cut 490 chars" in clipped["a"][0]
    assert clipped["a"][1] == "short" and clipped["b"] == 3
