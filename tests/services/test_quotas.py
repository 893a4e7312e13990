"""GPU quotas on the in-memory repositories: a job a full quota holds back says so and runs once the quota frees;
an instance past a quota is refused; the quota service's reads and writes."""

from __future__ import annotations

import pytest

from itl_accelerator.domain.states import JobStatus
from itl_accelerator.errors import QuotaExceeded
from itl_accelerator.models.quotas import QuotaWrite
from tests.services.conftest import Env


def set_quota(env, name: str, value: int, location: str = "eastus") -> None:
    body = QuotaWrite.model_validate({"properties": {"limit": {"limitObjectType": "LimitValue", "value": value}}})
    env.w.quotas.put(env.admin(), env.sub, location, name, body)


def test_a_job_held_back_by_a_full_quota_says_so_and_runs_once_it_frees(env, node):
    set_quota(env, "gpus", 2, node["location"])
    env.provision("llama", devices=2, memory_gb=160)
    env.run()
    env.submit("j", 2, 160)
    env.run()
    assert env.status("j") == "Pending"
    assert env.job_props("j")["statusReason"].startswith("Waiting for quota: the GPU quota 'gpus'"), env.job_props("j")
    env.delete_instance("llama")
    env.run()
    assert env.instance() is None
    assert env.job("j").status == JobStatus.RUNNING


def test_an_instance_past_a_quota_is_refused(env, node):
    set_quota(env, "gpus", 1, node["location"])
    with pytest.raises(QuotaExceeded):
        env.provision("llama", devices=2, memory_gb=160)


# ------------------------------------------------------------------------------------------------ issue 26
def quota_names(env, location: str = "eastus") -> dict[str, dict]:
    return {q["name"]: q for q in env.w.quotas.in_location(env.admin(), env.sub, location)}


def limit_change(env, name: str = "eastus#gpus"):
    from itl_accelerator.domain.records import LimitChange

    return LimitChange(event_id="evt-q", subscription_id=env.sub, kind="quota", name=name)


def test_every_model_the_usages_list_can_be_limited_and_a_look_alike_is_flagged(env):
    """``A100-80GB`` counts in ``gpus-a100-80gb``: that name can be set, and it limits; the look-alike
    ``gpus-a10080gb`` limits nothing, and says so (``isQuotaApplicable`` false)."""
    env.add_node("a100", model="A100-80GB")
    env.add_node("mi", model="MI300X_v1.2")
    env.provision("llama", node="a100", devices=2, memory_gb=160)
    env.run()
    usage_names = [u["name"]["value"] for u in env.w.quotas.usages(env.admin(), env.sub, "eastus")]
    assert usage_names == ["gpus", "gpus-a100-80gb", "gpus-mi300x_v1.2"]  # every model of the location's nodes
    for name in [*usage_names, "gpus-a10080gb"]:
        set_quota(env, name, 16 if name == "gpus" else 2)
    flags = {name: q["properties"]["isQuotaApplicable"] for name, q in quota_names(env).items()}
    assert flags == {"gpus": True, "gpus-a100-80gb": True, "gpus-mi300x_v1.2": True, "gpus-a10080gb": False}
    with pytest.raises(QuotaExceeded, match="gpus-a100-80gb"):
        env.provision("second", node="a100", devices=1, memory_gb=80)


def test_of_racing_creates_of_one_quota_exactly_one_creates(env):
    from itl_accelerator.services.api.quotas import QuotaService
    from tests.services.fakes import Hooked

    hooked = Hooked(env.repos.quotas)
    racing = QuotaService(hooked, env.repos.nodes, env.w.access)
    body = QuotaWrite.model_validate({"properties": {"limit": {"limitObjectType": "LimitValue", "value": 4}}})
    answers = []
    # another PUT creates the quota between this one's read and its write
    hooked.after["get"] = lambda _: answers.append(env.w.quotas.put(env.admin(), env.sub, "eastus", "gpus", body)[1])
    answers.append(racing.put(env.admin(), env.sub, "eastus", "gpus", body)[1])
    assert answers == [True, False]  # one 201, the other 200 (the same limit: nothing written)
    trail = [e for e in env.audit() if e.action == "ITL.Accelerator/locations/quotas/write"]
    assert len(trail) == 1


