"""benchmarks/scheduler_throughput.py's quick path runs and its counts hold together: every workload admitted or
still waiting, no node over-committed, the devices held at the end those the last admissions asked for, one
transaction per admission at least and a conflict only where a transaction was sent."""

from __future__ import annotations

from benchmarks import scheduler_throughput as bench


def test_the_pure_layer_serves_every_queue_to_the_end():
    run = bench.measure_pure(bench.Shape(150, 3, 10))
    bench.check(run)
    assert run.admitted == 150 and run.waiting == 0
    assert run.attempts >= run.admitted and run.rounds > 1  # the queues are offered more than the fleet holds
    assert run.held_asked > 0


def test_the_moto_runs_count_requests_conflicts_and_retries_consistently():
    runs = bench.measure_moto(bench.Shape(15, 3, 3), placers=2)
    assert len(runs) == 3
    for run in runs:
        bench.check(run)
        assert run.admitted == 15 and run.waiting == 0
        assert run.transactions >= run.admitted  # one per admission, more for each retry
        assert run.conflicts + run.condition_failures <= run.transactions - run.admitted
        assert run.calls["Query"] and run.calls["GetItem"] >= run.attempts
    assert runs[0].conflicts == 0  # one placer alone never conflicts
    each = bench.arrangements()
    per_second, conflicting = bench.model(runs[0], 30, each["all on one subscription"], 30, seconds=5)
    assert 0 < per_second < 1000 / bench.LATENCY_MS["TransactWriteItems"] and 0.5 < conflicting < 1
    partitioned = bench.model(runs[0], 30, each["one subscription per placer (partitioned)"], 30, seconds=5)
    assert partitioned[0] > per_second and partitioned[1] == 0
