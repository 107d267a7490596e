"""graphcep: online pattern matching over streaming temporal graphs."""

__version__ = "0.1.0"

from graphcep import timing as _timing  # noqa: E402,F401 -- its clock starts at the first import
