"""The temporal triangle (Listing 1, W = 10 s) as a Polars ``join_where`` script.

``python bench/polars_triangles.py EDGES.parquet`` prints the number of triangles: what a
Polars user would write for the query -- start-up, read, join -- timed as a whole
process by ``bench/spark_path.py``. It imports Polars only (the same joins as
``bench.triangles.polars_count``, reading the file with Polars itself).
"""

from __future__ import annotations

import sys

import polars as pl

W_US = 10_000_000  # 10 s in the edge schema's integer microseconds


def count(path: str, w: int = W_US) -> int:
    col = pl.col
    e = pl.scan_parquet(path).select("t", "src", "dst")
    e1 = e.select(t1="t", x1="src", x2="dst")
    e2 = e.select(t2="t", s2="src", x3="dst")
    e3 = e.select(t3="t", s3="src", d3="dst")
    p = e1.join_where(e2, col("x2") == col("s2"), col("t2") > col("t1"),
                      col("t2") <= col("t1") + w)
    p = p.filter((col("x1") != col("x2")) & (col("x3") != col("x1"))
                 & (col("x3") != col("x2")))
    tri = p.join_where(e3, col("x3") == col("s3"), col("x1") == col("d3"),
                       col("t3") > col("t2"), col("t3") <= col("t1") + w)
    return int(tri.select(pl.len()).collect().item())


if __name__ == "__main__":
    print(count(sys.argv[1]))
