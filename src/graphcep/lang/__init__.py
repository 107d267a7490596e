"""SAL (Streaming Analytics Language) front end: tokenizer, parser and errors.

>>> from graphcep.lang import parse_query
>>> parse_query("{ x1 e1 x2; x2 e2 x3; starttime(e1) < starttime(e2); }").edge_names
('e1', 'e2')
"""

from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.sal import STREAM_FUNCTIONS, parse_file, parse_program, parse_query
from graphcep.lang.tokens import Token, tokenize

__all__ = [
    "STREAM_FUNCTIONS",
    "QuerySyntaxError",
    "Token",
    "parse_file",
    "parse_program",
    "parse_query",
    "tokenize",
]
