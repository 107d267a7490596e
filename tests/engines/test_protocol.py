"""The engine protocol, held against every engine a job kind registers.

Each case builds an engine and a stream for it; every registered engine must have a case
(:func:`test_every_registered_engine_has_a_case`), so a new engine cannot ship without
these checks. What is checked (``engines/base.py``):

- the matches do not depend on how the stream is cut into batches;
- a batch out of stream order is refused with :class:`OutOfOrderError`, and the engine
  goes on as if it had never been pushed;
- ``snapshot``/``restore`` mid-stream continues exactly as an uninterrupted run; a
  snapshot of another engine, or bytes that are none, are a :class:`SnapshotError`;
- ``warm`` fills state and reports nothing: warm-up then push reports what the whole
  stream reports for the pushed edges;
- ``advance`` past every window drops the engine's edges;
- empty batches change nothing and return the output schema's empty table;
- ``describe`` and ``state_size`` answer.
"""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from graphcep import jobs
from graphcep.engines.base import ChunkedPushes, EngineBase, OutOfOrderError, SnapshotError
from graphcep.events import encoded_vertices, sort_stream
from graphcep.lang.ddst import parse_ddst
from graphcep.lang.nu import parse_nu
from graphcep.lang.sal import parse_program
from graphcep.lang.sequences import parse_subscriptions

S = 1_000_000


@dataclass(frozen=True)
class Case:
    """An engine class with a pattern and a stream it finds matches in."""

    engine: str  # "module:Class"
    job: Callable[[], jobs.ReplayJob]
    stream: Callable[[], pa.Table]
    timed: bool = True  # False: nothing expires with event time (subscriptions)

    def new(self) -> EngineBase:
        return self.job().new_engine()


