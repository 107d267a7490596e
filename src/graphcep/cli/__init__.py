"""The ``graphcep`` command: a thin layer over the Python API and the runtimes.

- :mod:`~graphcep.cli.app` -- the parser and every command but those below (``run``,
  ``explain``, ``gen``, ...); :func:`main` is the entry point;
- :mod:`~graphcep.cli.options` -- the options several commands share, checked by their
  argparse types before any work;
- :mod:`~graphcep.cli.stream` -- ``graphcep stream`` (:mod:`~graphcep.cli.kafka`: its
  Kafka options);
- :mod:`~graphcep.cli.draw` -- ``graphcep draw``; :mod:`~graphcep.cli.motifs` --
  ``graphcep motifs``; :mod:`~graphcep.cli.demo` -- ``graphcep demo``.

What a query's options mean for its job is :mod:`graphcep.jobs.options`, which the API
reads too.
"""

from graphcep.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
