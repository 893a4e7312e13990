"""Accelerators, not only GPUs (issue 29): a mixed fleet — NVIDIA H100 GPUs, AMD MI300X GPUs, a TPU v5e host and an
Ascend NPU server — registered, priced, quota'd, asked for, placed, run and metered, as a user of each sees it; and
what the provider stored before kinds existed reads as the GPUs it always was."""

from __future__ import annotations

from typing import Any

import pytest

from itl_accelerator.domain.records import node_key
from itl_accelerator.errors import AcceleratorNotSupported, BadRequest, Conflict
from itl_accelerator.models.jobs import SparkJobWrite
from itl_accelerator.models.nodes import SparkNodeWrite
from itl_accelerator.models.quotas import QuotaWrite
from itl_accelerator.repositories.errors import CapacityInUse
from tests.services.conftest import RG, Allocation, Env, job_body

TPU = {"kind": "TPU", "model": "v5e", "count": 8, "memoryGbPerDevice": 16, "topology": "2x4"}
NPU = {"kind": "NPU", "vendor": "Huawei", "model": "910B", "count": 8, "memoryGbPerDevice": 64}
MI300X = {"kind": "GPU", "vendor": "AMD", "model": "MI300X", "count": 8, "memoryGbPerDevice": 192}


def accelerator_node(accelerator: dict[str, Any], *, price: float = 1.2, sku: str = "HOST-8", **pricing: Any) -> dict:
    return {
        "location": "eastus",
        "sku": {"name": sku},
        "properties": {
            "owner": "owner-123",
            "accelerator": accelerator,
            "pricing": {"currency": "USD", "pricePerAcceleratorHour": price, **pricing},
        },
    }


def register(env: Env, name: str, body: dict[str, Any]) -> dict[str, Any]:
    node, created = env.w.nodes.put(env.admin(), env.sub, RG, name, SparkNodeWrite.model_validate(body))
    assert created
    return node


def submit(env: Env, name: str, properties: dict[str, Any]) -> Any:
    accepted, _ = env.w.jobs.submit(
        env.admin(), env.sub, RG, name, SparkJobWrite.model_validate({"properties": properties})
    )
    return accepted


@pytest.fixture
def fleet(env: Env) -> Env:
    """dgx-1 (8 NVIDIA H100 at 2.50), mi-1 (8 AMD MI300X at 3.00), tpu-1 (8 Google TPU v5e at 1.20), npu-1 (8
    Huawei 910B at 0.90), all in eastus."""
    env.add_node("dgx-1")
    register(env, "mi-1", accelerator_node(MI300X, price=3.0))
    register(env, "tpu-1", accelerator_node(TPU, price=1.2))
    register(env, "npu-1", accelerator_node(NPU, price=0.9))
    return env


def placed_on(env: Env, name: str) -> str:
    return str(env.job_props(name)["assignedNode"]).rsplit("/", 1)[-1]


# ------------------------------------------------------------------------------------------------ nodes
def test_each_node_says_what_it_holds_and_its_price_per_device_hour(fleet):
    tpu = fleet.w.nodes.get(fleet.admin(), fleet.sub, RG, "tpu-1")
    props = tpu["properties"]
    assert props["accelerator"] == {
        "kind": "TPU", "vendor": "Google", "model": "v5e", "count": 8, "memoryGbPerDevice": 16, "topology": "2x4",
        "resourceName": "google.com/tpu",
    }  # fmt: skip
    assert props["capacity"] == {
        "totalAccelerators": 8, "allocatedAccelerators": 0, "freeAccelerators": 8,
        "totalMemoryGb": 128, "allocatedMemoryGb": 0, "freeMemoryGb": 128,
    }  # fmt: skip
    assert props["pricing"]["pricePerAcceleratorHour"] == 1.2 and "pricePerGpuHour" not in props["pricing"]
    assert "gpuCount" not in props["hardwareSpecs"]
    # the seed's GPU node: NVIDIA GPUs under both spellings, one price under both names
    dgx = fleet.w.nodes.get(fleet.admin(), fleet.sub, RG, "dgx-1")["properties"]
    assert dgx["accelerator"]["kind"] == "GPU" and dgx["accelerator"]["vendor"] == "NVIDIA"
    assert dgx["hardwareSpecs"]["gpuCount"] == dgx["accelerator"]["count"] == 8
    assert dgx["pricing"]["pricePerGpuHour"] == dgx["pricing"]["pricePerAcceleratorHour"] == 2.5
    assert dgx["capacity"]["totalGpus"] == dgx["capacity"]["totalAccelerators"] == 8


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (accelerator_node(TPU, pricePerGpuHour=1.2), "pricePerGpuHour prices GPUs"),
        ({**accelerator_node(TPU), "properties": {**accelerator_node(TPU)["properties"],
          "hardwareSpecs": {"gpuCount": 8}}}, "hardwareSpecs.gpuCount describes GPUs"),
        (accelerator_node({"kind": "NPU", "model": "910B", "count": 8, "memoryGbPerDevice": 64}), "vendor is required"),
        (accelerator_node({"kind": "TPU", "count": 8, "memoryGbPerDevice": 16}), "model is required"),
        (accelerator_node({"kind": "tpu!", "model": "v5e", "count": 8}), "kind"),
    ],
    ids=["gpu-price-on-tpu", "gpu-specs-on-tpu", "npu-without-vendor", "tpu-without-model", "bad-kind"],
)  # fmt: skip
def test_a_node_that_says_its_devices_untruthfully_is_refused(body, says):
    with pytest.raises(ValueError, match=says):
        SparkNodeWrite.model_validate(body)


