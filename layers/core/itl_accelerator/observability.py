"""Powertools observability objects, created once for the whole process.

Every module logs through :data:`logger`; handlers are wrapped with :data:`tracer`. Service name and log level
come from ``POWERTOOLS_SERVICE_NAME`` / ``POWERTOOLS_LOG_LEVEL`` (set in template.yaml Globals).
"""

from aws_lambda_powertools import Logger, Tracer

logger = Logger(service="itl-accelerator")
tracer = Tracer(service="itl-accelerator")
