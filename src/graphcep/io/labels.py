"""Label edge streams for DDST patterns: edge labels, vertex labels, merged streams.

DDST patterns (:mod:`graphcep.engines.ddst.baseline`) match three optional string
columns: ``label`` (the edge's), ``src_label`` and ``dst_label`` (its endpoints', given per
edge). Most real edge files carry none of them; these functions add them, column at a
time, without Python loops over rows:

* :func:`constant_labels` -- one label for a whole file (every edge of a SNAP ``a2q`` file
  is an "answer", every vertex a "user");
* :func:`vertex_labels` -- endpoint labels from an ``id -> label`` mapping (a dict, a
  two-column table, or a file read by :func:`read_vertex_labels`); ids the mapping lacks
  get a null label (or ``default``);
* :func:`column_labels` -- an edge label from another column, as is or through a mapping;
* :func:`service_labels` -- a netflow's protocol and destination-port class,
  ``tcp/web``, ``udp/dns`` ... (the rule is :func:`port_class`);
* :func:`reverse_edges` -- the same edges the other way round, so a direction-free stream
  (face-to-face contacts) can be merged with its reverse;
* :func:`merge_streams` -- several tables as one stream in stream order ``(t, seq)``,
  ``seq`` kept unique the way :func:`graphcep.io.readers.read_edges` makes it for a
  multi-file read: the ``i``-th table's ``seq`` plus ``i << 40``.

Example: a question-and-answer stream from two files, answers and comments
---------------------------------------------------------------------------
>>> import pyarrow as pa
>>> answers = pa.table({"t": [5, 9], "src": ["ann", "bob"], "dst": ["cy", "cy"],
...                     "seq": [1, 2]})
>>> comments = pa.table({"t": [7, 9], "src": ["cy", "cy"], "dst": ["ann", "bob"],
...                      "seq": [1, 2]})
>>> stream = merge_streams([constant_labels(answers, label="a2q"),
...                         constant_labels(comments, label="c2a")])
>>> stream.select(["t", "src", "dst", "label"]).to_pylist()[-2:]   # equal t: file order
[{'t': 9, 'src': 'bob', 'dst': 'cy', 'label': 'a2q'}, {'t': 9, 'src': 'cy', 'dst': 'bob', 'label': 'c2a'}]
>>> [s >> 40 for s in stream.column("seq").to_pylist()]           # which table each came from
[0, 1, 0, 1]
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from graphcep.events import normalize_edges, sort_stream
from graphcep.io.readers import FILE_INDEX_SHIFT, offset_seq

__all__ = [
    "IP_PROTOCOLS",
    "PORT_CLASSES",
    "column_labels",
    "constant_labels",
    "merge_streams",
    "port_class",
    "read_vertex_labels",
    "reverse_edges",
    "service_labels",
    "vertex_labels",
]

#: Destination-port classes of :func:`port_class`, checked in this order.
PORT_CLASSES: dict[str, frozenset[int]] = {
    "web": frozenset({80, 443, 3128, 8000, 8080, 8443}),
    "dns": frozenset({53}),
    "mail": frozenset({25, 110, 143, 465, 587, 993, 995}),
    "irc": frozenset({6665, 6666, 6667, 6668, 6669, 6697}),
    "ssh": frozenset({22}),
    "ntp": frozenset({123}),
    "smb": frozenset({137, 138, 139, 445}),
}
#: IP protocol numbers -> names, for netflow columns that hold the number (NetFlow v5).
IP_PROTOCOLS: dict[int, str] = {1: "icmp", 6: "tcp", 17: "udp", 132: "sctp"}
_PORTED = ("tcp", "udp", "sctp")

#: Either a mapping or a table whose first two columns are id and label.
VertexLabels = Mapping[object, str | None] | pa.Table


# -- constant and per-column edge labels ----------------------------------------------------


def _set_column(table: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    """Replace column ``name`` (or append it) with ``values``."""
    index = table.schema.get_field_index(name)
    if index < 0:
        return table.append_column(name, values)
    return table.set_column(index, name, values)


def constant_labels(
    table: pa.Table,
    *,
    label: str | None = None,
    src_label: str | None = None,
    dst_label: str | None = None,
) -> pa.Table:
    """Give every edge of a table the same edge and/or endpoint labels.

    Parameters
    ----------
    table : pyarrow.Table
        Edges (any columns).
    label, src_label, dst_label : str, optional
        The label to set in that column; a column left as ``None`` is not touched.

    Returns
    -------
    pyarrow.Table
        ``table`` with the given columns set (string type), added when absent.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = constant_labels(pa.table({"src": ["a", "b"], "dst": ["b", "c"]}),
    ...                     label="a2q", src_label="user", dst_label="user")
    >>> t.column_names, t.column("label").to_pylist()
    (['src', 'dst', 'label', 'src_label', 'dst_label'], ['a2q', 'a2q'])
    """
    for name, value in (("label", label), ("src_label", src_label), ("dst_label", dst_label)):
        if value is not None:
            table = _set_column(
                table, name, pa.repeat(pa.scalar(value, pa.string()), table.num_rows)
            )
    return table


def column_labels(
    table: pa.Table,
    column: str,
    mapping: Mapping[object, str | None] | None = None,
    *,
    default: str | None = None,
    target: str = "label",
) -> pa.Table:
    """Derive a label column from another column: its values as text, or mapped.

    Parameters
    ----------
    table : pyarrow.Table
        Edges holding ``column``.
    column : str
        The column the label is read from.
    mapping : mapping, optional
        Value -> label. Without it the label is the value itself, as a string.
    default : str, optional
        The label of a value the mapping lacks, and of a null value (default null).
    target : str
        The column written: ``label`` (default), ``src_label`` or ``dst_label``.

    Returns
    -------
    pyarrow.Table
        ``table`` with ``target`` set.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"src": ["a", "b", "c"], "dst": ["b", "c", "a"], "kind": [1, 2, 9]})
    >>> column_labels(t, "kind", {1: "call", 2: "sms"}).column("label").to_pylist()
    ['call', 'sms', None]
    >>> column_labels(t, "kind", default="?").column("label").to_pylist()
    ['1', '2', '9']
    """
    values = table.column(column)
    if mapping is None:
        labels = pc.cast(values, pa.string())
    else:
        keys = pa.array(list(mapping.keys()))
        if keys.type != values.type:  # compare as text: {1: ...} fits a column of "1"
            keys, values = pc.cast(keys, pa.string()), pc.cast(values, pa.string())
        found = pc.index_in(values, value_set=keys)
        labels = pa.array(list(mapping.values()), pa.string()).take(found)
    if default is not None:
        labels = pc.fill_null(labels, default)
    return _set_column(table, target, labels)


def port_class(ports: pa.Array | pa.ChunkedArray | Sequence[int | None]) -> pa.Array:
    """The service class of destination ports (the rule :func:`service_labels` uses).

    A port in one of :data:`PORT_CLASSES` gets that class (``web`` 80/443/3128/8000/8080/
    8443, ``dns`` 53, ``mail`` 25/110/143/465/587/993/995, ``irc`` 6665-6669/6697,
    ``ssh`` 22, ``ntp`` 123, ``smb`` 137-139/445); any other port below 1024 is ``system``,
    below 49152 ``registered``, up to 65535 ``dynamic``. A null or impossible port (the
    VAST files write 100000 for "none") is ``none``.

    Examples
    --------
    >>> port_class([443, 53, 25, 6667, 21, 13363, 50000, 100000, None]).to_pylist()
    ['web', 'dns', 'mail', 'irc', 'system', 'registered', 'dynamic', 'none', 'none']
    """
    array = pa.chunked_array([ports]) if not isinstance(ports, pa.ChunkedArray) else ports
    values = pc.fill_null(pc.cast(array, pa.int64()), -1).to_numpy()
    valid = (values >= 0) & (values <= 65535)
    conditions = [np.isin(values, sorted(p)) for p in PORT_CLASSES.values()]
    conditions += [valid & (values < 1024), valid & (values < 49152), valid]
    choices = [*PORT_CLASSES, "system", "registered", "dynamic"]
    return pa.array(np.select(conditions, choices, "none").astype(object), pa.string())


def _protocol_names(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Protocol names in lower case; numbers are named by :data:`IP_PROTOCOLS`."""
    if pa.types.is_integer(values.type):
        keys = pa.array(list(IP_PROTOCOLS), values.type)
        names = pa.array(list(IP_PROTOCOLS.values()), pa.string()).take(
            pc.index_in(values, value_set=keys)
        )
        return pc.coalesce(names, pc.cast(values, pa.string()))
    return pc.utf8_lower(pc.utf8_trim_whitespace(pc.cast(values, pa.string())))


