"""Rules that differ only in a bound share one engine, and each still reports exactly its
own matches.

ν expressions whose whole is a delay ``<e>[low, high]`` with the same ``e`` and ``low``
run on the engine of the widest ``high`` (:meth:`graphcep.jobs.nu.NuJob.shared_form`).
The oracle of each rule is the brute-force matcher of the paper's definitions
(tests/nu_oracle.py) over its own expression; each rule's records (witness links, match
ids) are also held to its own engine run alone.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pyarrow as pa
import pytest

from graphcep.jobs import rules
from graphcep.jobs.nu import NuJob
from graphcep.patterns.nu import Delay, NuPattern
from tests.engines.test_nu_oracle import (
    PATTERNS,
    PLANTED,
    planted,
    random_links,
    trial_links,
)
from tests.nu_oracle import Oracle

SHAREABLE = sorted(name for name, expr in PATTERNS.items() if isinstance(expr, Delay))


def nu_rule(name: str, pattern: NuPattern, **options) -> rules.Rule:
    text = pattern.text()
    return rules.Rule(f"{name}.nu", rules.version_of(text), "nu", f"{name}.nu", text,
                      NuJob(pattern, **options))


def narrowed(name: str, fractions: tuple[float, ...], **options) -> list[rules.Rule]:
    """Rules of pattern ``name`` with its outer bound scaled by each fraction."""
    expr = PATTERNS[name]
    return [nu_rule(f"{name}{i}", NuPattern(f"{name}{i}", replace(
        expr, high_us=max(expr.low_us, int(expr.high_us * f)))), **options)
        for i, f in enumerate(fractions)]


def table_of(links: list[tuple[int, str, str]]) -> pa.Table:
    return pa.table({"t": pa.array([x[0] for x in links], pa.int64()),
                     "src": [x[1] for x in links], "dst": [x[2] for x in links],
                     "seq": pa.array(range(1, len(links) + 1), pa.int64())})


def pushed(engine, table: pa.Table, size: int) -> list[dict]:
    """Every row ``engine`` reports over ``table`` pushed in slices of ``size``."""
    rows = []
    for start in range(0, table.num_rows, size):
        rows += engine.push(table.slice(start, size)).to_pylist()
    return rows


def records(rows: list[dict]) -> list[tuple]:
    return sorted((r["match_id"], r["first_t"], r["last_t"], tuple(r["bindings"]),
                   tuple((e["t"], e["src"], e["dst"], e["seq"]) for e in r["edges"]))
                  for r in rows)


@pytest.mark.parametrize("engine", ["auto", "interpreted"])
@pytest.mark.parametrize("name", SHAREABLE)
def test_rules_differing_in_the_outer_bound_share_an_engine_and_find_their_own(
        name: str, engine: str) -> None:
    members = narrowed(name, (1.0, 0.5, 0.75, 1.0), engine=engine)
    oracles = {rule.name: Oracle(rule.job.pattern) for rule in members}
    rng = random.Random(sum(map(ord, name)))
    nonempty = 0
    for trial in range(25):
        links = trial_links(rng, name, trial)
        table, size = table_of(links), 1 + trial % 4
        shared = rules.RulesEngine(members, None)
        assert len(shared._engines()) == 1
        found = pushed(shared, table, size)
        for rule in members:
            mine = [row["sal"] for row in found if row["rule"] == rule.name]
            got = {(r["first_t"], r["last_t"], tuple(r["bindings"])) for r in mine}
            assert got == oracles[rule.name].matches(links), (rule.name, links)
            assert records(mine) == records(pushed(rule.job.new_engine(), table, size))
            nonempty += bool(mine)
    assert nonempty >= 10


def test_only_a_delay_around_the_whole_expression_in_search_mode_is_shared() -> None:
    path = [nu_rule(f"path{i}", NuPattern(f"path{i}", PATTERNS["path"])) for i in range(2)]
    anchored = narrowed("triangle", (1.0, 0.5), mode="anchored")
    other_low = [nu_rule("t0", NuPattern("t0", PATTERNS["triangle"])),
                 nu_rule("t1", NuPattern("t1", replace(PATTERNS["triangle"], low_us=1)))]
    for members in (path, anchored, other_low):
        assert len(rules.RulesEngine(members, None)._engines()) == len(members)
    assert len(rules.RulesEngine(narrowed("star", (1.0, 0.5)) + path, None)._engines()) == 3


def test_a_shared_engine_outlives_its_widest_rule_across_a_checkpoint() -> None:
    """The widest rule removed mid-stream: the narrower one keeps the engine, through a
    snapshot and restore, and reports what it reports alone."""
    wide, narrow = narrowed("triangle", (1.0, 0.5))
    rng = random.Random(7)
    links = planted(rng, random_links(rng, 60, "abcd"), PLANTED["triangle"])
    table = table_of(links)
    half = table.num_rows // 2
    shared = rules.RulesEngine([wide, narrow], 10**9)
    found = pushed(shared, table.slice(0, half), 7)
    shared.remove(wide.name)
    template = rules.RulesEngine([narrow], 10**9)
    restored = rules.RulesEngine.restore(shared.snapshot(), template=template)
    assert [live.borrowed for live in restored.live.values()] == [True]
    found += pushed(restored, table.slice(half), 7)
    mine = [row["sal"] for row in found if row["rule"] == narrow.name]
    assert records(mine) == records(pushed(narrow.job.new_engine(), table, 7))
    assert mine


def test_a_rule_added_live_joins_the_engine_of_a_wider_one() -> None:
    """Added at watermark τ, it reports exactly its batch matches whose last link is at
    or after τ (nothing to warm: the shared engine has read the stream all along)."""
    wide, narrow = narrowed("square", (1.0, 0.6))
    rng = random.Random(11)
    links = planted(rng, random_links(rng, 50, "abcd"), PLANTED["square"])
    table = table_of(links)
    cut = table.num_rows // 3
    live = rules.RulesEngine([wide], 10**9)
    pushed(live, table.slice(0, cut), 5)
    tau = table.column("t")[cut - 1].as_py()
    live.advance(tau)
    assert live.add(narrow) == (True, None)
    assert live.live[narrow.name].engine is live.live[wide.name].engine
    found = pushed(live, table.slice(cut), 5)
    mine = [row["sal"] for row in found if row["rule"] == narrow.name]
    alone = [r for r in pushed(narrow.job.new_engine(), table, 5) if r["last_t"] >= tau]
    assert records(mine) == records(alone)


def test_explain_says_which_rules_share_an_engine(tmp_path, capsys) -> None:
    from graphcep.cli.app import main

    for name, bound in (("soon.nu", 2), ("wide.nu", 9), ("late.nu", 5)):
        (tmp_path / name).write_text(f"<#X ~> #Y . Y ~> X>[0, {bound}]")
    (tmp_path / "path.nu").write_text("#X ~> #Y . <Y ~> #Z>[0, 9]")
    assert main(["explain", "--rules", str(tmp_path)]) == 0
    shared = [line for line in capsys.readouterr().out.splitlines() if "runs on" in line]
    assert shared == ["runs on the engine of wide.nu (the same query, a bound at least as "
                      "wide): its matches are those within its own bound"] * 2


SAL_FORMS = {
    # a flow answered by the reverse flow within the bound (the bench's SAL rules)
    "back": "{{ x e1 y; y e2 x; starttime(e1) < starttime(e2); "
            "starttime(e2) - starttime(e1) <= {b}; }}",
    # a triangle whose last flow ends strictly within the bound of the first's start
    "ring": "{{ x e1 y; y e2 z; z e3 x; starttime(e1) < starttime(e2); "
            "starttime(e2) < starttime(e3); endtime(e3) - starttime(e1) < {b}; }}",
}


def sal_streams(rng: random.Random, n: int) -> list[dict]:
    rows, t = [], 0
    for seq in range(1, n + 1):
        t += rng.choice([0, 250_000, 500_000, 1_000_000])
        rows.append({"t": t, "src": rng.choice("abcd"), "dst": rng.choice("abcd"),
                     "dur": rng.choice([0, 500_000, 1_500_000]), "seq": seq})
    return rows


@pytest.mark.parametrize("form", sorted(SAL_FORMS))
def test_sal_rules_differing_in_their_span_bound_share_an_engine(tmp_path, form) -> None:
    """Each rule's matches equal the brute-force matcher's for its own query, and its
    records (match ids, edges) its own engine's."""
    from tests.oracle import brute_force_matches

    for bound in ("2", "3.5", "5"):
        (tmp_path / f"{form}{bound}.sal").write_text(SAL_FORMS[form].format(b=bound))
    rng = random.Random(sum(map(ord, form)))
    nonempty = 0
    for trial in range(12):
        rows = sal_streams(rng, rng.randint(6, 24))
        table = pa.Table.from_pylist(rows)
        job = rules.load(str(tmp_path), {}).bind(1_500_000)
        shared = job.new_engine()
        assert len(shared._engines()) == 1
        found = pushed(shared, table, 1 + trial % 5)
        for rule in job.rules:
            mine = [row["sal"] for row in found if row["rule"] == rule.name]
            got = {tuple(e["seq"] for e in r["edges"]) for r in mine}
            assert got == brute_force_matches(rule.job.query, rows), (rule.name, rows)
            assert records(mine) == records(pushed(rule.job.new_engine(), table,
                                                   1 + trial % 5))
            nonempty += bool(mine)
    assert nonempty >= 6


def test_a_state_bound_names_the_rules_of_the_engine_that_hit_it(tmp_path) -> None:
    """A SAL file without SUBGRAPH names its query ``query1``, as do the others: the
    message must say which file's engine holds too much."""
    from graphcep.engines.base import StateBoundError

    (tmp_path / "wide.sal").write_text(SAL_FORMS["back"].format(b=20))
    (tmp_path / "narrow.sal").write_text(SAL_FORMS["back"].format(b=2))
    (tmp_path / "ring.sal").write_text(SAL_FORMS["ring"].format(b=3))
    rows = [{"t": 10_000 * i, "src": "ab"[i % 2], "dst": "ba"[i % 2], "dur": 0,
             "seq": i + 1} for i in range(300)]
    engine = rules.load(str(tmp_path), {"max_window_edges": 100}).bind(0).new_engine()
    with pytest.raises(StateBoundError, match=r"^rules narrow\.sal, wide\.sal: "):
        engine.push(pa.Table.from_pylist(rows))
