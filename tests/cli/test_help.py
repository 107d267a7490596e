"""Every command's --help ends with examples that parse and, where cheap, run; run --help
lists its options by query kind."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from graphcep.cli import build_parser, main
from graphcep.cli.options import EXAMPLES_HEADING, OPTION_GROUPS
from tests.paths import EXAMPLES

#: every command and sub-command whose --help is checked
COMMANDS = [[], ["run"], ["subscribe"], ["explain"], ["gen"], ["gen", "netflow"],
            ["stream"], ["motifs"], ["draw"], ["demo"]]


def help_text(command: list[str], capsys) -> str:
    assert main([*command, "--help"]) == 0
    return capsys.readouterr().out


def example_commands(text: str) -> list[list[str]]:
    """The commands of a help text's examples, each as its argument list after
    ``graphcep`` (``#`` comments dropped, ``\\`` continuations joined)."""
    block = text[text.index(EXAMPLES_HEADING) + len(EXAMPLES_HEADING):]
    joined = re.sub(r"\\\n\s*", " ", block)
    commands = [words for words in (shlex.split(line, comments=True)
                                    for line in joined.splitlines()) if words]
    assert all(words[0] == "graphcep" for words in commands), commands
    return [words[1:] for words in commands]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "graphcep")
def test_help_ends_with_examples_of_the_command_that_parse(command, capsys):
    text = help_text(command, capsys)
    assert EXAMPLES_HEADING in text
    tail = text[text.rindex(EXAMPLES_HEADING):]
    examples = example_commands(tail)
    assert len(examples) >= 2, tail
    if command:  # a command's own examples run that command (draw's also makes its file)
        assert sum(e[:len(command)] == command for e in examples) >= 2, examples
    parser = build_parser()
    for words in examples:
        args = parser.parse_args(words)  # an example that does not parse exits here
        assert callable(args.handler)
        for word in words:  # every file of the repository an example names is there
            if word.startswith("examples/"):
                assert (EXAMPLES.parent / word).is_file(), word


def option_groups(text: str) -> dict[str, list[str]]:
    """The help's headings (``title:`` at the line start) and the options under each."""
    groups: dict[str, list[str]] = {}
    title = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            title = line[:-1]
            groups[title] = []
        elif title and re.match(r"  -", line):
            groups[title].append(line.split()[0].rstrip(","))
    return groups


def test_run_help_groups_its_options_by_query_kind(capsys):
    groups = option_groups(help_text(["run"], capsys))
    assert groups["options"] == ["-h"], (
        "an option of graphcep run is in no group: name its destination in "
        "graphcep.cli.options.OPTION_GROUPS")
    expected = {
        "input": ["--input", "--format", "--time-unit", "--time-format", "--header",
                  "--columns"],
        "SAL queries (.sal)": ["--query-name", "--window", "--max-duration", "--homomorphic"],
        "DDST event patterns (.ddst)": ["--ddst-engine", "--signature-p", "--signature-seed",
                                        "--ddst-report"],
        "ν-expressions (.nu, .autom)": ["--nu-engine", "--anchored"],
        "subscriptions (.subs)": ["--key", "--symbol", "--subs-engine"],
        "window widening (--pww, for any query kind)": ["--pww", "--pww-base",
                                                        "--pww-max-duration"],
        "Spark": ["--engine", "--master", "--shards"],
    }
    for title, options in expected.items():
        assert set(options) <= set(groups[title]), title
    assert "--output" in groups["output"]
    assert "--max-window-edges" in groups[
        "state bounds (past one, the run stops with exit status 3)"]


@pytest.mark.parametrize("command", [["subscribe"], ["explain"], ["stream"], ["motifs"]])
def test_every_option_of_the_query_commands_is_in_a_group(command, capsys):
    assert option_groups(help_text(command, capsys))["options"] == ["-h"], (
        f"an option of graphcep {command[0]} is in no group: name its destination in "
        "graphcep.cli.options.OPTION_GROUPS")


def test_the_group_table_names_only_options_a_command_has():
    dests = set()
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("run", "subscribe", "explain", "stream", "motifs"):
        dests |= {a.dest for a in commands.choices[name]._actions}
    named = [dest for group in OPTION_GROUPS.values() for dest in group]
    assert len(named) == len(set(named))  # no option in two groups
    assert set(named) <= dests


#: the examples that read only what the repository and the gen example provide, run
#: in this process: in-process engines (no Spark), explain, gen, subscribe, motifs, draw
CHEAP = re.compile(r"^(explain|gen|subscribe|draw|motifs)\b|--engine local")


@pytest.mark.slow
def test_the_cheap_examples_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(EXAMPLES)
    seen: list[str] = []
    for command in COMMANDS:
        for words in example_commands(help_text(command, capsys)):
            line = " ".join(words)
            if line not in seen:
                seen.append(line)
    # the stream the examples read first (gen is listed before the runs that read it)
    assert main(["gen", "netflow", "--edges", "20000", "--vertices", "500", "-o",
                 "flows.csv"]) == 0
    ran = []
    for line in seen:
        words = shlex.split(line)
        if not CHEAP.search(line) or "--engine spark" in line or words[0] == "gen":
            continue
        if not all(Path(path).exists() for path in read_paths(words)):
            continue  # a stream the test does not have (CollegeMsg, the demo's)
        assert main(words) == 0, line
        capsys.readouterr()
        ran.append(line)
    assert len(ran) >= 12, ran
    assert Path("matches.jsonl").is_file() and Path("pictures").is_dir()


def read_paths(words: list[str]) -> list[str]:
    """The files an example command reads: its inputs, or the match file it draws."""
    paths = [words[i + 1] for i, word in enumerate(words) if word in ("--input", "-i")]
    return [words[1], *paths] if words[0] == "draw" else paths
