"""`Slots`: a call stops waiting for a slot at its deadline, or when something interrupts its
wait, and in neither case gives back a slot it never had."""

from __future__ import annotations

import pytest

from infra import Slots


class Interrupted(Exception):
    """What stops a waiting call here: its clock raising, as a thread interrupted mid-wait would."""


def test_a_call_that_stops_waiting_gives_back_no_slot() -> None:
    interrupt = [False]

    def clock() -> float:
        if interrupt[0]:
            raise Interrupted
        return 0.0

    slots = Slots(1, clock)
    with slots.hold(1.0, AssertionError):
        interrupt[0] = True
        with pytest.raises(Interrupted), slots.hold(1.0, AssertionError):
            pass
        interrupt[0] = False
        for _ in range(2):  # at its deadline; the second finds the slot still taken
            with pytest.raises(TimeoutError), slots.hold(0.0, TimeoutError):
                pass
    # a free slot had at the deadline, with no time left to use it, is given back
    with pytest.raises(TimeoutError), slots.hold(0.0, TimeoutError):
        pass
    with slots.hold(1.0, AssertionError), pytest.raises(TimeoutError), slots.hold(0.0, TimeoutError):
        pass


def test_a_slot_needs_one() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        Slots(0)