def test_a_client_that_knows_one_name_of_a_value_changes_it_by_that_name(env):
    # Given a GPU node read back whole (both names of its price and of its GPU count)
    env.add_node("dgx-1")
    node = env.w.nodes.get(env.admin(), env.sub, RG, "dgx-1")
    # When a client that knows the seed's names changes them and sends the rest back as read
    node["properties"]["pricing"]["pricePerGpuHour"] = 3.0
    node["properties"]["hardwareSpecs"]["gpuCount"] = 4
    node["sku"]["capacity"] = 4
    written, _ = env.w.nodes.put(env.admin(), env.sub, RG, "dgx-1", SparkNodeWrite.model_validate(node))
    # Then the names it changed win
    assert written["properties"]["pricing"]["pricePerAcceleratorHour"] == 3.0
    assert written["properties"]["accelerator"]["count"] == 4 and written["properties"]["capacity"]["totalGpus"] == 4
    # And a body that changes both names to different values is refused
    written["properties"]["pricing"].update(pricePerGpuHour=4.0, pricePerAcceleratorHour=5.0)
    with pytest.raises(BadRequest, match="two names of one price"):
        env.w.nodes.put(env.admin(), env.sub, RG, "dgx-1", SparkNodeWrite.model_validate(written))


# ------------------------------------------------------------------------------------------------ placement
def test_a_job_is_placed_on_a_node_of_its_kind_and_model_only(fleet):
    # When a TPU job, an NPU job, an AMD GPU job and the seed's GPU job are submitted
    submit(fleet, "tpu-job", {"accelerator": {"kind": "tpu", "count": 4}})
    submit(fleet, "npu-job", {"accelerator": {"kind": "NPU", "count": 2, "model": "910B", "memoryGb": 128}})
    submit(fleet, "amd-job", {"accelerator": {"kind": "GPU", "count": 8, "model": "MI300X"}})
    submit(fleet, "gpu-job", {"requestedGpus": 8, "requestedMemoryGb": 640, "gpuModel": "H100"})
    fleet.run()
    # Then each runs where its devices are
    assert {n: placed_on(fleet, n) for n in ("tpu-job", "npu-job", "amd-job", "gpu-job")} == {
        "tpu-job": "tpu-1", "npu-job": "npu-1", "amd-job": "mi-1", "gpu-job": "dgx-1",
    }  # fmt: skip
    assert fleet.allocation("tpu-1") == Allocation(4, 0) and fleet.allocation("npu-1") == Allocation(2, 128)
    # And each is billed by its node's terms, per device-hour of its kind
    terms = fleet.job_props("tpu-job")["billingTerms"]
    assert terms["pricePerAcceleratorHour"] == 1.2 and "pricePerGpuHour" not in terms
    assert fleet.job_props("tpu-job")["accelerator"] == {"kind": "TPU", "vendor": "Google", "count": 4, "memoryGb": 0}
    assert "requestedGpus" not in fleet.job_props("tpu-job")
    # And the DGX Platform is told what each runs on
    sent = {d["name"].rsplit("/", 1)[-1]: d["accelerator"] for d in fleet.dgx.called("submit_job")}
    assert sent["tpu-job"] == {"kind": "TPU", "vendor": "Google", "model": "v5e", "topology": "2x4"}
    assert sent["amd-job"] == {"kind": "GPU", "vendor": "AMD", "model": "MI300X"}


