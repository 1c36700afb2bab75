"""The docs' walkthrough: every command of a ```console block in README.md and docs/*.md is run
as a reader would run it, from the checkout, and what it prints must be what the docs show.

A ```console block holds commands (`$ drt …`), each followed by the lines it prints (stdout and
stderr together, in order) and, when it is not 0, its exit code as `[exit N]`. The lines are
compared whole, in order, all of them: a sample that drifts from what `drt` prints fails here.
Placeholders a sample may use, each standing for what differs per machine or run: `CHECKOUT`
(the checkout's absolute path), `PORT` (a number), `PASSWORD` (a word), `…` at the end of a
line (the rest of that line) and `…` alone on a line (any lines, none included). Blocks fenced as ```sh or plain ``` are not run: commands that need
a demo's servers or a real cluster.

`make demo` itself — the README's quick start — is run end to end by tests/integration/test_demo.py
(on the real servers it starts, with its output checked there); this walkthrough does not start it
again (the suite is near its time budget): it runs the quick start's read commands and every
example shown with its output, and checks the README's sample of what `drt demo --ui` leaves
running against the demo's own summary printer fed the values the demo builds. `drt` here is the checkout's `.venv/bin/drt`; `.venv/bin/drt` in a
sample is that same file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 300


@dataclass(frozen=True)
class Example:
    doc: str
    line: int
    command: str
    expected: tuple[str, ...]
    exit_code: int


def examples(path: Path) -> list[Example]:
    """The commands of the ```console blocks of one document, with the lines shown after each."""
    found: list[Example] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    in_block = False
    current: dict[str, object] | None = None

    def close() -> None:
        nonlocal current
        if current is not None:
            found.append(Example(str(path.relative_to(REPO)), int(current["line"]),  # type: ignore[call-overload]
                                 str(current["command"]), tuple(current["out"]),  # type: ignore[arg-type]
                                 int(current["exit"])))  # type: ignore[call-overload]
        current = None

    indent = 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if not in_block:
            in_block = stripped == "```console"
            indent = len(raw) - len(raw.lstrip(" "))  # a block inside a list item is indented
            continue
        text = raw[indent:] if raw[:indent].strip() == "" else raw
        if stripped.startswith("```"):
            close()
            in_block = False
        elif text.startswith("$ "):
            close()
            current = {"line": number, "command": text[2:], "out": [], "exit": 0}
        elif current is not None:
            m = re.fullmatch(r"\[exit (\d+)\]", stripped)
            if m:
                current["exit"] = int(m.group(1))
            else:
                current["out"].append(text)  # type: ignore[attr-defined]
    return found


ALL = [e for doc in DOCS for e in examples(doc)]


def pattern(line: str) -> re.Pattern[str]:
    """A sample line as a pattern: literal text, with the marked placeholders."""
    rest = line.endswith("…")
    body = re.escape(line[:-1] if rest else line)
    body = body.replace("CHECKOUT", re.escape(str(REPO)))
    body = body.replace("PORT", r"\d+").replace("PASSWORD", r"\S+")
    return re.compile(body + (".*" if rest else ""))


