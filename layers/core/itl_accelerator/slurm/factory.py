"""Builds a Slurm cluster's platform from settings (``SLURM_CLUSTERS``, settings.py ``SlurmClusterSettings``). The
JWT signing key comes from Secrets Manager in AWS (Powertools parameters, cached for 5 minutes; the secret holds the
key base64) when the cluster names ``jwtKeySecretId``, else from ``jwtKey`` (base64, locally); it is read when the
first token is minted, and never logged."""

from __future__ import annotations

import base64

from aws_lambda_powertools.utilities import parameters

from itl_accelerator.settings import Settings, SlurmClusterSettings
from itl_accelerator.slurm.client import JwtTokenSource, SlurmRestClient
from itl_accelerator.slurm.platform import SlurmPlatform

SECRET_MAX_AGE_SECONDS = 300


def signing_key(cluster: SlurmClusterSettings) -> bytes:
    """The cluster's JWT signing key (module docstring). ``ValueError`` when the cluster names none."""
    if cluster.jwt_key_secret_id:
        text = str(parameters.get_secret(cluster.jwt_key_secret_id, max_age=SECRET_MAX_AGE_SECONDS))
    else:
        text = cluster.jwt_key.get_secret_value()
    if not text:
        raise ValueError(f"Slurm cluster '{cluster.name}' names no JWT key (jwtKeySecretId or jwtKey)")
    return base64.b64decode(text.strip(), validate=True)


def slurm_client(cluster: SlurmClusterSettings, settings: Settings) -> SlurmRestClient:
    """A client of the cluster's slurmrestd with the deployment's attempts and call budget (as the DGX client's)."""
    return SlurmRestClient(
        cluster.url,
        cluster.api_version,
        cluster.user,
        JwtTokenSource(lambda: signing_key(cluster), user=cluster.user),
        connect_timeout=cluster.connect_timeout_seconds,
        read_timeout=cluster.read_timeout_seconds,
        attempts=settings.dgx_attempts,
        budget_seconds=settings.dgx_call_budget_seconds,
    )


def slurm_platform(name: str, settings: Settings) -> SlurmPlatform:
    """The platform of the configured cluster ``name``. ``KeyError`` when none is configured by that name."""
    cluster = settings.slurm_cluster(name)
    if cluster is None:
        raise KeyError(name)
    return SlurmPlatform(cluster, slurm_client(cluster, settings))
