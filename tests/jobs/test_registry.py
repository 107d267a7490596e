"""The job registry: which kind a query file is, loading it with options, bare patterns."""

from __future__ import annotations

import pytest

from graphcep import jobs
from graphcep.jobs.ddst import DDSTJob
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.ddst import parse_ddst
from graphcep.lang.sal import parse_program
from graphcep.patterns.subgraph import QueryError
from tests.paths import EXAMPLES

PAIR = "VERTICES A, B; EDGES x: A -> B; WITHIN 5 s"


@pytest.mark.parametrize(("name", "text", "kind"), [
    ("q.ddst", "anything", "ddst"),            # the suffix decides
    ("q.sal", "QUERY q; VERTICES A;", "sal"),
    ("q.txt", f"// a pattern\n{PAIR}", "ddst"),  # else the text
    ("q.txt", "QUERY = 3; { x1 e1 x2; }", "sal"),  # a SAL assignment named QUERY
    ("q.txt", "{ x1 e1 x2; }", "sal"),
    ("q.nu", "anything", "nu"),
    ("q.txt", "// two hosts\n<#X ~> #Y>[0, 1]", "nu"),       # a link: a ν-expression
    ("q.txt", "// x ~> y in a comment\n{ x1 e1 x2; }", "sal"),
    ("q.subs", "anything", "subs"),
    ("q.txt", "# probes\nssh: 22.@x.22.@x\n", "subs"),      # id: pattern lines
])
def test_kind_of_a_query_file(tmp_path, name, text, kind):
    path = tmp_path / name
    path.write_text(text)
    assert jobs.kind_of(str(path)).name == kind


def test_a_missing_file_is_left_to_the_default_kind_to_report(tmp_path):
    missing = str(tmp_path / "nothing.txt")
    assert jobs.kind_of(missing).name == "sal"
    with pytest.raises(FileNotFoundError):
        jobs.load(missing, {})


def test_load_gives_each_kind_its_job():
    sal = jobs.load(str(EXAMPLES / "triangle.sal"), {"fmt": "csv"})
    ddst = jobs.load(str(EXAMPLES / "ddst" / "congestion.ddst"), {"ddst_engine": "baseline"})
    assert isinstance(sal, SubgraphJob) and sal.extent().size == 10_000_000
    assert isinstance(ddst, DDSTJob) and ddst.engine == "baseline"
    assert ddst.summary_fields() == {"ddst_engine": "baseline"}
    assert sal.summary_fields() == {}


def test_a_kind_refuses_the_options_of_another():
    with pytest.raises(QueryError, match="--window does not apply to a DDST query"):
        jobs.load(str(EXAMPLES / "ddst" / "congestion.ddst"), {"window": "10"})
    with pytest.raises(QueryError, match="--signature-p applies to --ddst-engine signature"):
        jobs.load(str(EXAMPLES / "ddst" / "congestion.ddst"),
                  {"ddst_engine": "coloring", "signature_p": 7})


def test_bare_patterns_become_jobs_and_jobs_stay_as_they_are():
    program = parse_program("{ x1 e1 x2; }")
    sal = jobs.as_job(program)
    assert isinstance(sal, SubgraphJob) and jobs.as_job(sal) is sal
    assert isinstance(jobs.as_job(program.query()), SubgraphJob)
    ddst = jobs.as_job(parse_ddst(PAIR), engine="signature")
    assert isinstance(ddst, DDSTJob) and ddst.engine == "signature"
    with pytest.raises(TypeError, match="not a pattern graphcep can run: str"):
        jobs.as_job("{ x1 e1 x2; }")


def test_cells_say_why_a_job_cannot_be_split():
    assert jobs.cell_query_or_none(jobs.as_job(parse_ddst(PAIR))) is None
    with pytest.raises(QueryError, match="match graph"):
        jobs.as_job(parse_ddst(PAIR)).cell_query()
    sal = jobs.as_job(parse_program("{ x1 e1 x2; }"))
    assert jobs.cell_query_or_none(sal) is sal.query


def test_declared_source_is_the_programs_vast_stream():
    program = parse_program('Netflows = VastStream("localhost", 9999);\n'
                            'SUBGRAPH ON Netflows WITH source(SourceIp) AND target(DestIp) '
                            '{ x1 e1 x2; }')
    source = jobs.as_job(program).declared_source()
    assert (source.fmt, source.host, source.port) == ("vast", "localhost", 9999)
    assert jobs.as_job(parse_ddst(PAIR)).declared_source() is None
