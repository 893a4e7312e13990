"""Placement (services/common/placement.py) as the job lifecycle drives it: admission, best fit, the waiting queue
(priority, submission order, backfill), the starvation drain, and a node written between placement's read and its
reservation."""

from __future__ import annotations

from decimal import Decimal

import pytest

from itl_accelerator.domain.states import JobStatus
from tests.services.conftest import Allocation, Env


def running_on(env: Env, name: str) -> str:
    """The node a running job is on (its name)."""
    assert env.status(name) == "Running", env.job_props(name)["statusReason"]
    return env.job_props(name)["assignedNode"].rsplit("/", 1)[-1]


# ------------------------------------------------------------------------------------------------ admission
def test_a_job_in_a_subscription_without_nodes_fails_at_once_as_inadmissible(env):
    accepted = env.submit("j", 1, 80)
    env.run()
    props = env.job_props("j")
    assert props["status"] == "Failed"
    assert props["statusReason"] == "Inadmissible: The subscription has no nodes."
    operation = env.operation(accepted.operation_id)
    assert operation.status == "Failed" and operation.body["error"]["code"] == "JobFailed"
    assert env.dgx.jobs == {}


@pytest.mark.parametrize(
    ("devices", "memory_gb", "props", "why"),
    [
        (16, 1280, {}, "the largest node has 8 GPUs and 640 GiB"),
        (1, 80, {"gpuModel": "B200"}, "No node of the subscription has GPU model 'b200'."),
        (1, 80, {"location": "westeurope"}, "No node of the subscription has location 'westeurope'."),
        (1, 200, {}, "the largest node has 8 GPUs and 640 GiB"),  # more GPU memory than one GPU carries
    ],
    ids=["too-many-gpus", "no-such-model", "no-such-location", "too-much-memory-per-gpu"],
)
def test_a_job_no_node_could_ever_hold_fails_at_once_saying_why(env, node, devices, memory_gb, props, why):
    env.submit("big", devices, memory_gb, **props)
    env.run()
    done = env.job_props("big")
    assert done["status"] == "Failed" and done["statusReason"].startswith("Inadmissible: ")
    assert why in done["statusReason"]
    assert "assignedNode" not in done and done["gpuSeconds"] == 0 and "cost" not in done
    assert env.allocation() == Allocation(0, 0)


def test_a_job_that_only_waits_for_capacity_is_admitted_and_waits(env):
    env.add_node(availability="Cordoned")
    env.submit("j", 2, 160)
    env.run()
    job = env.job("j")
    assert job.status == JobStatus.PENDING and job.queued and job.task_token
    assert env.job_props("j")["statusReason"].startswith("Waiting for capacity: no node of the subscription has 2 free")


# ------------------------------------------------------------------------------------------------ best fit
def test_best_fit_prefers_the_node_left_fullest(env):
    env.add_node("big", devices=8)
    env.add_node("small", devices=4)
    env.add_node("medium", devices=6)
    env.submit("fit", 3, 240)
    env.run()
    # the small node is left with 1 free GPU; the others would keep 3 or 5
    assert running_on(env, "fit") == "small"
    assert env.allocation("small") == Allocation(3, 240)
    assert env.allocation("big") == env.allocation("medium") == Allocation(0, 0)


def test_best_fit_counts_what_a_node_already_holds(env):
    env.add_node("busy", devices=8)
    env.add_node("idle", devices=4)
    env.submit("first", 6, 480)
    env.run()
    assert running_on(env, "first") == "busy"
    # 2 GPUs: the busy node keeps 0 free, the idle one would keep 2
    env.submit("second", 2, 160)
    env.run()
    assert running_on(env, "second") == "busy"
    assert env.allocation("busy") == Allocation(8, 640)


def test_best_fit_only_considers_nodes_that_meet_the_jobs_constraints(env):
    env.add_node("h100-small", devices=2, model="H100")
    env.add_node("h200", devices=8, model="H200", gpu_memory_gb=141)
    env.add_node("far", devices=2, model="H200", gpu_memory_gb=141, location="westeurope")
    env.submit("j", 1, 100, gpuModel="H200", location="East US")
    env.run()
    assert running_on(env, "j") == "h200"


