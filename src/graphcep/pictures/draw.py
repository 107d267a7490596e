"""Match pictures as PNG files, drawn with matplotlib (Agg, no display needed).

Each vertex is a circle with its name and the query vertices it hosts; each edge an
arrow coloured by its order in time (dark first, light last) and labelled with its number,
what it matches (query edge, label) and its time. Graphviz is not needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from graphcep.io.sinks import MatchDrawing
from graphcep.pictures.layout import MatchLayout, PlacedEdge, lay_out

#: Inches of one match picture.
FIGURE_SIZE = (7.0, 6.0)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, never a window)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def render(layout: MatchLayout, path: str | Path) -> list[str]:
    """Draw ``layout`` to the PNG ``path``; the texts of every text artist drawn (the
    title, the vertices' and the edges' labels), for checking against the record."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=FIGURE_SIZE, dpi=100)
    try:
        ax.set_title(wrapped(layout.title), fontsize=9)
        _draw_edges(ax, layout, plt.get_cmap("viridis"))
        _draw_nodes(ax, layout)
        ax.set_xlim(-1.45, 1.45)
        ax.set_ylim(-1.35, 1.35)
        ax.set_aspect("equal")
        ax.axis("off")
        fig.savefig(path, format="png", bbox_inches="tight")
        return [ax.title.get_text()] + [t.get_text() for t in ax.texts]
    finally:
        plt.close(fig)


def wrapped(title: str, width: int = 72) -> str:
    """A title in lines of at most ``width`` characters, broken at its double spaces
    (between its fields) and kept where it had line breaks."""
    lines = []
    for part in title.split("\n"):
        line = ""
        for field in part.split("  "):
            if line and len(line) + 2 + len(field) > width:
                lines.append(line)
                line = field
            else:
                line = f"{line}  {field}" if line else field
        lines.append(line)
    return "\n".join(lines)


def draw_match(drawing: MatchDrawing, path: str | Path) -> list[str]:
    """Lay out and draw one match (see :func:`render`)."""
    return render(lay_out(drawing), path)


def graphviz_match(drawing: MatchDrawing, path: str | Path) -> None:
    """Draw one match with Graphviz's ``dot`` (its DOT as ``-o x.dot`` writes it)."""
    import subprocess

    from graphcep.io.sinks import drawing_dot

    subprocess.run([graphviz_program(), "-Tpng", "-o", str(path)], input=drawing_dot(drawing),
                   text=True, check=True, capture_output=True)


def graphviz_program() -> str:
    """The path of Graphviz's ``dot``; a :class:`~graphcep.io.sinks.SinkError` saying how
    to install it when there is none."""
    import shutil

    from graphcep.io.sinks import SinkError

    program = shutil.which("dot")
    if program is None:
        raise SinkError("--graphviz needs Graphviz's dot program, which is not installed "
                        "(apt-get install graphviz); without --graphviz, matplotlib draws")
    return program


def draw_all(drawings: Iterable[tuple[str, MatchDrawing]], directory: str | Path,
             graphviz: bool = False) -> list[Path]:
    """One PNG per ``(name, drawing)`` in ``directory`` (created), named ``NAME.png``;
    drawn by Graphviz's ``dot`` with ``graphviz``, else by matplotlib.

    The directory then shows this drawing's pictures only: the names written are listed
    in :data:`MANIFEST`, and the pictures an earlier drawing listed there and this one
    did not redraw are removed (a file no drawing listed is never touched)."""
    if graphviz:
        graphviz_program()  # before any file is written
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    earlier = listed_pictures(out)
    written = []
    for name, drawing in drawings:
        path = out / f"{name}.png"
        (graphviz_match if graphviz else draw_match)(drawing, path)
        written.append(path)
    for name in earlier - {p.name for p in written}:
        (out / name).unlink(missing_ok=True)
    (out / MANIFEST).write_text("".join(f"{p.name}\n" for p in written), encoding="utf-8")
    return written


#: The file, in a directory of pictures, naming the pictures the last drawing wrote there.
MANIFEST = ".graphcep-pictures"


def listed_pictures(directory: Path) -> set[str]:
    """The picture names an earlier drawing listed in ``directory``'s manifest: plain
    ``*.png`` names only, so a damaged or edited manifest cannot name another file."""
    try:
        lines = (directory / MANIFEST).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    return {line for line in lines
            if line.endswith(".png") and Path(line).name == line and line != ".png"}


def _draw_nodes(ax: Any, layout: MatchLayout) -> None:
    for key, (x, y) in layout.positions.items():
        ax.scatter([x], [y], s=1700, color="#dbe9f6", edgecolors="#2b5d8a", zorder=3)
        ax.text(x, y, layout.node_labels[key], ha="center", va="center", fontsize=8,
                zorder=4)


def _draw_edges(ax: Any, layout: MatchLayout, cmap: Any) -> None:
    count = max(len(layout.edges), 1)
    for edge in layout.edges:
        color = cmap(0.85 * (edge.order - 1) / max(count - 1, 1))
        (x0, y0), (x1, y1) = layout.positions[edge.src], layout.positions[edge.dst]
        if edge.src == edge.dst:
            _draw_loop(ax, edge, x0, y0, color)
            continue
        _arrow(ax, (x0, y0), (x1, y1), edge.bend, color)
        mx, my = _bent_middle(x0, y0, x1, y1, edge.bend)
        ax.text(mx, my, edge.label, ha="center", va="center", fontsize=7, color="black",
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": color, "alpha": 0.9},
                zorder=5)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], bend: float,
           color: Any) -> None:
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=16,
                                 connectionstyle=f"arc3,rad={bend}", color=color,
                                 linewidth=1.8, shrinkA=23, shrinkB=23, zorder=2))


def _bent_middle(x0: float, y0: float, x1: float, y1: float, bend: float
                 ) -> tuple[float, float]:
    """The middle of matplotlib's ``arc3`` curve: the chord's middle moved by half the
    bend times the chord, to the curve's side."""
    mx, my = (x0 + x1) / 2, (y0 + y1) / 2
    dx, dy = x1 - x0, y1 - y0
    return mx + bend * dy / 2, my - bend * dx / 2


def _draw_loop(ax: Any, edge: PlacedEdge, x: float, y: float, color: Any) -> None:
    """An edge from a vertex to itself: a small ring above it, labelled beside it."""
    from matplotlib.patches import Circle

    ax.add_patch(Circle((x, y + 0.18), 0.1, fill=False, color=color, linewidth=1.8))
    ax.text(x + 0.15, y + 0.3, edge.label, fontsize=7, zorder=5,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": color, "alpha": 0.9})
