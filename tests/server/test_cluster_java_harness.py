"""``tests/support/cluster_java.py``: a program that never says READY does not outlive the test.

The 4.9.7 Java client's threads keep a JVM alive after its main thread died at start (seen under
load: ``consumer.start()``'s route lookup timed out), and no test held the program yet to close it.
A stand-in program here: it prints a line, closes its stdout and sleeps.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.cluster_java import FailoverProgram

SILENT_AFTER_ONE_LINE = (
    "import os, sys, time; print('starting'); sys.stdout.flush(); os.close(1); time.sleep(60)"
)


def test_a_program_that_dies_before_ready_is_killed() -> None:
    program = FailoverProgram.__new__(FailoverProgram)
    with pytest.raises(AssertionError, match="exited"):
        program._start([sys.executable, "-c", SILENT_AFTER_ONE_LINE], subprocess.DEVNULL)
    try:
        assert program.proc.wait(5) is not None
    finally:
        if program.proc.poll() is None:
            program.proc.kill()
            program.proc.wait(5)
