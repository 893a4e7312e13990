"""The web portal in a real browser (Debian's chromium driven by Playwright) against a local stack started the way
the README says: a person signs in through the dev issuer's login page (authorization code + PKCE) as admin,
supplier or consumer and does what the portal is for — register a node, provision an instance and watch it serve,
submit a job and watch it end, see its cost in the usage totals equal the API's, cancel, read the activity log —
and never sees what the API keeps from them (another user's job, a node's earnings).

Every test signs in in a fresh browser context and works in a subscription of its own, so a failed test leaves
nothing behind for the next. Waits are on conditions (Playwright's expect, or the API polled to a deadline), never
on fixed sleeps. Screenshots of each view go to test-artifacts/portal/ (git-ignored) for a reviewer to look at.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import httpx
import pytest

from itl_local.portal import PORTAL_DIST
from tests.e2e.test_local_stack import BIN, Stack

playwright_api = pytest.importorskip("playwright.sync_api")  # a dev extra: ./dev installs it
expect = playwright_api.expect
PlaywrightTimeoutError = playwright_api.TimeoutError
# a busy 2-core machine answers slower than Playwright's 5 s default: every expectation may wait this long
expect.set_options(timeout=20_000)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

REPO_ROOT = Path(__file__).resolve().parents[2]
SHOTS = REPO_ROOT / "test-artifacts" / "portal"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
ADMIN, CONSUMER, SUPPLIER = "itl-accelerator-admin", "itl-accelerator-consumer", "itl-accelerator-supplier"
ROLES = (CONSUMER, ADMIN, SUPPLIER)
#: The user's time zone in the browser: times show in it, UTC on hover.
TIME_ZONE = "Europe/Amsterdam"
#: Waits for work that passes through workflows and schedules on a busy machine.
LONG = 60_000


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    assert (PORTAL_DIST / "index.html").is_file(), "the portal is not built: ./dev test builds it (or ./dev portal)"
    s = Stack(tmp_path_factory.mktemp("portal-stack"), options=("--quiet", "--schedule-every", "2"))
    yield s
    if s.proc.poll() is None:
        s.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert CHROMIUM.exists(), "Debian's chromium is missing: ./dev test installs it (apt-get install -y chromium)"
    with playwright_api.sync_playwright() as p:
        # launch() gives the browser a fresh temporary profile (user data dir) of its own
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def sub() -> str:
    return f"sub-{uuid.uuid4().hex[:10]}"


class Api:
    """The API as one principal, over HTTP (what the test checks the portal against)."""

    def __init__(self, stack: Stack, subject: str, role: str | None, sub: str):
        roles = ("--role", role) if role else ()
        token = stack.token("--sub", subject, *roles, "--scope", f"/subscriptions/{sub}")
        self.http = httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        self.rg = f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator"
        self.sub = f"/subscriptions/{sub}/providers/ITL.Accelerator"

    def put_node(
        self, name: str, owner: str, price: float = 2.5, currency: str = "USD", gpu_model: str = "H100"
    ) -> dict[str, Any]:
        body = {
            "location": "us-east-1",
            "sku": {"name": "DGX-H100-8GPU", "capacity": 8},
            "properties": {
                "owner": owner,
                "hardwareSpecs": {"gpuModel": gpu_model, "gpuMemoryGb": 80},
                "pricing": {"currency": currency, "pricePerGpuHour": price, "billingIncrementSeconds": 1},
            },
        }
        response = self.http.put(f"{self.rg}/sparkNodes/{name}", json=body)
        assert response.status_code in (200, 201), response.text
        return response.json()

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(path if path.startswith("/") else f"{self.rg}/{path}", params=params)

    def cost_query(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post(f"{self.sub}/costQuery", json=body)
        assert response.status_code == 200, response.text
        return response.json()["properties"]


def _contract() -> list[tuple[str, re.Pattern[str], set[str]]]:
    """(method, path pattern, query parameters) of every operation in docs/openapi.json."""
    document = json.loads((REPO_ROOT / "docs" / "openapi.json").read_text())
    operations = []
    for template, methods in document["paths"].items():
        pattern = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$")
        for method, operation in methods.items():
            query = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
            operations.append((method.upper(), pattern, query))
    return operations


CONTRACT = _contract()


def off_contract(method: str, url: str) -> str | None:
    """Why a request the portal sent is not an operation of docs/openapi.json (None when it is one)."""
    parts = urlsplit(url)
    query = {k for k, _ in parse_qsl(parts.query, keep_blank_values=True)}
    for operation_method, pattern, declared in CONTRACT:
        if operation_method == method and pattern.match(unquote(parts.path)):
            return None if query <= declared else f"{method} {parts.path}: undeclared query {sorted(query - declared)}"
    return f"{method} {parts.path}: no such operation"


def wait_until(condition: Callable[[], Any], what: str, timeout: float = LONG / 1000) -> Any:
    """Poll ``condition`` until it returns something truthy (returned), or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)  # a polling interval, not a wait for something to happen


@pytest.fixture
def portal(stack: Stack, browser: Any) -> Iterator[Callable[..., Any]]:
    """``portal(subject, roles, sub, viewport=...)`` → a page signed in through the dev login page. Every API
    request the pages send is checked against docs/openapi.json when the test ends (the portal's contract)."""
    contexts = []
    sent: list[tuple[str, str]] = []
    api_origin = f"{stack.url}/"

    def open_portal(
        subject: str,
        roles: tuple[str, ...],
        sub: str,
        viewport: tuple[int, int] = (1280, 800),
        start: str = "#/overview",
        on_request: Callable[[Any], None] | None = None,
        color_scheme: str = "light",
        scopes: tuple[str, ...] = (),
    ) -> Any:
        context = browser.new_context(
            viewport={"width": viewport[0], "height": viewport[1]}, timezone_id=TIME_ZONE, color_scheme=color_scheme
        )
        contexts.append(context)
        page = context.new_page()
        page.on(
            "request",
            lambda r: (
                sent.append((r.method, r.url))
                if r.url.startswith(api_origin) and not r.url.startswith(f"{api_origin}portal")
                else None
            ),
        )
        if on_request is not None:
            page.on("requestfinished", on_request)
        page.set_default_timeout(20_000)
        page.goto(f"{stack.url}/portal/{start}")
        page.get_by_role("button", name="Sign in").click()
        # the dev issuer's login page (another origin: the issuer's port)
        expect(page).to_have_url(re.compile(rf"^http://127\.0\.0\.1:{stack.idp_port}/realms/itl/"))
        page.get_by_label("User (subject)").fill(subject)
        for role in ROLES:
            page.get_by_label(role).set_checked(role in roles)
        page.get_by_label("Subscription scopes, one per line").fill("\n".join((f"/subscriptions/{sub}", *scopes)))
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator(".who-name")).to_have_text(subject)
        if start == "#/overview":
            expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        return page

    yield open_portal
    for context in contexts:
        context.close()
    problems = sorted({why for method, url in sent if (why := off_contract(method, url))})
    assert problems == [], f"the portal called what docs/openapi.json does not declare: {problems}"


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def go(page: Any, view: str) -> None:
    """Open ``view`` from the menu. A click that lands while a just-signed-in page is still settling was seen lost
    once on a loaded machine (the view stayed the overview for 20 s): the menu is clicked again then, as a user
    would, and a view that never comes still fails."""
    link = page.get_by_role("navigation", name="Views").get_by_role("link", name=view, exact=True)
    heading = page.get_by_role("heading", level=1)
    for _ in range(2):
        link.click()
        try:
            expect(heading).to_have_text(view, timeout=10_000)
            return
        except AssertionError:
            continue
    link.click()
    expect(heading).to_have_text(view)


def test_admin_registers_a_node_provisions_an_instance_and_watches_it_serve(stack: Stack, portal, sub: str):
    api = Api(stack, "ada", ADMIN, sub)
    page = portal("ada", (ADMIN,), sub)

    # Register a node through the form
    go(page, "Nodes")
    page.get_by_role("button", name="Register a node").click()
    form = page.get_by_role("form", name="Register a node")
    form.get_by_label("Name", exact=True).fill("dgx-a")
    form.get_by_label("Owner (supplier subject)").fill("sam")
    form.get_by_role("button", name="Register").click()
    expect(page.get_by_role("status").filter(has_text="Node dgx-a registered.")).to_be_visible()
    row = page.get_by_role("row").filter(has_text="dgx-a")
    expect(row).to_contain_text("0/8 GPUs allocated")
    assert api.get("sparkNodes/dgx-a").json()["properties"]["owner"] == "sam"
    shot(page, "nodes")

    # Provision an instance and watch the operation until it serves
    go(page, "Instances")
    page.get_by_role("button", name="Provision an instance").click()
    form = page.get_by_role("form", name="Provision an instance")
    form.get_by_label("Name", exact=True).fill("llama")
    form.get_by_label("GPUs").fill("2")
    form.get_by_label("GPU memory (GiB)").fill("80")
    form.get_by_role("button", name="Provision").click()
    progress = page.get_by_role("region", name="Provisioning llama")
    expect(progress).to_be_visible()
    shot(page, "instance-provisioning")
    expect(progress.get_by_role("status")).to_contain_text("llama serves at", timeout=LONG)
    endpoint = api.get("sparkNodes/dgx-a/sparkOllamaInstances/llama").json()["properties"]["endpoint"]
    expect(progress.locator(".endpoint")).to_have_text(endpoint)
    expect(page.get_by_role("row").filter(has_text="llama")).to_contain_text("Serving")  # the word its page says

    # The overview shows the GPUs it holds as a bar, and it as serving
    go(page, "Overview")
    expect(page.get_by_role("meter", name="2 of 8 GPUs allocated, 6 free")).to_be_visible()
    expect(page.get_by_test_id("instances-serving")).to_have_text("1")
    shot(page, "overview")

    # Its detail: endpoint and its usage chart; then delete it and see it gone
    page.goto(f"{stack.url}/portal/#/instances/rg1/dgx-a/llama")
    expect(page.locator("dd .endpoint")).to_have_text(endpoint)
    expect(page.get_by_role("region", name="Requests and tokens").locator("figure")).to_be_visible()
    shot(page, "instance-detail")
    page.get_by_role("button", name="Delete…").click()
    page.get_by_role("group", name="Confirm deletion").get_by_role("button", name="Delete instance").click()
    expect(page.get_by_role("status").filter(has_text="Instance llama deleted")).to_be_visible(timeout=LONG)
    assert api.get("sparkNodes/dgx-a/sparkOllamaInstances/llama").status_code == 404


