"""The train stand-in (_run.py)."""

from itl_workloads._run import main

main("train")
