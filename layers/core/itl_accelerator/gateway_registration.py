"""Registration with the ITL Control Plane's API gateway, as ``itl-controlplane-sdk``'s provider server does it.

What the SDK does (``itl_controlplane_sdk.fastapi.provider_server.ProviderServer._register_with_gateway``, read at
its release 1.0.3 and at its main branch): poll ``GET {gateway}/health`` until it answers 200, at most
``API_GATEWAY_MAX_RETRIES`` times (30) ``API_GATEWAY_RETRY_INTERVAL`` seconds apart (2); then ``POST
{gateway}/providers/register`` once; 200 or 201 is registered; anything else, or no gateway, is logged and not
fatal. The two versions spell the body differently:

- 1.0.3: ``{name, namespace, base_url, resource_types, version, health_endpoint: "/health"}``
- main:  ``{name, namespace, baseUrl, resourceTypes, healthCheckEndpoint: "/health", description}``

A gateway of either version reads its own spelling; one that ignores unknown fields (FastAPI's default) reads the
union of both, which is sent first. A gateway that refuses unknown fields (400 or 422) gets each spelling alone in
turn, the released one first. Nothing else is retried within one registration: the provider registers again at
every deployment (a CloudFormation custom resource) and on a schedule (template.yaml), so a gateway that forgot it
(a restart) learns of it again within the schedule's period.

The provider registers as namespace ``ITL.Accelerator`` with its resource types (``sparkNodes``,
``sparkNodes/sparkOllamaInstances``, ``sparkJobs``), its name (``SERVICE_NAME``), the API version it serves as its
version, its base URL (``PROVIDER_BASE_URL``: the API's URL in AWS) and ``/health`` as its health endpoint.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_fixed

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import DEFAULT_API_VERSION
from itl_accelerator.observability import logger
from itl_accelerator.resources import RESOURCE_TYPES
from itl_accelerator.settings import Settings

HEALTH_ENDPOINT = "/health"
#: Seconds each request to the gateway may take (the SDK's: 5 for /health, 10 for the registration).
HEALTH_TIMEOUT_SECONDS, REGISTER_TIMEOUT_SECONDS = 5.0, 10.0
#: Answers of a gateway that refuses a body it does not understand: the other spellings are tried.
_REFUSED_BODY = (400, 422)


@dataclass(frozen=True)
class ProviderDescription:
    """What the gateway is told: ``name``, ``namespace``, ``base_url`` (scheme://host[/stage]), ``resource_types``
    (type names below the namespace), ``version``, ``health_endpoint`` (a path below ``base_url``), ``description``."""

    name: str
    namespace: str
    base_url: str
    resource_types: tuple[str, ...]
    version: str
    health_endpoint: str = HEALTH_ENDPOINT
    description: str = ""

    def released_body(self) -> dict[str, Any]:
        """The body of itl-controlplane-sdk 1.0.3."""
        return {
            "name": self.name,
            "namespace": self.namespace,
            "base_url": self.base_url,
            "resource_types": list(self.resource_types),
            "version": self.version,
            "health_endpoint": self.health_endpoint,
        }

    def main_body(self) -> dict[str, Any]:
        """The body of itl-controlplane-sdk's main branch."""
        return {
            "name": self.name,
            "namespace": self.namespace,
            "baseUrl": self.base_url,
            "resourceTypes": list(self.resource_types),
            "healthCheckEndpoint": self.health_endpoint,
            "description": self.description,
        }

    def bodies(self) -> list[tuple[str, dict[str, Any]]]:
        """``(spelling, body)`` in the order they are tried: both spellings at once, then each alone."""
        return [
            ("both", {**self.released_body(), **self.main_body()}),
            ("released", self.released_body()),
            ("main", self.main_body()),
        ]


def describe_provider(settings: Settings, base_url: str | None = None) -> ProviderDescription:
    """This provider as the gateway is told of it; ``base_url`` (default: ``PROVIDER_BASE_URL``, else
    ``PUBLIC_BASE_URL``). Raises ``ValueError`` when no base URL is known."""
    url = (base_url or settings.provider_base_url or settings.public_base_url).rstrip("/")
    if not url:
        raise ValueError("no base URL to register: set PROVIDER_BASE_URL (the provider's API URL)")
    return ProviderDescription(
        name=settings.service_name,
        namespace=PROVIDER_NAMESPACE,
        base_url=url,
        resource_types=tuple(t.type_name.removeprefix(PROVIDER_NAMESPACE + "/") for t in RESOURCE_TYPES.values()),
        version=DEFAULT_API_VERSION,
        description="ITL Accelerator Resource Provider: GPU nodes, Ollama instances on them, GPU jobs",
    )


@dataclass(frozen=True)
class RegistrationOutcome:
    """How a registration went: ``registered``; ``gateway`` (its URL); ``status`` (the gateway's last answer to the
    registration, None when it was never sent); ``spelling`` (``both``, ``released`` or ``main``: the body it
    accepted); ``health_checks`` (``/health`` requests made); ``reason`` (why not, for people)."""

    registered: bool
    gateway: str
    status: int | None = None
    spelling: str | None = None
    health_checks: int = 0
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The outcome in JSON's camelCase (what the registration function returns and logs)."""
        return {
            "registered": self.registered,
            "gateway": self.gateway,
            "status": self.status,
            "spelling": self.spelling,
            "healthChecks": self.health_checks,
            "reason": self.reason,
        }


class GatewayNotReady(Exception):
    """The gateway's ``/health`` did not answer 200 (or could not be reached): asked again after the interval."""


class GatewayRegistration:
    """Registers a :class:`ProviderDescription` with the gateway at ``gateway_url`` (module docstring). ``http``,
    ``sleep`` and ``clock`` are injectable (tests)."""

    def __init__(
        self,
        gateway_url: str,
        *,
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.gateway_url = gateway_url.rstrip("/")
        self._http = http
        self._sleep = sleep
        self._clock = clock

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(headers={"User-Agent": "itl-accelerator-provider"})
        return self._http

    def wait_for_gateway(self, attempts: int, interval: float, time_left: Callable[[], float] | None = None) -> int:
        """Poll ``GET {gateway}/health`` until it answers 200 (tenacity's retry): the number of requests it took,
        or 0 when it never did within ``attempts`` (``interval`` seconds apart), or before ``time_left()`` (seconds)
        ran short of a pause and the requests after it."""
        if attempts < 1:
            return 0
        asked = itertools.count(1)

        def ask() -> int:
            number = next(asked)
            self._check_health()
            return number

        def out_of_tries(state: RetryCallState) -> bool:
            if state.attempt_number >= attempts:
                return True
            return time_left is not None and time_left() < interval + REGISTER_TIMEOUT_SECONDS + HEALTH_TIMEOUT_SECONDS

        retrying = Retrying(
            retry=retry_if_exception_type(GatewayNotReady),
            stop=out_of_tries,
            wait=wait_fixed(interval),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(ask)
        except GatewayNotReady:
            return 0

    def _check_health(self) -> None:
        """One ``GET {gateway}/health``; raises :class:`GatewayNotReady` unless it answered 200."""
        try:
            response = self._client().get(self.gateway_url + HEALTH_ENDPOINT, timeout=HEALTH_TIMEOUT_SECONDS)
        except httpx.HTTPError as exc:
            raise GatewayNotReady(type(exc).__name__) from exc
        if response.status_code != 200:
            raise GatewayNotReady(f"{HEALTH_ENDPOINT} answered {response.status_code}")

    def register(
        self,
        provider: ProviderDescription,
        *,
        attempts: int,
        interval: float,
        time_left: Callable[[], float] | None = None,
    ) -> RegistrationOutcome:
        """Wait for the gateway, then register ``provider`` (the spellings in turn while the gateway refuses the
        body with 400/422). Never raises for the gateway's sake: the outcome says what happened."""
        checks = self.wait_for_gateway(attempts, interval, time_left)
        if not checks:
            reason = f"the ITL gateway at {self.gateway_url} did not answer {HEALTH_ENDPOINT} with 200"
            logger.warning("ITL gateway not available: not registered", extra={"gateway": self.gateway_url})
            return RegistrationOutcome(False, self.gateway_url, health_checks=attempts, reason=reason)
        status: int | None = None
        for spelling, body in provider.bodies():
            try:
                response = self._client().post(
                    self.gateway_url + "/providers/register", json=body, timeout=REGISTER_TIMEOUT_SECONDS
                )
            except httpx.HTTPError as exc:
                logger.warning("ITL gateway registration failed", extra={"gateway": self.gateway_url})
                reason = f"the registration request failed: {type(exc).__name__}"
                return RegistrationOutcome(False, self.gateway_url, status, None, checks, reason)
            status = response.status_code
            if 200 <= status < 300:
                logger.info(
                    "Registered with the ITL gateway",
                    extra={"gateway": self.gateway_url, "status": status, "spelling": spelling},
                )
                return RegistrationOutcome(True, self.gateway_url, status, spelling, checks)
            if status not in _REFUSED_BODY:
                break
        logger.warning("ITL gateway refused the registration", extra={"gateway": self.gateway_url, "status": status})
        reason = f"the ITL gateway answered {status} to POST /providers/register"
        return RegistrationOutcome(False, self.gateway_url, status, None, checks, reason)


def register_provider(
    settings: Settings,
    *,
    gateway_url: str | None = None,
    base_url: str | None = None,
    attempts: int | None = None,
    interval: float | None = None,
    time_left: Callable[[], float] | None = None,
    registration: GatewayRegistration | None = None,
) -> RegistrationOutcome:
    """Register this provider with the gateway ``gateway_url`` (default ``CONTROL_PLANE_API_URL``); the health
    polls default to the settings' (the SDK's 30 x 2 s). An empty gateway URL registers nothing (``reason`` says
    so); so does a missing base URL."""
    gateway = (gateway_url if gateway_url is not None else settings.control_plane_api_url).rstrip("/")
    if not gateway:
        return RegistrationOutcome(False, "", reason="no ITL gateway configured (CONTROL_PLANE_API_URL is empty)")
    try:
        provider = describe_provider(settings, base_url)
    except ValueError as exc:
        return RegistrationOutcome(False, gateway, reason=str(exc))
    registrar = registration or GatewayRegistration(gateway)
    return registrar.register(
        provider,
        attempts=attempts or settings.provider_registration_attempts,
        interval=settings.provider_registration_interval_seconds if interval is None else interval,
        time_left=time_left,
    )
