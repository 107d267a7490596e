"""graphcep: online pattern matching over streaming temporal graphs."""

__version__ = "0.1.0"
