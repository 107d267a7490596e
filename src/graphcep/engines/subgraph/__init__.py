"""Temporal subgraph matching of SAL queries.

Goodman & Grunwald, "Streaming Temporal Graphs: Subgraph Matching" (IEEE Big Data 2019).
:mod:`~graphcep.engines.subgraph.plan` compiles a query (search order, time bounds as a
difference-bound matrix); :mod:`~graphcep.engines.subgraph.engine` keeps the window and
matches each batch; :mod:`~graphcep.engines.subgraph.kernel` is the compiled search loop.
"""