def test_a_gpu_job_never_takes_a_tpu_even_when_only_the_tpu_is_free(env):
    register(env, "tpu-1", accelerator_node(TPU))
    env.add_node("dgx-1", devices=8)
    submit(env, "big", {"requestedGpus": 8, "requestedMemoryGb": 640})
    env.run()
    submit(env, "waits", {"requestedGpus": 1, "requestedMemoryGb": 80})
    env.run()
    assert env.status("waits") == "Pending"
    assert env.job_props("waits")["statusReason"].startswith(
        "Waiting for capacity: no node of the subscription has 1 free NVIDIA GPUs"
    )
    assert env.allocation("tpu-1") == Allocation(0, 0)


def test_a_job_no_node_of_its_kind_could_hold_is_inadmissible_naming_the_kind(fleet):
    submit(fleet, "hpu-job", {"accelerator": {"kind": "HPU", "count": 8}})
    submit(fleet, "huge-tpu", {"accelerator": {"kind": "TPU", "count": 16}})
    submit(fleet, "tpu-v6", {"accelerator": {"kind": "TPU", "count": 1, "model": "v6e"}})
    fleet.run()
    assert fleet.status("hpu-job") == "Failed"
    assert "No node of the subscription has Intel HPUs" in fleet.job_props("hpu-job")["statusReason"]
    assert "asks for 16 TPUs" in fleet.job_props("huge-tpu")["statusReason"]
    assert "has 8 TPUs" in fleet.job_props("huge-tpu")["statusReason"]
    assert "TPU model 'v6e'" in fleet.job_props("tpu-v6")["statusReason"]


@pytest.mark.parametrize(
    "properties",
    [
        {"requestedGpus": 4, "requestedMemoryGb": 320, "accelerator": {"kind": "TPU", "count": 4}},
        {"requestedGpus": 4, "requestedMemoryGb": 320, "accelerator": {"kind": "GPU", "count": 8}},
        {"gpuModel": "H100", "accelerator": {"kind": "GPU", "count": 8, "model": "A100"}},
        {"accelerator": {"kind": "GPU", "count": 0}},
        {},
    ],
    ids=["gpus-and-tpus", "two-counts", "two-models", "no-devices", "nothing-asked"],
)
def test_a_request_that_says_two_things_or_nothing_is_refused(properties):
    with pytest.raises(ValueError):
        SparkJobWrite.model_validate({"properties": properties})


def test_the_seeds_gpu_form_and_the_accelerator_form_are_one_job(env):
    env.add_node("dgx-1")
    first = submit(env, "same", {"requestedGpus": 2, "requestedMemoryGb": 160, "gpuModel": "H100"})
    # the same job said the new way is the same job (an identical resubmission: nothing new starts)
    again, shown = env.w.jobs.submit(
        env.admin(), env.sub, RG, "same",
        SparkJobWrite.model_validate({"properties": {"accelerator": {"kind": "GPU", "count": 2, "model": "H100", "memoryGb": 160}}}),
    )  # fmt: skip
    assert first is not None and again is None and shown["properties"]["requestedGpus"] == 2


# ------------------------------------------------------------------------------------------------ instances
def test_an_ollama_instance_runs_on_nvidia_and_amd_gpus_only(fleet):
    with pytest.raises(AcceleratorNotSupported, match=r"NVIDIA GPUs \(CUDA\) and AMD GPUs \(ROCm\).*Google TPUs"):
        fleet.provision("llama", "tpu-1", devices=1, memory_gb=16)
    with pytest.raises(AcceleratorNotSupported, match="Huawei NPUs"):
        fleet.provision("llama", "npu-1", devices=1, memory_gb=64)
    accepted, _ = fleet.provision("llama", "mi-1", devices=1, memory_gb=192)
    assert accepted is not None
    fleet.run()
    assert fleet.instance_props("llama", "mi-1")["provisioningState"] == "Succeeded"
    assert fleet.allocation("tpu-1") == Allocation(0, 0)


