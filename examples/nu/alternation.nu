// A periodic alternation: X -> Y, Y -> X, X -> Y, ... at least twice back and forth,
// each exchange answered within 2 seconds, all within 30 seconds.
<#X ~> #Y . (<Y ~> X . X ~> Y>[0, 2])+>[0, 30]
