// A 4-clique among users: every pair of W, X, Y, Z exchanges at least one message, in
// either direction and any order, within 10 minutes (the paper's Twitter experiment, k = 4).
<#{W, X, Y, Z} ((W ~> X | X ~> W) % (W ~> Y | Y ~> W) % (W ~> Z | Z ~> W) %
                (X ~> Y | Y ~> X) % (X ~> Z | Z ~> X) % (Y ~> Z | Z ~> Y))>[0, 600]