def test_a_tpu_host_is_registered_shown_and_runs_a_tpu_job_as_tpus(stack: Stack, portal, sub: str):
    api = Api(stack, "ada", ADMIN, sub)
    page = portal("ada", (ADMIN,), sub)

    # Register a TPU v5e host through the form: a kind, its vendor and model, devices and their memory
    go(page, "Nodes")
    page.get_by_role("button", name="Register a node").click()
    form = page.get_by_role("form", name="Register a node")
    form.get_by_label("Name", exact=True).fill("tpu-a")
    form.get_by_label("SKU").fill("TPU-v5e-8")
    form.get_by_label("Accelerator kind").select_option("TPU")
    form.get_by_label("Model").fill("v5e")
    form.get_by_label("Memory per device (GiB)").fill("16")
    form.get_by_label("Price per device-hour").fill("1.2")
    form.get_by_role("button", name="Register").click()
    expect(page.get_by_role("status").filter(has_text="Node tpu-a registered.")).to_be_visible()
    accelerator = api.get("sparkNodes/tpu-a").json()["properties"]["accelerator"]
    assert (accelerator["kind"], accelerator["vendor"], accelerator["model"], accelerator["count"]) == (
        "TPU",
        "Google",
        "v5e",
        8,
    )
    row = page.get_by_role("row").filter(has_text="tpu-a")
    expect(row).to_contain_text("0/8 TPUs allocated")
    expect(row).to_contain_text("8 \u00d7 Google TPU v5e")
    expect(row).to_contain_text("1.2 USD")

    # Ask for 4 TPUs: placed on it, and the overview counts TPUs apart from GPUs
    go(page, "Jobs")
    page.get_by_role("button", name="Submit a job").click()
    form = page.get_by_role("form", name="Submit a job")
    form.get_by_label("Name", exact=True).fill("tpu-job")
    form.get_by_label("Accelerator kind").select_option("TPU")
    form.get_by_label("Devices").fill("4")
    form.get_by_label("Device memory (GiB)").fill("0")
    form.get_by_label("Container image (optional)").fill("nvcr.io/nvidia/pytorch:24.10-py3")
    form.get_by_label("Environment, NAME=value per line").fill("ITL_SIM_FOREVER=1")
    form.get_by_role("button", name="Submit").click()
    page.get_by_role("status").get_by_role("link", name="tpu-job").click()
    expect(page.locator(".job-status .badge")).to_have_text("Running", timeout=LONG)
    expect(page.get_by_role("region", name="Details")).to_contain_text("4 \u00d7 Google TPU")  # a TPU's vendor
    expect(page.get_by_role("region", name="Details")).to_contain_text("tpu-a")
    go(page, "Overview")
    expect(page.get_by_role("region", name="TPUs")).to_contain_text("4 / 8")
    expect(page.get_by_role("meter", name="4 of 8 TPUs allocated, 4 free")).to_be_visible()
    shot(page, "overview-tpu")
    assert api.http.post(f"{api.rg}/sparkJobs/tpu-job/cancel").status_code == 202


def test_consumer_submits_a_job_watches_it_end_and_sees_its_cost_equal_the_apis(stack: Stack, portal, sub: str):
    Api(stack, "ada", ADMIN, sub).put_node("dgx-b", owner="sam", price=3.6)
    api = Api(stack, "cora", CONSUMER, sub)
    page = portal("cora", (CONSUMER,), sub)

    go(page, "Jobs")
    page.get_by_role("button", name="Submit a job").click()
    form = page.get_by_role("form", name="Submit a job")
    # The form refuses what the API refuses (here: more than 64 devices) before sending anything
    form.get_by_label("Devices").fill("65")
    form.get_by_label("Name", exact=True).fill("train-1")
    form.get_by_role("button", name="Submit").click()
    assert form.get_by_label("Devices").evaluate("e => !e.validity.valid && e.validity.rangeOverflow")
    assert api.get("sparkJobs/train-1").status_code == 404
    assert form.get_by_label("Accelerator kind").input_value() == "GPU"  # GPUs unless another kind is chosen
    form.get_by_label("Devices").fill("2")
    form.get_by_label("Device memory (GiB)").fill("80")
    form.get_by_role("button", name="Submit").click()
    page.get_by_role("status").get_by_role("link", name="train-1").click()

    # The job's page follows it to its end, on a timeline
    expect(page.get_by_role("heading", level=1)).to_have_text("Job train-1")
    shot(page, "job-running")
    expect(page.locator(".job-status .badge")).to_have_text("Succeeded", timeout=LONG)
    timeline = page.get_by_role("list", name="Timeline")
    expect(timeline.locator(".step-done")).to_have_count(4)
    expect(timeline.locator("time").first).to_have_attribute("title", re.compile(r" UTC$"))
    job = api.get("sparkJobs/train-1").json()
    cost = job["properties"]["cost"]
    expect(page.locator(".job-cost")).to_have_text(f"{cost['amount']} {cost['currency']}")
    shot(page, "job-detail")

    # Once the hourly roll-up has the job, the usage view's totals are the job's cost, to the last digit
    def rolled_up() -> bool:
        totals = api.get("sparkJobs/train-1/stats", hours=24).json()["totals"]
        return totals.get("cost") == [cost]

    wait_until(rolled_up, "the job's usage to be rolled up")
    page.get_by_role("link", name="Usage and cost").last.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Usage and cost")
    expect(page.locator(f'.total-cost[data-currency="{cost["currency"]}"]')).to_have_text(cost["amount"])
    expect(page.locator("figure").first).to_be_visible()
    shot(page, "usage")

    # A second job of the same name: the API's error is shown with its ARM code
    go(page, "Jobs")
    expect(page.get_by_role("row").filter(has_text="train-1")).to_contain_text("Succeeded")
    page.get_by_role("button", name="Submit a job").click()
    form = page.get_by_role("form", name="Submit a job")
    form.get_by_label("Name", exact=True).fill("train-1")
    form.get_by_role("button", name="Submit").click()
    alert = form.get_by_role("alert")
    expect(alert.locator(".error-code")).to_have_text("Conflict")
    expect(alert.locator(".error-message")).not_to_be_empty()
    shot(page, "jobs")
    page.get_by_role("link", name="My jobs only").click()
    expect(page.get_by_text("Jobs submitted by cora")).to_be_visible()
    expect(page.get_by_role("table", name="Jobs").get_by_role("row").filter(has_text="train-1")).to_have_count(1)


def test_the_submit_form_shows_what_is_offered_and_a_job_of_that_size_runs_at_once(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-o1", owner="sam", price=2.4)
    admin.put_node("dgx-o2", owner="sam", price=3.1)
    cora = Api(stack, "cora", CONSUMER, sub)
    body = {"location": "us-east-1", "properties": {"requestedGpus": 5, "requestedMemoryGb": 400, "workload": FOREVER}}
    busy = cora.http.put(f"{cora.rg}/sparkJobs/busy", json=body)
    assert busy.status_code in (200, 201), busy.text
    wait_until(lambda: cora.get("sparkJobs/busy").json()["properties"]["status"] == "Running", "busy to run")
    api_offer = cora.get(f"{cora.sub}/locations/us-east-1/offers", resourceGroup="rg1").json()["value"][0]
    assert api_offer["properties"]["largestSingleNode"]["devices"] == 8  # the other node is still free

    page = portal("cora", (CONSUMER,), sub)
    go(page, "Jobs")
    page.get_by_role("button", name="Submit a job").click()
    form = page.get_by_role("form", name="Submit a job")
    form.get_by_label("Location (optional)").fill("us-east-1")
    form.get_by_label("Location (optional)").blur()  # a change: the form reads the offers once
    offer = form.locator('.offer[data-offer="gpu-h100"]')
    expect(offer).to_contain_text("GPU h100: up to 8 at once on one node (640 GiB free beside them)")
    expect(offer).to_contain_text("2 of 2 nodes taking work, 2.4\u20133.1 USD per device-hour")
    # a job asking what is offered runs at once
    form.get_by_label("Name", exact=True).fill("offered")
    form.get_by_label("Devices").fill("8")
    form.get_by_label("Device memory (GiB)").fill("640")
    form.get_by_role("button", name="Submit").click()
    expect(page.get_by_role("status").get_by_role("link", name="offered")).to_be_visible()

    def placed() -> bool:
        job = cora.get("sparkJobs/offered").json().get("properties") or {}
        return job.get("status") in ("Scheduled", "Running", "Succeeded") and bool(job.get("assignedNode"))

    wait_until(placed, "the offered job to be placed")
    shot(page, "jobs-offers")


def test_consumer_cancels_a_running_job(stack: Stack, portal, sub: str):
    Api(stack, "ada", ADMIN, sub).put_node("dgx-c", owner="sam")
    api = Api(stack, "cora", CONSUMER, sub)
    page = portal("cora", (CONSUMER,), sub)

    go(page, "Jobs")
    page.get_by_role("button", name="Submit a job").click()
    form = page.get_by_role("form", name="Submit a job")
    form.get_by_label("Name", exact=True).fill("long-1")
    form.get_by_label("Container image (optional)").fill("nvcr.io/nvidia/pytorch:24.10-py3")
    form.get_by_label("Command, one argument per line").fill("python\ntrain.py")
    form.get_by_label("Environment, NAME=value per line").fill("ITL_SIM_FOREVER=1")  # the simulator never ends it
    form.get_by_role("button", name="Submit").click()
    page.get_by_role("status").get_by_role("link", name="long-1").click()
    expect(page.locator(".job-status .badge")).to_have_text("Running", timeout=LONG)
    expect(page.get_by_role("list", name="Timeline").locator(".step-current")).to_contain_text("Running")

    # A job that does not fit beside it waits, and the list says why
    waiting = {"name": "big-1", "requested_gpus": 8, "requested_memory_gb": 640}
    assert api.http.post(f"{api.rg}/sparkJobs", json=waiting).status_code == 202
    go(page, "Jobs")
    row = page.get_by_role("row").filter(has_text="big-1")
    expect(row.locator(".badge")).to_have_text("Pending", timeout=LONG)
    expect(row.locator(".reason")).to_contain_text("Waiting for capacity", timeout=LONG)
    shot(page, "jobs-waiting")
    page.get_by_role("link", name="long-1").click()

    # The running job's log follows in the page: new training steps appear without a reload
    log = page.get_by_role("log", name="Job log")
    expect(log).to_contain_text("container started", timeout=LONG)
    first = log_steps(log)
    expect(log).to_contain_text(f"step {first + 3}:", timeout=LONG)
    expect(page.get_by_role("region", name="Log").get_by_role("status")).to_contain_text("Following the job")
    shot(page, "job-log")

    # Cancelling asks first; keeping it changes nothing
    page.get_by_role("button", name="Cancel job…").click()
    confirm = page.get_by_role("group", name="Confirm cancellation")
    expect(confirm).to_contain_text("Cancel long-1?")
    confirm.get_by_role("button", name="Keep it").click()
    expect(confirm).to_have_count(0)
    assert api.get("sparkJobs/long-1").json()["properties"]["status"] == "Running"
    page.get_by_role("button", name="Cancel job…").click()
    page.get_by_role("group", name="Confirm cancellation").get_by_role("button", name="Cancel job").click()
    # the request is acknowledged while the job still runs (unless it ended first), and the note goes once it ended:
    # its status and reason say how
    requested = page.get_by_role("status").filter(has_text="Cancellation requested.")
    expect(requested.or_(page.locator(".job-status .badge", has_text="Canceled"))).to_be_visible()
    expect(page.locator(".job-status .badge")).to_have_text("Canceled", timeout=LONG)
    assert api.get("sparkJobs/long-1").json()["properties"]["status"] == "Canceled"
    expect(page.locator(".reason")).to_contain_text("cora")
    expect(requested).to_have_count(0)
    # the log ends with the platform's last line, and says so
    expect(log).to_contain_text("job Canceled", timeout=LONG)
    expect(page.get_by_role("region", name="Log").get_by_role("status")).to_contain_text("End of the log.")
    shot(page, "job-canceled")

    # Deleting the finished job asks first too
    page.get_by_role("button", name="Delete…").click()
    page.get_by_role("group", name="Confirm deletion").get_by_role("button", name="Delete job").click()
    expect(page.get_by_role("status").filter(has_text="Job long-1 deleted.")).to_be_visible()
    assert api.get("sparkJobs/long-1").status_code == 404


def log_steps(log: Any) -> int:
    """The last training step a job's log shows (0 before the first)."""
    steps = re.findall(r"step (\d+):", log.inner_text())
    return int(steps[-1]) if steps else 0


def plain(value: float) -> str:
    """A number of a cost query's answer as the portal writes it in ``data-value`` (JavaScript's shortest form)."""
    return f"{Decimal(repr(value)).normalize():f}"


def test_the_cost_view_shows_each_caller_the_rows_the_api_answers_them_in_their_currency(
    stack: Stack, portal, sub: str
):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-g", owner="sam", price=3.6, currency="EUR")
    cora = Api(stack, "cora", CONSUMER, sub)
    job = {"name": "costed-1", "requested_gpus": 2, "requested_memory_gb": 80}
    assert cora.http.post(f"{cora.rg}/sparkJobs", json=job).status_code == 202
    ended = wait_until(
        lambda: (j := cora.get("sparkJobs/costed-1").json())["properties"]["status"] == "Succeeded" and j,
        "the job to end",
    )
    cost = ended["properties"]["cost"]
    assert cost["currency"] == "EUR"
    by_submitter = {"dataset": {"grouping": [{"type": "Dimension", "name": "SubmittedBy"}]}}

    def rolled_up() -> list[Any] | None:
        rows = admin.cost_query(by_submitter)["rows"]
        return rows if rows and Decimal(repr(rows[0][0])) == Decimal(cost["amount"]) else None

    # the cost query reads the roll-up's charges per hour: wait for the job's to be there, to the last digit
    rows = wait_until(rolled_up, "the job's cost to be rolled up")
    assert [r[1:] for r in rows] == [["cora", "EUR"]]

    page = portal("ada", (ADMIN,), sub)
    go(page, "Costs")
    page.get_by_label("Group by 1").select_option(label="Submitted by")
    page.get_by_role("button", name="Run query").click()
    expect(page).to_have_url(re.compile(r"#/costs\?g1=SubmittedBy$"))
    table = page.get_by_role("table", name="Costs")
    expect(table.locator("thead th")).to_have_text(["Cost", "Submitted by", "Currency"])
    row = table.locator("tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td")).to_have_text([re.compile(r"\d"), "cora", "EUR"])
    expect(row.locator(".money")).to_have_attribute("data-currency", "EUR")
    expect(row.locator(".money")).to_have_attribute("data-value", plain(rows[0][0]))
    shot(page, "costs")
    page.reload()  # the hash carries the query: a bookmark shows the same answer
    expect(page.get_by_label("Group by 1")).to_have_value("SubmittedBy")
    expect(page.get_by_role("table", name="Costs").locator("tbody tr .money")).to_have_attribute(
        "data-value", plain(rows[0][0])
    )

    # A consumer sees what the API answers them: their own work's rows; another consumer, none
    own = cora.cost_query(by_submitter)["rows"]
    assert [r[1:] for r in own] == [["cora", "EUR"]]
    consumer = portal("cora", (CONSUMER,), sub)
    consumer.goto(f"{stack.url}/portal/#/costs?g1=SubmittedBy")
    mine = consumer.get_by_role("table", name="Costs").locator("tbody tr")
    expect(mine).to_have_count(len(own))
    expect(mine.locator(".money")).to_have_attribute("data-value", plain(own[0][0]))
    assert Api(stack, "bob", CONSUMER, sub).cost_query(by_submitter)["rows"] == []
    other = portal("bob", (CONSUMER,), sub)
    go(other, "Costs")
    expect(other.get_by_text("No costs in this period that you may see.")).to_be_visible()
    expect(other.get_by_role("table", name="Costs")).to_have_count(0)