def test_a_job_locks_the_billing_terms_of_the_node_it_is_placed_on(env):
    env.add_node("cheap", devices=8, price=1.25, increment=1, minimum=0)
    env.submit("j", 2, 160)
    env.run()
    job = env.job("j")
    assert job.billing_terms is not None and job.billing_terms.price_per_gpu_hour == Decimal("1.25")
    terms = env.job_props("j")["billingTerms"]
    assert terms["pricePerGpuHour"] == 1.25 and terms["billingIncrementSeconds"] == 1
    # a later price change does not reprice it
    env.patch_node("cheap", {"properties": {"pricing": {"pricePerGpuHour": 9.0}}})
    assert env.job("j").billing_terms.price_per_gpu_hour == Decimal("1.25")


# ------------------------------------------------------------------------------------------------ the queue
def fill_node(env: Env, name: str = "a", devices: int = 8) -> None:
    """A job holding ``devices`` GPUs of the node, running until ended."""
    env.submit(name, devices, devices * 80)
    env.run()
    assert env.status(name) == "Running"


def test_waiting_jobs_are_served_by_priority_first(env, node):
    fill_node(env)
    env.clock.advance(10)
    env.submit("low", 8, 640, priority=1)
    env.clock.advance(10)
    env.submit("high", 8, 640, priority=9)
    env.run()
    assert env.status("low") == env.status("high") == "Pending"
    # When the running job ends and frees the node
    env.clock.advance(60)
    env.end_job("a")
    # Then the job of higher priority gets it, though it came later
    assert env.status("high") == "Running" and env.status("low") == "Pending"
    assert env.job("low").queued and env.job("low").task_token


def test_waiting_jobs_of_equal_priority_are_served_in_submission_order(env, node):
    fill_node(env)
    env.clock.advance(10)
    env.submit("second-name-first", 8, 640)  # submitted first, named to sort last
    env.clock.advance(10)
    env.submit("a-later", 8, 640)
    env.run()
    env.clock.advance(60)
    env.end_job("a")
    assert env.status("second-name-first") == "Running" and env.status("a-later") == "Pending"


def test_a_small_job_backfills_while_a_large_one_waits_then_the_large_one_runs(env, node):
    fill_node(env, devices=6)
    env.submit("large", 4, 320, priority=9)
    env.run()
    assert env.status("large") == "Pending"
    # When a job that fits now comes, it runs now: not held behind the large one
    env.submit("small", 2, 160)
    env.run()
    assert env.status("small") == "Running" and env.status("large") == "Pending"
    assert env.allocation() == Allocation(8, 640)
    # And the large one runs once the first frees its GPUs
    env.clock.advance(120)
    env.end_job("a")
    assert env.status("large") == "Running"
    assert env.allocation() == Allocation(6, 480)


def test_a_job_starving_at_the_head_of_the_queue_has_a_node_drained_for_it(env, node):
    # Given a 6-GPU job running, and a 4-GPU job waiting at the head of the queue
    fill_node(env, devices=6)
    env.clock.advance(10)
    env.submit("starving", 4, 320)
    env.run()
    assert env.status("starving") == "Pending"
    # When it has waited longer than JOB_STARVATION_SECONDS and the waiting jobs are served again (the reconciler's
    # periodic retry of placement)
    env.clock.advance(env.settings.job_starvation_seconds + 1)
    report = env.w.reconciler.run()
    assert report.still_running == 1
    drained = env.job("starving").drain_node
    assert drained is not None and drained.name == "dgx-1"
    # Then a job that would fit in the 2 free GPUs is not placed there: the node is kept for the starving job
    env.submit("small", 2, 160)
    env.run()
    assert env.status("small") == "Pending" and env.allocation() == Allocation(6, 480)
    # And once the running job ends, the starving job is placed first, then the small one, and the drain ends
    env.clock.advance(60)
    env.end_job("a")
    assert env.status("starving") == "Running" and env.status("small") == "Running"
    assert env.job("starving").drain_node is None
    assert env.allocation() == Allocation(6, 480)