# ------------------------------------------------------------------------------------------------ quotas
def test_quotas_count_per_kind_and_model_and_gpus_keeps_its_meaning(fleet):
    submit(fleet, "tpu-job", {"accelerator": {"kind": "TPU", "count": 4}})
    fleet.run()
    usages = {u["name"]["value"]: u["currentValue"] for u in fleet.w.quotas.usages(fleet.admin(), fleet.sub, "eastus")}
    assert usages["tpus"] == 4 and usages["tpus-v5e"] == 4
    assert usages["gpus"] == 0 and usages["npus-910b"] == 0 and usages["gpus-mi300x"] == 0
    # every name the usages list shows can be set, and a limit on TPUs holds TPU jobs only
    for name in usages:
        fleet.w.quotas.put(
            fleet.admin(),
            fleet.sub,
            "eastus",
            name,
            QuotaWrite.model_validate({"properties": {"limit": {"value": 64}}}),
        )
    fleet.w.quotas.put(
        fleet.admin(), fleet.sub, "eastus", "tpus", QuotaWrite.model_validate({"properties": {"limit": {"value": 4}}})
    )
    submit(fleet, "tpu-2", {"accelerator": {"kind": "TPU", "count": 2}})
    submit(fleet, "gpu-2", {"requestedGpus": 2, "requestedMemoryGb": 160})
    fleet.run()
    assert fleet.status("gpu-2") == "Running"
    assert fleet.status("tpu-2") == "Pending"
    assert "TPU quota 'tpus'" in fleet.job_props("tpu-2")["statusReason"]


# ------------------------------------------------------------------------------------------------ stored before kinds
def test_a_gpu_node_and_job_stored_before_kinds_existed_read_as_the_gpus_they_were(env):
    # Given a node and a job as the code before accelerator kinds wrote them (no accelerator, one price name)
    env.add_node("dgx-1")
    stored = env.node("dgx-1")
    props = {k: v for k, v in stored.document["properties"].items() if k != "accelerator"}
    props["pricing"] = {k: v for k, v in props["pricing"].items() if k != "pricePerAcceleratorHour"}
    env.state.nodes[next(iter(env.state.nodes))].node.document["properties"] = props
    # Then it reads as NVIDIA H100 GPUs at its price
    node = env.w.nodes.get(env.admin(), env.sub, RG, "dgx-1")["properties"]
    assert node["accelerator"]["kind"] == "GPU" and node["accelerator"]["model"] == "H100"
    assert node["pricing"]["pricePerAcceleratorHour"] == 2.5
    assert env.repos.nodes.get(node_key(env.sub, RG, "dgx-1")).shape.gpu_model == "h100"
    # And a job of 2 GPUs is placed on it and billed by its price
    submit(env, "j", {"requestedGpus": 2, "requestedMemoryGb": 160})
    env.run()
    assert placed_on(env, "j") == "dgx-1" and env.job_props("j")["billingTerms"]["pricePerGpuHour"] == 2.5
    # And a job document without its accelerator (stored before) shows the GPUs it asked for
    job = env.job("j")
    job.document["properties"].pop("accelerator")
    shown = env.w.jobs.get(env.admin(), env.sub, RG, "j")["properties"]
    assert shown["accelerator"] == {"kind": "GPU", "vendor": "NVIDIA", "count": 2, "memoryGb": 160}


