"""itlc accelerator: the command line of the ITL Accelerator Resource Provider (``ITL.Accelerator``).

Standalone as ``itlc-accelerator``; mounted in the ITL CLI as ``itlc accelerator`` (the click group
:data:`itlc_accelerator.main.accelerator`). docs/CLI.md describes the commands.
"""

__version__ = "0.1.0"
