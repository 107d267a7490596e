// A directed triangle among three distinct hosts, all within 10 seconds:
// X -> Y, then Y -> Z, then Z -> X. #X reads a fresh host (held by no other variable).
<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]