# ------------------------------------------------------------------------------------------------ billing
def test_a_mixed_days_export_and_cost_query_name_each_kind_and_model(env):
    from decimal import Decimal

    from itl_accelerator.models.costs import CostQuery
    from tests.services.test_metering import DAY, export_rows, money, sync, t

    # Given a TPU job of 8 v5e for an hour at 1.20 and a GPU job of 2 H100 for an hour at 2.50, on 10 March
    env.add_node("dgx-1")
    register(env, "tpu-1", accelerator_node(TPU, price=1.2))
    env.clock.set(f"{DAY}T10:00:00")
    submit(env, "tune", {"accelerator": {"kind": "TPU", "count": 8, "model": "v5e"}})
    submit(env, "train", {"requestedGpus": 2, "requestedMemoryGb": 160})
    env.run()
    env.clock.set(f"{DAY}T11:00:00")
    env.end_job("tune", at=env.clock())
    env.end_job("train", at=env.clock())
    sync(env, "2025-03-11T01:00:00")
    env.w.usage_rollups.run()
    # When the day is exported
    env.w.billing_export.run(now=t("2025-03-11T01:30:00"))
    rows = {r["ResourceName"]: r for r in export_rows(env, DAY)}
    # Then each row's units, description and custom columns name its kind and model
    tpu, gpu = rows["tune"], rows["train"]
    assert (tpu["ConsumedUnit"], tpu["PricingUnit"], tpu["PricingQuantity"]) == ("TPU-Hours", "TPU-Hours", "8.0")
    assert tpu["ChargeDescription"] == "TPU time (v5e) of job tune on node tpu-1 (HOST-8)"
    assert (tpu["x_AcceleratorKind"], tpu["x_AcceleratorModel"], tpu["ListUnitPrice"]) == ("TPU", "v5e", "1.2")
    assert (gpu["ConsumedUnit"], gpu["x_AcceleratorKind"], gpu["x_AcceleratorModel"]) == ("GPU-Hours", "GPU", "H100")
    assert money(list(rows.values())) == Decimal("14.6")  # 8 x 1.20 + 2 x 2.50
    # And the cost query groups by kind and model, summing to the bill
    answer = env.w.costs.query(env.admin(), env.sub, CostQuery.model_validate({
        "timeframe": "Custom", "timePeriod": {"from": f"{DAY}T00:00:00Z", "to": "2025-03-11T00:00:00Z"},
        "dataset": {"grouping": [{"type": "Dimension", "name": "AcceleratorKind"},
                                 {"type": "Dimension", "name": "AcceleratorModel"}]},
    }))  # fmt: skip
    names = [c["name"] for c in answer["properties"]["columns"]]
    by_kind = {(r[names.index("AcceleratorKind")], r[names.index("AcceleratorModel")]): Decimal(str(r[0]))
               for r in answer["properties"]["rows"]}  # fmt: skip
    assert by_kind == {("TPU", "v5e"): Decimal("9.6"), ("GPU", "H100"): Decimal("5")}


def test_a_tpu_job_waiting_under_its_ceiling_is_told_prices_per_tpu_hour(fleet):
    submit(
        fleet,
        "cheap",
        {"accelerator": {"kind": "TPU", "count": 2}, "maxPrice": {"pricePerAcceleratorHour": 0.5, "currency": "USD"}},
    )
    fleet.run()
    reason = fleet.job_props("cheap")["statusReason"]
    assert "1.2 USD per TPU-hour" in reason and "per GPU-hour" not in reason, reason


# ------------------------------------------------------------------------------------------------ vendors and spellings
def test_the_seeds_gpu_form_means_nvidia_gpus_and_never_takes_a_free_amd_node(env):
    # Given a full NVIDIA node beside a free AMD one (and the AMD one the cheaper)
    env.add_node("dgx-1", devices=8, price=2.5)
    register(env, "mi-1", accelerator_node(MI300X, price=1.0))
    submit(env, "big", {"requestedGpus": 8, "requestedMemoryGb": 640})
    env.run()
    assert placed_on(env, "big") == "dgx-1"
    # When a job in the seed's form (a CUDA image, as the seed's users run) and one saying kind GPU only are submitted
    submit(env, "seed", {"requestedGpus": 1, "requestedMemoryGb": 80})
    submit(env, "plain", {"accelerator": {"kind": "gpu", "count": 1}})
    env.run()
    # Then both wait for an NVIDIA GPU, saying so, and the AMD node stays free
    for name in ("seed", "plain"):
        props = env.job_props(name)
        assert props["status"] == "Pending" and props["accelerator"]["vendor"] == "NVIDIA"
        assert "no node of the subscription has 1 free NVIDIA GPUs" in props["statusReason"]
        # their price ceiling is made of NVIDIA prices only (the AMD node's 1.00 is no price they accepted)
        assert [t["pricePerGpuHour"] for t in props["priceCeiling"]["terms"]] == [2.5]
    assert env.allocation("mi-1") == Allocation(0, 0)
    # And a job naming AMD's model, its vendor, or any vendor takes the AMD node
    submit(env, "by-model", {"requestedGpus": 1, "requestedMemoryGb": 80, "gpuModel": "MI300X"})
    submit(env, "by-vendor", {"accelerator": {"kind": "GPU", "vendor": "amd", "count": 1}})
    submit(
        env,
        "any",
        {
            "accelerator": {"kind": "GPU", "vendor": "any", "count": 1},
            "maxPrice": {"pricePerGpuHour": 5, "currency": "USD"},
        },
    )
    env.run()
    assert {n: placed_on(env, n) for n in ("by-model", "by-vendor", "any")} == dict.fromkeys(
        ("by-model", "by-vendor", "any"), "mi-1"
    )
    assert env.job_props("by-vendor")["accelerator"]["vendor"] == "AMD"
    assert env.job_props("any")["accelerator"]["vendor"] == "Any"
    assert "vendor" not in env.job_props("by-model")["accelerator"]  # a model names its maker
    # And once the NVIDIA node frees, the seed's job runs there
    env.end_job("big")
    env.run()
    assert placed_on(env, "seed") == "dgx-1"


