"""When a waiting job will start (issue 44 item 4; domain/calendar.py, services/common/placement.py
``Placement.estimate_starts``) as users read it: a waiting job shows ``estimatedStartTime``, its ``queuePosition``
and ``estimatedAt``; the estimate is what then happens (the job starts within one tracker check of it); open-ended
work makes it ``null`` with the reason; it moves when the fleet changes and is gone once the job is placed."""

from __future__ import annotations

from datetime import datetime

from itl_accelerator.domain.calendar import Unknown
from tests.services.conftest import Env


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def running(env: Env, name: str, devices: int, minutes: int) -> float:
    """Submit ``name`` holding ``devices`` for at most ``minutes``; it runs now. Its latest end (epoch seconds)."""
    env.submit(name, devices, 80 * devices, maxDurationMinutes=minutes)
    env.run()
    assert env.status(name) == "Running", env.job_props(name)["statusReason"]
    return env.clock() + minutes * 60


def test_a_waiting_job_says_when_it_will_start_and_then_starts_then(env: Env, node):
    ends = running(env, "first", 8, 60)
    env.clock.advance(30)
    env.submit("next", 8, 640, maxDurationMinutes=30)
    env.run()
    props = env.job_props("next")
    assert props["status"] == "Pending" and props["queuePosition"] == 1
    assert abs(epoch(props["estimatedStartTime"]) - ends) <= 1
    assert abs(epoch(props["estimatedAt"]) - env.clock()) <= 1
    # the first job runs to its maximum duration: the waiting one starts within one tracker check of the estimate
    env.clock.set(ends)
    env.end_job("first", at=ends)
    started = env.job_props("next")
    assert started["status"] == "Running"
    assert (
        abs(epoch(started["startedAt"]) - epoch(props["estimatedStartTime"])) <= env.settings.job_poll_interval_seconds
    )
    assert not {"estimatedStartTime", "queuePosition", "estimatedAt"} & started.keys()


def test_the_jobs_behind_see_the_ones_ahead_in_queue_order(env: Env, node):
    ends = running(env, "first", 8, 60)
    env.submit("high", 8, 640, maxDurationMinutes=120, priority=9)
    env.submit("low", 4, 320, maxDurationMinutes=30, priority=1)
    env.run()
    high, low = env.job_props("high"), env.job_props("low")
    assert (high["queuePosition"], low["queuePosition"]) == (1, 2)
    assert abs(epoch(high["estimatedStartTime"]) - ends) <= 1
    assert abs(epoch(low["estimatedStartTime"]) - (ends + 120 * 60)) <= 1  # after the whole node's next holder


def test_open_ended_work_in_the_way_leaves_the_start_unknown_saying_why(env: Env, node):
    accepted, _ = env.provision("llama", devices=8, memory_gb=640)
    assert accepted is not None
    env.run()
    env.submit("j", 2, 160)
    env.run()
    props = env.job_props("j")
    assert props["status"] == "Pending" and props["estimatedStartTime"] is None
    assert props["estimatedStartReason"] == str(Unknown.OPEN_ENDED) and props["queuePosition"] == 1


def test_a_higher_priority_job_submitted_later_moves_the_estimate_back(env: Env, node):
    env.add_node("dgx-2")
    first_ends = running(env, "first", 8, 60)
    second_ends = running(env, "second", 8, 120)
    env.submit("waiting", 8, 640, maxDurationMinutes=30, priority=5)
    env.run()
    before = env.job_props("waiting")
    assert before["queuePosition"] == 1 and abs(epoch(before["estimatedStartTime"]) - first_ends) <= 1
    env.clock.advance(120)
    env.submit("urgent", 8, 640, maxDurationMinutes=45, priority=9)  # served first: takes the node freed first
    env.run()
    after = env.job_props("waiting")
    assert after["queuePosition"] == 2
    moved = min(first_ends + 45 * 60, second_ends)
    assert abs(epoch(after["estimatedStartTime"]) - moved) <= 1
    assert epoch(after["estimatedAt"]) > epoch(before["estimatedAt"])


def test_the_submitter_sees_the_estimate_of_its_own_job(env: Env, node):
    running(env, "first", 8, 60)
    ann = env.consumer("ann")
    env.submit("mine", 8, 640, ctx=ann, maxDurationMinutes=30)
    env.run()
    shown = env.w.jobs.get(env.consumer("ann"), env.sub, "rg1", "mine")["properties"]
    assert shown["queuePosition"] == 1 and shown["estimatedStartTime"] is not None