def test_the_cost_view_sends_its_forms_query_and_lists_budgets_and_quota_usage(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    month = datetime.now(UTC).strftime("%Y-%m-01T00:00:00Z")
    budget = {
        "properties": {
            "amount": "500",
            "currency": "EUR",
            "timePeriod": {"startDate": month},
            "notifications": {"eighty": {"threshold": 80}},
            "actionAtLimit": "RefuseNewAllocations",
        }
    }
    assert admin.http.put(f"{admin.sub}/budgets/team-month", json=budget).status_code == 201
    quota = {"properties": {"limit": {"limitObjectType": "LimitValue", "value": 8}}}
    assert admin.http.put(f"{admin.sub}/locations/us-east-1/quotas/gpus", json=quota).status_code == 201
    page = portal("ada", (ADMIN,), sub)
    go(page, "Costs")

    # The budget set through the API, with this month's spend as the API has it
    listed = admin.get(f"{admin.sub}/budgets").json()["value"]
    spend = listed[0]["properties"]["currentSpend"]
    row = page.get_by_role("table", name="Budgets").locator("tbody tr")
    expect(row).to_have_count(1)
    expect(row.get_by_role("rowheader")).to_have_text("team-month")
    expect(row.locator(".budget-amount")).to_have_text("500 EUR")
    expect(row.locator(".budget-spend")).to_contain_text(f"{spend['amount']} EUR")
    expect(row).to_contain_text("RefuseNewAllocations")
    # The GPU quota's usage in the location
    gpus = page.get_by_role("table", name="Accelerator quota usage").locator('tr[data-quota="gpus"]')
    expect(gpus.locator(".quota-limit")).to_have_text("8")
    expect(gpus.locator(".quota-current")).to_have_text("0")

    # The form's query is the request's body, and the URL's hash carries it
    form = page.get_by_role("form", name="Cost query")
    form.get_by_label("Timeframe").select_option("Custom")
    form.get_by_label("From (UTC day)").fill("2026-01-01")
    form.get_by_label("To (UTC day, included)").fill("2026-01-31")
    form.get_by_label("Granularity").select_option("Daily")
    form.get_by_label("Measure").select_option("GpuSeconds")
    form.get_by_label("Group by 1").select_option("ResourceGroupName")
    form.get_by_label("Group by 2").select_option(label="A tag…")
    form.get_by_label("Tag key 2").fill("team")
    form.get_by_label("Filter by").select_option("ResourceType")
    form.get_by_label("is one of (one value per line)").fill("ITL.Accelerator/sparkJobs")
    with page.expect_request(lambda r: r.method == "POST" and "/costQuery" in r.url) as sent:
        form.get_by_role("button", name="Run query").click()
    assert sent.value.post_data_json == {
        "type": "ActualCost",
        "timeframe": "Custom",
        "timePeriod": {"from": "2026-01-01T00:00:00Z", "to": "2026-02-01T00:00:00Z"},
        "dataset": {
            "granularity": "Daily",
            "aggregation": {"totalGpuSeconds": {"name": "GpuSeconds", "function": "Sum"}},
            "grouping": [{"type": "Dimension", "name": "ResourceGroupName"}, {"type": "TagKey", "name": "team"}],
            "filter": {
                "dimensions": {"name": "ResourceType", "operator": "In", "values": ["ITL.Accelerator/sparkJobs"]}
            },
        },
    }
    expect(page.get_by_text("No usage in this period that you may see.")).to_be_visible()
    # a daily answer is charted; one with no rows says there is nothing to draw (and draws nothing)
    chart = page.get_by_role("figure", name="Device-seconds per day (UTC), all groups together")
    expect(chart.locator(".empty")).to_have_text("Nothing to draw: the query answered no days.")
    expect(chart.locator("canvas")).to_have_count(0)
    query = dict(parse_qsl(urlsplit(page.url).fragment.split("?", 1)[1]))
    assert query == {
        "timeframe": "Custom",
        "from": "2026-01-01",
        "to": "2026-01-31",
        "granularity": "Daily",
        "measure": "GpuSeconds",
        "g1": "ResourceGroupName",
        "g2": "tag:team",
        "fd": "ResourceType",
        "fv": "ITL.Accelerator/sparkJobs",
    }
    expect(page.get_by_label("Tag key 2")).to_have_value("team")
    shot(page, "costs-query")

    # Another location's quotas: the hash carries it too, and the query's answer stays
    page.get_by_label("Location", exact=True).fill("eu-west-1")
    page.get_by_role("button", name="Show quotas").click()
    expect(page.get_by_role("heading", name=re.compile(r"in eu-west-1$"))).to_be_visible()
    expect(gpus.locator(".quota-limit")).to_have_text("none set")
    expect(page).to_have_url(re.compile(r"&location=eu-west-1$"))
    expect(page.get_by_text("No usage in this period that you may see.")).to_be_visible()

    # Without a role the API refuses the query: its error is shown as it said it
    refused = Api(stack, "nora", None, sub).http.post(f"{admin.sub}/costQuery", json={})
    assert refused.status_code == 403
    nobody = portal("nora", (), sub)
    go(nobody, "Costs")
    alert = nobody.get_by_role("region", name="Cost query answer").get_by_role("alert")
    expect(alert.locator(".error-code")).to_have_text("AuthorizationFailed")
    expect(alert.locator(".error-message")).to_have_text(refused.json()["error"]["message"])


def test_an_admin_sets_changes_and_removes_a_budget_and_a_quota_and_a_consumer_is_not_offered_it(
    stack: Stack, portal, sub: str
):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-q", owner="sam")
    page = portal("ada", (ADMIN,), sub)
    go(page, "Costs")

    # A budget through the form: what the API stores is what the form said
    budgets = page.get_by_role("region", name="Budgets")
    budgets.get_by_role("button", name="Set a budget").click()
    form = page.get_by_role("form", name="Set a budget")
    form.get_by_label("Name", exact=True).fill("team-month")
    form.get_by_label("Amount per month").fill("100")
    form.get_by_label("Currency").fill("USD")
    form.get_by_label("Resource groups (optional)").fill("rg1")
    form.get_by_label("Contact e-mails").fill("finance@example.com")
    form.get_by_label("At the limit").select_option("RefuseNewAllocations")
    form.get_by_role("button", name="Save budget").click()
    expect(budgets.get_by_role("status").filter(has_text="Budget team-month created.")).to_be_visible()
    stored = admin.get(f"{admin.sub}/budgets/team-month").json()["properties"]
    assert (stored["amount"], stored["currency"], stored["actionAtLimit"]) == ("100", "USD", "RefuseNewAllocations")
    assert stored["filter"]["dimensions"]["values"] == ["rg1"]
    assert [n["contactEmails"] for n in stored["notifications"].values()] == [["finance@example.com"]]
    row = page.get_by_role("table", name="Budgets").locator('tr[data-budget="team-month"]')
    expect(row.locator(".budget-amount")).to_have_text("100 USD")
    expect(row).to_contain_text("resource groups rg1")

    # Changed: the form opens filled in, the name fixed
    row.get_by_role("button", name="Edit").click()
    form = page.get_by_role("form", name="Change budget team-month")
    expect(form.get_by_label("Amount per month")).to_have_value("100")
    form.get_by_label("Amount per month").fill("150.5")
    form.get_by_role("button", name="Save budget").click()
    expect(budgets.get_by_role("status").filter(has_text="Budget team-month saved.")).to_be_visible()
    expect(row.locator(".budget-amount")).to_have_text("150.5 USD")
    assert admin.get(f"{admin.sub}/budgets/team-month").json()["properties"]["amount"] == "150.5"

    # A bad value is the API's 400, shown as it said it; nothing changes
    budgets.get_by_role("button", name="Set a budget").click()
    form = page.get_by_role("form", name="Set a budget")
    form.get_by_label("Name", exact=True).fill("bad-mail")
    form.get_by_label("Amount per month").fill("10")
    form.get_by_label("Contact e-mails").fill("not-an-address")
    form.get_by_role("button", name="Save budget").click()
    expect(budgets.get_by_role("alert").locator(".error-code")).to_have_text(re.compile("Invalid"))
    assert admin.get(f"{admin.sub}/budgets/bad-mail").status_code == 404

    # A quota: set from its row, then removed (asked first)
    gpus = page.get_by_role("table", name="Accelerator quota usage").locator('tr[data-quota="gpus"]')
    expect(gpus.locator(".quota-limit")).to_have_text("none set")
    gpus.get_by_role("button", name="Set limit").click()
    quota_form = page.get_by_role("form", name="Set a quota")
    expect(quota_form.get_by_label("Quota")).to_have_value("gpus")
    quota_form.get_by_label("Limit (devices at once)").fill("8")
    quota_form.get_by_role("button", name="Set quota").click()
    expect(gpus.locator(".quota-limit")).to_have_text("8")
    quota = admin.get(f"{admin.sub}/locations/us-east-1/quotas/gpus").json()
    assert quota["properties"]["limit"]["value"] == 8
    gpus.get_by_role("button", name="Remove…").click()
    page.get_by_role("group", name="Confirm removing gpus").get_by_role("button", name="Remove quota").click()
    expect(gpus.locator(".quota-limit")).to_have_text("none set")
    assert admin.get(f"{admin.sub}/locations/us-east-1/quotas/gpus").status_code == 404
    # and the budget, likewise
    row.get_by_role("button", name="Remove…").click()
    page.get_by_role("group", name="Confirm removing team-month").get_by_role("button", name="Remove budget").click()
    expect(budgets.get_by_role("status").filter(has_text="Budget team-month removed.")).to_be_visible()
    assert admin.get(f"{admin.sub}/budgets/team-month").status_code == 404
    shot(page, "costs-admin-forms")

    # A consumer is shown the budgets and quotas, not offered to set them
    consumer = portal("cora", (CONSUMER,), sub)
    go(consumer, "Costs")
    expect(consumer.get_by_role("button", name="Set a budget")).to_be_disabled()
    expect(consumer.get_by_text("Setting a budget is for admins.")).to_be_visible()
    expect(consumer.get_by_role("button", name="Set a quota")).to_be_disabled()
    expect(consumer.get_by_role("button", name="Set limit")).to_have_count(0)


def test_the_hourly_cost_chart_draws_a_series_per_currency_whose_totals_are_the_tables_and_the_apis(
    stack: Stack, portal, sub: str
):
    # Two nodes billing in two currencies, a job of cora's on each (placed by GPU model)
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-eur", owner="sam", price=3.6, currency="EUR", gpu_model="H100")
    admin.put_node("dgx-usd", owner="sam", price=2.5, currency="USD", gpu_model="A100")
    cora = Api(stack, "cora", CONSUMER, sub)
    costs = {}
    for name, model in (("on-eur", "H100"), ("on-usd", "A100")):
        job = {"name": name, "requested_gpus": 2, "requested_memory_gb": 80, "gpu_model": model}
        assert cora.http.post(f"{cora.rg}/sparkJobs", json=job).status_code == 202
    for name in ("on-eur", "on-usd"):
        ended = wait_until(
            lambda n=name: (j := cora.get(f"sparkJobs/{n}").json())["properties"]["status"] == "Succeeded" and j,
            f"job {name} to end",
        )
        costs[ended["properties"]["cost"]["currency"]] = Decimal(ended["properties"]["cost"]["amount"])
    assert set(costs) == {"EUR", "USD"}

    def totals(rows: list[list[Any]]) -> dict[str, Decimal]:
        out: dict[str, Decimal] = {}
        for row in rows:  # [totalCost, UsageDateTime, Currency]
            out[row[-1]] = out.get(row[-1], Decimal(0)) + Decimal(repr(row[0]))
        return out

    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    two_days = {
        "from": f"{now - timedelta(days=2):%Y-%m-%dT%H:00:00Z}",
        "to": f"{now + timedelta(hours=1):%Y-%m-%dT%H:00:00Z}",
    }
    hourly = {"timeframe": "Custom", "timePeriod": two_days, "dataset": {"granularity": "Hourly"}}
    wait_until(lambda: totals(admin.cost_query(hourly)["rows"]) == costs, "both jobs' costs to be rolled up")

    # One click from the overview: the hourly cost chart of the last 24 h, its query in the hash (a bookmark)
    page = portal("ada", (ADMIN,), sub)
    # (the overview asks its own cost queries too: its spend, by no period)
    hourly_query = lambda r: (  # noqa: E731
        r.method == "POST" and "/costQuery" in r.url and (r.post_data_json or {})["dataset"]["granularity"] == "Hourly"
    )
    asked = datetime.now(UTC)  # the period ends after the hour the query was asked in (not the hour of the check)
    with page.expect_request(hourly_query) as sent:
        page.get_by_role("link", name="Cost per hour, last 24 h").click()
    expect(page).to_have_url(re.compile(r"#/costs\?timeframe=Custom&hours=24&granularity=Hourly$"))
    body = sent.value.post_data_json
    period = body["timePeriod"]
    start, end = (datetime.fromisoformat(period[k]) for k in ("from", "to"))
    assert (end - start).total_seconds() == 24 * 3600 and start.minute == 0 and end > asked
    assert body["dataset"]["granularity"] == "Hourly" and body["timeframe"] == "Custom"
    expect(page.get_by_label("Or the last hours")).to_have_value("24")
    expect(page.get_by_label("From (UTC day)")).to_be_disabled()
    answered = totals(admin.cost_query(body)["rows"])
    assert answered == costs

    # The chart: a canvas and a series per currency; its caption's totals are the table's and the API's
    chart = page.get_by_role("figure", name=re.compile(r"^Cost per hour"))
    expect(chart.locator(".chart-canvas canvas").first).to_be_visible()
    expect(chart.locator(".u-legend .u-series .u-label")).to_have_text(["Time", "Cost (EUR)", "Cost (USD)"])
    # each currency on its own axis labelled with it, and the current hour's bar drawn whole (half an hour of room)
    drawn = chart.evaluate(
        "f => { const p = f.closest('itl-chart').plot; const t = p.data[0];"
        " return {labels: p.axes.slice(1).map(a => a.label), room: p.scales.x.max - t[t.length - 1]}; }"
    )
    assert drawn["labels"] == ["EUR", "USD"] and drawn["room"] >= 1800, drawn
    caption = chart.locator("figcaption .chart-total")
    expect(caption).to_have_count(2)
    shown = {t.get_attribute("data-currency"): Decimal(t.get_attribute("data-value")) for t in caption.all()}
    assert shown == answered
    table = page.get_by_role("table", name="Costs")
    cells = table.locator("tbody .money")
    expect(cells).to_have_count(len(admin.cost_query(body)["rows"]))
    in_table: dict[str, Decimal] = {}
    for cell in cells.all():
        currency = cell.get_attribute("data-currency")
        in_table[currency] = in_table.get(currency, Decimal(0)) + Decimal(cell.get_attribute("data-value"))
    assert in_table == answered
    footer = {
        t.get_attribute("data-currency"): Decimal(t.get_attribute("data-value"))
        for t in table.locator("tfoot .money").all()
    }
    assert footer == answered
    # Hover: the hour in the user's time zone and in UTC
    over = chart.locator(".chart-canvas .u-over")
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
    expect(chart.locator(".u-legend .u-series").first.locator(".u-value")).to_have_text(re.compile(r"\(\d\d:00 UTC\)$"))
    expect(page.locator("#fatal")).to_have_count(0)  # nothing broke (a resize loop did, once)
    shot(page, "costs-hourly-chart")

    # One grouping: a series per submitter and currency
    page.get_by_label("Group by 1").select_option(label="Submitted by")
    page.get_by_role("button", name="Run query").click()
    expect(chart.locator(".u-legend .u-series .u-label")).to_have_text(["Time", "cora (EUR)", "cora (USD)"])

    # An hourly query of a day with nothing in it says there is nothing to draw
    page.goto(f"{stack.url}/portal/#/costs?timeframe=Custom&from=2026-01-01&to=2026-01-01&granularity=Hourly")
    empty = page.get_by_role("figure", name="Cost per hour")
    expect(empty.locator(".empty")).to_have_text("Nothing to draw: the query answered no hours.")
    expect(empty.locator("canvas")).to_have_count(0)
    expect(page.get_by_text("No costs in this period that you may see.")).to_be_visible()
    expect(page.locator("#fatal")).to_have_count(0)


def test_a_consumer_never_sees_another_users_job_or_a_nodes_earnings(stack: Stack, portal, sub: str):
    Api(stack, "ada", ADMIN, sub).put_node("dgx-d", owner="sam")
    alice = Api(stack, "alice", CONSUMER, sub)
    submitted = alice.http.post(
        f"{alice.rg}/sparkJobs", json={"name": "alices-job", "requested_gpus": 1, "requested_memory_gb": 8}
    )
    assert submitted.status_code == 202, submitted.text
    page = portal("bob", (CONSUMER,), sub)

    go(page, "Jobs")
    expect(page.get_by_text("No jobs.")).to_be_visible()
    expect(page.get_by_role("table", name="Jobs")).to_have_count(0)
    page.goto(f"{stack.url}/portal/#/jobs/rg1/alices-job")
    expect(page.get_by_role("alert").locator(".error-code")).to_have_text("ResourceNotFound")

    page.goto(f"{stack.url}/portal/#/nodes/rg1/dgx-d")
    earnings = page.get_by_role("region", name="Utilisation and earnings")
    expect(earnings).to_contain_text("A node\u2019s utilisation and earnings are for admins and its supplier (sam).")
    expect(earnings.locator(".earnings")).to_have_count(0)
    expect(earnings.get_by_role("alert")).to_have_count(0)  # not asked, so not refused
    shot(page, "consumer-node-no-earnings")

    # A consumer is not offered what only suppliers and admins may do: each is greyed out with the reason
    actions = page.get_by_role("region", name="Actions")
    expect(actions.get_by_role("button", name="Set price")).to_have_count(0)
    expect(actions.get_by_role("button", name="Cordon")).to_have_count(0)
    expect(actions).to_contain_text("Setting the price, cordoning and uncordoning are for admins")
    expect(actions.get_by_role("button", name="Delete…")).to_be_disabled()
    expect(actions).to_contain_text("Deleting a node is for admins.")
    go(page, "Nodes")
    expect(page.get_by_role("button", name="Register a node")).to_be_disabled()
    expect(page.get_by_text("Registering a node is for admins.")).to_be_visible()
    go(page, "Instances")
    expect(page.get_by_role("button", name="Provision an instance")).to_be_disabled()
    go(page, "Jobs")
    expect(page.get_by_role("button", name="Submit a job")).to_be_enabled()

    # The overview shows what bob is billed (nothing: alice's job is not his), as the cost query answers him
    go(page, "Overview")
    spend = page.get_by_role("region", name="Spend")
    expect(spend.get_by_role("heading")).to_have_text("Billed to you")
    expect(page.get_by_test_id("spend-month")).to_have_text("—")
    expect(spend).to_contain_text("The cost query's answer for you")


def test_supplier_sees_earnings_sets_price_and_cordons_but_may_not_delete(stack: Stack, portal, sub: str):
    api = Api(stack, "ada", ADMIN, sub)
    api.put_node("dgx-e", owner="sam", price=2.0)
    page = portal("sam", (SUPPLIER,), sub)

    go(page, "Nodes")
    page.get_by_role("link", name="dgx-e").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Node dgx-e")
    earnings = page.get_by_role("region", name="Utilisation and earnings")
    expect(earnings.get_by_text("Earnings over 24 h")).to_be_visible()
    expect(earnings.get_by_role("alert")).to_have_count(0)

    page.get_by_label("New price per GPU-hour").fill("3.1")  # a GPU node's price: per GPU-hour
    page.get_by_role("button", name="Set price").click()
    expect(page.get_by_role("status").filter(has_text="Price changed.")).to_be_visible()
    expect(page.locator("#node-price-now")).to_have_text("3.1 USD")
    assert api.get("sparkNodes/dgx-e").json()["properties"]["pricing"]["pricePerGpuHour"] == 3.1

    page.get_by_role("button", name="Cordon").click()
    expect(page.get_by_role("region", name="Capacity").locator(".badge")).to_have_text("Cordoned")
    page.get_by_role("button", name="Uncordon").click()
    expect(page.get_by_role("region", name="Capacity").locator(".badge")).to_have_text("Available")
    shot(page, "supplier-node")

    # Deleting is an admin's: offered greyed out with the reason (the API would refuse it), and a supplier
    # submits no jobs
    expect(page.get_by_role("button", name="Delete…")).to_be_disabled()
    expect(page.get_by_role("region", name="Actions")).to_contain_text("Deleting a node is for admins.")
    assert api.get("sparkNodes/dgx-e").status_code == 200
    go(page, "Jobs")
    expect(page.get_by_role("button", name="Submit a job")).to_be_disabled()
    expect(page.get_by_text("Submitting a job is for consumers and admins.")).to_be_visible()


FOREVER = {
    "image": "nvcr.io/nvidia/pytorch:24.10-py3",
    "command": ["python", "train.py"],
    "env": {"ITL_SIM_FOREVER": "1"},
}


def last_hours_body(hours: int) -> dict[str, Any]:
    """The cost query the portal asks for the last ``hours`` up to and including the current hour (UTC)."""
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    period = {
        "from": (end - timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "to": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {
        "type": "ActualCost",
        "timeframe": "Custom",
        "timePeriod": period,
        "dataset": {"granularity": "None", "aggregation": {"totalCost": {"name": "Cost", "function": "Sum"}}},
    }


def billed(api: Api, hours: int) -> list[str]:
    """``["0.123456 USD", ...]``: what the cost query bills ``api``'s caller over the last ``hours``, per currency."""
    answer = api.cost_query(last_hours_body(hours))
    names = [c["name"] for c in answer["columns"]]
    totals: dict[str, Decimal] = {}
    for row in answer["rows"]:
        currency = row[names.index("Currency")]
        totals[currency] = totals.get(currency, Decimal(0)) + Decimal(repr(row[names.index("totalCost")]))
    return [f"{plain(float(amount))} {currency}" for currency, amount in sorted(totals.items())]


def run_jobs(reader: Api, jobs: dict[str, Api]) -> dict[str, dict[str, Any]]:
    """Submit a 1-GPU job of each name as its caller and wait for each to end with a cost: name → its cost."""
    for name, caller in jobs.items():
        body = {"name": name, "requested_gpus": 1, "requested_memory_gb": 8}
        assert caller.http.post(f"{caller.rg}/sparkJobs", json=body).status_code == 202

    def cost_of(name: str) -> dict[str, Any] | None:
        job = reader.get(f"sparkJobs/{name}").json()["properties"]
        return job["cost"] if job["status"] in ("Succeeded", "Failed") and job.get("cost") else None

    return {name: wait_until(lambda n=name: cost_of(n), f"{name} to end") for name in jobs}


def test_every_money_figure_is_the_apis_bill_for_the_caller_deleted_work_included(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-m", owner="sam", price=3.6)
    cora = Api(stack, "cora", CONSUMER, sub)
    costs = run_jobs(admin, {"adas-job": admin, "coras-job": cora})
    cora_cost = f"{plain(float(costs['coras-job']['amount']))} {costs['coras-job']['currency']}"
    # once rolled up, the cost query bills cora her job and nothing of ada's
    wait_until(lambda: billed(cora, 720) == [cora_cost], "cora's job to be rolled up")
    wait_until(lambda: len(admin.cost_query(last_hours_body(720))["rows"]) > 0, "ada's job to be rolled up")
    # a deleted job stays billed
    assert cora.http.delete(f"{cora.rg}/sparkJobs/coras-job").status_code == 200

    page = portal("cora", (CONSUMER,), sub)
    expect(page.get_by_test_id("spend-month")).to_have_text(" ".join(billed(cora, 720)))
    expect(page.get_by_test_id("spend-day")).to_have_text(" ".join(billed(cora, 24)))
    expect(page.get_by_role("region", name="Spend")).to_contain_text("asked")  # when the figure was read
    page.get_by_role("link", name="Usage and cost").last.click()
    page.get_by_role("button", name="Show what you were billed, per resource").click()
    expect(page.locator(".sum-spend")).to_have_text(cora_cost)
    expect(
        page.get_by_role("table", name="Billed per resource").get_by_role("row").filter(has_text="coras-job")
    ).to_contain_text(cora_cost)
    expect(
        page.get_by_role("table", name="Billed per resource").get_by_role("row").filter(has_text="adas-job")
    ).to_have_count(0)
    shot(page, "usage-billed")

    # an admin is billed both: the figure is the API's answer for her, not a sum the portal makes
    ada = portal("ada", (ADMIN,), sub)
    month = billed(admin, 720)
    assert month != [cora_cost]
    expect(ada.get_by_test_id("spend-month")).to_have_text(" ".join(month))


def export_today(stack: Stack) -> str:
    """Export today early on the stack (every day before it first, as the schedule does): today's UTC date."""
    today = datetime.now(UTC).date()
    for day in (today - timedelta(days=1), today):  # yesterday is refused when it is before the first usage
        done = subprocess.run(
            [str(BIN / "itl-local"), "schedule", "billing-export", "--day", day.isoformat()],
            env=stack.env,
            capture_output=True,
            text=True,
        )
    assert done.returncode == 0 or "before" in done.stderr, done.stdout + done.stderr
    return today.isoformat()


def test_a_subscriptions_billing_file_downloads_as_the_api_serves_it_to_each_caller(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-f", owner="sam", price=1.8)
    cora = Api(stack, "cora", CONSUMER, sub)
    cost = run_jobs(admin, {"adas-billed": admin, "coras-billed": cora})["coras-billed"]
    # once her usage is recorded (the roll-up has it), the day is exported
    wait_until(lambda: billed(cora, 24) == [f"{plain(float(cost['amount']))} {cost['currency']}"], "the roll-up")
    wait_until(lambda: len(billed(admin, 24)) > 0 and billed(admin, 24) != billed(cora, 24), "ada's roll-up")
    today = export_today(stack)

    def api_rows(api: Api) -> list[list[str]]:
        body = api.get(f"{api.sub}/billingExports/{today}").json()["properties"]
        rows = [[c["name"] for c in body["columns"]], *body["rows"]]
        while body["nextLink"]:
            body = api.http.get(body["nextLink"]).json()["properties"]
            rows += body["rows"]
        return rows

    cora_rows = api_rows(cora)
    names = {row[cora_rows[0].index("ResourceName")] for row in cora_rows[1:]}
    assert names == {"coras-billed"}  # her own work only
    assert "adas-billed" in {row[cora_rows[0].index("ResourceName")] for row in api_rows(admin)[1:]}

    page = portal("cora", (CONSUMER,), sub, start="#/usage")
    expect(page.get_by_role("heading", level=1)).to_have_text("Usage and cost")
    form = page.get_by_role("form", name="Download a billing file")
    expect(page.locator("p.loading")).to_have_count(0)  # the view has loaded what it shows: no re-render resets the day
    day = form.get_by_label("Day (UTC)")
    day.fill(today)
    expect(day).to_have_value(today)
    try:
        # the file is saved once every page is read: on a busy machine that can take longer than a click's wait
        with page.expect_download(timeout=60_000) as download:
            form.get_by_role("button", name="Download CSV").click()
    except PlaywrightTimeoutError:
        alerts = page.get_by_role("alert").all_inner_texts()
        raise AssertionError(f"no file was offered for {today}; the page showed {alerts}") from None
    assert download.value.suggested_filename == f"itl-accelerator-focus-{sub}-{today}.csv"
    saved = Path(download.value.path()).read_text(encoding="utf-8")
    assert list(csv.reader(io.StringIO(saved, newline=""))) == cora_rows  # the file is the API's rows, cell for cell
    summary = page.locator(".bill-summary")
    expect(summary).to_contain_text(f"{len(cora_rows) - 1} rows")
    expect(summary.locator(".money")).to_have_text(f"{cost['amount']} {cost['currency']}")  # her job's cost, exactly
    shot(page, "usage-billing-file")

    # a day not exported yet says why, with the API's code
    tomorrow = (datetime.now(UTC).date() + timedelta(days=1)).isoformat()
    form.get_by_label("Day (UTC)").fill(tomorrow)
    form.get_by_role("button", name="Download CSV").click()
    expect(page.get_by_role("alert").locator(".error-code")).to_have_text("BillingExportNotFound")


def test_a_deep_link_opened_signed_out_shows_its_view_after_sign_in(stack: Stack, portal, sub: str):
    Api(stack, "ada", ADMIN, sub).put_node("dgx-l", owner="sam")
    page = portal("ada", (ADMIN,), sub, start="#/nodes/rg1/dgx-l")
    expect(page.get_by_role("heading", level=1)).to_have_text("Node dgx-l")
    assert page.url.endswith("#/nodes/rg1/dgx-l")
    # the menu works from there
    go(page, "Jobs")
    go(page, "Nodes")
    page.get_by_role("link", name="dgx-l").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Node dgx-l")


def test_views_follow_status_changes_without_a_reload(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-v", owner="sam")
    page = portal("ada", (ADMIN,), sub)
    expect(page.get_by_test_id("jobs-running")).to_have_text("0")

    body = {"name": "live-1", "requested_gpus": 1, "requested_memory_gb": 8, "workload": FOREVER}
    assert admin.http.post(f"{admin.rg}/sparkJobs", json=body).status_code == 202
    wait_until(lambda: admin.get("sparkJobs/live-1").json()["properties"]["status"] == "Running", "live-1 to run")
    # the overview reads the fleet again by itself (every 10 s)
    expect(page.get_by_test_id("jobs-running")).to_have_text("1", timeout=20_000)
    go(page, "Jobs")
    row = page.get_by_role("row").filter(has_text="live-1")
    expect(row.locator(".badge")).to_have_text("Running")
    assert admin.http.post(f"{admin.rg}/sparkJobs/live-1/cancel").status_code == 202
    wait_until(lambda: admin.get("sparkJobs/live-1").json()["properties"]["status"] == "Canceled", "live-1 to end")
    expect(row.locator(".badge")).to_have_text("Canceled", timeout=10_000)  # the list: every 3 s while one is active
    # a node's page follows its capacity
    page.get_by_role("navigation", name="Views").get_by_role("link", name="Nodes", exact=True).click()
    page.get_by_role("link", name="dgx-v").click()
    expect(page.get_by_role("region", name="Capacity").get_by_role("meter")).to_have_attribute("aria-valuenow", "0")
    assert (
        admin.http.patch(f"{admin.rg}/sparkNodes/dgx-v", json={"properties": {"availability": "Cordoned"}}).status_code
        == 200
    )
    expect(page.get_by_role("region", name="Capacity").locator(".badge")).to_have_text("Cordoned", timeout=10_000)


def test_the_overview_of_120_jobs_takes_a_handful_of_small_compressed_requests(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-o", owner="sam")
    # 120 jobs no node could ever hold (16 GPUs, the node has 8): each ends at once, inadmissible
    for n in range(120):
        body = {"name": f"job-{n:03d}", "requested_gpus": 16, "requested_memory_gb": 8}
        assert admin.http.post(f"{admin.rg}/sparkJobs", json=body).status_code == 202, n
    listed = admin.get(f"{admin.sub}/sparkJobs", **{"$top": 1000}).json()["value"]
    assert len(listed) == 120
    seen: list[tuple[str, int]] = []

    def finished(request: Any) -> None:
        if request.url.startswith(f"{stack.url}/subscriptions/"):
            seen.append((request.url, request.sizes()["responseBodySize"]))

    page = portal("ada", (ADMIN,), sub, on_request=finished)
    expect(page.get_by_test_id("spend-month")).to_be_visible()
    expect(page.get_by_role("region", name="Jobs")).to_contain_text("running")
    page.wait_for_load_state("networkidle")
    first_load = list(seen)
    assert 0 < len(first_load) <= 6, first_load
    transferred = sum(size for _, size in first_load)
    assert transferred < 200_000, transferred
    print(f"overview of {len(listed)} jobs: {len(first_load)} API requests, {transferred} bytes compressed")


def money_of(text: str) -> Decimal:
    """The amount of a ``"0.012000 USD ..."`` figure as the portal shows it."""
    return Decimal(text.split()[0])


def test_a_running_job_has_one_cost_so_far_on_its_page_and_in_the_list(stack: Stack, portal, sub: str):
    Api(stack, "ada", ADMIN, sub).put_node("dgx-r", owner="sam", price=3.6)
    cora = Api(stack, "cora", CONSUMER, sub)
    body = {"name": "run-1", "requested_gpus": 2, "requested_memory_gb": 80, "workload": FOREVER}
    assert cora.http.post(f"{cora.rg}/sparkJobs", json=body).status_code == 202
    wait_until(lambda: cora.get("sparkJobs/run-1").json()["properties"]["status"] == "Running", "run-1 to run")
    page = portal("cora", (CONSUMER,), sub, start="#/jobs/rg1/run-1")
    expect(page.get_by_role("heading", level=1)).to_have_text("Job run-1")

    # While it runs: the API's cost so far, when it is as of, at the price the job locked — growing as it runs
    details = page.get_by_role("region", name="Details")
    line = details.locator(".job-cost-line")
    expect(details.get_by_text("Cost so far", exact=True)).to_be_visible()
    expect(line).to_have_text(re.compile(r"^\d+\.\d{6} USD \(as of \d\d:\d\d:\d\d, at 3\.6 USD per GPU-hour\)$"))
    expect(page.locator(".job-cost")).not_to_have_text("0.000000 USD")
    shown = money_of(page.locator(".job-cost").inner_text())
    now = cora.get("sparkJobs/run-1").json()["properties"]
    assert now["costAsOf"] and 0 < shown <= Decimal(now["cost"]["amount"]), (shown, now)
    expect(line.locator("time")).to_have_attribute("title", re.compile(r" UTC$"))
    expect(page.locator("main")).not_to_contain_text("not metered yet")
    # the hourly roll-up keeps its chart, said to trail the job's cost, with no total of its own beside it
    usage = page.get_by_role("region", name="Usage over time")
    expect(usage.locator("figcaption")).to_contain_text("the hourly roll-up")
    expect(usage.locator(".money, .totals")).to_have_count(0)
    shot(page, "job-cost-so-far")

    # The list shows that figure too, so far
    go(page, "Jobs")
    row = page.get_by_role("table", name="Jobs").get_by_role("row").filter(has_text="run-1")
    cost = row.locator("td").last
    expect(cost).to_have_text(re.compile(r"^\d+\.\d{6} USD so far$"))
    listed = money_of(cost.inner_text())
    assert 0 < listed <= Decimal(cora.get("sparkJobs/run-1").json()["properties"]["cost"]["amount"])

    # Once it ended: its final cost, the API's to the last digit, in both places, and nothing "so far"
    assert cora.http.post(f"{cora.rg}/sparkJobs/run-1/cancel").status_code == 202
    final = wait_until(
        lambda: (p := cora.get("sparkJobs/run-1").json()["properties"])["status"] == "Canceled" and p, "run-1 to end"
    )
    assert final.get("costAsOf") is None
    expect(cost).to_have_text(f"{final['cost']['amount']} USD", timeout=LONG)
    row.get_by_role("link", name="run-1").click()
    expect(page.locator(".job-cost")).to_have_text(f"{final['cost']['amount']} USD")
    expect(details.get_by_text("Cost", exact=True)).to_be_visible()
    expect(line).not_to_contain_text("as of")


def test_the_activity_log_is_offered_to_admins_only_and_never_asked_for_others(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-act", owner="sam")
    cora = Api(stack, "cora", CONSUMER, sub)
    body = {"name": "coras-1", "requested_gpus": 1, "requested_memory_gb": 8}
    assert cora.http.post(f"{cora.rg}/sparkJobs", json=body).status_code == 202
    since = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    audit_asked: list[str] = []

    def note(request: Any) -> None:
        if "/auditEvents" in request.url:
            audit_asked.append(request.url)

    for subject, role in (("cora", CONSUMER), ("sam", SUPPLIER)):
        page = portal(subject, (role,), sub, on_request=note)
        nav = page.get_by_role("navigation", name="Views")
        expect(nav.get_by_role("link", name="Costs", exact=True)).to_be_visible()
        expect(nav.get_by_role("link", name="Activity log")).to_have_count(0)
        # a deep link says whose the log is, without asking the API
        page.goto(f"{stack.url}/portal/#/activity")
        expect(page.get_by_role("heading", level=1)).to_have_text("Activity log")
        expect(page.get_by_role("status")).to_contain_text("The activity log is for admins.")
        expect(page.get_by_role("table", name="Audit events")).to_have_count(0)
        shot(page, f"activity-{subject}")
        if role == CONSUMER:
            page.goto(f"{stack.url}/portal/#/jobs/rg1/coras-1")
            expect(page.get_by_role("link", name="Usage and cost", exact=True).last).to_be_visible()
            expect(page.get_by_role("main").get_by_role("link", name="Activity", exact=True)).to_have_count(0)
    assert audit_asked == []
    # so no refusal of theirs was written into the admins' audit trail
    events = admin.get(f"{admin.sub}/auditEvents", startTime=since, **{"$top": 1000}).json()["value"]
    denied = [e for e in events if e["outcome"] == "Denied" and e["actor_id"] in ("cora", "sam")]
    assert denied == []
    # an admin is offered it
    ada = portal("ada", (ADMIN,), sub)
    go(ada, "Activity log")
    expect(ada.get_by_role("table", name="Audit events")).to_be_visible()


def test_each_role_is_shown_and_asked_only_the_node_figures_it_may_read(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    sams = admin.put_node("dgx-sams", owner="sam")["id"]
    admin.put_node("dgx-olgas", owner="olga")
    stats_asked: list[str] = []

    def note(request: Any) -> None:
        if "/sparkNodes/" in request.url and "/stats" in request.url:
            stats_asked.append(request.url)

    def node_options(page: Any) -> list[str]:
        go(page, "Usage and cost")
        expect(page.locator(".loading")).to_have_count(0, timeout=LONG)
        labels = page.get_by_label("Resource").locator("option").all_inner_texts()
        return sorted(label for label in labels if label.startswith("Node "))

    # A consumer: no node to choose in the usage view, and a node's page says whose its figures are
    cora = portal("cora", (CONSUMER,), sub, on_request=note)
    assert node_options(cora) == []
    cora.goto(f"{stack.url}/portal/#/usage?resource={sams}")
    expect(cora.get_by_role("status").filter(has_text="Reading a node")).to_contain_text(
        "Reading a node\u2019s utilisation and earnings is for admins and the node\u2019s supplier."
    )
    cora.goto(f"{stack.url}/portal/#/nodes/rg1/dgx-sams")
    figures = cora.get_by_role("region", name="Utilisation and earnings")
    expect(figures).to_contain_text("are for admins and its supplier (sam)")
    expect(figures.get_by_role("button")).to_have_count(0)
    expect(figures.get_by_role("alert")).to_have_count(0)
    assert stats_asked == []

    # A supplier: its own node's figures, offered and shown; another supplier's node is not asked for by itself
    sam = portal("sam", (SUPPLIER,), sub, on_request=note)
    assert node_options(sam) == ["Node dgx-sams (rg1)"]
    sam.goto(f"{stack.url}/portal/#/nodes/rg1/dgx-sams")
    expect(sam.get_by_role("region", name="Utilisation and earnings").get_by_text("Earnings over 24 h")).to_be_visible()
    sam.goto(f"{stack.url}/portal/#/nodes/rg1/dgx-olgas")
    figures = sam.get_by_role("region", name="Utilisation and earnings")
    expect(figures).to_contain_text("are for admins and its supplier (olga)")
    # (a node it supplied before still holds its own earnings: those it may ask for)
    expect(figures.get_by_role("button", name="Show my earnings on dgx-olgas")).to_be_visible()
    assert not [u for u in stats_asked if "dgx-olgas" in u]

    # An admin: every node's
    ada = portal("ada", (ADMIN,), sub)
    assert node_options(ada) == ["Node dgx-olgas (rg1)", "Node dgx-sams (rg1)"]


def test_value_axes_start_at_zero_and_a_month_of_hours_is_drawn_per_day(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-z", owner="sam", price=3.6)
    cost = run_jobs(admin, {"zero-1": admin})["zero-1"]
    sam = Api(stack, "sam", SUPPLIER, sub)

    def earned() -> bool:
        totals = sam.get("sparkNodes/dgx-z/stats", hours=24).json()["totals"]["cost"]
        return [Decimal(c["amount"]) for c in totals] == [Decimal(cost["amount"])]

    wait_until(earned, "the job's earnings to be rolled up")
    wait_until(lambda: billed(sam, 720), "the supplier's earnings to be in the cost query")
    page = portal("sam", (SUPPLIER,), sub, start="#/nodes/rg1/dgx-z")
    scale = "(f, key) => { const s = f.closest('itl-chart').plot.scales[key]; return [s.min, s.max]; }"
    points = "f => f.closest('itl-chart').plot.data[0].length"

    # The earnings per hour: bars from 0 (a single hour's earnings is not drawn as the whole height of its axis)
    hourly = page.get_by_role("figure", name=re.compile(r"^Earnings per hour"))
    expect(hourly.locator(".chart-canvas canvas").first).to_be_visible()
    low, high = hourly.evaluate(scale, "y:USD")
    assert low == 0 and high >= float(cost["amount"]), (low, high)
    utilisation = page.get_by_role("figure", name=re.compile(r"^GPU utilisation and allocation per hour"))
    assert utilisation.evaluate(scale, "y:%") == [0, 100]
    # two hours' earnings, 0.02 and 0.03 USD, are drawn from 0: the second bar half as tall again, not three times
    two_hours = page.evaluate(
        """async () => {
          const chart = Object.assign(document.createElement('itl-chart'), {
            bars: true, title: 'Two hours', points: [{t: 1767225600, v: 0.02}, {t: 1767229200, v: 0.03}],
            series: [{key: 'v', label: 'Earnings', unit: 'USD'}],
          });
          document.querySelector('main').append(chart);
          await chart.updateComplete;
          const s = chart.plot.scales['y:USD'];
          chart.remove();
          return [s.min, s.max];
        }"""
    )
    assert two_hours[0] == 0 and two_hours[1] >= 0.03, two_hours

    # 720 hours: a bar per UTC day, and the chart says so
    page.get_by_label("Hours").fill("720")
    page.get_by_role("button", name="Show").click()
    daily = page.get_by_role("figure", name=re.compile(r"^Earnings per day \(UTC\)"))
    expect(daily.locator("figcaption")).to_contain_text("720 hours are more than 3 days")
    expect(daily.locator(".chart-canvas canvas").first).to_be_visible()
    assert 30 <= daily.evaluate(points) <= 32
    assert daily.evaluate(scale, "y:USD")[0] == 0
    shot(page, "node-earnings-per-day")

    # The cost query's hourly answer over 30 days: drawn per day too, its table keeping every hour
    page.goto(f"{stack.url}/portal/#/costs?timeframe=Custom&hours=720&granularity=Hourly")
    chart = page.get_by_role("figure", name=re.compile(r"^Cost per day \(UTC\)"))
    expect(chart.locator("figcaption")).to_contain_text("the hourly answer drawn per UTC day")
    expect(chart.locator(".chart-canvas canvas").first).to_be_visible()
    assert 30 <= chart.evaluate(points) <= 32
    assert chart.evaluate(scale, "y:USD")[0] == 0
    expect(page.get_by_role("table", name="Costs").locator("thead th").nth(1)).to_have_text("Hour")


def test_the_offers_line_reads_cleanly_and_says_which_currencies_a_budget_leaves_out(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-usd", owner="sam", price=2.5, currency="USD")
    admin.put_node("dgx-eur", owner="sam", price=3.0, currency="EUR")
    month = datetime.now(UTC).strftime("%Y-%m-01T00:00:00Z")
    budget = {"properties": {"amount": "1000", "currency": "USD", "timePeriod": {"startDate": month}}}
    assert admin.http.put(f"{admin.sub}/budgets/usd-only", json=budget).status_code == 201
    cora = Api(stack, "cora", CONSUMER, sub)
    offered = cora.get(f"{cora.sub}/locations/us-east-1/offers", resourceGroup="rg1").json()["value"]
    assert [o["properties"]["budget"]["excludedCurrencies"] for o in offered] == [["EUR"]]

    page = portal("cora", (CONSUMER,), sub)
    go(page, "Jobs")
    page.get_by_role("button", name="Submit a job").click()
    form = page.get_by_role("form", name="Submit a job")
    form.get_by_label("Location (optional)").fill("us-east-1")
    form.get_by_label("Location (optional)").blur()
    offer = form.locator(".offer")
    expect(offer).to_contain_text("nodes billing in EUR are not offered: your budget counts USD only")
    expect(offer).to_contain_text("(640 GiB free beside them), 2 of 2 nodes taking work, 2.5 USD per device-hour")
    assert not re.search(r",\s*,", offer.inner_text()), offer.inner_text()
    # the price estimate leaves the EUR node out too, saying why
    estimate = form.locator(".estimate")
    expect(estimate).to_contain_text("nodes billing in EUR left out: your budget counts USD only")
    expect(estimate).to_contain_text("Estimate on 1 GPU node here: 2.5 USD per GPU-hour")
    shot(page, "jobs-offers-budget")


def test_an_instance_serves_under_one_word_and_a_consumer_is_told_its_cost_is_not_hers(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-i", owner="sam", price=2.0)
    body = {"name": "chat", "model": "mistral:7b", "gpus": 1, "memory_gb": 40}
    assert admin.http.post(f"{admin.rg}/sparkNodes/dgx-i/sparkOllamaInstances", json=body).status_code == 202
    wait_until(
        lambda: (
            admin.get("sparkNodes/dgx-i/sparkOllamaInstances/chat").json()["properties"]["provisioningState"]
            == "Succeeded"
        ),
        "chat to serve",
    )
    page = portal("cora", (CONSUMER,), sub)
    go(page, "Instances")
    row = page.get_by_role("table", name="Instances").get_by_role("row").filter(has_text="chat")
    expect(row.locator(".badge")).to_have_text("Serving")
    row.get_by_role("link", name="chat").click()
    expect(page.get_by_role("region", name="Instance").locator("dd .badge")).to_have_text("Serving")
    totals = page.get_by_role("region", name="Requests and tokens").locator(".totals")
    expect(totals).to_contain_text("not billed to you: an instance is provisioned, and paid for, by the subscription")
    shot(page, "instance-consumer")
    page.get_by_role("link", name="dgx-i").click()
    expect(page.get_by_role("region", name="Instances on this node").locator(".badge")).to_have_text("Serving")
    # an admin, whom it is billed to, is told nothing of the kind
    ada = portal("ada", (ADMIN,), sub, start="#/instances/rg1/dgx-i/chat")
    expect(ada.get_by_role("region", name="Requests and tokens").locator(".totals")).to_contain_text("cost")
    expect(ada.locator(".instance-cost-note")).to_have_count(0)


def test_a_consumer_sees_how_near_each_budget_is_to_its_limit(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    month = datetime.now(UTC).strftime("%Y-%m-01T00:00:00Z")
    budget = {
        "properties": {
            "amount": "100",
            "currency": "USD",
            "timePeriod": {"startDate": month},
            "actionAtLimit": "RefuseNewAllocations",
        }
    }
    assert admin.http.put(f"{admin.sub}/budgets/team", json=budget).status_code == 201
    cora = Api(stack, "cora", CONSUMER, sub)
    standing = cora.get(f"{cora.sub}/budgets/team").json()["properties"]["standing"]
    page = portal("cora", (CONSUMER,), sub)
    go(page, "Costs")
    table = page.get_by_role("table", name="Budgets")
    expect(table.locator("thead th").nth(3)).to_have_text("Left this month")
    row = table.locator('tr[data-budget="team"]')
    expect(row.locator(".budget-spend")).to_contain_text(f"{standing['remainingPercent']} % left")
    expect(row.locator(".budget-exceeded")).to_have_text("Exceeded" if standing["exceeded"] else "No")
    expect(row).to_contain_text("RefuseNewAllocations")


def test_an_attempts_reason_names_its_exit_code_once(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-x", owner="sam")
    workload = {**FOREVER, "env": {"ITL_SIM_EXIT_CODES": "1,0", "ITL_SIM_SECONDS": "1"}}
    body = {
        "name": "retry-1",
        "requested_gpus": 1,
        "requested_memory_gb": 8,
        "retryStrategy": {"attempts": 2, "intervalSeconds": 1},
        "workload": workload,
    }
    response = admin.http.post(f"{admin.rg}/sparkJobs", json=body)
    assert response.status_code == 202, response.text
    job = wait_until(
        lambda: (p := admin.get("sparkJobs/retry-1").json()["properties"])["status"] == "Succeeded" and p,
        "retry-1 to succeed on its second attempt",
    )
    first = job["attempts"][0]
    assert first["exitCode"] == 1 and "code 1" in first["statusReason"], first
    page = portal("ada", (ADMIN,), sub, start="#/jobs/rg1/retry-1")
    reason = page.get_by_role("region", name="Attempts").locator("tbody tr").first.locator(".reason")
    expect(reason).to_have_text(first["statusReason"])  # as the API says it: the code once


def test_the_jobs_list_is_newest_first_by_default_and_pages_in_that_order(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-sort", owner="sam")
    names = ["a-oldest", *(f"job-{n:03d}" for n in range(53)), "zz-newest"]
    for name in names:  # each asks more GPUs than the node has: it ends at once, inadmissible
        body = {"name": name, "requested_gpus": 16, "requested_memory_gb": 8}
        assert admin.http.post(f"{admin.rg}/sparkJobs", json=body).status_code == 202, name
    page = portal("ada", (ADMIN,), sub)
    go(page, "Jobs")
    rows = page.get_by_role("table", name="Jobs").locator("tbody tr")
    expect(page.get_by_label("Sort")).to_have_value("newest")
    expect(rows).to_have_count(50)
    expect(rows.first).to_contain_text("zz-newest")
    expect(rows.nth(1)).to_contain_text("job-052")
    expect(page.locator(".jobs-order")).to_contain_text("Showing 50 of 55 jobs, newest first; sorted by the portal")
    page.get_by_role("button", name="Show 5 more").click()
    expect(rows).to_have_count(55)
    expect(rows.last).to_contain_text("a-oldest")
    shot(page, "jobs-newest-first")
    page.get_by_label("Sort").select_option("name")
    expect(rows).to_have_count(50)
    expect(rows.first).to_contain_text("a-oldest")
    page.get_by_label("Sort").select_option("oldest")
    expect(rows.first).to_contain_text("a-oldest")
    expect(rows.nth(1)).to_contain_text("job-000")


AXE = REPO_ROOT / "portal" / "node_modules" / "axe-core" / "axe.min.js"
#: The rules axe checks: WCAG 2.0, 2.1 and 2.2, levels A and AA.
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]


def axe_violations(page: Any) -> list[str]:
    """What axe-core (the portal's dev dependency, injected into the page) finds against WCAG 2.2 AA: rule id and
    the elements, one string each."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    found = page.evaluate(
        "async (tags) => (await axe.run(document, {runOnly: {type: 'tag', values: tags}})).violations"
        ".map(v => `${v.id}: ${v.nodes.map(n => n.target.join(' ')).join(', ')}`)",
        WCAG,
    )
    return list(found)


@pytest.mark.parametrize(
    ("scheme", "width", "height"),
    [("light", 1280, 800), ("dark", 1280, 800), ("dark", 390, 844)],
    ids=["light-desktop", "dark-desktop", "dark-phone"],
)
def test_every_view_passes_axe_in_the_users_colour_scheme(stack: Stack, portal, sub: str, scheme: str, width, height):
    assert AXE.is_file(), "axe-core is missing: ./dev installs the portal's npm packages"
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-a11y", owner="sam")
    body = {"name": "a11y-job", "requested_gpus": 1, "requested_memory_gb": 8, "workload": FOREVER}
    assert admin.http.post(f"{admin.rg}/sparkJobs", json=body).status_code == 202
    month = datetime.now(UTC).strftime("%Y-%m-01T00:00:00Z")
    budget = {"properties": {"amount": "50", "currency": "USD", "timePeriod": {"startDate": month}}}
    assert admin.http.put(f"{admin.sub}/budgets/a11y", json=budget).status_code == 201
    start = (datetime.now(UTC) + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
    window = {"startTime": start.strftime("%Y-%m-%dT%H:00:00Z"),
              "endTime": (start + timedelta(hours=4)).strftime("%Y-%m-%dT%H:00:00Z")}  # fmt: skip
    booking = {"location": "us-east-1", "properties": {"accelerator": {"kind": "GPU", "count": 1}, **window}}
    assert admin.http.put(f"{admin.rg}/capacityReservations/a11y", json=booking).status_code == 201
    page = portal("ada", (ADMIN,), sub, viewport=(width, height), color_scheme=scheme)
    assert page.evaluate("() => matchMedia('(prefers-color-scheme: dark)').matches") is (scheme == "dark")
    views = {
        "#/overview": "Overview",
        "#/nodes": "Nodes",
        "#/nodes/rg1/dgx-a11y": "Node dgx-a11y",
        "#/instances": "Instances",
        "#/jobs": "Jobs",
        "#/jobs/rg1/a11y-job": "Job a11y-job",
        "#/reservations": "Reservations",
        "#/usage": "Usage and cost",
        "#/costs": "Costs",
        "#/activity": "Activity log",
    }
    found = {}
    for hash_, heading in views.items():
        page.evaluate("h => { location.hash = h; }", hash_)
        expect(page.get_by_role("heading", level=1)).to_have_text(heading)
        expect(page.locator(".loading")).to_have_count(0, timeout=LONG)
        if hash_ == "#/jobs":
            page.get_by_role("button", name="Submit a job").click()
            expect(page.locator(".estimate")).to_be_visible()
        if hash_ == "#/costs":
            page.get_by_role("button", name="Set a budget").click()
        if hash_ == "#/reservations":
            page.get_by_role("button", name="Book capacity").click()
            expect(page.get_by_role("figure", name="Reservations by node")).to_be_visible()
        if hash_ == "#/jobs/rg1/a11y-job":
            expect(page.get_by_role("log", name="Job log")).to_be_visible(timeout=LONG)
        found[hash_] = axe_violations(page)
    shot(page, f"axe-{scheme}-{width}")
    # what a consumer is shown instead of what is not hers to read or set: the activity log's and a node's figures'
    # reasons, the budgets' share left, the instance cost's note
    consumer = portal("cora", (CONSUMER,), sub, viewport=(width, height), color_scheme=scheme)
    for hash_, heading in {
        "#/activity": "Activity log",
        "#/nodes/rg1/dgx-a11y": "Node dgx-a11y",
        "#/costs": "Costs",
        "#/usage": "Usage and cost",
    }.items():
        consumer.evaluate("h => { location.hash = h; }", hash_)
        expect(consumer.get_by_role("heading", level=1)).to_have_text(heading)
        expect(consumer.locator(".loading")).to_have_count(0, timeout=LONG)
        found[f"consumer {hash_}"] = axe_violations(consumer)
    assert {h: v for h, v in found.items() if v} == {}
    assert admin.http.post(f"{admin.rg}/sparkJobs/a11y-job/cancel").status_code == 202


def test_the_smaller_things_a_user_reaches_for(stack: Stack, portal, sub: str):
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-s", owner="sam", price=2.5)
    other = f"{sub}-b"
    page = portal("ada", (ADMIN,), sub, scopes=(f"/subscriptions/{other}",))
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=stack.url)

    # The submit form prices what it asks before it is sent, and takes secret variables the page never shows
    go(page, "Jobs")
    page.get_by_role("button", name="Submit a job").click()
    form = page.get_by_role("form", name="Submit a job")
    form.get_by_label("Devices").fill("2")
    expect(form.locator(".estimate")).to_contain_text("about 5 USD an hour for 2")
    form.get_by_label("Accelerator kind").select_option("TPU")
    expect(form.locator(".estimate")).to_contain_text("No TPU node here could hold 2 TPUs")
    form.get_by_label("Accelerator kind").select_option("GPU")
    form.get_by_label("Name", exact=True).fill("secret-1")
    form.get_by_label("Container image (optional)").fill("nvcr.io/nvidia/pytorch:24.10-py3")
    form.get_by_label("Environment, NAME=value per line").fill("ITL_SIM_FOREVER=1")
    form.get_by_label("Secret variables, NAME=value per line").fill("HF_TOKEN=hf_abc123")
    form.get_by_role("button", name="Submit").click()
    page.get_by_role("status").get_by_role("link", name="secret-1").click()
    expect(page.locator(".job-env")).to_contain_text("HF_TOKEN=******")
    expect(page.locator("body")).not_to_contain_text("hf_abc123")
    job = admin.get("sparkJobs/secret-1").json()
    assert job["properties"]["workload"]["secretEnv"] == {"HF_TOKEN": "******"}

    # Copy an id
    wait_until(lambda: admin.get("sparkJobs/secret-1").json()["properties"]["status"] == "Running", "secret-1 to run")
    page.get_by_role("button", name="Copy id").click()
    expect(page.locator(".copy-note").filter(has_text="Id copied.")).to_be_visible()
    assert page.evaluate("() => navigator.clipboard.readText()") == job["id"]
    assert admin.http.post(f"{admin.rg}/sparkJobs/secret-1/cancel").status_code == 202

    # Switching subscription on a resource's page shows that subscription's list, not a 404
    page.get_by_label("Subscription", exact=True).select_option(other)
    expect(page.get_by_role("heading", level=1)).to_have_text("Jobs")
    expect(page.get_by_role("alert")).to_have_count(0)
    page.get_by_label("Subscription", exact=True).select_option(sub)

    # A cost query's rows as a CSV file
    wait_until(lambda: admin.cost_query(last_hours_body(24))["rows"], "the job's usage to be rolled up", timeout=120)
    page.goto(f"{stack.url}/portal/#/costs?timeframe=Custom&hours=24&g1=ResourceName")
    table = page.get_by_role("table", name="Costs")
    expect(table.locator("tbody tr").first).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download CSV").click()
    text = Path(download.value.path()).read_text()
    lines = text.strip().splitlines()
    assert lines[0].split(",")[:2] == ["totalCost", "ResourceName"] and lines[0].endswith("Currency")
    assert len(lines) == 1 + table.locator("tbody tr").count()
    assert any(line.split(",")[1] == "secret-1" for line in lines[1:])
    assert download.value.suggested_filename.startswith("costs-") and download.value.suggested_filename.endswith(".csv")


#: Where a text element's lines break: {breaks: the character before each break}, from each character's place.
LINE_BREAKS = """e => {
  const chars = [];
  const walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    for (let i = 0; i < n.data.length; i++) {
      const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
      const rect = r.getClientRects()[0];
      if (rect && rect.width) chars.push([n.data[i], rect.top]);
    }
  }
  const breaks = [];
  for (let i = 1; i < chars.length; i++) if (chars[i][1] > chars[i - 1][1] + 2) breaks.push(chars[i - 1][0]);
  return {text: chars.map(c => c[0]).join(''), breaks};
}"""


def test_admin_reads_the_activity_log_filtered_and_paged(stack: Stack, portal, sub: str):
    api = Api(stack, "ada", ADMIN, sub)
    for name in ("n1", "n2", "n3"):
        api.put_node(name, owner="sam")
    page = portal("ada", (ADMIN,), sub)

    go(page, "Activity log")
    page.get_by_label("Page size").fill("2")
    page.get_by_role("button", name="Apply").click()
    rows = page.get_by_role("table", name="Audit events").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("n3")  # newest first: what just happened is on the first page
    page.get_by_role("button", name="Load more").click()
    expect(rows).to_have_count(3)
    expect(rows.last).to_contain_text("n1")
    expect(rows.first.locator("time")).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
    shot(page, "activity")

    n2 = api.get("sparkNodes/n2").json()["id"]
    page.get_by_label("Resource id").fill(n2)
    page.get_by_role("button", name="Apply").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("n2")
    # the actor is the API's filter (the request carries it), not a narrowing of what was loaded
    page.get_by_label("Actor (user id, or SYSTEM)").fill("nobody-else")
    with page.expect_request(lambda r: "/auditEvents" in r.url and "actor=nobody-else" in r.url):
        page.get_by_role("button", name="Apply").click()
    expect(page.get_by_text("No events.")).to_be_visible()
    page.get_by_label("Resource id").fill("")
    page.get_by_label("Actor (user id, or SYSTEM)").fill("ada")
    page.get_by_label("Order").select_option("Oldest first")
    page.get_by_role("button", name="Apply").click()
    expect(rows.first).to_contain_text("n1")

    # the action names wrap only after a '/' (a narrow column, as on a phone), never inside a word
    page.set_viewport_size({"width": 390, "height": 844})
    page.get_by_label("Order").select_option("Newest first")
    page.get_by_role("button", name="Apply").click()
    action = (
        page.get_by_role("table", name="Audit events").locator("tbody tr").first.locator("td").nth(2).locator("code")
    )
    expect(action).to_contain_text("ITL.Accelerator/sparkNodes/")
    lines = action.evaluate(LINE_BREAKS)
    assert all(before == "/" for before in lines["breaks"]), lines


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_every_view_fits_the_screen_is_labelled_and_works_from_the_keyboard(
    stack: Stack, portal, sub: str, width: int, height: int
):
    Api(stack, "ada", ADMIN, sub).put_node("dgx-f", owner="ada")
    page = portal("ada", (ADMIN,), sub, viewport=(width, height))
    phone = width < 700

    views = ["Overview", "Nodes", "Instances", "Jobs", "Usage and cost", "Costs", "Activity log"]
    for view in views:
        if phone:
            page.get_by_role("button", name="Menu").click()
        go(page, view)
        expect(page.locator(".loading")).to_have_count(0)
        for button in page.get_by_role(
            "button", name=re.compile(r"^(Register a node|Provision an instance|Submit a job)$")
        ).all():
            button.click()
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 1, f"{view} is {overflow}px wider than a {width}px screen"
        unlabelled = page.evaluate(
            """[...document.querySelectorAll('main input, main select, main textarea, header input, header select')]
                 .filter(e => e.type !== 'hidden' && !e.labels.length && !e.getAttribute('aria-label'))
                 .map(e => e.outerHTML)"""
        )
        assert unlabelled == [], f"{view}: fields without a label: {unlabelled}"
        shot(page, f"{view.lower().replace(' ', '-')}-{'phone' if phone else 'desktop'}")

    if not phone:
        # Keyboard: skip link to the content, then Tab to a view link and Enter follows it
        page.goto(f"{stack.url}/portal/#/overview")
        page.reload()  # as a person arriving: nothing focused yet
        expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        page.keyboard.press("Tab")
        expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator("main")).to_be_focused()
        nav_nodes = page.get_by_role("navigation", name="Views").get_by_role("link", name="Nodes")
        for _ in range(12):
            if nav_nodes.evaluate("e => e === document.activeElement"):
                break
            page.keyboard.press("Tab")
        expect(nav_nodes).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", level=1)).to_have_text("Nodes")
        expect(page.locator("main")).to_be_focused()  # the new view's content is where the keyboard goes on


def test_an_unreachable_api_shows_an_error_not_a_blank_page(stack: Stack, portal, sub: str):
    page = portal("ada", (ADMIN,), sub)
    page.route(re.compile(r".*/subscriptions/.*"), lambda route: route.abort())

    go(page, "Nodes")

    alert = page.get_by_role("alert")
    expect(alert.locator(".error-code")).to_have_text("NetworkError")
    expect(alert).to_contain_text("could not be reached")
    shot(page, "error-unreachable")


def test_the_stack_answers_the_portals_origin_with_cors_and_no_other(stack: Stack, sub: str):
    # The portal is served from the API's own origin locally; a portal on another origin is what CORS is for, and
    # the stack configures it from template.yaml's PortalOrigin (its own origin here), never '*'.
    origin = stack.url
    api = Api(stack, "ada", ADMIN, sub)
    nodes = f"{api.rg}/sparkNodes"

    preflight = api.http.options(nodes, headers={"Origin": origin, "Access-Control-Request-Method": "PUT"})
    allowed = api.http.get(nodes, headers={"Origin": origin})
    other = api.http.get(nodes, headers={"Origin": "https://elsewhere.example.com"})

    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == origin
    assert "PUT" in preflight.headers["access-control-allow-methods"]
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == origin
    assert "azure-asyncoperation" in allowed.headers["access-control-expose-headers"].lower()
    assert "access-control-allow-origin" not in other.headers


def test_sign_out_ends_the_session_and_comes_back_to_sign_in(stack: Stack, portal, sub: str):
    page = portal("ada", (ADMIN,), sub)

    page.get_by_role("button", name="Sign out").click()

    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert page.evaluate("Object.keys(sessionStorage).filter(k => k.startsWith('oidc.user'))") == []
