"""What README.md and docs/ show a newcomer holds: its commands run as written, its links lead
to files of the repository, and what it says an example prints is what the example prints.

The README is read from a fresh clone, top to bottom (issue 22); these tests keep the parts a
machine can check from drifting between such readings. Commands that need what a clone does
not have (a Loki at ``http://loki:3100``, the reader's own log files, ``postmortems/``) are
only parsed; the ones that need nothing but the demo's database are run.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from correlator._arguments import parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^ *```(\w*)\n(.*?)^ *```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_DEMO_DB = "correlator-demo.duckdb"


def _blocks(path: Path, language: str) -> list[str]:
    """The fenced blocks of ``language``, dedented (a block may sit in a list item)."""
    found = _FENCE.findall(path.read_text())
    return [textwrap.dedent(body) for lang, body in found if lang == language]


def _commands(program: str) -> list[tuple[str, str]]:
    """(document, line) for every line of a ``sh`` block of the docs that runs ``program``."""
    found = []
    for doc in DOCS:
        for block in _blocks(doc, "sh"):
            for line in block.splitlines():
                if line.startswith(f"{program} "):
                    found.append((doc.name, line))
    return found


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_lead_to_files_of_the_repository(doc: Path) -> None:
    for target in _LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (doc.parent / path).resolve() if path else doc
        assert resolved.is_relative_to(ROOT), f"{doc.name}: {target} is outside the repository"
        assert resolved.exists(), f"{doc.name}: {target} does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.*)$", resolved.read_text(), re.MULTILINE)
            assert anchor in {_slug(h) for h in headings}, f"{doc.name}: no heading #{anchor}"


def test_design_sections_cited_by_the_code_exist() -> None:
    sections = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs/design.md").read_text(), re.M))
    cited: dict[str, set[str]] = {}
    for folder in ("agent_logging", "correlator", "devstack", "dashboards", "tests", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md") and path.is_file():
                for number in re.findall(r"DESIGN §(\d+)", path.read_text(errors="replace")):
                    cited.setdefault(number, set()).add(str(path.relative_to(ROOT)))
    cited.update((n, {"README.md"}) for n in re.findall(r"DESIGN §(\d+)", README.read_text()))
    assert cited, "the code cites DESIGN sections: the pattern no longer finds them"
    missing = {number: files for number, files in cited.items() if number not in sections}
    assert not missing, f"cited but not in docs/design.md: {missing}"


@pytest.mark.parametrize(("doc", "line"), _commands("correlator"))
def test_every_correlator_command_shown_parses(doc: str, line: str) -> None:
    # shlex drops the trailing "# comment" as a shell would.
    words = shlex.split(line, comments=True)
    try:
        parser().parse_args(words[1:])
    except SystemExit as exc:
        pytest.fail(f"{doc}: `{line}` is refused by the CLI (exit {exc.code})")


@pytest.mark.integration
def test_the_commands_after_the_demo_run_as_written(tmp_path: Path) -> None:
    """The README's next step after ``bash scripts/demo.sh``: the demo's database answers."""
    shown = [line for _, line in _commands("correlator") if line.split()[1:3] == ["--db", _DEMO_DB]]
    assert shown, f"README shows no `correlator --db {_DEMO_DB} ...` command to run after the demo"
    demo = _correlator(["demo", "--no-serve"], tmp_path)
    assert demo.returncode == 0, demo.stderr
    for line in shown:
        done = _correlator(shlex.split(line, comments=True)[1:], tmp_path)
        assert done.returncode == 0, f"`{line}`: {done.stderr}"
        assert done.stdout.strip(), f"`{line}` printed nothing"
    timeline = _correlator(["--db", _DEMO_DB, "timeline", "--id", "a-7f3c"], tmp_path)
    assert "owner layer cert" in timeline.stdout


def _correlator(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "correlator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "160"},
    )


@pytest.mark.integration
def test_the_five_minute_example_prints_the_record_shown(tmp_path: Path) -> None:
    example = next(b for b in _blocks(README, "python") if "agent_logging.bound(" in b)
    (tmp_path / "example.py").write_text(example)
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # standard error, as the README says
    (printed,) = [json.loads(line) for line in done.stderr.splitlines()]
    (shown,) = [json.loads(block) for block in _blocks(README, "json")]
    del printed["ts"], shown["ts"]
    assert printed == shown


@pytest.mark.integration
def test_the_owner_rules_example_is_accepted(tmp_path: Path) -> None:
    (rules,) = _blocks(README, "toml")
    (tmp_path / "rules.toml").write_text(rules)
    code = "import agent_logging; agent_logging.configure(owner_rules='rules.toml', output='none')"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
