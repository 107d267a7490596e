"""Rules of every kind over one stream, added, changed and removed while it runs.

The oracle of a live rule is the batch run of that rule alone over the whole stream
(:func:`graphcep.runtime.local.run_job`, whose engines are checked against brute force
in each kind's own tests), filtered by the definition: a rule in force from watermark τa
until τr reports exactly the batch matches whose last edge has ``τa <= t < τr``. The
watermarks are computed here from the micro-batches (lateness 0: after a batch every edge
before its newest one is released), the last edge of a match from its own record.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.engines.base import SnapshotError
from graphcep.jobs import rules
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.local import run_job
from graphcep.runtime.streaming.driver import StreamOperator

NEVER = -(2**63)
#: the interpreted ν engine: the compiled one gives the same matches (its own tests),
#: at a compile cost this file's many small engines would pay again and again
OPTIONS = {"nu_engine": "interpreted"}

#: One file of each kind (and a SAL program with two SUBGRAPHs: two rules), each with an
#: extent of at most 5 s; ``pair.sal`` and ``back_soon.nu`` have a second text, their change.
TEXTS = {
    "pair.sal": "{ x e1 y; y e2 x; starttime(e1) < starttime(e2); "
                "starttime(e2) - starttime(e1) <= 5; }",
    # pair.sal with a narrower bound: one engine serves both while pair.sal's is wider
    "pair_soon.sal": "{ x e1 y; y e2 x; starttime(e1) < starttime(e2); "
                     "starttime(e2) - starttime(e1) <= 2; }",
    "two.sal": "SUBGRAPH Fan { x e1 y; x e2 z; starttime(e1) < starttime(e2); "
               "starttime(e2) - starttime(e1) <= 2; } "
               "SUBGRAPH Path { x e1 y; y e2 z; starttime(e1) < starttime(e2); "
               "starttime(e2) - starttime(e1) <= 4; }",
    "back.nu": "<#X ~> #Y . Y ~> X>[0, 5]",
    # back.nu with a narrower bound: one engine serves both while back.nu is in force
    "back_soon.nu": "<#X ~> #Y . Y ~> X>[0, 3]",
    "path.nu": "<#X ~> #Y . Y ~> #Z>[0, 3]",
    "back.ddst": "VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y; WITHIN 5 s",
    "echo.subs": "pp: @a.@b.@a\nsame: @a.@a\n",
}
CHANGED = {"pair.sal": "{ x e1 y; y e2 x; starttime(e1) < starttime(e2); "
                       "starttime(e2) - starttime(e1) <= 3; }",
           "back_soon.nu": "<#X ~> #Y . Y ~> X>[0, 2]"}
SECOND = 1_000_000


def edges_table(rows: list[tuple[int, str, str]]) -> pa.Table:
    rows = sorted(rows, key=lambda r: r[0])
    return pa.table({"t": pa.array([r[0] * SECOND for r in rows], pa.int64()),
                     "src": [r[1] for r in rows], "dst": [r[2] for r in rows],
                     "seq": pa.array(range(1, len(rows) + 1), pa.int64())})


def last_edge_t(rule: rules.Rule, record: dict, by_seq: dict[int, int]) -> int:
    """The time of the match's last edge, from its record: a DDST report's trigger, the
    newest edge of the others."""
    if rule.kind == "ddst":
        return by_seq[record["trigger_seq"]]
    return max(edge["t"] for edge in record["edges"])


def batch_oracle(rule: rules.Rule, stream: pa.Table, since: int, until: float) -> Counter:
    """(rule, version, identity) of the batch matches whose last edge is in [since, until)."""
    matches = run_job(rule.job, stream)[0]
    keys = rule.job.instances(matches).keys
    by_seq = dict(zip(stream.column("seq").to_pylist(), stream.column("t").to_pylist(),
                      strict=True))
    return Counter((rule.name, rule.version, f"{rule.name}/{key}")
                   for record, key in zip(matches.to_pylist(), keys, strict=True)
                   if since <= last_edge_t(rule, record, by_seq) < until)


def file_rules(folder: Path, name: str, text: str) -> list[rules.Rule]:
    (folder / name).write_text(text)
    return rules.rules_of_file(folder / name, text, OPTIONS)


class LiveRun:
    """A stream over micro-batches whose rules directory changes between them."""

    def __init__(self, folder: Path, history_us: int | None, checkpoint: Path | None = None,
                 accept_partial: bool = False, snapshot_interval: float = 30.0) -> None:
        self.folder = folder
        self.found: list[pa.Table] = []
        self.notes: list[str] = []
        self._options = (history_us, checkpoint, accept_partial, snapshot_interval)
        self.restart()

    def restart(self) -> None:
        """A new process from the checkpoint (the rules loaded from the directory now)."""
        history_us, checkpoint, accept_partial, interval = self._options
        job = rules.load(str(self.folder), OPTIONS, strict=False).live(history_us,
                                                                       accept_partial)
        self.operator = StreamOperator(job, lateness_us=0, watch=job.watch(str(self.folder)),
                                       checkpoint=checkpoint, snapshot_interval=interval,
                                       on_matches=lambda m, b: self.found.append(m))

    def batch(self, batch_id: int, chunk: pa.Table) -> None:
        self.notes += self.operator.process(batch_id, chunk).notes

    def flush(self) -> None:
        self.notes += self.operator.flush().notes

    def reported(self) -> Counter:
        rows = [row for table in self.found for row in
                table.select(["rule", "version", "match_id"]).to_pylist()]
        return Counter((r["rule"], r["version"], r["match_id"]) for r in rows)


def watermarks(chunks: list[pa.Table]) -> list[int]:
    """The watermark before each micro-batch and before the flush (lateness 0: the newest
    time read so far; every edge before it released)."""
    marks, newest = [NEVER], NEVER
    for chunk in chunks:
        if chunk.num_rows:
            newest = max(newest, max(chunk.column("t").to_pylist()))
        marks.append(newest)
    return marks


vertices = st.sampled_from("abcd")
streams = st.lists(st.tuples(st.integers(0, 30), vertices, vertices).filter(
    lambda r: r[1] != r[2]), min_size=4, max_size=40)


@st.composite
def schedules(draw: st.DrawFn) -> tuple[list[int], dict[str, tuple[int, int | None, int]], int]:
    """Cut points of the micro-batches, and for each file the batch before which it is
    added (0: at the start), changed (``pair.sal`` only; None: never) and removed (one past
    the flush: never); the history in seconds."""
    batches = draw(st.integers(2, 6))
    plan = {}
    for name in TEXTS:
        add = draw(st.integers(0, batches))
        change = (draw(st.one_of(st.none(), st.integers(add + 1, batches + 1)))
                  if name in CHANGED and add < batches else None)
        low = (change if change is not None else add) + 1
        remove = draw(st.integers(min(low, batches + 1), batches + 1))
        plan[name] = (add, change if change is not None and change < remove else None, remove)
    history = draw(st.sampled_from([5, 10, 100]))
    return sorted(draw(st.lists(st.floats(0, 1), min_size=batches - 1,
                                max_size=batches - 1))), plan, history


def cut(stream: pa.Table, fractions: list[float]) -> list[pa.Table]:
    points = [0, *(round(f * stream.num_rows) for f in fractions), stream.num_rows]
    return [stream.slice(a, b - a) for a, b in zip(points, points[1:], strict=False)]


@settings(max_examples=30)
@given(rows=streams, schedule=schedules(),
       restarts=st.sets(st.integers(1, 6), max_size=3),
       interval=st.sampled_from([0.0, float("inf")]))
def test_live_rules_report_the_batch_matches_of_their_time_in_force(
        tmp_path_factory, rows, schedule, restarts, interval) -> None:
    """... also across restarts from the checkpoint before random micro-batches (and the
    flush), the engines snapshotted every batch or only at the first: a restart then
    replays every batch since through the restored rules."""
    fractions, plan, history_s = schedule
    folder = tmp_path_factory.mktemp("rules")
    stream = edges_table(rows)
    chunks = cut(stream, fractions)
    marks = watermarks(chunks)
    events: dict[int, list[tuple[str, str | None]]] = {}
    for name, (add, change, remove) in plan.items():
        if add == 0:
            (folder / name).write_text(TEXTS[name])
        else:
            events.setdefault(add, []).append((name, TEXTS[name]))
        if change is not None:
            events.setdefault(change, []).append((name, CHANGED[name]))
        events.setdefault(remove, []).append((name, None))
    run = LiveRun(folder, history_s * SECOND, tmp_path_factory.mktemp("ckpt"),
                  snapshot_interval=interval)
    for step in range(len(chunks) + 1):
        for name, text in events.get(step, []):
            if text is None:
                (folder / name).unlink(missing_ok=True)
            else:
                (folder / name).write_text(text)
        if step in restarts:  # the process died after the batch before: changes made
            run.restart()     # while down take effect at this batch, as they would have
        if step < len(chunks):
            run.batch(step, chunks[step])
        else:
            run.flush()
    expected: Counter = Counter()
    spare = tmp_path_factory.mktemp("oracle")
    for name, (add, change, remove) in plan.items():
        if add > len(chunks):
            continue
        versions = [(add, change if change is not None else remove, TEXTS[name])]
        if change is not None:
            versions.append((change, remove, CHANGED[name]))
        for start, end, text in versions:
            since = marks[start] if start > 0 else NEVER
            until = marks[end] if end <= len(chunks) else float("inf")
            for rule in file_rules(spare, name, text):
                released = [t for c in chunks[:start] for t in c.column("t").to_pylist()]
                # a whole-stream rule added after the history dropped an edge is refused
                refused = (rule.job.whole_stream and start > 0 and released and
                           min(released) < since - history_s * SECOND)
                if refused:
                    assert any(rule.name in note and "refused" in note for note in run.notes)
                    continue
                expected += batch_oracle(rule, stream, since, until)
    assert run.reported() == expected


@settings(max_examples=25)
@given(rows=streams, fractions=st.lists(st.floats(0, 1), min_size=1, max_size=6),
       restarts=st.sets(st.integers(1, 7), min_size=1, max_size=4))
def test_a_restart_replays_the_batches_since_the_snapshot_through_every_kind_of_rule(
        tmp_path_factory, rows, fractions, restarts) -> None:
    """Rules of every kind, unchanged, snapshotted only after the first micro-batch: each
    restart restores that snapshot and replays every batch since (their edges and
    frontiers) before going on. Each rule reports its batch matches, each once."""
    folder = tmp_path_factory.mktemp("rules")
    for name, text in TEXTS.items():
        (folder / name).write_text(text)
    stream = edges_table(rows)
    chunks = cut(stream, sorted(fractions))
    run = LiveRun(folder, 100 * SECOND, tmp_path_factory.mktemp("ckpt"),
                  snapshot_interval=float("inf"))
    for step in range(len(chunks) + 1):
        if step in restarts:
            run.restart()
        if step < len(chunks):
            run.batch(step, chunks[step])
        else:
            run.flush()
    spare = tmp_path_factory.mktemp("oracle")
    expected: Counter = Counter()
    for name, text in TEXTS.items():
        for rule in file_rules(spare, name, text):
            expected += batch_oracle(rule, stream, NEVER, float("inf"))
    assert run.reported() == expected


def test_a_broken_rule_file_keeps_its_last_good_version(tmp_path) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    for name in ("pair.sal", "back.nu"):
        (folder / name).write_text(TEXTS[name])
    stream = edges_table([(t, "ab"[t % 2], "ba"[t % 2]) for t in range(12)])
    chunks = cut(stream, [0.25, 0.5, 0.75])
    run = LiveRun(folder, 10 * SECOND)
    run.batch(0, chunks[0])
    (folder / "pair.sal").write_text("{ x e1 y; y e2 x; starttime(e1) < ; }")
    run.batch(1, chunks[1])
    broken = [note for note in run.notes if "pair.sal:1:" in note]
    assert len(broken) == 1 and "keeping pair.sal as last read" in broken[0], run.notes
    run.batch(2, chunks[2])  # the same broken content: said once
    assert len([note for note in run.notes if "pair.sal:1:" in note]) == 1
    (folder / "pair.sal").write_text(TEXTS["pair.sal"])  # mended, the same version
    run.batch(3, chunks[3])
    run.flush()
    expected: Counter = Counter()
    for name in ("pair.sal", "back.nu"):
        for rule in file_rules(tmp_path, name, TEXTS[name]):
            expected += batch_oracle(rule, stream, NEVER, float("inf"))
    assert run.reported() == expected and sum(expected.values()) > 0


def test_a_rule_wider_than_the_history_is_refused_or_accepted_with_a_warning(
        tmp_path) -> None:
    stream = edges_table([(t, "ab"[t % 2], "ba"[t % 2]) for t in range(20)])
    chunks = cut(stream, [0.5])
    for partial in (False, True):
        folder = tmp_path / f"rules-{partial}"
        folder.mkdir()
        (folder / "path.nu").write_text(TEXTS["path.nu"])  # extent 3 s: the history
        run = LiveRun(folder, None, accept_partial=partial)
        run.batch(0, chunks[0])
        (folder / "pair.sal").write_text(TEXTS["pair.sal"])  # extent 5 s
        run.batch(1, chunks[1])
        run.flush()
        [note] = [note for note in run.notes if "pair.sal" in note]
        if partial:
            assert "warning: it misses" in note and "5 s and the history 3 s" in note
            assert any(rule == "pair.sal" for rule, _, _ in run.reported())
        else:
            assert "refused" in note and "--history" in note
            assert not any(rule == "pair.sal" for rule, _, _ in run.reported())


def test_restart_continues_with_the_checkpoint_rules_and_applies_changes_made_while_down(
        tmp_path) -> None:
    folder, checkpoint = tmp_path / "rules", tmp_path / "ckpt"
    folder.mkdir()
    for name in ("pair.sal", "back.ddst", "echo.subs"):
        (folder / name).write_text(TEXTS[name])
    stream = edges_table([((7 * i) % 23, "abcd"[i % 4], "abcd"[(3 * i + 1) % 4])
                          for i in range(40)])
    chunks = cut(stream, [0.3, 0.6])
    marks = watermarks(chunks)
    first = LiveRun(folder, 10 * SECOND, checkpoint)
    first.batch(0, chunks[0])
    first.batch(1, chunks[1])
    del first.operator  # as a crash: nothing more is written
    # while down: pair.sal changed, back.ddst removed, back.nu added
    (folder / "pair.sal").write_text(CHANGED["pair.sal"])
    (folder / "back.ddst").unlink()
    (folder / "back.nu").write_text(TEXTS["back.nu"])
    second = LiveRun(folder, 10 * SECOND, checkpoint)
    assert second.operator.resume() == 1
    second.batch(2, chunks[2])
    second.flush()
    at = marks[2]
    assert any(f"changed pair.sal version {rules.version_of(CHANGED['pair.sal'])}" in note
               and "event time" in note for note in second.notes), second.notes
    spare = tmp_path / "oracle"
    spare.mkdir()
    expected: Counter = Counter()
    for name, text, since, until in (
            ("pair.sal", TEXTS["pair.sal"], NEVER, at), ("pair.sal", CHANGED["pair.sal"], at,
                                                          float("inf")),
            ("back.ddst", TEXTS["back.ddst"], NEVER, at),
            ("echo.subs", TEXTS["echo.subs"], NEVER, float("inf")),
            ("back.nu", TEXTS["back.nu"], at, float("inf"))):
        for rule in file_rules(spare, name, text):
            expected += batch_oracle(rule, stream, since, until)
    assert first.reported() + second.reported() == expected
    assert {rule for rule, _, _ in expected} == {"pair.sal", "back.ddst", "echo.subs",
                                                  "back.nu"}


def test_a_re_run_micro_batch_applies_the_directory_to_the_restored_rules(tmp_path) -> None:
    """A micro-batch run again (the operator restores the state of the batch before it)
    applies the directory's change again: the restored engine holds the rules before it."""
    folder, checkpoint = tmp_path / "rules", tmp_path / "ckpt"
    folder.mkdir()
    (folder / "pair.sal").write_text(TEXTS["pair.sal"])
    stream = edges_table([((7 * i) % 23, "abcd"[i % 4], "abcd"[(3 * i + 1) % 4])
                          for i in range(40)])
    chunks = cut(stream, [0.3, 0.6])
    marks = watermarks(chunks)
    run = LiveRun(folder, 10 * SECOND, checkpoint)
    run.batch(0, chunks[0])
    (folder / "pair.sal").write_text(CHANGED["pair.sal"])
    run.batch(1, chunks[1])
    written = len(run.found)
    run.batch(1, chunks[1])
    assert written == 2 and len(run.found) == 3  # each run of batch 1 has matches
    del run.found[1]  # the first run's output, which the re-run rewrites
    run.batch(2, chunks[2])
    run.flush()
    spare = tmp_path / "oracle"
    spare.mkdir()
    expected: Counter = Counter()
    for text, since, until in ((TEXTS["pair.sal"], NEVER, marks[1]),
                               (CHANGED["pair.sal"], marks[1], float("inf"))):
        for rule in file_rules(spare, "pair.sal", text):
            expected += batch_oracle(rule, stream, since, until)
    assert run.reported() == expected
    assert len({version for _, version, _ in expected}) == 2


