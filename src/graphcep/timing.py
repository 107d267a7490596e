"""Where a run's time goes: named phases measured by the wall clock.

``graphcep run --profile`` prints them; the runtimes add their own (a Spark run's
statistics pass and replay tasks). A phase entered twice adds up. A phase whose name
starts with :data:`NESTED` is a part of the phase above it (or a sum over tasks running
side by side): it is indented in the table and left out of the total's "(other)".

Examples
--------
>>> phases = Phases()
>>> with phases.phase("read"):
...     pass
>>> list(phases.seconds)
['read']
>>> print(phases.table(total=1.0).splitlines()[0])
phase                         seconds   share
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: The prefix of a phase that is a part of the one above it.
NESTED = "  "

#: ``time.perf_counter()`` when graphcep was first imported (see ``graphcep/__init__``).
IMPORTED_AT = time.perf_counter()


class Phases:
    """Wall-clock seconds per named phase, in the order first entered."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.seconds.setdefault(name, 0.0)  # listed before the parts added while it runs
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def update(self, other: dict[str, float], prefix: str = "") -> None:
        for name, seconds in other.items():
            self.add(prefix + name, seconds)

    def table(self, total: float) -> str:
        """The phases as a text table with their share of ``total`` seconds, and what no
        phase accounts for."""
        width = max([28, *(len(name) + 2 for name in self.seconds)])
        lines = [f"{'phase':<{width}}{'seconds':>9}{'share':>8}"]
        for name, seconds in self.seconds.items():
            lines.append(f"{name:<{width}}{seconds:>9.3f}{seconds / total if total else 0:>8.1%}")
        rest = total - sum(v for k, v in self.seconds.items() if not k.startswith(NESTED))
        if rest > 0.0005:
            lines.append(f"{'(other)':<{width}}{rest:>9.3f}{rest / total if total else 0:>8.1%}")
        lines.append(f"{'total':<{width}}{total:>9.3f}")
        return "\n".join(lines)


def process_age() -> float | None:
    """Seconds since this process started (Linux ``/proc``; None elsewhere): what the
    interpreter's own start-up and the imports before graphcep's took."""
    try:
        with open("/proc/self/stat") as stat:
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as uptime:
            up = float(uptime.read().split()[0])
        return max(up - started_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return None
