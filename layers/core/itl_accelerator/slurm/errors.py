"""Named Slurm REST failures, as dgx/errors.py names the DGX Platform's. Step Functions ``Retry`` matches these class
names (``errorType``). No message ever carries the token or the signing key.

slurmrestd answers most refusals with HTTP 500 (400 for a body it cannot parse) and an ``errors[]`` body, each
``{error, error_number|error_code, description, source}``; only a request without a token is a 401. The client
decodes them by Slurm's error number (slurm/slurm_errno.h), never by the status alone:

==========================================  ==========================================================
``SlurmJobNotFound``                        2017 ``ESLURM_INVALID_JOB_ID`` ("Unable to find JobId=..."),
                                            2136-2140 (empty/zero/negative/too large/non-numeric id),
                                            and 9002 on a job path (v0.0.38: a job id that is no number)
``SlurmAuthError``                          401/403; 1007 ``SLURM_PROTOCOL_AUTHENTICATION_ERROR``, 2002
                                            ``ESLURM_ACCESS_DENIED``, 2010 ``ESLURM_USER_ID_MISSING``,
                                            6000-6011 ``ESLURM_AUTH_*``, 9008 ``ESLURM_REST_AUTH_FAIL``; and
                                            -1 "Unspecified error": what 22.05 answers for a token slurmctld
                                            refused (expired, wrong key, unknown user: seen live)
``SlurmTransientError``                     connection failure, timeout, 429, 502/503/504; 1000-1025 and
                                            1800-1805 (communication with slurmctld), 5003-5005 (socket),
                                            2026/2041/2131 (controller in standby/takeover), 4034 (slurmd
                                            busy); a 5xx whose body holds no ``errors[]`` (slurmrestd when
                                            slurmctld is down: 500 after ~18 s)
``SlurmPermanentError``                     any other error: a refused submit (2014 "Requested node
                                            configuration is not available", 2000 bad partition, 2018 bad
                                            node name, 9001 "Failure during parsing"...) with Slurm's text
==========================================  ==========================================================
"""

from __future__ import annotations


class SlurmError(Exception):
    """Base. ``status`` is the HTTP status when there was a response; ``error_numbers`` Slurm's error numbers from
    the body's ``errors[]`` (empty when none)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_numbers: tuple[int, ...] = (),
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.error_numbers = error_numbers
        self.retry_after = retry_after


class SlurmTransientError(SlurmError):
    """Worth retrying: slurmrestd or slurmctld could not be reached or did not answer in time. ``ambiguous``: the
    request may have reached slurmctld and been carried out (a read timeout, a 5xx after sending), so a submit must
    look for its job before it submits again; False when it surely was not (connection refused)."""

    def __init__(self, message: str, *, ambiguous: bool = False, **kwargs: object):
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.ambiguous = ambiguous


class SlurmPermanentError(SlurmError):
    """Not worth retrying: Slurm refused the request (the message holds Slurm's own error text)."""


class SlurmJobNotFound(SlurmPermanentError):
    """slurmctld does not know the job: never submitted there, or finished more than ``MinJobAge`` seconds ago
    (300 by default) and purged. Cancelling it again is a success."""


class SlurmNodeNotFound(SlurmPermanentError):
    """The cluster has no node of that name (2018 "Invalid node name specified": also a submit naming one)."""


class SlurmAuthError(SlurmPermanentError):
    """The token was refused (expired, signed with another key, unknown user) or the user may not do this (a job of
    another user: "Access/permission denied")."""


class SlurmUnsupported(SlurmPermanentError):
    """The REST version in use does not serve this operation (e.g. node updates on v0.0.38)."""
