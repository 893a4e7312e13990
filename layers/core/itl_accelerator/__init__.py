"""ITL Accelerator Resource Provider core library (shipped as the `core` Lambda layer).

Layering runs one way: ``itl_functions`` (handlers) → ``api`` (routes) → ``services`` → ``store`` / clients.
"""

PROVIDER_NAMESPACE = "ITL.Accelerator"
