"""Every module or document that the shipped code cites by its path exists, so a comment that says where to look
does not send the reader to a file that was moved or removed.

What counts as a citation: in each ``*.py`` file of the shipped trees (layers/, functions/, local/, cli/,
mcp_server/, benchmarks/) and of the generator (tools/), any word that is a path ending in ``.py`` or ``.md``
(``services/common/lro.py``, ``docs/SLURM.md``, ``keys.py``), wherever it stands (comment, docstring, string). A path wrapped at a ``/`` onto the
next line of a comment or docstring is read whole. A glob (``*_workflow.py``) and a URL are not citations.

The rule for resolving one:

- A path with a directory (``a/b.py``) must name a file relative to one of: the repository root
  (``docs/SLURM.md``, ``tests/unit/...``, ``local/itl_local/iam.py``); a directory that holds top-level packages —
  ``layers/core/``, ``functions/``, ``local/``, ``local/workloads/``, ``cli/``, ``mcp_server/`` — so a module is cited
  by its package (``itl_accelerator/slurm/platform.py``, ``itl_local/iam.py``); or the ``itl_accelerator``
  package itself (``layers/core/itl_accelerator/``), from which the provider's code cites its own modules
  (``services/schedules/node_health.py``, ``domain/records.py``).
- A bare file name (``keys.py``, "job_steps.py ``_ended``") leaves its directory to the sentence around it; it must
  name a file that exists somewhere in the repository (outside the ignored build and venv directories), or be one of
  ``NOT_IN_REPOSITORY``.

``KNOWN_STALE`` lists, by citing file, the stale citations in files that other work is changing now; each is to be
fixed there and then taken off the list.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO_ROOT

SHIPPED = ("layers", "functions", "local", "cli", "mcp_server", "benchmarks", "tools")

#: Where a cited path with a directory may start (see the module's docstring).
ROOTS = (
    REPO_ROOT,
    REPO_ROOT / "layers" / "core",
    REPO_ROOT / "functions",
    REPO_ROOT / "local",
    REPO_ROOT / "local" / "workloads",
    REPO_ROOT / "cli",
    REPO_ROOT / "mcp_server",
    REPO_ROOT / "layers" / "core" / "itl_accelerator",
)

#: Bare names that are cited knowingly and are no file of the repository.
NOT_IN_REPOSITORY = {
    # the ITL Control Plane's own contract and design documents, which this repository implements and does not hold
    "ARM_CONTRACT.md",
    "DESIGN.md",
    # the user's script in the examples of a job's command (`python train.py`), not a module of this repository
    "train.py",
}

#: Stale citations left in files that other work is editing now (issue 43): citing file → cited paths. Fix them
#: there, then remove them from here.
KNOWN_STALE: dict[str, set[str]] = {}

# a path: directories, each maybe wrapped after its slash onto the next line (after its indentation or "#"), then
# a file name; not glued to a word, a dot, a slash, a colon (a URL) or a glob's star before it
_CITED = re.compile(r"(?<![\w./:*-])((?:[\w.-]+/(?:\n[ \t]*(?:#[ \t]*)?)?)*[\w-][\w.-]*\.(?:py|md))(?![\w/-])")
_WRAP = re.compile(r"\n[ \t]*(?:#[ \t]*)?")
_SKIPPED_DIRS = {".git", ".venv", ".venv-sam", ".venv-scan", ".venv-focus", "node_modules", "__pycache__", ".local"}


def _repo_file_names() -> set[str]:
    names: set[str] = set()
    for path in REPO_ROOT.rglob("*"):
        if not _SKIPPED_DIRS.intersection(path.relative_to(REPO_ROOT).parts) and path.is_file():
            names.add(path.name)
    return names


def _citations(source: Path) -> list[tuple[int, str]]:
    text = source.read_text()
    return [(text.count("\n", 0, m.start()) + 1, _WRAP.sub("", m.group(1))) for m in _CITED.finditer(text)]


def _resolves(cited: str, names: set[str]) -> bool:
    if "/" not in cited:
        return cited in names or cited in NOT_IN_REPOSITORY
    return any((root / cited).is_file() for root in ROOTS)


def test_every_cited_module_path_exists():
    names = _repo_file_names()
    stale = []
    cited_count = 0
    for tree in SHIPPED:
        for source in sorted((REPO_ROOT / tree).rglob("*.py")):
            if _SKIPPED_DIRS.intersection(source.relative_to(REPO_ROOT).parts):
                continue
            relative = source.relative_to(REPO_ROOT).as_posix()
            for line, cited in _citations(source):
                cited_count += 1
                if not _resolves(cited, names) and cited not in KNOWN_STALE.get(relative, set()):
                    stale.append(f"{relative}:{line} cites {cited}")
    assert cited_count > 300, "the scan found too few citations: is the pattern broken?"
    assert not stale, "cited paths that name no file (rule: this test's docstring):\n" + "\n".join(stale)


def test_the_pattern_reads_citations_as_written():
    source = (
        "# see services/common/lro.py and docs/\n# SLURM.md, keys.py ``x``; not *_workflow.py nor https://h/a/b.md\n"
        '"""x (docs/\n    API_REFERENCE.md, "Quotas"), itl_local/iam.py."""'
    )
    cited = [_WRAP.sub("", m.group(1)) for m in _CITED.finditer(source)]
    assert cited == ["services/common/lro.py", "docs/SLURM.md", "keys.py", "docs/API_REFERENCE.md", "itl_local/iam.py"]
