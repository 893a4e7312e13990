"""Slurm execution backend: a typed client of slurmrestd (client.py), its errors and models, one adapter per REST
version (versions.py: v0.0.38 of Slurm 22.05; v0.0.41-v0.0.44 of Slurm 24.05-25.11, as AWS PCS serves).
docs/SLURM.md tells how it sits beside the DGX Platform client."""

from itl_accelerator.slurm.client import JwtTokenSource, SlurmRestClient, StaticToken, TokenSource
from itl_accelerator.slurm.errors import (
    SlurmAuthError,
    SlurmError,
    SlurmJobNotFound,
    SlurmNodeNotFound,
    SlurmPermanentError,
    SlurmTransientError,
    SlurmUnsupported,
)
from itl_accelerator.slurm.hostlist import HostlistError, expand_hostlist
from itl_accelerator.slurm.models import JobState, SlurmJob, SlurmJobSpec, SlurmNode
from itl_accelerator.slurm.versions import SUPPORTED_VERSIONS

__all__ = [
    "SUPPORTED_VERSIONS",
    "HostlistError",
    "JobState",
    "JwtTokenSource",
    "SlurmAuthError",
    "SlurmError",
    "SlurmJob",
    "SlurmJobNotFound",
    "SlurmJobSpec",
    "SlurmNode",
    "SlurmNodeNotFound",
    "SlurmPermanentError",
    "SlurmRestClient",
    "SlurmTransientError",
    "SlurmUnsupported",
    "StaticToken",
    "TokenSource",
    "expand_hostlist",
]