def service_labels(
    table: pa.Table,
    *,
    protocol: str | None = None,
    port: str | None = None,
    target: str = "label",
) -> pa.Table:
    """Label netflows by protocol and destination-port class: ``tcp/web``, ``udp/dns`` ...

    The label is ``"<protocol>/<class>"`` for TCP, UDP and SCTP, the class given by
    :func:`port_class`, and the protocol name alone for the others (``icmp``); a flow
    with a null protocol gets a null label.

    Parameters
    ----------
    table : pyarrow.Table
        Netflow edges.
    protocol : str, optional
        The protocol column: names (``tcp``) or IP protocol numbers (6). Default: the
        first of ``IpLayerProtocolCode`` (``vast``), ``prot`` (``netflow5``).
    port : str, optional
        The destination-port column. Default: the first of ``DestPort``, ``dstport``.
    target : str
        The column written (default ``label``).

    Returns
    -------
    pyarrow.Table
        ``table`` with ``target`` set.

    Examples
    --------
    >>> import pyarrow as pa
    >>> flows = pa.table({"src": ["h"] * 4, "dst": ["d", "w", "m", "p"],
    ...                   "IpLayerProtocolCode": ["udp", "tcp", "TCP", "icmp"],
    ...                   "DestPort": [53, 443, 25, 8]})
    >>> service_labels(flows).column("label").to_pylist()
    ['udp/dns', 'tcp/web', 'tcp/mail', 'icmp']
    """
    protocol = protocol or _first_present(table, ("IpLayerProtocolCode", "prot"))
    port = port or _first_present(table, ("DestPort", "dstport"))
    names = _protocol_names(table.column(protocol))
    classes = port_class(table.column(port))
    ported = pc.is_in(names, value_set=pa.array(_PORTED))
    joined = pc.binary_join_element_wise(names, classes, "/")
    labels = pc.if_else(ported, joined, names)
    return _set_column(table, target, labels)


