"""ARM identifiers, names and protocol constants for the ``ITL.Accelerator`` namespace.

Rules followed (ARM_CONTRACT.md): ids are full ARM paths without host or api-version (19); names match
case-insensitively and keep the casing last supplied (24); ``api-version`` is optional, unknown values are refused (25).
"""

from __future__ import annotations

import re

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.errors import InvalidParameter, InvalidResourceName, MissingApiVersion, UnsupportedApiVersion

#: api-version values this provider serves; the first is the default (newest stable).
SUPPORTED_API_VERSIONS: tuple[str, ...] = ("2026-11-01",)
DEFAULT_API_VERSION = SUPPORTED_API_VERSIONS[0]

SPARK_NODES = "sparkNodes"
SPARK_NODES_TYPE = f"{PROVIDER_NAMESPACE}/{SPARK_NODES}"

# Resource names: 1-63 characters, letters, digits, '-', '_' and '.', starting with a letter or digit and not
# ending with '.'. Keeps names safe as DynamoDB key parts (no '#') and as DNS labels on the DGX Platform.
_RESOURCE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9_-])?$")
# ARM resource group names: 1-90 of letters, digits, '_', '(', ')', '-', '.'; not ending with '.'.
_RESOURCE_GROUP = re.compile(r"^[-\w().]{0,89}[-\w()]$", re.ASCII)
# Subscription ids: a GUID in Azure; the ITL Control Plane also uses short slugs (e.g. "sub-123").
_SUBSCRIPTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")


def validate_api_version(value: str | None) -> str:
    """Return the api-version to serve.

    ``None`` (absent) → the default (ITL: the Control Plane sends none). Empty → 400 ``MissingApiVersionParameter``.
    Unknown → 400 ``UnsupportedApiVersionValue`` listing the supported values.
    """
    if value is None:
        return DEFAULT_API_VERSION
    if value == "":
        raise MissingApiVersion("The api-version query parameter is present but empty.", target="api-version")
    if value not in SUPPORTED_API_VERSIONS:
        raise UnsupportedApiVersion(
            f"The api-version '{value}' is not supported. Supported versions: {', '.join(SUPPORTED_API_VERSIONS)}.",
            target="api-version",
        )
    return value


def validate_subscription_id(value: str) -> str:
    """400 ``InvalidParameter`` unless ``value`` is a GUID or slug of at most 64 characters."""
    if not _SUBSCRIPTION.fullmatch(value):  # (match would take a trailing newline: $ matches before one)
        raise InvalidParameter(f"The subscription id '{value[:100]}' is not valid.", target="subscriptionId")
    return value


def validate_resource_group(value: str) -> str:
    """400 ``InvalidParameter`` unless ``value`` follows ARM's resource group naming rule."""
    if not _RESOURCE_GROUP.fullmatch(value):
        raise InvalidParameter(
            f"The resource group name '{value[:100]}' is not valid: use 1-90 letters, digits, '_', '(', ')', '-' or "
            "'.', not ending with '.'.",
            target="resourceGroupName",
        )
    return value


def validate_resource_name(value: str, *, target: str = "name") -> str:
    """400 ``InvalidResourceName`` unless ``value`` is 1-63 of letters, digits, '-', '_', '.' (see module rule)."""
    if not isinstance(value, str) or not _RESOURCE_NAME.match(value):
        raise InvalidResourceName(
            f"The resource name '{str(value)[:100]}' is not valid: use 1-63 letters, digits, '-', '_' or '.', "
            "starting with a letter or digit and not ending with '.'.",
            target=target,
        )
    return value


#: A location as the API takes it (models/common.py Location): ``us-east-1``, ``East US``.
LOCATION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,63}$")


def parse_location(value: str) -> str:
    """A location from a path (``{location}``) normalised (:func:`normalize_location`); 400 ``InvalidParameter``
    (target ``location``) for one that is not a location."""
    if not LOCATION.fullmatch(value):
        raise InvalidParameter(f"'{value[:64]}' is not a location.", target="location")
    return normalize_location(value)


def normalize_location(value: str) -> str:
    """Location compared ignoring case and spaces (ARM_CONTRACT.md line 4): ``"East US"`` → ``"eastus"``."""
    return re.sub(r"\s+", "", value).lower()


_RESOURCE_ID = re.compile(
    rf"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/{re.escape(PROVIDER_NAMESPACE)}"
    r"(?P<rest>(?:/[^/]+/[^/]+)+)$",
    re.IGNORECASE,
)


def parse_resource_id(value: str) -> tuple[str, str, list[tuple[str, str]]] | None:
    """Inverse of :func:`resource_id`: ``(subscription, resource group, [(type, name), ...])`` with the casing of
    ``value``, or None when it is not an id of this provider's resources."""
    match = _RESOURCE_ID.match(value or "")
    if not match:
        return None
    parts = match["rest"].strip("/").split("/")
    return match["sub"], match["rg"], list(zip(parts[0::2], parts[1::2], strict=True))


def resource_id(subscription_id: str, resource_group: str, *segments: tuple[str, str]) -> str:
    """Build an ARM id: ``/subscriptions/{sub}/resourceGroups/{rg}/providers/ITL.Accelerator/{type}/{name}[/...]``.

    ``segments`` are ``(type, name)`` pairs from the top-level type down to the child.
    """
    path = f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/{PROVIDER_NAMESPACE}"
    for type_name, name in segments:
        path += f"/{type_name}/{name}"
    return path