def run(command: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(["bash", "-c", command], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)


def test_the_readme_is_a_front_page_with_examples() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= README_MAX_LINES, f"README.md has {len(readme)} lines (at most {README_MAX_LINES})"
    ran = [e for e in ALL if e.doc == "README.md"]
    assert len(ran) >= 3, "the README's quick start shows no console example"
    assert any(e.command.endswith("drt --help") for e in ran)
    assert "make demo" in "\n".join(readme) and "make test" in "\n".join(readme)


@pytest.mark.parametrize("example", ALL, ids=[f"{e.doc}:{e.line}" for e in ALL])
def test_a_documented_command_prints_what_the_docs_show(example: Example) -> None:
    result = run(example.command)
    printed = result.stdout.rstrip("\n").splitlines()
    where = f"{example.doc}:{example.line}: $ {example.command}"
    assert "Traceback" not in result.stdout, f"{where}\n{result.stdout}"
    assert result.returncode == example.exit_code, (
        f"{where}: exit {result.returncode}, the docs show {example.exit_code}\n{result.stdout}")
    shown = list(example.expected)
    whole = "".join(r"(?:[^\n]*\n)*?" if want == "…" else pattern(want).pattern + "\n" for want in shown)
    assert re.fullmatch(whole, "".join(ln + "\n" for ln in printed)), (f"{where}: the docs show\n  " + "\n  ".join(shown)
                          + "\nbut it printed\n  " + "\n  ".join(printed))


def test_the_demo_ui_lines_are_what_the_readme_shows() -> None:
    """The README's `--ui` sample against `drt demo`'s summary printer (dr_toolkit/cli/demo.py),
    given a summary shaped as drt_demo builds it (its `ui` value: drt_demo/demo.py)."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, ln in enumerate(lines) if "With `--ui` its summary also says:" in ln)
    fence = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    end = next(i for i in range(fence + 1, len(lines)) if lines[i].startswith("```"))
    shown = lines[fence + 1:end]
    probe = (
        "from pathlib import Path\n"
        "from dr_toolkit.cli.demo import _render\n"
        "work = Path('demo-data').resolve()\n"
        "url = 'http://127.0.0.1:8793'\n"
        "_render({'checks': [], 'run_id': 'failover-1', 'failover_status': 'succeeded', 'workdir': str(work),\n"
        "         'topology': str(work / 'drt.yaml'), 'duration_s': 180, 'next_steps': ['drt demo --stop'],\n"
        "         'ui': {'url': url, 'dr_page': f'{url}/dr-toolkit/', 'user': 'admin', 'password': 'x1y2',\n"
        "                'running': ['zookeeper', 'hdfs-hot'], 'env_file': str(work / 'airflow.env')}})\n")
    r = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    printed = r.stdout.splitlines()
    first = [i for i, ln in enumerate(printed) if pattern(shown[0]).fullmatch(ln)]
    assert first, f"README.md's --ui sample starts with a line drt demo does not print:\n{r.stdout}"
    got = printed[first[0]:first[0] + len(shown)]
    assert len(got) == len(shown) and all(pattern(w).fullmatch(g) for w, g in zip(shown, got, strict=True)), (
        "README.md's --ui sample\n  " + "\n  ".join(shown) + "\nbut drt demo prints\n  " + "\n  ".join(got))


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_every_link_between_the_docs_reaches_its_file_and_section() -> None:
    """The README's sections moved into docs/: a link to a file or a section that is not there fails."""
    broken = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.exists():
                broken.append(f"{doc.relative_to(REPO)}: {target} (no such file)")
                continue
            if anchor and file.suffix == ".md":
                headings = re.findall(r"^#{1,6} (.+)$", file.read_text(encoding="utf-8"), flags=re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{doc.relative_to(REPO)}: {target} (no such section)")
    assert not broken, "\n".join(broken)


# -- the topology file's field reference (docs/configuration.md), generated from the model ----------
FIELDS_BEGIN = "<!-- fields: generated from dr_toolkit.topology by tests/integration/test_readme_walkthrough.py -->"
FIELDS_END = "<!-- fields: end -->"


def _tname(ann: Any) -> str:
    from pydantic import BaseModel

    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        text = " or ".join(_tname(a) for a in args)
        return text + (" or null" if len(args) < len(typing.get_args(ann)) else "")
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in typing.get_args(ann))
    if origin is list:
        return f"list of {_tname(typing.get_args(ann)[0])}"
    if origin is dict:
        key, value = typing.get_args(ann)
        return f"map of {_tname(key)} to {_tname(value)}"
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return "section"
    return str(getattr(ann, "__name__", ann))


def _default(f: Any) -> str:
    from pydantic import BaseModel
    from pydantic_core import PydanticUndefined

    if f.default is not PydanticUndefined:
        value = f.default
    elif f.default_factory is not None:
        value = f.default_factory()
    else:
        return "required"
    if value is None:
        return "—"
    return "`{}`" if isinstance(value, BaseModel) else f"`{json.dumps(value)}`"


def _model_in(ann: Any) -> tuple[Any, str] | None:
    """The model a field holds, and how: itself (""), a list of them ("[]"), a map of them (".<name>")."""
    from pydantic import BaseModel

    def is_model(a: Any) -> bool:
        return isinstance(a, type) and issubclass(a, BaseModel)

    args = [a for a in typing.get_args(ann) if a is not type(None)]
    if typing.get_origin(ann) in (typing.Union, types.UnionType) and len(args) == 1:
        ann = args[0]
    if is_model(ann):
        return ann, ""
    if typing.get_origin(ann) is list and is_model(typing.get_args(ann)[0]):
        return typing.get_args(ann)[0], "[]"
    if typing.get_origin(ann) is dict and is_model(typing.get_args(ann)[1]):
        return typing.get_args(ann)[1], ".<name>"
    return None


def _rows(model: Any, prefix: str) -> list[str]:
    out: list[str] = []
    for name, f in model.model_fields.items():
        if f.exclude:
            continue
        path = f"{prefix}{name}"
        held = _model_in(f.annotation)
        if held is None:
            desc = " ".join((f.description or "").split()).replace("|", "\\|")
            out.append(f"| `{path}` | {_tname(f.annotation)} | {_default(f)} | {desc} |")
            continue
        sub, suffix = held
        kind = {"[]": "a list of entries", ".<name>": "a map of named entries", "": "a section"}[suffix]
        doc = f.description or (sub.__doc__ or "").strip().split("\n\n")[0]
        out.append(f"| `{path}` | {kind} | {_default(f)} | {' '.join(doc.split())} |")
        out += _rows(sub, f"{path}{suffix}.")
    return out


def field_reference() -> str:
    """Every field of the topology file: its path, type, default and meaning, from the model itself."""
    from dr_toolkit.topology import Topology

    return "\n".join(["| field | type | default | meaning |", "|---|---|---|---|", *_rows(Topology, "")])


def test_the_field_reference_is_the_models() -> None:
    """docs/configuration.md's field table is the topology model's fields; regenerate it with
    `.venv/bin/python -m tests.integration.test_readme_walkthrough` after changing the model."""
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert FIELDS_BEGIN in text and FIELDS_END in text, "docs/configuration.md lost its field table's markers"
    shown = text.split(FIELDS_BEGIN, 1)[1].split(FIELDS_END, 1)[0].strip()
    assert shown == field_reference(), "docs/configuration.md's field table differs from dr_toolkit.topology: " \
        "run .venv/bin/python -m tests.integration.test_readme_walkthrough"


if __name__ == "__main__":  # rewrite docs/configuration.md's field table from the model
    path = REPO / "docs" / "configuration.md"
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(FIELDS_BEGIN, 1)
    tail = rest.split(FIELDS_END, 1)[1]
    path.write_text(f"{head}{FIELDS_BEGIN}\n{field_reference()}\n{FIELDS_END}{tail}", encoding="utf-8")
