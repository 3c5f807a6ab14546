"""jq_filter: both filter styles work on libjq (the `jq` binding, in a child process; no jq
program installed or on PATH); anything that reaches outside the records is refused before jq
runs; runaway filters are stopped by time, memory and output limits."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from server.errors import JqFilterError, JqTimeoutError
from server.jq import apply_jq, check_expression
from tests.output_helpers import make_records

RECORDS = make_records(30, scored=True)


def test_array_and_stream_styles_give_the_same_list() -> None:
    expected = [r for r in RECORDS if r["match"]["score"] > 0.5]
    assert apply_jq(RECORDS, "map(select(.match.score > 0.5))") == expected
    assert apply_jq(RECORDS, ".[] | select(.match.score > 0.5)") == expected
    assert apply_jq(RECORDS, '[.[] | select(.file.path | test("\\\\.go$"))] | length') == [
        sum(r["file"]["path"].endswith(".go") for r in RECORDS)
    ]
    assert apply_jq([], "map(.)") == []


@pytest.mark.parametrize(
    "expression",
    [
        "env",
        "env.HOME",
        "$ENV",
        "$ENV.PATH",
        "$ ENV",
        "{$ENV}",
        '"\\(env)"',
        '"a\\("b" + "\\(input_filename)")c"',
        "input_filename",
        "$__loc__",
        "$ __loc__",
        "input",
        "[inputs]",
        ".[] | debug",
        '"x" | stderr',
        'import "foo" as foo; .',
        'include "foo"; .',
        '"foo" | modulemeta',
        "get_search_list",
        'halt_error("x")',
        "def f: env; f",
        "# comment\nenv",
    ],
)
def test_reaching_outside_the_records_is_refused(expression: str) -> None:
    with pytest.raises(JqFilterError, match="may not use"):
        apply_jq(RECORDS, expression)


@pytest.mark.parametrize(
    "expression",
    [
        "map(.env)",
        '.[] | select(.match.content | test("env|input"))',
        '"env: \\(.[0].type)"',
        "# env\n.",
        'map(."env")',
    ],
)
def test_the_same_words_as_data_or_field_names_are_fine(expression: str) -> None:
    check_expression(expression)
    apply_jq([{"env": 1, "match": {"content": "x"}, "type": "t"}], expression)


def test_even_a_name_the_check_missed_sees_an_empty_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence in depth: with the name check switched off, jq itself finds no environment."""
    monkeypatch.setenv("CODEPAGER_TEST_SECRET", "s3cret")
    monkeypatch.setattr("server.jq.sandbox.check_expression", lambda expression: None)
    assert apply_jq(RECORDS, "$ENV") == [{}]
    assert apply_jq(RECORDS, "env | length") == [0]


def test_even_with_the_name_check_off_no_file_or_other_input_is_reachable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Defence in depth: libjq runs with no input file name, no further inputs and an empty
    working directory, so a module next to the server (its cwd) cannot be included."""
    monkeypatch.setattr("server.jq.sandbox.check_expression", lambda expression: None)
    (tmp_path / "secret.jq").write_text('def leak: "s3cret";')
    monkeypatch.chdir(tmp_path)
    assert apply_jq(RECORDS, "input_filename") == [None]
    assert apply_jq(RECORDS, "[inputs]") == []  # one array out: the array itself
    for expression in ['include "secret"; leak', 'import "secret" as s; s::leak']:
        with pytest.raises(JqFilterError, match="module not found"):
            apply_jq(RECORDS, expression)


def test_needs_no_jq_program_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert apply_jq(RECORDS, "map(.match.score) | max") == [max(r["match"]["score"] for r in RECORDS)]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("map(", "does not compile"),
        ('"open', "unterminated string"),
        ("", "empty"),
        (".[] | .nope.deeper + 1 | error", "run time"),
        ("x" * 10_001, "longer than"),
    ],
)
def test_bad_filters_get_clear_errors(expression: str, message: str) -> None:
    with pytest.raises(JqFilterError, match=message):
        apply_jq(RECORDS, expression)


def test_runaway_filters_are_stopped() -> None:
    started = time.monotonic()
    with pytest.raises(JqTimeoutError, match=r"longer than 0.5 s"):
        apply_jq(RECORDS, "def f: f; f", timeout_s=0.5)
    assert time.monotonic() - started < 5
    with pytest.raises(JqFilterError, match="memory limit"):
        apply_jq(RECORDS, "[range(1e9)] | length", timeout_s=30, memory_mb=64)
    with pytest.raises(JqFilterError, match="more than 1 MiB"):
        apply_jq(RECORDS, "range(1e9)", max_output_bytes=1 << 20)
