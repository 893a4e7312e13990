"""Execution platforms: where a node's work runs — the DGX Platform (itl_accelerator/dgx) or a Slurm cluster
(itl_accelerator/slurm, through slurmrestd) — behind one interface the workflow steps, the job tracker, the usage sync
and the job logs speak (:class:`~itl_accelerator.platforms.protocol.ExecutionPlatform`), and the router that gives a
node's platform or a platform id's (:class:`~itl_accelerator.platforms.router.Platforms`). No step branches on the
platform: each asks the router, and the router is the one place that knows which platforms there are
(docs/SLURM.md)."""
