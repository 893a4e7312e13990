"""The embedded local runtime (never deployed): embedded AWS (moto), an API Gateway emulator driven by
template.yaml, a dev OIDC issuer, and the commands ``itl-local up | token | invoke | openapi``."""