def _first_present(table: pa.Table, names: Sequence[str]) -> str:
    for name in names:
        if name in table.column_names:
            return name
    raise KeyError(f"the table has none of the columns {', '.join(names)}; name one")


# -- vertex labels --------------------------------------------------------------------------


def read_vertex_labels(
    path: str | os.PathLike,
    *,
    delimiter: str = "\t",
    id_column: int | str = 0,
    label_column: int | str = 1,
    header: bool = False,
) -> pa.Table:
    """Read an ``id -> label`` table from a delimited text file (gzip read through).

    Parameters
    ----------
    path : path-like
        The file: one vertex per line, e.g. SocioPatterns metadata ``id<TAB>class``.
    delimiter : str
        Field separator (default tab).
    id_column, label_column : int or str
        0-based positions, or names when ``header`` is true.
    header : bool
        Whether line 1 names the columns.

    Returns
    -------
    pyarrow.Table
        Columns ``id`` and ``label``, both strings, in file order.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "classes.tsv"
    >>> _ = path.write_text("1\\tPC\\tF\\n2\\tMP*1\\tM\\n")
    >>> read_vertex_labels(path).to_pylist()
    [{'id': '1', 'label': 'PC'}, {'id': '2', 'label': 'MP*1'}]
    """
    read = pacsv.ReadOptions(autogenerate_column_names=not header)
    parse = pacsv.ParseOptions(delimiter=delimiter)
    raw = pacsv.read_csv(Path(path), read_options=read, parse_options=parse)
    pick = [c if isinstance(c, str) else raw.column_names[c] for c in (id_column, label_column)]
    columns = [pc.cast(raw.column(name), pa.string()) for name in pick]
    return pa.table(columns, names=["id", "label"])


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _label_table(labels: VertexLabels) -> tuple[pa.Array, pa.Array]:
    """Ids and labels as string arrays; an id given two different labels is an error."""
    if isinstance(labels, pa.Table):
        ids, values = labels.column(0), labels.column(1)
    else:
        ids = pa.array([_text(x) for x in labels], pa.string())
        values = pa.array([_text(x) for x in labels.values()], pa.string())
    table = pa.table(
        [pc.cast(ids, pa.string()), pc.cast(values, pa.string())], names=["id", "label"]
    ).combine_chunks()
    counts = table.group_by("id").aggregate([("label", "count_distinct", pc.CountOptions("all"))])
    clash = counts.filter(pc.greater(counts.column("label_count_distinct"), 1))
    if clash.num_rows:
        raise ValueError(f"vertex {clash.column('id')[0].as_py()!r} is given several labels")
    return table.column("id").chunk(0), table.column("label").chunk(0)


