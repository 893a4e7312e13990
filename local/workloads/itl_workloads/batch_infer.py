"""The batch_infer stand-in (_run.py)."""

from itl_workloads._run import main

main("batch_infer")
