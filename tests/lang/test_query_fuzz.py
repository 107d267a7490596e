"""Mutation fuzz of query texts: whatever a query file holds, the answer is a parse or a
syntax error at ``file:line:col`` -- never another exception, never a traceback.

The seeds are the example queries (SAL ``examples/*.sal``, DDST
``examples/ddst/*.ddst``). Each mutant applies one to three edits: delete, duplicate or
swap tokens, insert random characters or raw bytes (not always UTF-8), truncate, or
replace a number by a huge, negative, tiny or non-finite one. For every mutant:

* the language's parser either returns a query or raises :class:`QuerySyntaxError` whose
  message starts with ``file:line:col:``;
* ``graphcep explain`` on it (in-process, through :func:`graphcep.cli.main`) exits 0 or 2,
  with nothing on stderr when 0 and a message starting ``graphcep:`` when 2 -- the
  position when the parser refused the text.

A handful of mutants also go through a real ``graphcep explain`` process, to show that no
traceback reaches the terminal. Seeded and bounded: the same mutants on every run.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from graphcep.cli import main
from graphcep.jobs import kind_of
from graphcep.lang.ddst import parse_ddst_file
from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.sal import parse_file
from tests.paths import EXAMPLES

SEEDS = sorted(EXAMPLES.glob("*.sal")) + sorted((EXAMPLES / "ddst").glob("*.ddst"))
MUTANTS_PER_SEED = 120
SUBPROCESS_MUTANTS = 6

_TOKEN = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*|[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|\s+|.",
                    re.DOTALL)
_NUMBER = re.compile(rb"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
#: What a number may become: beyond every range, negative, tiny, not finite, not a number.
_NUMBERS = (b"1e15", b"1e100", b"1e101", b"1e999", b"-5", b"-1e15", b"0", b"0.0000001",
            b"1e-100", b"nan", b"inf", b"99999999999999999999999", b"9223372036854775808",
            b"4611686018427387904", b"2.5")
_CHARACTERS = ("{", "}", "(", ")", ";", ",", ":", "->", "<", "<=", ">=", "=", "==", "-", "+",
               "*", "[", "]", '"', "'", "\\", "/*", "//", "#", ".", "\n", "\t", "\r", "\x00",
               "é", "\u00a0", "\ufeff", "\U0001f600", "SUBGRAPH", "QUERY", "VERTICES",
               "EDGES", "ORDER", "WITHIN", "starttime(", "endtime(e1)", "in", "not", "EDGES;")
_BYTES = (b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\x80\x80")


def _tokens(text: bytes) -> list[bytes]:
    return _TOKEN.findall(text)


def _mutate(text: bytes, rng: random.Random) -> bytes:
    """One random edit of ``text``."""
    tokens = _tokens(text) or [b""]
    i, j = rng.randrange(len(tokens)), rng.randrange(len(tokens))
    kind = rng.randrange(8)
    if kind == 0:  # delete a token
        del tokens[i]
    elif kind == 1:  # duplicate a token
        tokens.insert(i, tokens[i])
    elif kind == 2:  # swap two tokens
        tokens[i], tokens[j] = tokens[j], tokens[i]
    elif kind == 3:  # insert characters
        tokens.insert(i, rng.choice(_CHARACTERS).encode())
    elif kind == 4:  # insert raw bytes, often not UTF-8
        tokens.insert(i, rng.choice(_BYTES))
    elif kind == 5:  # truncate anywhere, even inside a UTF-8 sequence
        return text[: rng.randrange(len(text) + 1)]
    else:  # replace a number
        numbers = [k for k, tok in enumerate(tokens) if _NUMBER.fullmatch(tok)]
        if numbers:
            tokens[rng.choice(numbers)] = rng.choice(_NUMBERS)
        else:
            tokens.insert(i, rng.choice(_NUMBERS))
    return b"".join(tokens)


def mutants(seed: Path, count: int, rng: random.Random) -> list[bytes]:
    original = seed.read_bytes()
    out = []
    for _ in range(count):
        text = original
        for _ in range(rng.randint(1, 3)):
            text = _mutate(text, rng)
        out.append(text)
    return out


def check_parse(path: Path) -> QuerySyntaxError | None:
    """Parse as the command line would; only a positioned syntax error may come out."""
    parse = parse_ddst_file if kind_of(str(path)).name == "ddst" else parse_file
    try:
        parse(path)
    except QuerySyntaxError as err:
        head = str(err).splitlines()[0]
        assert re.match(rf"{re.escape(str(path))}:\d+:\d+: \S", head), head
        assert err.line >= 1 and err.column >= 1
        return err
    return None


@pytest.mark.parametrize("seed", SEEDS, ids=[p.name for p in SEEDS])
def test_mutated_queries_parse_or_fail_at_a_position(seed, tmp_path, capsys):
    rng = random.Random(f"{seed.name}-2024")
    path = tmp_path / seed.name
    refused = explained = 0
    # SAL texts may bound their extent through durations (the watering hole): give one;
    # a seed that bounds nothing at all (run with --pww) is explained within a window
    sal_options = [] if kind_of(str(seed)).name == "ddst" else ["--max-duration", "60"]
    if sal_options and main(["explain", str(seed), *sal_options]) != 0:
        sal_options += ["--window", "3600"]
    assert main(["explain", str(seed), *sal_options]) == 0, capsys.readouterr().err
    capsys.readouterr()
    for number, text in enumerate(mutants(seed, MUTANTS_PER_SEED, rng)):
        path.write_bytes(text)
        context = f"mutant {number} of {seed.name}: {text[:300]!r}"
        error = check_parse(path)
        status = main(["explain", str(path), *sal_options])
        captured = capsys.readouterr()
        assert status in (0, 2), context
        assert "Traceback" not in captured.err, context
        if status == 0:
            assert captured.err == "", context
            explained += 1
            continue
        refused += 1
        assert captured.err.startswith("graphcep: "), context
        if error is not None:
            assert captured.err.startswith(f"graphcep: {path}:{error.line}:{error.column}: "), \
                context
    # the fuzz reaches both sides: texts that still explain and texts that are refused
    assert refused > 0 and explained > 0


def test_mutated_queries_print_no_traceback_in_a_real_process(tmp_path):
    rng = random.Random("subprocess-2024")
    for number in range(SUBPROCESS_MUTANTS):
        seed = SEEDS[number * len(SEEDS) // SUBPROCESS_MUTANTS]
        path = tmp_path / f"m{number}{seed.suffix}"
        path.write_bytes(mutants(seed, 1, rng)[0])
        done = subprocess.run([sys.executable, "-m", "graphcep.cli", "explain", str(path)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 2), done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        if done.returncode == 2:
            # stderr is a pipe here: the one-line form (a terminal also gets line and caret)
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert done.stderr.startswith("graphcep: ")
