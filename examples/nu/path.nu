// The paper's Fig. 2: a path from host a to host b through fresh hosts, every link of it
// within one second of the first. X holds the path's current host: X! releases it as the
// next link reads it, #X takes the next one. Replace a and b by the hosts you watch.
<a ~> #X . (X! ~> #X)* . X! ~> b>[0, 1]
