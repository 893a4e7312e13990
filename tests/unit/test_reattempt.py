"""The bounded optimistic-concurrency retry: again while the write's condition failed, never past its budget."""

from __future__ import annotations

import pytest

from itl_accelerator.services.common.reattempt import reattempt


class Raced(Exception):
    pass


class GaveUp(Exception):
    pass


def test_it_answers_as_soon_as_an_attempt_succeeds() -> None:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Raced
        return "done"

    assert reattempt(attempt, on=Raced, attempts=3, exhausted=GaveUp) == "done"
    assert len(calls) == 3


def test_past_its_attempts_it_raises_the_exhausted_error_caused_by_the_last_race() -> None:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        raise Raced(len(calls))

    with pytest.raises(GaveUp) as raised:
        reattempt(attempt, on=Raced, attempts=2, exhausted=GaveUp)
    assert len(calls) == 2 and raised.value.__cause__.args == (2,)  # type: ignore[union-attr]


def test_another_error_is_not_retried() -> None:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        raise KeyError("no")

    with pytest.raises(KeyError):
        reattempt(attempt, on=Raced, attempts=5, exhausted=GaveUp)
    assert len(calls) == 1


def test_no_attempt_at_all_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        reattempt(lambda: 1, on=Raced, attempts=0, exhausted=GaveUp)


def test_without_exhausted_the_last_race_itself_is_raised() -> None:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        raise Raced(len(calls))

    with pytest.raises(Raced) as raised:
        reattempt(attempt, on=Raced, attempts=3)
    assert len(calls) == 3 and raised.value.args == (3,)
