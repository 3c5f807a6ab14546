"""How long a search waits for the fold of a change the live layer does not take (a burst, here
any change: `live_limit` 0), with a real watcher on a real tree and an injected clock: it waits
up to its bound only when the fold can end by then, judged by how long the last fold took. On
a large tree a fold takes seconds, and every search of a checkout waited its whole bound in
vain (0.5 s of each, at 8x sympy)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from search_engine.live.read_your_writes import LiveRoot
from search_engine.live.watcher import watch


class Folds:
    """A fold that takes `seconds` of the injected clock, and that clock. With `hold` set, a
    fold sets `entered` and waits for `hold` to be cleared... by `release`."""

    def __init__(self) -> None:
        self.now = 0.0
        self.seconds = 5.0
        self.count = 0
        self.hold = False
        self.entered = threading.Event()
        self.released = threading.Event()

    def clock(self) -> float:
        return self.now

    def fold(self) -> None:
        self.now += self.seconds
        if self.hold:
            self.entered.set()
            assert self.released.wait(60)
        self.count += 1


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    return root


@pytest.fixture
def folds() -> Folds:
    return Folds()


@pytest.fixture
def live(tmp_path: Path, tree: Path, folds: Folds) -> Iterator[LiveRoot]:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    live = LiveRoot(folds.fold, watch(tree, private, clock=folds.clock), wait_s=1.0, clock=folds.clock)
    yield live
    folds.released.set()
    assert live.wait_idle(60)
    live.close()


def test_a_search_does_not_wait_for_a_fold_that_cannot_end_within_its_bound(
    live: LiveRoot, tree: Path, folds: Folds
) -> None:
    assert live.settle().state == "current"  # the first full check: nothing to judge by, waited for
    assert folds.count == 1
    (tree / "a.py").write_text("x = 2\n")
    during = live.settle()  # the last fold took 5 s, the bound is 1 s: it answers at once
    assert during.state == "updating" and during.pending == frozenset({"a.py"})
    assert live.wait_idle(60) and folds.count == 2
    assert live.settle().state == "current"


def test_a_fold_that_can_end_in_time_is_waited_for(live: LiveRoot, tree: Path, folds: Folds) -> None:
    folds.seconds = 0.25
    assert live.settle().state == "current"
    (tree / "a.py").write_text("x = 2\n")
    assert live.settle().state == "current"  # the last fold took 0.25 s: within the 1 s bound
    assert folds.count == 2


@pytest.mark.timeout(30)  # before the rule, the second search waited its whole 1,000 s bound
def test_a_fold_running_longer_than_the_last_one_is_not_waited_for(tmp_path: Path, tree: Path, folds: Folds) -> None:
    """A checkout's fold (1,000 files) after a fold of a few: once it has run longer than the
    last fold took, no search waits for it, however long the bound."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    live = LiveRoot(folds.fold, watch(tree, private, clock=folds.clock), wait_s=1000.0, clock=folds.clock)
    try:
        folds.seconds = 2.0
        assert live.settle().state == "current"  # the last fold took 2 s
        folds.seconds, folds.hold = 3.0, True
        (tree / "a.py").write_text("x = 2\n")
        # The first search after the edit expects the fold within 2 s and waits (on a thread).
        first: list[str] = []
        waiting = threading.Thread(target=lambda: first.append(live.settle().state))
        waiting.start()
        assert folds.entered.wait(60)
        second = live.settle()  # the fold has run 3 s, longer than the last: not waited for
        assert second.state == "updating" and second.pending == frozenset({"a.py"})
        folds.released.set()
        waiting.join(60)
        assert first == ["current"] and live.wait_idle(60) and live.settle().state == "current"
    finally:
        folds.released.set()
        live.close()


def test_a_fold_learns_that_an_update_made_meanwhile_covered_it(live: LiveRoot, tree: Path, folds: Folds) -> None:
    """An update made outside the fold (the server's start-up check, `reindex`) while the fold
    waits covers what it was started for: `round_covered` says so, and the fold may skip its walk.
    A background verification is never covered: walking is its point."""
    assert live.settle().state == "current"
    folds.hold = True
    (tree / "a.py").write_text("x = 2\n")
    waiting = threading.Thread(target=live.settle)
    waiting.start()
    assert folds.entered.wait(60)
    assert not live.round_covered()
    live.folded_through(live.snapshot())
    assert live.round_covered()
    folds.released.set()
    waiting.join(60)
    assert live.wait_idle(60) and not live.round_covered()  # no fold running

    folds.entered.clear()
    folds.released.clear()
    folds.now += 1000.0  # a background verification is due
    assert live.settle().state == "current"
    assert folds.entered.wait(60)
    live.folded_through(live.snapshot())
    assert not live.round_covered()
    folds.released.set()
