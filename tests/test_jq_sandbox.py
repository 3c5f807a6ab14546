"""jq_filter: both filter styles work on libjq (the `jq` binding, in a child process; no jq
program installed or on PATH); anything that reaches outside the records is refused before jq
runs; runaway filters are stopped by time, memory and output limits."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from infra import Slots
from server.errors import JqFilterError, JqTimeoutError
from server.jq import apply_jq, check_expression
from server.settings import JqSettings
from tests.output_helpers import make_records
from tests.slot_helpers import Overlap, all_slots_taken, counted_popens, run_at_once

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


@pytest.mark.slow
def test_runaway_filters_are_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()
    with pytest.raises(JqTimeoutError, match=r"longer than 0.5 s"):
        apply_jq(RECORDS, "def f: f; f", limits=JqSettings(timeout_s=0.5))
    assert time.monotonic() - started < 5
    monkeypatch.setattr("server.jq.sandbox.MEMORY_MB", 64)
    with pytest.raises(JqFilterError, match="64 MiB memory limit"):
        apply_jq(RECORDS, "[range(1e9)] | length", limits=JqSettings(timeout_s=30))
    with pytest.raises(JqFilterError, match="more than 1 MiB"):
        apply_jq(RECORDS, "range(1e9)", max_output_bytes=1 << 20)


def test_no_more_workers_than_the_cap_run_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """8 concurrent filters took +704 MB (found by an audit): each worker has its memory cap,
    and nothing bounded how many ran. With a cap of 2, five filters never have more than 2
    workers running, and each gets its own answer."""
    calls, cap = 5, 2
    overlap = Overlap(calls, cap)
    counted_popens(monkeypatch, overlap, hold=True)
    workers = Slots(cap, overlap)
    results = run_at_once(
        calls, lambda k: apply_jq(RECORDS, f"map(.match.score + {k})", limits=JqSettings(timeout_s=60), workers=workers)
    )
    assert overlap.most == cap and overlap.now == 0
    assert results == {k: [r["match"]["score"] + k for r in RECORDS] for k in range(calls)}


def test_a_filter_that_waits_out_its_timeout_for_a_worker_fails_saying_the_server_was_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A filter over the cap waits for a worker within its own timeout, then fails with the
    jq timeout error, starting no worker (never hangs, never dropped); the slot it never had
    is not given back, so the next filter still waits for the running one."""
    busy = r"waited 5 s for a worker and was not run: the server was busy with other filters \(it runs 1 at once"
    with all_slots_taken(monkeypatch, step=6.0) as (workers, overlap):  # the waiter's time is up at its first look
        for _ in range(2):  # the second: the first gave back no slot
            with pytest.raises(JqTimeoutError, match=busy):
                apply_jq(RECORDS, "map(.match.score)", limits=JqSettings(timeout_s=5), workers=workers)
    assert overlap.most == 0
    assert apply_jq(RECORDS, "length", workers=workers) == [len(RECORDS)]