def test_a_seed_form_job_in_a_fleet_of_amd_gpus_only_is_inadmissible_naming_nvidia(env):
    register(env, "mi-1", accelerator_node(MI300X))
    submit(env, "seed", {"requestedGpus": 1, "requestedMemoryGb": 80})
    env.run()
    assert env.status("seed") == "Failed"
    assert env.job_props("seed")["statusReason"] == "Inadmissible: No node of the subscription has NVIDIA GPUs."


def test_a_job_read_back_with_the_vendor_it_got_is_the_same_job(env):
    env.add_node("dgx-1")
    first = submit(env, "same", {"requestedGpus": 2, "requestedMemoryGb": 160})
    shown = env.w.jobs.get(env.admin(), env.sub, RG, "same")
    assert shown["properties"]["accelerator"]["vendor"] == "NVIDIA"
    again, _ = env.w.jobs.submit(env.admin(), env.sub, RG, "same", SparkJobWrite.model_validate(shown))
    assert first is not None and again is None  # nothing new started
    # while saying another vendor is another job
    with pytest.raises(Exception, match="cannot be submitted until it ends"):
        env.w.jobs.submit(env.admin(), env.sub, RG, "same", SparkJobWrite.model_validate(
            {"properties": {"accelerator": {"kind": "GPU", "vendor": "AMD", "count": 2, "memoryGb": 160}}}))  # fmt: skip


def test_offers_say_whose_devices_they_are(env):
    env.add_node("dgx-1")
    register(env, "mi-1", accelerator_node(MI300X))
    found = {
        o["name"]: o["properties"]["accelerator"] for o in env.w.offers.in_location(env.admin(), env.sub, "eastus")
    }
    assert found == {
        "gpu-h100": {"kind": "GPU", "vendor": "NVIDIA", "model": "h100"},
        "gpu-mi300x": {"kind": "GPU", "vendor": "AMD", "model": "mi300x"},
    }


@pytest.mark.parametrize("node_kind, job_kind", [("Fpga", "FPGA"), ("fpga", "Fpga"), ("FPGA", "fpga")])
def test_a_kind_in_another_letter_case_is_the_same_kind(env, node_kind, job_kind):
    # Given a node of a kind the provider does not know, spelt one way
    fpga = {"kind": node_kind, "vendor": "AMD Xilinx", "model": "U250", "count": 4, "memoryGbPerDevice": 64}
    shown = register(env, "f-1", accelerator_node(fpga, price=0.8))
    assert shown["properties"]["accelerator"]["kind"] == "FPGA"  # one spelling, decided where it enters
    env.w.quotas.put(
        env.admin(), env.sub, "eastus", "fpgas", QuotaWrite.model_validate({"properties": {"limit": {"value": 3}}})
    )
    # When a job asks for it spelt another way, and its model in another case
    submit(env, "j", {"accelerator": {"kind": job_kind, "vendor": "amd xilinx", "count": 2, "model": "u250"}})
    submit(env, "k", {"accelerator": {"kind": job_kind, "count": 2}})
    env.run()
    # Then the first runs on that node at its price, counted in the quota of that kind; the second waits for the quota
    props = env.job_props("j")
    assert props["status"] == "Running" and placed_on(env, "j") == "f-1", props["statusReason"]
    assert props["billingTerms"]["pricePerAcceleratorHour"] == 0.8 and props["accelerator"]["kind"] == "FPGA"
    assert env.status("k") == "Pending"
    assert env.job_props("k")["statusReason"].startswith("Waiting for quota: the FPGA quota 'fpgas'")


