// A 3-clique among users: every pair of X, Y, Z exchanges at least one message, in
// either direction and any order, within 10 minutes (the paper's Twitter experiment).
<#{X, Y, Z} ((X ~> Y | Y ~> X) % (X ~> Z | Z ~> X) % (Y ~> Z | Z ~> Y))>[0, 600]
