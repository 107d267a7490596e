"""δ-temporal motif counts (Paranjape, Benson, Leskovec, WSDM 2017), SNAP's semantics.

:mod:`.order` builds the sorted event groups (and states the tie rule), :mod:`.pairs`,
:mod:`.stars` and :mod:`.triangles` are the three compiled counters, :mod:`.layout` the
6x6 table, :mod:`.count` puts them together.
"""

from graphcep.engines.motifs.count import StreamCounts, count_stream
from graphcep.engines.motifs.order import MotifStream, motif_stream

__all__ = ["MotifStream", "StreamCounts", "count_stream", "motif_stream"]
