"""How a failure is named to the agent (issue 40.6): the server's own errors each carry their code
and hint; the tables that map the engine's and the session store's errors, which the server
cannot subclass, answer every entry (none shadowed by an earlier, more general one)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from search_engine import IndexDamagedError, IndexStoreError, PathError, PathOutsideRootError, SearchError
from server.errors import (
    _CURSOR_REFUSALS,
    _MAPPED_ERRORS,
    REFUSALS,
    TOOL_ERRORS,
    InvalidParamsError,
    ServerError,
    error_result,
    server_errors,
)


def shadowed(types: Sequence[type[BaseException]]) -> list[tuple[type[BaseException], type[BaseException]]]:
    """(entry, earlier entry) for each entry a subclass of an earlier one: matching the first
    entry an error is an instance of, the later one would never answer."""
    return [(later, earlier) for i, later in enumerate(types) for earlier in types[:i] if issubclass(later, earlier)]


def test_shadowed_finds_an_entry_after_its_base() -> None:
    assert shadowed([SearchError, PathError, PathOutsideRootError]) == [
        (PathError, SearchError),
        (PathOutsideRootError, SearchError),
        (PathOutsideRootError, PathError),
    ]
    assert shadowed([IndexDamagedError, IndexStoreError, SearchError]) == []


@pytest.mark.parametrize(
    "table",
    [[t for t, _, _ in _MAPPED_ERRORS], [t for t, _ in _CURSOR_REFUSALS]],
    ids=["tool errors", "cursor refusals"],
)
def test_no_mapped_error_is_shadowed_by_an_earlier_entry(table: list[type[BaseException]]) -> None:
    assert shadowed(table) == [], "put the more specific class first"


def test_every_server_error_class_says_its_own_code_and_hint() -> None:
    classes = server_errors()
    assert len(classes) >= 10, classes  # the walk reaches subclasses of subclasses
    for cls in classes:
        # its own, not inherited: a subclass without them would answer with its parent's code
        assert isinstance(vars(cls).get("code"), str) and cls.code, cls
        assert isinstance(vars(cls).get("hint"), str) and cls.hint, cls
    codes = [cls.code for cls in classes] + [code for _, code, _ in _MAPPED_ERRORS]
    assert len(codes) == len(set(codes)), codes
    assert InvalidParamsError.hint == REFUSALS[InvalidParamsError.code]


@pytest.mark.parametrize("cls", [c for c in server_errors() if not issubclass(c, InvalidParamsError)])
def test_a_server_error_answers_with_its_class_code_and_hint(cls: type[ServerError]) -> None:
    error = (error_result(cls("what went wrong")).structured_content or {})["error"]
    assert error == {"code": cls.code, "message": "what went wrong", "hint": cls.hint}
    assert TOOL_ERRORS[cls.code] == cls.hint


def test_a_refusal_carries_the_code_and_hint_it_was_given() -> None:
    refusal = InvalidParamsError("stale", {"reason": "x"}, code="results_changed")
    assert (refusal.code, refusal.hint) == ("results_changed", REFUSALS["results_changed"])
    assert refusal.data == {"code": "results_changed", "hint": REFUSALS["results_changed"], "reason": "x"}
    assert InvalidParamsError.code == "invalid_arguments"  # the class's own stays the default
