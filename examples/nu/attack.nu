// The paper's coordinated attack: two hosts never seen in this match talk, then both
// contact the same target, in either order, all within one second. #{T} allocates the
// target once, so whichever of the two links comes first binds it.
<#X ~> #Y . (#{T} (X ~> T % Y ~> T))>[0, 1]