def vertex_labels(
    table: pa.Table,
    labels: VertexLabels,
    *,
    default: str | None = None,
    ends: Sequence[str] = ("src", "dst"),
) -> pa.Table:
    """Set ``src_label`` / ``dst_label`` from an ``id -> label`` mapping.

    Parameters
    ----------
    table : pyarrow.Table
        Edges with ``src`` and ``dst``.
    labels : mapping or pyarrow.Table
        ``id -> label``: a dict, or a table whose first two columns are id and label (as
        :func:`read_vertex_labels` returns). Ids are compared as strings.
    default : str, optional
        The label of an id the mapping lacks (default null: "no label").
    ends : sequence of str
        Which endpoints to label: ``src``, ``dst`` or both (default).

    Returns
    -------
    pyarrow.Table
        ``table`` with ``<end>_label`` set for each end.

    Raises
    ------
    ValueError
        An id is given two different labels.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"src": ["1", "2", "7"], "dst": ["2", "1", "1"]})
    >>> out = vertex_labels(t, {1: "PC", 2: "MP*1"})
    >>> out.column("src_label").to_pylist(), out.column("dst_label").to_pylist()
    (['PC', 'MP*1', None], ['MP*1', 'PC', 'PC'])
    """
    ids, values = _label_table(labels)
    for end in ends:
        found = pc.index_in(pc.cast(table.column(end), pa.string()), value_set=ids)
        column = values.take(found)
        if default is not None:
            column = pc.fill_null(column, default)
        table = _set_column(table, f"{end}_label", column)
    return table


def reverse_edges(table: pa.Table) -> pa.Table:
    """The same edges the other way round: ``src``/``dst`` and their labels swapped.

    Merged with the original (:func:`merge_streams`), it makes a direction-free stream --
    face-to-face contacts, co-presence -- match a query edge in either direction.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"t": [20], "src": ["1"], "dst": ["2"], "src_label": ["PC"],
    ...               "dst_label": ["PC*"]})
    >>> both = merge_streams([t, reverse_edges(t)])
    >>> both.select(["src", "dst", "src_label", "dst_label"]).to_pylist()
    [{'src': '1', 'dst': '2', 'src_label': 'PC', 'dst_label': 'PC*'}, {'src': '2', 'dst': '1', 'src_label': 'PC*', 'dst_label': 'PC'}]
    """
    names = table.column_names
    swap = {"src": "dst", "dst": "src", "src_label": "dst_label", "dst_label": "src_label"}
    renamed = [swap.get(n, n) for n in names]
    order = [n for n in names if n in renamed] + [n for n in renamed if n not in names]
    return table.rename_columns(renamed).select(order)


# -- merging --------------------------------------------------------------------------------


def _checked_seq(table: pa.Table, index: int) -> pa.Table:
    """The table in the edge schema, its ``seq`` checked to be unique and below ``2**40``."""
    table = normalize_edges(table)
    seq = table.column("seq")
    if table.num_rows == 0:
        return table
    low, high = pc.min_max(seq).values()
    if low.as_py() < 0 or high.as_py() >= 1 << FILE_INDEX_SHIFT:
        raise ValueError(
            f"table {index}: seq must lie in [0, 2**{FILE_INDEX_SHIFT}) to be merged "
            "(is it already a merged or multi-file stream?)"
        )
    if pc.count_distinct(seq).as_py() != table.num_rows:
        raise ValueError(f"table {index}: seq is not unique")
    return table


def merge_streams(tables: Sequence[pa.Table]) -> pa.Table:
    """Merge several edge tables into one stream in stream order ``(t, seq)``.

    The ``i``-th table's ``seq`` (a line number, as readers make it; the row order when
    absent) gets ``i << 40`` added, as :func:`graphcep.io.readers.read_edges` does for
    the ``i``-th file of a read: ``seq`` stays unique, ``seq >> 40`` tells the table and
    ``seq & (2**40 - 1)`` the line. Edges with equal ``t`` therefore keep the order of the
    tables, then their own. Columns one table lacks (labels, attributes) are null in its
    rows.

    Parameters
    ----------
    tables : sequence of pyarrow.Table
        Edge tables (``t``, ``src``, ``dst``, optional ``seq`` and others), each with a
        unique ``seq`` in ``[0, 2**40)``.

    Returns
    -------
    pyarrow.Table
        One table in the edge schema, sorted by ``(t, seq)``.

    Raises
    ------
    ValueError
        No tables, or a table's ``seq`` is not unique or out of range.

    Examples
    --------
    >>> import pyarrow as pa
    >>> a = pa.table({"t": [3, 1], "src": ["x", "y"], "dst": ["y", "z"]})
    >>> b = pa.table({"t": [1], "src": ["z"], "dst": ["x"], "label": ["late"]})
    >>> m = merge_streams([a, b])
    >>> m.select(["t", "seq", "label"]).to_pylist()
    [{'t': 1, 'seq': 2, 'label': None}, {'t': 1, 'seq': 1099511627777, 'label': 'late'}, {'t': 3, 'seq': 1, 'label': None}]
    """
    if not tables:
        raise ValueError("nothing to merge")
    parts = [offset_seq(_checked_seq(t, i), i) for i, t in enumerate(tables)]
    merged = pa.concat_tables(parts, promote_options="permissive")
    return sort_stream(merged).combine_chunks()
