// A 2x2 biclique (a "DDoS square"): two sources A and B both reach two targets S and T,
// the four links in any order, within 20 milliseconds; the four hosts are distinct.
<#{A, B, S, T} (A ~> S % A ~> T % B ~> S % B ~> T)>[0, 0.02]
