"""``./dev deps-audit``: pip-audit over the installed distributions of ``.venv`` (the versions the tests ran, which
the layer's and the CLI's requirements resolve to), judged so that an audit which could not run never reads as clean.

Exit 1 on any known vulnerability (each printed with its id and the versions that fix it), and when pip-audit could
not look a distribution up in its vulnerability service (PyPI's JSON API) — unless ``--offline-ok``, where that is
said on stderr with the count and the run exits 0: a machine without a route to the service (this project's CI
machines reach only PyPI's simple index) cannot audit, and says so rather than passing silently. Our own editable
packages are skipped (they are not on PyPI) and are not counted. A pip-audit that crashes fails the run, always.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

#: pip-audit's skip reason for a distribution installed editable (``--skip-editable``).
EDITABLE = "distribution marked as editable"


def judge(report: dict[str, object], offline_ok: bool) -> tuple[int, list[str]]:
    """``(exit code, lines to print)`` for pip-audit's JSON report (``{"dependencies": [{"name", "version",
    "vulns": [{"id", "fix_versions"}], "skip_reason"?}]}``)."""
    listed = [d for d in report.get("dependencies", []) if isinstance(d, dict)]  # type: ignore[attr-defined]
    # this project's own packages (installed editable) are not on PyPI: not audited, by design
    dependencies = [d for d in listed if EDITABLE not in str(d.get("skip_reason") or "")]
    found = [(d, v) for d in dependencies for v in d.get("vulns") or []]
    skipped = [d for d in dependencies if d.get("skip_reason")]
    lines = [
        f"VULNERABLE {d['name']} {d['version']}: {v['id']} (fixed in {', '.join(v.get('fix_versions') or []) or 'no release yet'})"
        for d, v in found
    ]
    audited = len(dependencies) - len(skipped)
    lines.append(
        f"pip-audit: {audited} of {len(dependencies)} distributions audited, {len(found)} known vulnerabilities"
    )
    if skipped:
        lines.append(
            f"pip-audit could not look up {len(skipped)} distributions (e.g. {skipped[0]['name']}: "
            f"{skipped[0]['skip_reason']}): the vulnerability service is not reachable from here"
        )
    if found:
        return 1, lines
    if skipped and not offline_ok:
        return 1, lines
    return 0, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev deps-audit", description=__doc__.splitlines()[0])
    parser.add_argument("--pip-audit", required=True, help="the pip-audit executable")
    parser.add_argument("--site-packages", required=True, help="the environment's site-packages to audit")
    parser.add_argument("--offline-ok", action="store_true", help="exit 0 when the service cannot be reached")
    args = parser.parse_args(argv)
    done = subprocess.run(  # noqa: S603 - the executable and path ./dev passes, no shell
        [args.pip_audit, "--path", args.site_packages, "--skip-editable", "--progress-spinner", "off", "-f", "json"],
        capture_output=True,
        text=True,
    )
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        print(done.stdout + done.stderr, file=sys.stderr)
        print("pip-audit gave no report: it failed", file=sys.stderr)
        return 1  # a scanner that crashed is never a pass, offline or not
    code, lines = judge(report, args.offline_ok)
    for line in lines:
        print(line, file=sys.stderr if line.startswith("pip-audit could not") else sys.stdout)
    return code


if __name__ == "__main__":
    sys.exit(main())