def test_a_job_that_no_node_its_submitter_sees_could_hold_fails_at_once_saying_why(env):
    # Given a node in rg1 only, and a consumer holding rg2
    env.add_node("dgx-1")
    cora = env.consumer("cora", scopes=[f"/subscriptions/{env.sub}/resourceGroups/rg2"])
    # When she submits a job without a maxPrice (its ceiling is made of the prices she can see: none)
    accepted, _ = env.w.jobs.submit(cora, env.sub, "rg2", "j", job_body(1, 80))
    assert accepted is not None
    env.run()
    # Then it fails at once, saying why and what to do, instead of waiting for ever
    props = env.w.jobs.get(cora, env.sub, "rg2", "j")["properties"]
    assert props["status"] == "Failed" and props["priceCeiling"]["terms"] == []
    assert props["statusReason"].startswith(
        "Inadmissible: No node that could hold the job was in the submitter's resource groups"
    )
    assert "properties.maxPrice" in props["statusReason"]
    # And with a maxPrice it runs on the subscription's node within it
    env.w.jobs.submit(cora, env.sub, "rg2", "j2", job_body(1, 80, maxPrice={"pricePerGpuHour": 3, "currency": "USD"}))
    env.run()
    assert env.w.jobs.get(cora, env.sub, "rg2", "j2")["properties"]["status"] == "Running"


def test_a_tpu_node_refuses_to_shrink_below_what_is_held_in_tpus(env):
    register(env, "tpu-1", accelerator_node(TPU))
    submit(env, "j", {"accelerator": {"kind": "TPU", "count": 6}})
    env.run()
    body = env.w.nodes.get(env.admin(), env.sub, RG, "tpu-1")
    body["properties"]["accelerator"]["count"] = 4
    body["sku"].pop("capacity", None)
    with pytest.raises(Conflict, match=r"\(6 TPUs, 0 GiB, 0 instances\)") as refused:
        env.w.nodes.put(env.admin(), env.sub, RG, "tpu-1", SparkNodeWrite.model_validate(body))
    assert "GPU" not in str(refused.value)


@pytest.mark.parametrize(
    "change",
    [
        {"model": "A100"},  # another model of the kind
        {"kind": "NPU", "vendor": "Huawei", "model": "910B"},  # another kind
        {"vendor": "AMD", "model": "MI300X"},  # another vendor
    ],
    ids=["model", "kind", "vendor"],
)
def test_a_nodes_devices_cannot_change_while_work_holds_them(env, change):
    # Given a job holding 2 of an H100 node's GPUs
    env.add_node("dgx-1")
    env.submit("j", 2, 160)
    env.run()
    # When an admin says the node holds other devices
    body = env.w.nodes.get(env.admin(), env.sub, RG, "dgx-1")
    body["properties"]["accelerator"] = {**body["properties"]["accelerator"], **change}
    body["properties"].pop("hardwareSpecs")
    body["properties"]["pricing"].pop("pricePerGpuHour")
    # Then it is refused, saying why; the node is as it was
    with pytest.raises(
        Conflict, match=r"cannot change from NVIDIA GPU H100 .* while 2 GPUs and 160 GiB of it are held"
    ):
        env.w.nodes.put(env.admin(), env.sub, RG, "dgx-1", SparkNodeWrite.model_validate(body))
    assert env.node("dgx-1").accelerator.model == "H100"
    # And once the job has ended it may change
    env.end_job("j")
    shown, _ = env.w.nodes.put(env.admin(), env.sub, RG, "dgx-1", SparkNodeWrite.model_validate(body))
    assert shown["properties"]["accelerator"]["model"] == change["model"]


def test_a_nodes_devices_changed_between_the_read_and_a_placement_are_refused_by_the_store(env):
    # Given an admin who read an idle node, then a job placed on it before the admin's write lands
    env.add_node("dgx-1")
    read = env.node("dgx-1")
    env.submit("j", 2, 160)
    env.run()
    changed = env.node("dgx-1")
    changed.document["properties"]["accelerator"] = {**changed.document["properties"]["accelerator"], "model": "A100"}
    # Then the store refuses the change of devices under the placed work (the etag did not move: a placement does not
    # change it)
    with pytest.raises(CapacityInUse):
        env.repos.nodes.replace(read, changed, env.audit()[-1].model_copy(update={"event_id": "e-race"}))
