"""Builds the DGX client from settings. The API key comes from Secrets Manager in AWS (Powertools parameters,
cached for 5 minutes) when ``DGX_PLATFORM_API_KEY_SECRET_ID`` is set, else from ``DGX_PLATFORM_API_KEY``."""

from __future__ import annotations

from aws_lambda_powertools.utilities import parameters

from itl_accelerator.dgx.client import DgxPlatformClient
from itl_accelerator.settings import Settings

SECRET_MAX_AGE_SECONDS = 300


def api_key(settings: Settings) -> str:
    """The DGX API key (never logged)."""
    if settings.dgx_platform_api_key_secret_id:
        return str(parameters.get_secret(settings.dgx_platform_api_key_secret_id, max_age=SECRET_MAX_AGE_SECONDS))
    return settings.dgx_platform_api_key.get_secret_value()


def dgx_client(settings: Settings) -> DgxPlatformClient:
    """A client for ``DGX_PLATFORM_API_URL`` with the configured timeouts and attempts."""
    return DgxPlatformClient(
        settings.dgx_platform_api_url,
        api_key(settings),
        connect_timeout=settings.dgx_connect_timeout_seconds,
        read_timeout=settings.dgx_read_timeout_seconds,
        attempts=settings.dgx_attempts,
        budget_seconds=settings.dgx_call_budget_seconds,
    )