def netflow(edges: int = 600, vertices: int = 12, seed: int = 3) -> pa.Table:
    """A random stream with repeated times, numbered in stream order."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, edges // 4, edges)) * S // 2
    src, dst = rng.integers(0, vertices, edges), rng.integers(0, vertices, edges)
    return pa.table({"t": t, "src": [f"v{i}" for i in src], "dst": [f"v{i}" for i in dst],
                     "dur": np.full(edges, S), "seq": np.arange(edges)})


def labelled(edges: int = 400, seed: int = 5) -> pa.Table:
    """A random stream whose edges carry one of two labels and vertices one of two."""
    table = netflow(edges, 10, seed)
    rng = np.random.default_rng(seed + 1)
    pick = np.array(["x", "y"], dtype=object)
    return (table.append_column("label", pa.array(pick[rng.integers(0, 2, edges)]))
            .append_column("src_label", pa.array(pick[rng.integers(0, 2, edges)]))
            .append_column("dst_label", pa.array(pick[rng.integers(0, 2, edges)])))


TRIANGLE = parse_program("""{
    x1 e1 x2; x2 e2 x3; x3 e3 x1;
    starttime(e3) - starttime(e1) <= 20;
    starttime(e1) < starttime(e2); starttime(e2) < starttime(e3);
}""")
TRIANGLE_NU = parse_nu("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 20]", "triangle")
SUBSCRIPTIONS = parse_subscriptions("back: @x.@y.@x\nhop: v1.@x\nrepeat: @x.@x.v2")
SPREAD = parse_ddst("QUERY spread; VERTICES A:x, B, C; EDGES AB: A -> B [x]; BC: B -> C [y]; "
                    "ORDER AB < BC; WITHIN 15 s;")

CASES = {
    "subgraph": Case("graphcep.engines.subgraph.engine:SubgraphEngine",
                     lambda: jobs.as_job(TRIANGLE).bind(S), netflow),
    **{f"nu-{name}": Case(f"{module}:{cls}",
                          lambda name=name: jobs.as_job(TRIANGLE_NU, engine=name), netflow)
       for name, (module, cls) in importlib.import_module("graphcep.jobs.nu").ENGINES.items()},
    **{name: Case(f"{module}:{cls}",
                  lambda name=name: jobs.as_job(SPREAD, engine=name), labelled)
       for name, (module, cls) in importlib.import_module("graphcep.jobs.ddst").ENGINES.items()},
    **{f"subs-{name}": Case(f"{module}:{cls}",
                            lambda name=name: jobs.as_job(SUBSCRIPTIONS, engine=name),
                            netflow, timed=False)
       for name, (module, cls) in importlib.import_module("graphcep.jobs.sequences")
       .ENGINES.items()},
}


def registered_engines() -> set[str]:
    """``module:Class`` of every engine the job kinds run."""
    found = set()
    for kind in jobs.KINDS:
        for module, cls in kind.job_module().ENGINES.values():
            found.add(f"{module}:{cls}")
    return found


def test_every_registered_engine_has_a_case():
    assert registered_engines() == {case.engine for case in CASES.values()}


@pytest.fixture(params=sorted(CASES), name="case")
def case_fixture(request) -> Case:
    return CASES[request.param]


def matches_of(table: pa.Table) -> list:
    """Match rows in a canonical order (a push's order within ties is its own)."""
    return sorted(table.to_pylist(), key=lambda row: row["match_id"])


def run(engine: EngineBase, stream: pa.Table, cuts: list[int]) -> list:
    """Push ``stream`` cut at ``cuts``; all matches."""
    out, start = [], 0
    for end in [*cuts, stream.num_rows]:
        out += matches_of(engine.push(stream.slice(start, end - start)))
        start = end
    return sorted(out, key=lambda row: row["match_id"])


def test_the_case_finds_matches(case):
    """Without matches, the checks below would hold of an engine that finds nothing."""
    assert len(run(case.new(), case.stream(), [])) >= 3


@pytest.mark.parametrize("cuts", [[1, 2, 3], [100, 101], list(range(7, 600, 7))])
def test_matches_do_not_depend_on_batches(case, cuts):
    stream = case.stream()
    cuts = [c for c in cuts if c < stream.num_rows]
    assert run(case.new(), stream, cuts) == run(case.new(), stream, [])


def test_matches_do_not_depend_on_chunks(case):
    """A push's matches taken in chunks of one row are the push's, and an engine that
    hands out its own chunks (``push_chunks``) cuts a push that finds several."""
    stream = case.stream()
    engine = case.new()
    chunks = list(ChunkedPushes(engine, chunk_rows=1)(stream))
    assert sorted((row for c in chunks for row in c.to_pylist()),
                  key=lambda row: row["match_id"]) == run(case.new(), stream, [])
    if hasattr(engine, "push_chunks"):
        assert sum(1 for c in chunks if c.num_rows) > 1


def test_out_of_order_batch_is_refused_and_changes_nothing(case):
    stream = case.stream()
    half = stream.num_rows // 2
    whole = run(case.new(), stream, [half])
    engine = case.new()
    first = matches_of(engine.push(stream.slice(0, half)))
    late = stream.slice(half - 5, 1)  # before what was pushed
    with pytest.raises(OutOfOrderError):
        engine.push(late)
    backwards = sort_stream(stream.slice(half, 4)).take([3, 2, 1, 0])
    if len(set(backwards.column("t").to_pylist())) > 1:
        with pytest.raises(OutOfOrderError):
            engine.push(backwards)
    rest = matches_of(engine.push(stream.slice(half)))
    assert sorted(first + rest, key=lambda row: row["match_id"]) == whole


@pytest.mark.parametrize("numbered", [True, False], ids=["seq", "no-seq"])
def test_snapshot_restore_mid_stream_equals_an_uninterrupted_run(case, numbered):
    """Also without ``seq``: the engine numbers arrivals itself, and must go on numbering
    where it stopped."""
    stream = case.stream()
    if not numbered:
        stream = stream.drop_columns(["seq"])
    third = stream.num_rows // 3
    whole = run(case.new(), stream, [third, 2 * third])
    engine = case.new()
    first = run(engine, stream.slice(0, third), [])
    blob = engine.snapshot()
    restored = type(engine).restore(blob)
    assert restored.edges_seen == engine.edges_seen == third
    assert restored.matches_found == engine.matches_found == len(first)
    rest = run(restored, stream.slice(third), [third])
    assert sorted(first + rest, key=lambda row: row["match_id"]) == whole
    assert restored.edges_seen == stream.num_rows


def test_a_snapshot_of_another_kind_or_version_is_refused(case):
    engine = case.new()
    engine.push(case.stream().slice(0, 50))
    blob = engine.snapshot()
    with pytest.raises(SnapshotError, match="unreadable bytes"):
        type(engine).restore(blob[: len(blob) // 2])
    with pytest.raises(SnapshotError, match="before snapshots were versioned"):
        type(engine).restore(pickle.dumps({"query": "old"}))
    envelope = pickle.loads(blob)
    envelope["state_version"] += 1
    with pytest.raises(SnapshotError, match="state version"):
        type(engine).restore(pickle.dumps(envelope))
    other = next(c for name, c in CASES.items() if c.engine != case.engine)
    stranger = other.new().snapshot()
    with pytest.raises(SnapshotError, match="restores"):
        type(engine).restore(stranger)


def test_warm_fills_state_and_reports_nothing(case):
    """A shard warmed up on the edges before it reports what a whole run reports for its
    own edges: the matches their arrivals trigger."""
    stream = case.stream()
    half = stream.num_rows // 2
    whole = case.new().push(stream)
    engine = case.new()
    assert engine.warm(stream.slice(0, half)) is None
    own = matches_of(engine.push(stream.slice(half)))
    triggered_late = matches_of(_triggered_after(whole, stream, half))
    assert own == triggered_late and own


def _triggered_after(matches: pa.Table, stream: pa.Table, half: int) -> pa.Table:
    """Matches whose triggering edge (the newest) is among the rows from ``half`` on."""
    first_late = stream.column("seq")[half].as_py()
    if "trigger_seq" in matches.column_names:  # DDST: the arrival that reports
        return matches.filter(pc.greater_equal(matches.column("trigger_seq"), first_late))
    last_seq = [max(e["seq"] for e in edges) for edges in matches.column("edges").to_pylist()]
    return matches.filter(pa.array([s >= first_late for s in last_seq]))


def test_advance_drops_what_no_window_can_hold(case):
    engine = case.new()
    stream = case.stream()
    engine.push(stream)
    if not case.timed:  # an occurrence is contiguous in its sequence, however long it takes
        before = engine.state_size()
        assert engine.advance(stream.column("t")[-1].as_py() + S).num_rows == 0
        assert engine.state_size() == before
        return
    assert engine.state_size()["edges"] > 0
    far = stream.column("t")[-1].as_py() + 10**6 * S
    assert engine.advance(far).num_rows == 0
    assert engine.state_size()["edges"] == 0


def test_empty_batches_change_nothing(case):
    stream = case.stream()
    engine = case.new()
    empty = stream.slice(0, 0)
    out = engine.push(empty)
    assert out.num_rows == 0 and out.schema == case.job().output.schema
    engine.push(stream.slice(0, 100))
    before = engine.state_size()
    assert engine.push(empty).num_rows == 0
    assert engine.state_size() == before and engine.edges_seen == 100


def test_describe_and_state_size_answer(case):
    engine = case.new()
    assert isinstance(engine.describe(), str) and engine.describe()
    size = engine.state_size()
    assert size and all(isinstance(v, int) for v in size.values())


def test_vertices_encoded_once_give_the_same_matches(case):
    """Batches whose ``src`` and ``dst`` come dictionary-encoded by one dictionary (a rules
    engine encodes each batch once for all its rules) give the matches, output types
    included, of plain strings -- also when the dictionary holds names the batch no
    longer uses (a filtered batch), and across a snapshot and restore."""
    stream = case.stream()
    cuts = [0, 37, 38, 150, 311, stream.num_rows]
    keep = pa.array(np.arange(stream.num_rows) % 5 != 2)
    engines = {"plain": case.new(), "encoded": case.new(), "mixed": case.new()}
    got: dict[str, list] = {name: [] for name in engines}
    schemas = set()
    for n, (start, end) in enumerate(zip(cuts, cuts[1:], strict=False)):
        piece, kept = stream.slice(start, end - start), keep.slice(start, end - start)
        if n == 3:
            engine = engines["encoded"]
            engines["encoded"] = type(engine).restore(engine.snapshot(), **dict(
                getattr(engine, "restore_context", dict)()))
        for name, engine in engines.items():  # mixed: every other batch encoded
            encode = name == "encoded" or (name == "mixed" and n % 2)
            out = engine.push((encoded_vertices(piece) if encode else piece).filter(kept))
            schemas.add(out.schema)
            got[name] += out.to_pylist()
    assert len(schemas) == 1
    for name in ("encoded", "mixed"):
        assert matches_of(pa.Table.from_pylist(got[name])) == \
            matches_of(pa.Table.from_pylist(got["plain"])), name
    assert got["plain"]
