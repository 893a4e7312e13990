"""The Task steps of the state machines (statemachines/*.asl.json) and their typed inputs and outputs (io.py)."""
