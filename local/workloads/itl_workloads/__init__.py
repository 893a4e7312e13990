"""Stand-ins for the job types' default workloads (docs/DGX_INTEGRATION.md: ``python -m itl_workloads.train`` ...),
for the local Slurm cluster (``./dev up --backend slurm``): a job runs here as the DGX simulator runs one, by the same
environment knobs, so a job behaves alike on both backends (_run.py)."""
