"""A tour of graphcep's Python API, one cell at a time.

The ``# %%`` lines make cells: VS Code, PyCharm, Spyder and Jupytext open this file as a
notebook, and ``python examples/tour.py`` runs it whole (the tests run it so). It finds
the temporal triangles of SNAP CollegeMsg -- a message a -> b, then b -> c, then c -> a,
all within one hour: 1,653 of them -- in a pandas DataFrame and draws some; in a Spark
DataFrame and joins them with a table; in a streaming DataFrame, matched as it arrives.
The same messages give the same matches, with the same ``match_id``, on every path.

``GRAPHCEP_TOUR_DATA`` names the CollegeMsg file (default: the copy the tests use),
``GRAPHCEP_TOUR_OUT`` the directory the tour writes in (default: a new temporary one).
"""

# %% Where the data is, and where the tour writes
import gzip
import os
import shutil
import tempfile
from itertools import islice
from pathlib import Path

import pandas as pd

import graphcep

HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd() / "examples"
DATA = Path(os.environ.get("GRAPHCEP_TOUR_DATA",
                           HERE.parent / "tests" / "fixtures" / "CollegeMsg.txt.gz"))
OUT = Path(os.environ.get("GRAPHCEP_TOUR_OUT") or tempfile.mkdtemp(prefix="graphcep-tour-"))
OUT.mkdir(parents=True, exist_ok=True)

# %% The query: a triangle of messages within one hour, and its plan
q = graphcep.parse("""SUBGRAPH triangle {
    x1 e1 x2; x2 e2 x3; x3 e3 x1;
    starttime(e1) < starttime(e2); starttime(e2) < starttime(e3);
    starttime(e3) - starttime(e1) <= 3600;
}""")
print(q.explain())

# %% pandas -> matches: the columns are named as the data names them
with gzip.open(DATA, "rt") as lines:
    messages = pd.read_csv(lines, sep=" ", names=["sender", "receiver", "unix"])
triangles = q.match(messages, src="sender", dst="receiver", time="unix")
print(f"{len(triangles):,} triangles in {len(messages):,} messages")
print(triangles[["match_id", "first_time", "last_time", "x1", "x2", "x3"]].head())

# %% Matches -> pictures: the first three, drawn as `graphcep draw` draws a match file
from graphcep.cli.draw import named_drawings  # noqa: E402
from graphcep.pictures.draw import draw_all  # noqa: E402
from graphcep.pictures.records import read_matches  # noqa: E402

triangles.to_parquet(OUT / "triangles.parquet")  # the columns of `graphcep run -o *.parquet`
pictures = draw_all(named_drawings(islice(read_matches(OUT / "triangles.parquet"), 3)),
                    OUT / "pictures")
print("drew", ", ".join(path.name for path in pictures))

# %% A Spark DataFrame -> matches -> a join
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402, N812

spark = SparkSession.builder.master("local[2]").appName("graphcep-tour").getOrCreate()
schema = "sender string, receiver string, unix long"
events = spark.read.schema(schema).option("sep", " ").csv(str(DATA))
# a Spark DataFrame in, a Spark DataFrame of matches out: computed in the executors,
# lazily (nothing runs until an action), so it joins with other tables as any other
matches = q.match(events, src="sender", dst="receiver", time="unix")
sent = events.groupBy("sender").agg(F.count("*").alias("messages_sent"))
openers = (matches.join(sent, matches.x1 == sent.sender)
           .groupBy("x1", "messages_sent").agg(F.count("*").alias("triangles_opened"))
           .orderBy(F.desc("triangles_opened"), "x1"))
openers.show(5)

# %% A streaming DataFrame -> matches, as the messages arrive in a directory
incoming = OUT / "incoming"
incoming.mkdir(exist_ok=True)
shutil.copy(DATA, incoming / DATA.name)  # a file arriving (write elsewhere, then move)
arriving = spark.readStream.schema(schema).option("sep", " ").csv(str(incoming))
running = q.stream(arriving, src="sender", dst="receiver", time="unix", lateness=60,
                   checkpoint=OUT / "checkpoint", output=OUT / "matches", once=True)
# once=True: match what is there and stop; without it the stream runs until
# running.stop(), a restart on the same checkpoint going on where it stopped.
print(f"{running.totals.matches:,} triangles in {running.totals.edges:,} streamed "
      f"messages, {running.totals.late:,} late")
streamed = {row["match_id"] for row in read_matches(OUT / "matches")}
print("the same match ids through pandas, Spark and the stream:",
      streamed == set(triangles["match_id"])
      == {row.match_id for row in matches.select("match_id").collect()})
