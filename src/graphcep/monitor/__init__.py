"""Watching a stream while it runs: ``graphcep stream --metrics-port N --ui-port N``.

- :mod:`~graphcep.monitor.live` -- the live numbers, fed by each micro-batch's report
  (one hook for the driver and the executor modes), the newest matches and the rejects
  by reason (wrappers around the stream's sinks);
- :mod:`~graphcep.monitor.exposition` -- those numbers in Prometheus' text format;
- :mod:`~graphcep.monitor.page` -- the live page (plain HTML and a small inline script);
- :mod:`~graphcep.monitor.server` -- the standard library's HTTP server on a thread.

Nothing here imports Spark or numba: the command line stays light.
"""