def test_a_hundred_rules_and_one_more_added_live(tmp_path) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    for i in range(100):
        window = 1 + i % 5
        (folder / f"r{i:03d}.sal").write_text(
            f"{{ x e1 y; y e2 x; starttime(e1) < starttime(e2); "
            f"starttime(e2) - starttime(e1) <= {window}; }}")
    stream = edges_table([(t // 2, "abcd"[t % 4], "abcd"[(3 * t + 1) % 4]) for t in range(60)])
    chunks = cut(stream, [0.5])
    marks = watermarks(chunks)
    run = LiveRun(folder, None)
    run.batch(0, chunks[0])
    watch, engine = run.operator.watch, run.operator.engine
    assert watch.changes(engine) == []  # the 100 files parsed once, at the first batch
    (folder / "new.nu").write_text(TEXTS["back.nu"])
    started = time.perf_counter()
    [note] = watch.changes(engine)  # what the next batch does first
    took = time.perf_counter() - started
    assert note.startswith("rules: added new.nu") and took < 5, (note, took)  # 1 s alone
    run.batch(1, chunks[1])
    run.flush()
    expected: Counter = Counter()
    for path in sorted(folder.iterdir()):
        since = marks[1] if path.name == "new.nu" else NEVER
        for rule in file_rules(tmp_path, path.name, path.read_text()):
            expected += batch_oracle(rule, stream, since, float("inf"))
    reported = run.reported()
    found = {rule for rule, _, _ in reported}
    assert "new.nu" in found and len(found) > 50  # the rules of window 1 s find nothing
    assert reported == expected


def test_a_rules_directory_that_cannot_run_is_refused_in_one_line(tmp_path) -> None:
    (tmp_path / "bad.sal").write_text("{ x e1 y; starttime(e1) < ; }")
    (tmp_path / "notes.txt").write_text("not a rule")
    with pytest.raises(QueryError, match=r"bad\.sal:1:\d+:"):
        rules.load(str(tmp_path), OPTIONS)
    (tmp_path / "bad.sal").unlink()
    with pytest.raises(QueryError, match="no query file.*notes.txt"):
        rules.load(str(tmp_path), OPTIONS)


def test_a_checkpoint_rule_that_no_longer_loads_is_said(tmp_path) -> None:
    rule = file_rules(tmp_path, "pair.sal", TEXTS["pair.sal"])[0]
    with pytest.raises(SnapshotError, match="no longer loads"):
        rules._rebuilt(rule.name, "pair.sal", "{ x e1 y; starttime(e1) < ; }", OPTIONS)


def test_the_history_is_bounded(tmp_path) -> None:
    from graphcep.engines.base import StateBoundError

    (tmp_path / "back.nu").write_text(TEXTS["back.nu"])  # an engine of no edge bound
    job = rules.load(str(tmp_path), {**OPTIONS, "max_window_edges": 5}, strict=False)
    operator = StreamOperator(job.live(10 * SECOND, False), watch=job.watch(str(tmp_path)))
    operator.process(0, edges_table([(t, "a", "b") for t in range(5)]))  # t 0-3 released
    with pytest.raises(StateBoundError, match="history would hold 7 released edges"):
        operator.process(1, edges_table([(t, "a", "b") for t in range(5, 8)]))


def test_each_rule_state_is_its_own_engine_state(tmp_path) -> None:
    """``rule_state_size`` (the live page's per-rule state) is what an engine of that rule
    alone holds after the same edges; a removed rule holds nothing."""
    from graphcep.monitor.live import rule_numbers

    chosen = [rule for name in ("back.nu", "path.nu", "back.ddst")
              for rule in file_rules(tmp_path, name, TEXTS[name])]
    stream = edges_table([(t, "abc"[t % 3], "abc"[(t + 1) % 3]) for t in range(12)])
    engine = rules.RulesEngine(chosen, None, options=OPTIONS)
    engine.push(stream)
    alone = {}
    for rule in chosen:
        own = rule.job.new_engine(1)
        own.push(rule.job.orient(stream))
        alone[rule.name] = own.state_size()
    assert any(alone.values())  # pending partial matches: the comparison can tell rules apart
    assert {rule.name: engine.rule_state_size(rule.name) for rule in chosen} == alone
    assert {name: facts["state"] for name, facts in rule_numbers(engine).items()} == alone
    engine.remove("back.nu")
    assert engine.rule_state_size("back.nu") == {}


#: SAL rules over flows with a port: two read the same predicates (they share one filtered
#: input), one another predicate, one a loop (an edge ``u -> u``), one no predicate
FILTERED = {
    "ssh.sal": "{ x e1 y; y e2 x; e1.port == 22; e2.port == 22; "
               "starttime(e1) < starttime(e2); starttime(e2) - starttime(e1) <= 4; }",
    "ssh_wide.sal": "{ x e1 y; y e2 x; e2.port == 22; e1.port == 22; "
                    "starttime(e1) < starttime(e2); starttime(e2) - starttime(e1) <= 9; }",
    "web.sal": "{ x e1 y; y e2 z; e1.port != 22; e2.port >= 80; "
               "starttime(e1) < starttime(e2); starttime(e2) - starttime(e1) <= 5; }",
    "loop.sal": "{ x e1 x; x e2 y; starttime(e1) < starttime(e2); "
                "starttime(e2) - starttime(e1) <= 3; }",
    "any.sal": "{ x e1 y; y e2 x; starttime(e1) < starttime(e2); "
               "starttime(e2) - starttime(e1) <= 2; }",
}
flows = st.lists(st.tuples(st.integers(0, 20), vertices, vertices, st.sampled_from([22, 80, 443])),
                 min_size=2, max_size=40)


@settings(max_examples=40, deadline=None)
@given(rows=flows, cuts=st.lists(st.floats(0, 1), max_size=3))
def test_rules_with_the_same_predicates_share_one_filtered_input_and_lose_no_match(
        tmp_path_factory, rows, cuts) -> None:
    """Each rule's engine reads only the edges that may play one of its query edges, those
    of rules with the same predicates filtered once; every rule still reports exactly the
    matches of the brute force over the whole stream, loops and other ports included."""
    from tests.oracle import brute_force_matches

    folder = tmp_path_factory.mktemp("filtered")
    for name, text in FILTERED.items():
        (folder / name).write_text(text)
    ordered = sorted(rows, key=lambda r: r[0])
    stream = pa.table({"t": pa.array([r[0] * SECOND for r in ordered], pa.int64()),
                       "src": [r[1] for r in ordered], "dst": [r[2] for r in ordered],
                       "dur": pa.array([0] * len(ordered), pa.int64()),
                       "seq": pa.array(range(1, len(ordered) + 1), pa.int64()),
                       "port": pa.array([r[3] for r in ordered], pa.int64())})
    job = rules.load(str(folder), OPTIONS)
    by_name = {rule.name: rule for rule in job.rules}
    inputs = rules._shared_inputs(stream)
    assert inputs(by_name["ssh.sal"].job) is inputs(by_name["ssh_wide.sal"].job)
    assert inputs(by_name["any.sal"].job).num_rows == sum(r[1] != r[2] for r in rows)
    found: dict[str, set[tuple[int, ...]]] = {name: set() for name in FILTERED}
    operator = StreamOperator(job, lateness_us=0,
                              on_matches=lambda m, b: [
                                  found[row["rule"]].add(tuple(e["seq"] for e in row["sal"]["edges"]))
                                  for row in m.to_pylist()])
    for batch_id, chunk in enumerate(cut(stream, sorted(cuts))):
        operator.process(batch_id, chunk)
    operator.flush()
    edges = stream.to_pylist()
    for name, rule in by_name.items():
        assert found[name] == brute_force_matches(rule.job.query, edges), name


@pytest.mark.parametrize("threads", [2, 3])
def test_rules_in_threads_give_what_one_thread_gives(tmp_path, threads) -> None:
    """Rules match in threads (``threads``; their kernels release the GIL), and the
    chunks come out as one thread gives them: the same rows in the same order, batch after
    batch, and the same counts."""
    chosen = [rule for name, text in TEXTS.items() for rule in file_rules(tmp_path, name, text)]
    stream = edges_table([(t // 2, "abcd"[t % 4], "abcd"[(3 * t + 1) % 4]) for t in range(60)])
    one, many = (rules.RulesEngine(chosen, None, options=OPTIONS, threads=n)
                 for n in (1, threads))
    rows = 0
    for part in cut(stream, [0.3, 0.6]):
        expected = [c.to_pylist() for c in one.push_chunks(part, chunk_rows=2)]
        assert [c.to_pylist() for c in many.push_chunks(part, chunk_rows=2)] == expected
        rows += sum(map(len, expected))
    assert rows >= 10 and len(one.counts) >= 4 and one.counts == many.counts
    counting = rules.RulesEngine(chosen, None, options=OPTIONS, threads=threads)
    assert counting.count(stream) == sum(one.counts.values())
    assert counting.counts == one.counts


def test_the_first_snapshot_is_taken_before_the_first_edges(tmp_path) -> None:
    """A stream's first engine snapshot is of its engine as it started -- before the
    first micro-batch's edges, which the log lists and a restart replays -- so it holds
    no window: the first batch is not the one that writes the rules' whole state."""
    import pickle

    from graphcep.runtime.streaming.checkpoint_bytes import decompressed

    folder = tmp_path / "rules"
    folder.mkdir()
    for name, text in TEXTS.items():
        (folder / name).write_text(text)
    stream = edges_table([(t // 3, "abcd"[t % 4], "abcd"[(t + 1) % 4]) for t in range(90)])
    run = LiveRun(folder, 100 * SECOND, tmp_path / "ckpt", snapshot_interval=float("inf"))
    first, rest = cut(stream, [0.5])
    run.batch(0, first)
    state = tmp_path / "ckpt" / "state"
    snapshot, _ = pickle.loads(decompressed((state / "engine-000000000000.bin").read_bytes()))
    live = run.operator.engine
    restored = type(live).restore(snapshot, **live.restore_context())
    assert restored.state_size()["history_edges"] == 0 and restored.counts == {}
    assert [entry.batch_id for entry in run.operator._state.log] == [0]
    run.restart()  # from that snapshot and the first batch's edges
    run.batch(1, rest)
    run.flush()
    (tmp_path / "oracle").mkdir()
    expected: Counter = Counter()
    for name, text in TEXTS.items():
        for rule in file_rules(tmp_path / "oracle", name, text):
            expected += batch_oracle(rule, stream, NEVER, float("inf"))
    assert sum(expected.values()) >= 5 and run.reported() == expected
