"""The README's first screen: the two set-up commands, the language table and the
contents; every command there parses and names a file of the repository."""

from __future__ import annotations

import re
import shlex

from graphcep.cli import build_parser, demo
from tests.paths import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = README[:README.index("## Overview")]


def language_table() -> dict[str, list[str]]:
    """The rows of "Which language for which question", by language: the command's words."""
    section = FIRST_SCREEN[FIRST_SCREEN.index("## Which language"):
                           FIRST_SCREEN.index("## Contents")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[3].startswith("`graphcep"):
            language = re.sub(r"\[(.+?)\]\(.+?\)", r"\1", cells[1])
            rows[language] = shlex.split(cells[3].strip("`"))
    return rows


def test_the_set_up_commands_are_the_demo_and_what_ci_runs():
    block = FIRST_SCREEN[FIRST_SCREEN.index("```bash"):]
    commands = [line for line in block.splitlines()[1:block.count("\n")]
                if line.startswith("python3")][:2]
    assert commands[0].endswith("&& .venv/bin/graphcep demo")
    assert commands[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def test_each_language_has_an_example_that_is_a_file_and_a_command_that_parses():
    rows = language_table()
    assert list(rows) == ["SAL", "DDST", "ν-expressions", "subscriptions",
                          "window widening", "motif counts"]
    parser = build_parser()
    for language, words in rows.items():
        assert words[0] == "graphcep"
        args = parser.parse_args(words[1:])
        named = [w for w in words if w.startswith(("examples/", "tests/fixtures/"))]
        assert named and all((ROOT / w).is_file() for w in named), language
        assert callable(args.handler)


def test_the_table_runs_the_demos_queries_on_its_streams():
    """What the table's commands give after ``graphcep demo`` is what the demo printed."""
    queries = {q.file: q for q in demo.demo_queries()}
    for language, words in language_table().items():
        if words[1] != "run":
            continue
        query = queries[words[2].rsplit("/", 1)[1]]
        assert words[3:] == ["--input", f"demo-output/{query.stream}", *query.options], language


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' dropped, spaces '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_contents_and_the_tables_links_lead_to_headings():
    anchors = {github_anchor(h) for h in re.findall(r"^#{2,3} (.+)$", README, re.M)}
    links = re.findall(r"\]\(#([^)]+)\)", FIRST_SCREEN)
    assert len(links) >= 20
    assert [link for link in links if link not in anchors] == []
    top_sections = re.findall(r"^## (.+)$", README[README.index("## Overview"):], re.M)
    contents = FIRST_SCREEN[FIRST_SCREEN.index("## Contents"):]
    for title in top_sections:  # every reference section is in the contents
        assert f"(#{github_anchor(title)})" in contents, title
