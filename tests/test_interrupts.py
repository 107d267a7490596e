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
    return run_code(code)


def run_code(code: str, *args: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with ``args``: its status and output."""
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=60)


def test_ctrl_c_ends_the_process_with_one_line_and_130():
    done = _stopped(signal.SIGINT)
    assert done.returncode == 130
    assert done.stderr == "graphcep: interrupted; the rest is kept\n"


def test_sigterm_ends_the_process_with_one_line_and_143():
    done = _stopped(signal.SIGTERM)
    assert done.returncode == 143
    assert done.stderr == "graphcep: terminated; the rest is kept\n"


def test_last_words_end_the_line_and_a_failure_is_named():
    """``last`` runs before leaving: what it returns ends the line; when it fails, the
    line names why (the signal still ends the process with 130)."""
    code = (
        "import os, signal, sys, time\n"
        "from graphcep.interrupts import exit_on_interrupt\n"
        "def ok():\n"
        "    print('summary')\n"
        "    return '; report written'\n"
        "def bad():\n"
        "    raise OSError('report not written: disk full')\n"
        "exit_on_interrupt('the rest is kept', last=ok if sys.argv[1] == 'ok' else bad)\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(30)\n"
    )
    ran = [run_code(code, which) for which in ("ok", "bad")]
    assert [done.returncode for done in ran] == [130, 130]
    assert ran[0].stdout == "summary\n"
    assert ran[0].stderr == "graphcep: interrupted; the rest is kept; report written\n"
    assert ran[1].stderr == ("graphcep: interrupted; the rest is kept; "
                             "report not written: disk full\n")


def test_py4j_records_on_the_root_logger_are_dropped():
    """py4j logs ``logging.exception(...)`` on the root logger when Ctrl-C meets a call
    into the JVM; those records are dropped, every other record is kept."""
    code = (
        "import logging, sys\n"
        "from graphcep.interrupts import quiet_py4j_records\n"
        "quiet_py4j_records(); quiet_py4j_records()\n"
        "py4j = logging.LogRecord('root', logging.ERROR, '/x/py4j/java_gateway.py', 1,\n"
        "                         'Exception while sending command.', None, None)\n"
        "mine = logging.LogRecord('root', logging.ERROR, '/x/graphcep/cli/app.py', 1,\n"
        "                         'kept', None, None)\n"
        "logging.basicConfig(stream=sys.stdout, format='%(message)s')\n"
        "logging.getLogger().handle(py4j)\n"
        "logging.getLogger().handle(mine)\n"
        "print(len(logging.getLogger().filters))\n"
    )
    done = run_code(code)
    assert done.stdout == "kept\n1\n", done.stderr


def test_a_held_signal_is_honoured_by_the_commands_handler_or_as_keyboardinterrupt():
    """After the block: the command's own handler acts on the held signal (its line, 143
    for SIGTERM); with Python's default Ctrl-C, ``KeyboardInterrupt``; none held, nothing."""
    code = (
        "import os, signal, sys\n"
        "from graphcep.interrupts import exit_on_interrupt, honour, interrupt_deferred\n"
        "honour([])\n"
        "if sys.argv[1] == 'handler':\n"
        "    exit_on_interrupt('nothing was started')\n"
        "with interrupt_deferred() as caught:\n"
        "    os.kill(os.getpid(), signal.SIGTERM if sys.argv[1] == 'handler' else signal.SIGINT)\n"
        "try:\n"
        "    honour(caught)\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(7)\n"
    )
    ran = [run_code(code, which) for which in ("handler", "default")]
    assert (ran[0].returncode, ran[0].stderr) == (143, "graphcep: terminated; nothing was started\n")
    assert (ran[1].returncode, ran[1].stderr) == (7, "")
