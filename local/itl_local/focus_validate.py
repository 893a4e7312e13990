"""Run FinOps' focus-validator on a FOCUS file, offline, with this provider's applicability criteria.

``./dev focus-validate FILE [--all] [validator options]`` runs :func:`main`; tests call :func:`validate`, the same
path. The validator lives in ``.venv-focus`` (``./dev`` installs it: it pins ``numpy<2``, which clashes with the
pyarrow it also needs, so it has a venv of its own with numpy 2 installed after it).

What focus-validator 2.2.1 needs, and what this runner does about it:

- It fetches release lists from the internet unless told ``--block-download``; its FOCUS 1.2 rules are bundled
  (``--validate-version 1.2.0.1``). Both flags are always given: validation never touches the network.
- It opens ``focus_validator/rules/currency_codes.csv`` relative to its working directory: it runs in the directory
  holding its installed package (where its ``focus_validator_detailed.log`` then goes too, inside the venv).
- It reads ``.csv`` and ``.parquet`` only: a ``.csv.gz`` is decompressed (streamed) to a temporary ``.csv``.
- It exits 0 whatever it finds: the verdict is read from its report, the ``Total | Pass | Fail | Skipped`` line and
  one line per rule.
- It lists a failed alternative of an OR rule as a failure even when the OR rule passes: with ``InvoiceId`` null
  (no invoices yet), ``InvoiceId-C-003-C`` = ``C-004`` ("null when not invoiced") OR ``C-005`` ("not null when
  invoiced") passes, yet ``C-005`` is reported failed — its condition is not modelled, so every FOCUS file with an
  InvoiceId column fails one of the two. Such failures are shown, named with the passing OR rule (read from the
  bundled model), and not counted. Every other failure fails the run.
- Its bundled model writes two conditions in a shape it does not compile: ``CapacityReservationStatus-C-003-C``
  ("null when CapacityReservationId is null") and ``-C-004-C`` ("not null when CapacityReservationId is not null and
  ChargeCategory is Usage") have ``{"AND": ...}`` without a ``CheckFunction``, which it reads as no condition — so it
  requires the status null on every row, and not null on every row, and every file holding rows of a capacity
  reservation and rows of none fails one of them. The runner gives it a copy of the model with those conditions
  written as it reads them (:func:`corrected_model`, ``--rule-set-path``): the rules are checked as FOCUS states
  them, not excused.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from itl_accelerator.billing.focus import FOCUS_APPLICABILITY_CRITERIA

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = REPO_ROOT / ".venv-focus"
VALIDATOR_VERSION = "2.2.1"
MODEL_VERSION = "1.2.0.1"

_SUMMARY = re.compile(r"^Total: (\d+) \| Pass: (\d+) \| Fail: (\d+) \| Skipped: (\d+)$", re.MULTILINE)
_RULE_LINE = re.compile(r"^\S*\s*([A-Za-z]+-[A-Z]-\d{3}-[A-Z]): (PASS|FAIL|SKIPPED)\b", re.MULTILINE)


class ValidatorMissing(RuntimeError):
    """focus-validator is not installed in the venv given."""


@dataclass
class Report:
    """focus-validator's findings on one file, and this runner's verdict (:attr:`ok`)."""

    command: list[str]
    returncode: int
    output: str
    stderr: str
    total: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    results: dict[str, str] = field(default_factory=dict)
    #: Failed rules that are an alternative of an OR rule that passed: rule id → that OR rule.
    excused: dict[str, str] = field(default_factory=dict)

    @property
    def failures(self) -> list[str]:
        """Failed rules that count."""
        return sorted(r for r, status in self.results.items() if status == "FAIL" and r not in self.excused)

    @property
    def ok(self) -> bool:
        complete = self.total > 0 and self.failed == sum(s == "FAIL" for s in self.results.values())
        return self.returncode == 0 and complete and not self.failures

    def verdict(self) -> str:
        word = "PASSED" if self.ok else "FAILED"
        text = (
            f"focus-validator {VALIDATOR_VERSION} (FOCUS {MODEL_VERSION}): {word} — {self.total} rules: "
            f"{self.passed} passed, {self.skipped} skipped, {self.failed} failed"
        )
        if self.excused:
            text += (
                f" of which {len(self.excused)} not counted ("
                + ", ".join(
                    f"{rule} is an alternative of {parent}, which passed"
                    for rule, parent in sorted(self.excused.items())
                )
                + ")"
            )
        if self.failures:
            text += "; counted failures: " + ", ".join(self.failures)
        if self.returncode != 0 or not self.total:
            text += f"; the validator exited {self.returncode} without a complete report"
        return text


def package_parent(venv: Path = DEFAULT_VENV) -> Path:
    """The site-packages directory holding ``focus_validator`` (the validator's working directory)."""
    found = sorted(venv.glob("lib/python3*/site-packages/focus_validator/rules"))
    if not found or not (venv / "bin" / "focus-validator").exists():
        raise ValidatorMissing(f"focus-validator is not installed in {venv}: run ./dev focus-validate (it installs it)")
    return found[-1].parent.parent


def _or_parents(model_file: Path) -> dict[str, list[str]]:
    """Rule id → the rules whose requirement is an OR naming it as one alternative."""
    rules = json.loads(model_file.read_text())["ModelRules"]
    parents: dict[str, list[str]] = {}
    for rule_id, rule in rules.items():
        requirement = rule.get("ValidationCriteria", {}).get("Requirement", {})
        if requirement.get("CheckFunction") == "OR":
            for item in requirement.get("Items", []):
                if item.get("CheckFunction") == "CheckModelRule":
                    parents.setdefault(item["ModelRuleId"], []).append(rule_id)
    return parents


def _condition_as_read(condition: dict[str, Any]) -> dict[str, Any] | None:
    """``{"AND": check}`` or ``{"AND": [checks]}`` (no ``CheckFunction``) as the validator compiles it: the check, or
    ``{"CheckFunction": "AND", "Items": [checks]}``; None for any other condition (left as it is)."""
    if "CheckFunction" in condition or set(condition) != {"AND"}:
        return None
    inner = condition["AND"]
    if isinstance(inner, dict):
        return inner
    return {"CheckFunction": "AND", "Items": list(inner)}


def corrected_model(model: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The bundled ``model`` with each condition the validator would read as none written as it reads it (module
    docstring), and the ids of the rules changed."""
    fixed = json.loads(json.dumps(model))
    changed = []
    for rule_id, rule in fixed["ModelRules"].items():
        criteria = rule.get("ValidationCriteria") or {}
        condition = criteria.get("Condition")
        read = _condition_as_read(condition) if isinstance(condition, dict) and condition else None
        if read is not None:
            criteria["Condition"] = read
            changed.append(rule_id)
    return fixed, sorted(changed)


def parse(command: list[str], returncode: int, output: str, stderr: str, model_file: Path) -> Report:
    report = Report(command=command, returncode=returncode, output=output, stderr=stderr)
    summary = _SUMMARY.search(output)
    if summary:
        report.total, report.passed, report.failed, report.skipped = map(int, summary.groups())
    report.results = {rule: status for rule, status in _RULE_LINE.findall(output)}
    failed = [rule for rule, status in report.results.items() if status == "FAIL"]
    if failed:
        parents = _or_parents(model_file)
        for rule in failed:
            passing = [p for p in parents.get(rule, []) if report.results.get(p) == "PASS"]
            if passing:
                report.excused[rule] = passing[0]
    return report


def validate(
    data_file: Path | str,
    *options: str,
    criteria: tuple[str, ...] = FOCUS_APPLICABILITY_CRITERIA,
    venv: Path = DEFAULT_VENV,
) -> Report:
    """Validate ``data_file`` (``.csv``, ``.csv.gz`` or ``.parquet``) against FOCUS 1.2 with ``criteria``;
    ``options`` go to the validator as they are (an ``--applicability-criteria`` there replaces ``criteria``)."""
    cwd = package_parent(venv)
    data_file = Path(data_file).resolve()
    with tempfile.TemporaryDirectory(prefix="focus-validate-") as tmp:
        if data_file.suffix == ".gz":
            plain = Path(tmp) / (data_file.stem if data_file.stem.endswith(".csv") else data_file.stem + ".csv")
            with gzip.open(data_file, "rb") as src, plain.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        else:
            plain = data_file
        rules = Path(tmp) / "rules"
        rules.mkdir()
        model_name = f"model-{MODEL_VERSION}.json"
        fixed, _ = corrected_model(json.loads((cwd / "focus_validator" / "rules" / model_name).read_text()))
        (rules / model_name).write_text(json.dumps(fixed))
        command = [str(venv / "bin" / "focus-validator"), "--block-download", "--validate-version", MODEL_VERSION]
        command += ["--rule-set-path", str(rules)]
        if not any(o.startswith("--applicability-criteria") for o in options) and criteria:
            command += ["--applicability-criteria", ",".join(criteria)]
        command += [*options, "--data-file", str(plain)]
        env = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # its report has emoji; never the locale's codec
        # The command is the venv's own executable and fixed flags; options and the file come from the developer.
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, encoding="utf-8", errors="replace")  # noqa: S603
    return parse(
        command,
        done.returncode,
        done.stdout,
        done.stderr,
        cwd / "focus_validator" / "rules" / f"model-{MODEL_VERSION}.json",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="./dev focus-validate",
        description="Validate a FOCUS file (.csv, .csv.gz, .parquet) with focus-validator, offline, with this "
        "provider's applicability criteria. Other options go to focus-validator (e.g. --show-violations, "
        "--filter-rules X, --applicability-criteria A,B).",
    )
    parser.add_argument("file", type=Path)
    parser.add_argument("--all", action="store_true", help="print the whole report (default: failures and summary)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help=argparse.SUPPRESS)
    args, options = parser.parse_known_args(argv)
    if not args.file.is_file():
        print(f"no such file: {args.file}", file=sys.stderr)
        return 2
    try:
        report = validate(args.file, *options, venv=args.venv)
    except ValidatorMissing as exc:
        print(exc, file=sys.stderr)
        return 2
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError: a .gz that is not gzip
        print(f"cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    for line in report.output.splitlines():
        if args.all or not re.search(r": (PASS|SKIPPED)\b", line):
            print(line)
    if report.stderr.strip() and not report.ok:
        print(report.stderr, file=sys.stderr)
    print(report.verdict())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
