"""DDST event patterns over graph streams: three engines, one semantics.

Xu, Zhou, Han, Sun, Lin, "Event pattern matching over graph streams" (PVLDB 2014). The
semantics -- labels, Definitions 1-2, one window per arriving edge, what a report holds --
is stated in :mod:`~graphcep.engines.ddst.baseline`, Algorithm DDST run on every window.
:mod:`~graphcep.engines.ddst.signature` and :mod:`~graphcep.engines.ddst.coloring` report
exactly the same matches with less work per edge. What the three share is public in
:mod:`~graphcep.engines.ddst.common` (the query and windows as arrays, label fits,
Algorithm DDST on a window graph) and :mod:`~graphcep.engines.ddst.reports` (the match
schema and the rows of a push); the compiled fixpoint is :mod:`~graphcep.engines.ddst.kernel`.
"""
