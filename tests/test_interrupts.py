"""Ctrl-C around Spark: held back while the JVM starts, one line and 130 once it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from graphcep.interrupts import interrupt_deferred


def test_a_signal_during_the_block_is_held_back_and_named():
    before = signal.getsignal(signal.SIGINT)
    with interrupt_deferred() as caught:
        os.kill(os.getpid(), signal.SIGINT)  # would raise KeyboardInterrupt unheld
        os.kill(os.getpid(), signal.SIGTERM)  # would end the test run unheld
    assert caught == [signal.SIGINT, signal.SIGTERM]
    assert signal.getsignal(signal.SIGINT) is before


def test_nothing_held_means_an_empty_list():
    with interrupt_deferred() as caught:
        pass
    assert caught == []


def _stopped(signum: int) -> subprocess.CompletedProcess:
    code = (
        "import os, signal, time\n"
        "from graphcep.interrupts import exit_on_interrupt\n"
        "exit_on_interrupt('the rest is kept')\n"
        f"os.kill(os.getpid(), {int(signum)})\n"
        "time.sleep(30)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


def test_ctrl_c_ends_the_process_with_one_line_and_130():
    done = _stopped(signal.SIGINT)
    assert done.returncode == 130
    assert done.stderr == "graphcep: interrupted; the rest is kept\n"


def test_sigterm_ends_the_process_with_one_line_and_143():
    done = _stopped(signal.SIGTERM)
    assert done.returncode == 143
    assert done.stderr == "graphcep: terminated; the rest is kept\n"
