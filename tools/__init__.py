"""The repository's own tools, run from a checkout and never shipped: ``generate`` writes every file that is made
from another (``./dev generate``)."""