def test_a_starving_job_canceled_ends_its_drain_and_the_jobs_it_held_back_run_at_once(env, node):
    fill_node(env, devices=6)
    env.clock.advance(10)
    env.submit("starving", 4, 320)
    env.run()
    env.clock.advance(env.settings.job_starvation_seconds + 1)
    env.w.reconciler.run()
    env.submit("small", 2, 160)
    env.run()
    assert env.status("small") == "Pending"
    # When the starving job is canceled
    env.w.jobs.cancel(env.admin(), env.sub, "rg1", "starving")
    env.run()
    # Then the node is no longer kept for it: the small job, which fits, runs
    assert env.status("starving") == "Canceled"
    assert env.status("small") == "Running"


def test_before_starving_a_waiting_job_does_not_hold_back_others(env, node):
    fill_node(env, devices=6)
    env.submit("waiting", 4, 320)
    env.run()
    env.clock.advance(env.settings.job_starvation_seconds - 60)
    env.w.reconciler.run()
    assert env.job("waiting").drain_node is None
    env.submit("small", 2, 160)
    env.run()
    assert env.status("small") == "Running"


# ------------------------------------------------------------------------------------------------ read, then write
def test_a_node_repriced_between_placements_read_and_its_reservation_locks_the_new_price(env, node):
    # Given the node's price changes right after placement read its candidates (at 2.50), for a job whose stated
    # price ceiling (maxPrice) admits the new price
    def reprice(candidates: object) -> None:
        env.patch_node("dgx-1", {"properties": {"pricing": {"pricePerGpuHour": 4.0}}})

    env.nodes_hooks.after["candidates"] = reprice
    env.submit("j", 2, 160, maxPrice={"pricePerGpuHour": 5, "currency": "USD"})
    env.run()
    # Then the reservation is refused as stale, the node read again, and the job placed at the price now in force
    assert env.status("j") == "Running"
    assert env.job("j").billing_terms.price_per_gpu_hour == Decimal("4")
    assert env.job_props("j")["billingTerms"]["pricePerGpuHour"] == 4.0
    meter = env.meter(str(env.job("j").operation_id))
    assert meter is not None and meter.terms.price_per_gpu_hour == Decimal("4")
    assert env.allocation() == Allocation(2, 160)


def test_a_node_repriced_above_the_ceiling_between_read_and_reservation_is_passed_over(env, node):
    """The same race without a stated ceiling: the job's ceiling is the 2.50 in force when it was submitted, so the
    node read again at 4.00 is not taken — the job waits, saying why (issue 26)."""

    def reprice(candidates: object) -> None:
        env.patch_node("dgx-1", {"properties": {"pricing": {"pricePerGpuHour": 4.0}}})

    env.nodes_hooks.after["candidates"] = reprice
    env.submit("j", 2, 160)
    env.run()
    assert env.status("j") == "Pending" and env.allocation() == Allocation(0, 0)
    assert env.job_props("j")["statusReason"].startswith("Waiting for a node within its price ceiling")


def test_a_candidate_that_filled_up_after_it_was_read_is_passed_over_for_the_next(env):
    env.add_node("small", devices=4)
    env.add_node("big", devices=8)

    # Given an instance takes the small node's GPUs right after placement read it as the best fit
    def fill_small(candidates: object) -> None:
        accepted, _ = env.provision("squatter", "small", devices=2, memory_gb=160)
        assert accepted is not None

    env.nodes_hooks.after["candidates"] = fill_small
    env.submit("j", 3, 240)
    env.run()
    # Then the job goes to the next candidate; nothing is over-committed
    assert running_on(env, "j") == "big"
    assert env.allocation("small") == Allocation(2, 160, 1)
    assert env.allocation("big") == Allocation(3, 240)


