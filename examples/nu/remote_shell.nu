// The window-widening paper's case study: a remote shell in a system-call trace (.syscall).
// A connection is accepted (accept fd=x => y), the new descriptor y is duplicated onto
// 0, 1 and 2 in any order (dup fd=y => 0 / 1 / 2), then a program runs (execve exe=z).
// Each call is two links at its own time, NAME ~> KEY then KEY ~> RETURN (io/syscall.py),
// so <K ~> R>[0] reads the rest of the call just matched; #Y is the accepted connection,
// one node in the accept and the three dups. Other calls interleave (search mode). No
// delay bounds the episode: run it with --pww L to catch it at any pace, with bounded state.
accept ~> #X . <X ~> #Y>[0] .
( (dup ~> Y . <Y ~> "0">[0])
% (dup ~> Y . <Y ~> "1">[0])
% (dup ~> Y . <Y ~> "2">[0]) ) .
execve ~> @
