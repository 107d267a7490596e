"""The SAL listings of Goodman & Grunwald, "Streaming Temporal Graphs: Subgraph Matching"
(IEEE Big Data 2019), as text: the paper's own queries, for examples, the demo and tests.

Listing 3's PDF text is garbled (line numbers interleaved, ``el`` for ``e1``, ``.`` and
``:`` for ``,`` and ``;``); :data:`LISTING_3` is the intended program. The files in the
repository's ``examples/`` folder hold the same texts.
"""

LISTING_1 = """{
    x1 e1 x2;
    x2 e2 x3;
    x3 e3 x1;
    starttime(e3) - starttime(e1) <= 10;
    starttime(e1) < starttime(e2);
    starttime(e2) < starttime(e3);
}
"""

LISTING_2 = (
    "{ target e1 bait; target e2 controller; starttime(e2) > endtime(e1); "
    "starttime(e2) - endtime(e1) < 20; bait in Top1000; controller not in Top1000; }\n"
)

LISTING_3 = """// Preamble Statements
WindowSize = 1000
// Connection Statements
Netflows = VastStream("localhost", 9999);
// Partition Statements
PARTITION Netflows BY SourceIp, DestIp;
HASH SourceIp WITH IpHashFunction;
HASH DestIp WITH IpHashFunction;
// Defining Features
Top1000 = FOREACH Netflows GENERATE topk(DestIp, 100000, 10000, 10000);
// Subgraph definition
SUBGRAPH ON Netflows WITH source(SourceIp) AND target(DestIp)
{
  target e1 bait;
  target e2 controller;
  starttime(e2) > endtime(e1);
  starttime(e2) - endtime(e1) < 20;
  bait in Top1000;
  controller not in Top1000;
}
"""