def test_capacity_is_never_over_committed_by_many_jobs(env):
    env.add_node("n1", devices=8)
    env.add_node("n2", devices=4)
    names = [f"job-{i}" for i in range(8)]
    for i, name in enumerate(names):
        env.submit(name, 1 + i % 4, 80 * (1 + i % 4))
        env.clock.advance(1)
    env.run()
    running = [n for n in names if env.status(n) == "Running"]
    held = {n: env.allocation(n) for n in ("n1", "n2")}
    assert held["n1"].devices <= 8 and held["n2"].devices <= 4
    assert sum(a.devices for a in held.values()) == sum(env.job(j).devices for j in running)
    # And as each running job ends, the waiting ones run, until every job has run once
    for _ in names:
        running = [n for n in names if env.status(n) == "Running"]
        if not running:
            break
        env.clock.advance(60)
        env.end_job(running[0])
        assert env.allocation("n1").devices <= 8 and env.allocation("n2").devices <= 4
    assert [env.status(n) for n in names] == ["Succeeded"] * len(names)
    assert env.allocation("n1") == env.allocation("n2") == Allocation(0, 0)


# ------------------------------------------------------------------------------------------------ price ceiling
def serve_queue(env: Env) -> None:
    """What a fleet change or a release does: serve the subscription's waiting jobs; then the workflows go on."""
    env.w.placement.dispatch(env.admin(), env.sub)
    env.run()


def test_a_waiting_job_is_never_placed_at_a_price_set_after_it_was_submitted(env, node):
    """Issue 26's case: while a consumer's 2-second job waited, its supplier re-priced the node to 1,000,000 EUR per
    GPU-hour with a one-hour increment and minimum, and the job was billed 1,000,000 EUR when it was placed."""
    fill_node(env, "big")
    env.submit("short", 1, 80, ctx=env.consumer("ann"), workload={"image": "busybox", "command": ["sleep", "2"]})
    env.run()
    ceiling = env.job_props("short")["priceCeiling"]
    assert ceiling["basis"] == "PricesAtSubmission" and ceiling["terms"] == [
        {"pricePerGpuHour": 2.5, "currency": "USD", "billingIncrementSeconds": 60, "minimumBillableSeconds": 60}
    ]
    hostile = {"currency": "EUR", "pricePerGpuHour": 1_000_000, "billingIncrementSeconds": 3600,
               "minimumBillableSeconds": 3600}  # fmt: skip
    env.patch_node("dgx-1", {"properties": {"pricing": hostile}}, ctx=env.supplier())
    env.end_job("big")
    serve_queue(env)
    props = env.job_props("short")
    assert props["status"] == "Pending" and env.allocation() == Allocation(0, 0)
    assert props["statusReason"] == (
        "Waiting for a node within its price ceiling: 1 node with room now bills above it (the lowest: 1000000 EUR "
        "per GPU-hour (3600 s increments, 3600 s minimum)); the job's price ceiling is 2.5 USD per GPU-hour (60 s "
        "increments, 60 s minimum)."
    )
    # a price back within the ceiling serves it, at that price
    env.patch_node("dgx-1", {"properties": {"pricing": {"currency": "USD", "pricePerGpuHour": 2.0,
                                                         "billingIncrementSeconds": 60, "minimumBillableSeconds": 60}}},
                   ctx=env.supplier())  # fmt: skip
    serve_queue(env)
    assert env.status("short") == "Running"
    assert env.job_props("short")["billingTerms"]["pricePerGpuHour"] == 2.0


def test_the_default_ceiling_is_every_undominated_price_of_the_nodes_that_could_hold_the_job(env):
    env.add_node("a", price=2.0, increment=60, minimum=60)
    env.add_node("b", price=3.0, increment=1, minimum=0)
    env.add_node("c", price=1.0, currency="EUR", increment=3600, minimum=3600)
    env.add_node("a-twin", price=2.0, increment=30, minimum=30)  # dominated by a
    env.add_node("other-model", model="H200", gpu_memory_gb=141, price=10.0)  # the job asks for an H100
    env.add_node("too-small", devices=1, price=50.0)  # cannot hold 2 GPUs
    env.add_node("cordoned", price=2.5, increment=1, minimum=0, availability="Cordoned")  # counts: it may come back
    env.submit("j", 2, 160, gpuModel="H100")
    terms = [(t["pricePerGpuHour"], t["currency"], t["billingIncrementSeconds"], t["minimumBillableSeconds"])
             for t in env.job_props("j")["priceCeiling"]["terms"]]  # fmt: skip
    assert terms == [(3.0, "USD", 1, 0), (2.0, "USD", 60, 60), (1.0, "EUR", 3600, 3600)]


