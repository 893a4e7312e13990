"""The AWS calls each function makes locally, recorded per function (itl_local.iam checks them against the
function's policies in template.yaml).

Every botocore call made inside a Lambda invocation of the local runtime (:func:`itl_local.lambda_runtime.
current_function` names the function) is recorded as a :class:`Call`; calls made outside any invocation (test
code, moto's own Step Functions interpreter) are not. Process-wide caches that would be per function in AWS (each
function has its own execution environments) are made per function while recording, so that one function's cached
read cannot hide the read another function makes: Powertools' parameter providers (the DGX API key secret).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from itl_local.lambda_runtime import current_function, observe_invocations

REGION = "us-east-1"


@dataclass(frozen=True)
class Call:
    """One AWS API call made by ``function``: botocore service name, IAM prefix (the signing name), region,
    operation name (``TransactWriteItems``) and its parameters."""

    function: str
    service: str
    prefix: str
    region: str
    operation: str
    params: dict[str, Any] = field(compare=False, hash=False)


class _PerFunctionProvider:
    """Stands in for one of Powertools' default parameter providers (``parameters.get_secret`` uses
    ``DEFAULT_PROVIDERS["secrets"]``): each function gets a provider of its own, with its own cache."""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._providers: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    def _provider(self) -> Any:
        function = current_function()
        with self._lock:
            if function not in self._providers:
                self._providers[function] = self._make()
            return self._providers[function]

    def clear_cache(self) -> None:
        with self._lock:
            providers = list(self._providers.values())
        for provider in providers:
            provider.clear_cache()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider(), name)


class CallRecorder:
    """Records the AWS calls of every local Lambda invocation while installed (``install()`` / ``uninstall()``).

    ``calls``: every :class:`Call` made inside an invocation (calls made outside one, by test code, are left out).
    ``invocations``: function logical id → invocations started. ``bindings``: logical id → the value
    CloudFormation's ``Ref`` gives for that resource locally (see :meth:`bind`)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.invocations: Counter[str] = Counter()
        self.bindings: dict[str, str] = {}
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []

    def bind(self, **refs: str) -> None:
        """Name local resources: ``bind(Table="itl-accelerator-test", DgxApiKeySecret="arn:...")``."""
        self.bindings.update(refs)

    def install(self) -> None:
        """Wrap ``BaseClient._make_api_call`` (the one path every client operation takes, whoever made the client),
        give each function its own Powertools secrets/SSM provider, and count invocations."""
        from aws_lambda_powertools.utilities.parameters import base
        from aws_lambda_powertools.utilities.parameters.secrets import SecretsProvider
        from aws_lambda_powertools.utilities.parameters.ssm import SSMProvider
        from botocore.client import BaseClient

        original = BaseClient._make_api_call
        recorder = self

        def recording(client: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
            function = current_function()
            if function is not None:
                model = client.meta.service_model
                call = Call(
                    function,
                    model.service_name,
                    model.signing_name,
                    client.meta.region_name or REGION,
                    operation_name,
                    dict(api_params),
                )
                with recorder._lock:
                    recorder.calls.append(call)
            return original(client, operation_name, api_params)

        BaseClient._make_api_call = recording  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(BaseClient, "_make_api_call", original))

        for kind, make in (("secrets", SecretsProvider), ("ssm", SSMProvider)):
            saved = base.DEFAULT_PROVIDERS.get(kind)
            base.DEFAULT_PROVIDERS[kind] = _PerFunctionProvider(make)
            self._undo.append(lambda kind=kind, saved=saved: _restore(base.DEFAULT_PROVIDERS, kind, saved))

        def count(function: str) -> None:
            with self._lock:
                self.invocations[function] += 1

        self._undo.append(observe_invocations(count))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()


def _restore(mapping: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        mapping.pop(key, None)
    else:
        mapping[key] = value
