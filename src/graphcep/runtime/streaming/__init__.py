"""Structured Streaming: ``graphcep stream`` and ``Query.stream``, in one package.

- :mod:`~graphcep.runtime.streaming.driver` -- the driver mode's operator: event-time
  reordering, an engine, late edges, exactly-once parts and state (knows nothing of Spark);
- :mod:`~graphcep.runtime.streaming.sources` -- the sources: files arriving in a directory,
  a TCP socket, the generator (:mod:`~graphcep.runtime.streaming.kafka_source`: Kafka);
- :mod:`~graphcep.runtime.streaming.query` -- the Spark query that drives the operator,
  its failures and its checkpoint;
- :mod:`~graphcep.runtime.streaming.kafka_sink` -- matches, late edges and rejects as
  Kafka records, exactly once (:mod:`~graphcep.runtime.streaming.kafka_client`: the
  clients; :mod:`~graphcep.runtime.streaming.kafka_jars`: Spark's connector);
- :mod:`~graphcep.runtime.streaming.cell_engines` -- HyperCube cells in the driver's
  worker processes (``--cells``);
- :mod:`~graphcep.runtime.streaming.cells` and :mod:`~graphcep.runtime.streaming.cells_run`
  -- the executor mode (``--matching executors``): cells as Spark keys, their state in
  Spark's state store.

Nothing here is imported by this file, so importing one module loads only what it needs.
"""