def test_a_raised_quota_places_the_job_it_held_back_at_once(env, node):
    set_quota(env, "gpus", 2, node["location"])
    env.provision("llama", devices=2, memory_gb=160)
    env.run()
    env.submit("j", 2, 160)
    env.run()
    assert env.job_props("j")["statusReason"].startswith("Waiting for quota")
    set_quota(env, "gpus", 4, node["location"])
    report = env.w.fleet_changes.on_changes([], [limit_change(env)])
    assert report.placed == 1
    env.run()
    assert env.status("j") == "Running"


def test_a_quota_changed_tells_the_waiting_jobs_why_at_once_and_fails_one_it_can_never_hold(env, node):
    env.add_node("dgx-2")
    set_quota(env, "gpus", 8, node["location"])
    env.submit("big", 8, 640)
    env.run()
    env.submit("small", 1, 80)
    env.submit("four", 4, 320)
    env.run()
    reason = "Waiting for quota: the GPU quota 'gpus' of the subscription in 'eastus' allows {} GPUs and {} are in use"
    assert env.job_props("small")["statusReason"].startswith(reason.format(8, 8))
    set_quota(env, "gpus", 9, node["location"])  # room for "small", not for "four"
    report = env.w.fleet_changes.on_changes([], [limit_change(env)])
    env.run()
    assert (report.placed, report.failed, report.reasons) == (1, 0, 1)
    assert env.status("small") == "Running"
    assert env.job_props("four")["statusReason"].startswith(reason.format(9, 9))  # as of now, not as submitted
    set_quota(env, "gpus", 2, node["location"])  # below what "four" asks: it could never run
    report = env.w.fleet_changes.on_changes([], [limit_change(env)])
    env.run()
    assert report.failed == 1 and env.status("four") == "Failed"
    assert "the GPU quota 'gpus' in 'eastus' allows 2" in env.job_props("four")["statusReason"]
    assert env.status("small") == "Running"  # a limit below the use stops nothing running


def test_a_deleted_quota_places_the_job_it_held_back_at_once(env, node):
    set_quota(env, "gpus", 2, node["location"])
    env.provision("llama", devices=2, memory_gb=160)
    env.run()
    env.submit("j", 1, 80)
    env.run()
    assert env.status("j") == "Pending"
    assert env.w.quotas.delete(env.admin(), env.sub, node["location"], "gpus")
    assert env.w.fleet_changes.on_changes([], [limit_change(env)]).placed == 1


@pytest.mark.parametrize("model", ["H200.", "H100/PCIe", "H100 (SXM5)", "Ä100", "-h100", "x" * 59, "H100 "])
def test_a_node_model_no_quota_name_could_limit_is_refused(model):
    from pydantic import ValidationError

    from itl_accelerator.models.nodes import SparkNodeWrite
    from tests.services.conftest import node_body

    with pytest.raises(ValidationError, match="gpuModel"):
        SparkNodeWrite.model_validate(node_body(model=model))


def test_the_longest_model_makes_a_quota_name_one_can_set(env):
    from itl_accelerator.models.nodes import SparkNodeWrite
    from tests.services.conftest import node_body

    model = "A" * 57 + "1"  # 58 characters: gpus- and 58 is 63, the longest ARM name
    body = {**node_body(model=model), "sku": {"name": "DGX-LONG", "capacity": 8}}
    env.w.nodes.put(env.admin(), env.sub, "rg1", "long", SparkNodeWrite.model_validate(body))
    set_quota(env, f"gpus-{model.lower()}", 2)
    assert env.w.quotas.get(env.admin(), env.sub, "eastus", f"gpus-{model.lower()}")["properties"]["isQuotaApplicable"]


def test_a_job_a_full_quota_holds_back_says_so_even_when_its_own_work_fills_the_node(env: Env):
    # Given a 4-GPU node and a quota of 4 GPUs, both taken by one job
    env.add_node("dgx-1", devices=4)
    env.w.quotas.put(
        env.admin(), env.sub, "eastus", "gpus", QuotaWrite.model_validate({"properties": {"limit": {"value": 4}}})
    )
    env.submit("a", 4, 320)
    env.run()
    # When another job of 1 GPU is submitted
    env.submit("b", 1, 80)
    env.run()
    # Then it says the quota holds it back (a new node would not help), not capacity
    assert env.job_props("b")["statusReason"] == (
        "Waiting for quota: the GPU quota 'gpus' of the subscription in 'eastus' allows 4 GPUs and 4 are in use; "
        "the job needs 1."
    )