@pytest.mark.parametrize(
    ("pricing", "eligible"),
    [
        ({"pricePerGpuHour": 2.0, "billingIncrementSeconds": 30, "minimumBillableSeconds": 30}, True),  # within a
        ({"pricePerGpuHour": 3.0, "billingIncrementSeconds": 60, "minimumBillableSeconds": 60}, False),  # none holds
        ({"pricePerGpuHour": 1.0, "billingIncrementSeconds": 3600, "minimumBillableSeconds": 3600}, False),  # USD
        ({"currency": "EUR", "pricePerGpuHour": 0.5, "billingIncrementSeconds": 60, "minimumBillableSeconds": 0}, True),
    ],
)
def test_a_node_is_eligible_only_within_one_member_of_the_ceiling(env, pricing, eligible):
    env.add_node("a", price=2.0, increment=60, minimum=60)
    env.add_node("b", price=3.0, increment=1, minimum=0)
    env.add_node("c", price=1.0, currency="EUR", increment=3600, minimum=3600)
    for name in ("a", "b", "c"):
        env.patch_node(name, {"properties": {"availability": "Cordoned"}})
    env.submit("j", 2, 160)
    env.run()
    env.add_node("new", price=1.0)
    env.patch_node("new", {"properties": {"pricing": {"currency": "USD", **pricing}}})
    serve_queue(env)
    assert (env.status("j") == "Running") is eligible


def test_a_stated_max_price_bounds_the_price_and_the_rounding_only_when_stated(env):
    env.add_node("hourly", price=2.9, increment=3600, minimum=3600)
    env.submit("any-rounding", 1, 80, maxPrice={"pricePerGpuHour": 3, "currency": "USD"})
    env.submit("per-minute", 1, 80, maxPrice={"pricePerGpuHour": 3, "currency": "USD", "billingIncrementSeconds": 60})
    env.submit("too-low", 1, 80, maxPrice={"pricePerGpuHour": 2.5, "currency": "USD"})
    env.submit("euro", 1, 80, maxPrice={"pricePerGpuHour": 100, "currency": "EUR"})
    env.run()
    assert [env.status(j) for j in ("any-rounding", "per-minute", "too-low", "euro")] == [
        "Running", "Pending", "Pending", "Pending"]  # fmt: skip
    assert env.job_props("per-minute")["priceCeiling"] == {
        "basis": "MaxPrice",
        "fixedAt": env.job_props("per-minute")["submittedAt"],
        "terms": [{"pricePerGpuHour": 3.0, "currency": "USD", "billingIncrementSeconds": 60,
                   "minimumBillableSeconds": 3600}],
    }  # fmt: skip
    assert env.job_props("per-minute")["maxPrice"] == {
        "pricePerGpuHour": 3.0, "currency": "USD", "billingIncrementSeconds": 60}  # fmt: skip
    # the same job sent again (its GET echoed back) is the same job: the ceiling is read-only
    again = env.w.jobs.get(env.admin(), env.sub, "rg1", "per-minute")
    from itl_accelerator.models.jobs import SparkJobWrite

    accepted, _ = env.w.jobs.submit(env.admin(), env.sub, "rg1", "per-minute", SparkJobWrite.model_validate(again))
    assert accepted is None


