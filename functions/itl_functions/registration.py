"""Registration with the ITL Control Plane's API gateway (itl_accelerator/gateway_registration.py), at deploy time
and on a schedule.

- As a CloudFormation custom resource (template.yaml ``ProviderRegistration``): on Create and Update it registers
  with ``ResourceProperties.GatewayUrl`` and ``BaseUrl`` (waiting for the gateway as the ITL SDK does, 30 x 2 s) and
  answers SUCCESS whatever the gateway did — ``Data.Registered`` is ``"true"`` or ``"false"`` and the reason is in
  the answer and the log: a deployment never fails or rolls back because the ITL gateway is away (the schedule
  registers again). On Delete it answers SUCCESS at once (the SDK has no deregistration).
- As a schedule's target (EventBridge Scheduler, every 15 minutes): registers again, waiting at most
  ``healthAttempts`` polls of the gateway's /health (the schedule's input), so a gateway that restarted and forgot
  its providers learns of this one again. Returns the outcome.

Each run publishes ``ProviderRegistrationRuns`` and ``ProviderRegistrations`` or ``ProviderRegistrationFailed`` (a
gateway is configured and did not take the registration).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from itl_accelerator.custom_resource import is_custom_resource_request, respond
from itl_accelerator.gateway_registration import RegistrationOutcome, register_provider
from itl_accelerator.observability import log_metrics, logger, metrics, tracer
from itl_accelerator.settings import get_settings

PHYSICAL_ID = "itl-gateway-registration/ITL.Accelerator"


def _count(outcome: RegistrationOutcome | None) -> None:
    metrics.add_metric(name="ProviderRegistrationRuns", unit=MetricUnit.Count, value=1)
    if outcome is None:
        return
    if outcome.registered:
        metrics.add_metric(name="ProviderRegistrations", unit=MetricUnit.Count, value=1)
    elif outcome.gateway:
        metrics.add_metric(name="ProviderRegistrationFailed", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """A custom resource request (answered on its ResponseURL) or the schedule's input (module docstring).
    Returns the registration's outcome (``registered``, ``gateway``, ``status``, ``spelling``, ``reason``)."""
    settings = get_settings()

    def time_left() -> float:
        return float(context.get_remaining_time_in_millis()) / 1000

    if is_custom_resource_request(event):
        return _deploy(event, settings, time_left)
    attempts = int(event.get("healthAttempts") or settings.provider_registration_attempts)
    outcome = register_provider(settings, attempts=attempts, time_left=time_left)
    _count(outcome)
    log = logger.info if outcome.registered or not outcome.gateway else logger.warning
    log("ITL gateway registration", extra={"outcome": outcome.as_dict(), "scheduled_time": event.get("scheduledTime")})
    return outcome.as_dict()


def _deploy(event: dict[str, Any], settings: Any, time_left: Any) -> dict[str, Any]:
    if event["RequestType"] == "Delete":
        _count(None)
        respond(event, success=True, physical_id=event.get("PhysicalResourceId") or PHYSICAL_ID)
        return {"registered": False, "reason": "deleted: nothing to undo"}
    properties = event.get("ResourceProperties") or {}
    try:
        outcome = register_provider(
            settings,
            gateway_url=properties.get("GatewayUrl"),
            base_url=properties.get("BaseUrl") or None,
            time_left=time_left,
        )
    except Exception as exc:  # noqa: BLE001 - a deployment must not hang or fail because of the ITL gateway
        logger.exception("ITL gateway registration crashed")
        outcome = RegistrationOutcome(False, str(properties.get("GatewayUrl") or ""), reason=type(exc).__name__)
    _count(outcome)
    data = {"Registered": str(outcome.registered).lower(), "Gateway": outcome.gateway}
    reason = "registered" if outcome.registered else f"not registered: {outcome.reason}"
    respond(event, success=True, physical_id=PHYSICAL_ID, data=data, reason=reason)
    return outcome.as_dict()
