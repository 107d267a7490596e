"""Pictures of a run: each match drawn as a small graph, timelines of edges and matches,
and a one-file HTML report.

* :mod:`~graphcep.pictures.records` reads a JSONL match file back into match rows;
* :mod:`~graphcep.pictures.layout` places a match's vertices and numbers its edges (no
  plotting library);
* :mod:`~graphcep.pictures.draw` draws a laid-out match as a PNG with matplotlib;
* :mod:`~graphcep.pictures.timelines` counts edges and matches over time and plots them;
* :mod:`~graphcep.pictures.report` writes the HTML report of ``run``/``stream --report``.

matplotlib is imported only by the modules that draw, and only when a command draws.
"""