def test_a_budget_in_one_currency_admits_allocations_in_that_currency_only(env):
    from itl_accelerator.errors import BudgetCurrencyMismatch
    from tests.services.test_budgets import put_budget

    env.add_node("euro", price=1.0, currency="EUR")
    env.add_node("dollar", price=2.0, availability="Cordoned")
    put_budget(env, "team", amount="100", currency="USD")
    env.submit("j", 1, 80)
    env.run()
    props = env.job_props("j")
    assert props["status"] == "Pending"
    assert "the budget 'team' covering it counts USD only" in props["statusReason"], props["statusReason"]
    with pytest.raises(BudgetCurrencyMismatch, match="'team' counts USD"):
        env.provision("llama", node="euro", devices=1, memory_gb=80)
    env.patch_node("dollar", {"properties": {"availability": "Available"}})
    serve_queue(env)
    assert running_on(env, "j") == "dollar"


def test_a_cordoned_node_parked_at_an_extreme_price_does_not_raise_the_ceiling(env):
    """A supplier keeping a cordoned node at 1,000,000 EUR would otherwise be the ceiling of every job submitted,
    and could then re-price its available node up to it while the jobs wait."""
    env.add_node("fair", price=2.5, owner="sup-a")
    env.add_node("parked", price=1_000_000, currency="EUR", increment=3600, minimum=3600, availability="Cordoned",
                 owner="sup-b")  # fmt: skip
    env.submit("k", 1, 80)
    terms = env.job_props("k")["priceCeiling"]["terms"]
    assert [(t["pricePerGpuHour"], t["currency"]) for t in terms] == [(2.5, "USD")]


@pytest.mark.parametrize(("increment", "eligible"), [(30, True), (60, True), (45, False), (7, False)])
def test_a_node_is_within_only_when_its_increment_divides_the_ceilings(env, increment, eligible):
    """A 45 s increment bills a 50 s run 90 s where the ceiling's 60 s bills 60 s: no smaller increment bounds the
    bill unless it divides the ceiling's."""
    env.add_node("a", price=2.0, increment=60, minimum=0)
    env.patch_node("a", {"properties": {"availability": "Cordoned"}})
    env.submit("j", 1, 80)
    env.run()
    env.add_node("b", price=2.0, increment=increment, minimum=0)
    serve_queue(env)
    assert (env.status("j") == "Running") is eligible


def test_a_release_does_not_rewrite_a_waiting_reason_for_its_figures_alone(env, node):
    from itl_accelerator.models.quotas import QuotaWrite

    env.add_node("dgx-2")
    limit = QuotaWrite.model_validate({"properties": {"limit": {"limitObjectType": "LimitValue", "value": 8}}})
    env.w.quotas.put(env.admin(), env.sub, "eastus", "gpus", limit)
    env.submit("big", 6, 480)
    env.submit("small", 2, 160)
    env.run()
    env.submit("waits", 4, 320)
    env.run()
    told = env.job("waits")
    assert told.properties["statusReason"].startswith("Waiting for quota")
    env.end_job("small")  # 2 GPUs freed: still too few under the quota; the reason's kind and quota are the same
    assert env.job("waits").etag == told.etag


def test_the_default_ceiling_is_made_of_the_prices_the_submitter_can_see(env):
    """A consumer holding rg1 never saw the 3,600 USD node of rg2: its job is not placed there (a new user's
    finding: an MCP quote of 2.50 USD for the only node they could see ran at 3,600 USD on a node they could not)."""
    env.add_node("mine", price=2.5)
    env.add_node("theirs", rg="rg2", price=3600.0, increment=1, minimum=0)
    env.submit("filler", 8, 640)
    env.run()
    assert running_on(env, "filler") == "mine"
    ann = env.consumer("ann", scopes=[f"/subscriptions/{env.sub}/resourceGroups/rg1"])
    env.submit("j", 1, 80, ctx=ann)
    env.run()
    terms = env.job_props("j")["priceCeiling"]["terms"]
    assert [t["pricePerGpuHour"] for t in terms] == [2.5]
    assert env.status("j") == "Pending" and "price ceiling" in env.job_props("j")["statusReason"]
    admin_job = env.submit("k", 1, 80)  # an admin holding the subscription saw both
    env.run()
    assert admin_job is not None and running_on(env, "k") == "theirs"
