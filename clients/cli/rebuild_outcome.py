"""What ``rebuild-index`` tells a script: whether the new index is in place, for both engines.

0: in place. 1: nothing was replaced (the old index is as it was). 2: usage error (argparse).
3: in place, but a step after the swap failed (the checkpoint not updated, the replaced index not
removable): the swap is the point of no return, so a failure after it must not read as "failed".
"""

from __future__ import annotations

import sys
from pathlib import Path

EXIT_IN_PLACE = 0
EXIT_NOT_REPLACED = 1
EXIT_IN_PLACE_UNFINISHED = 3

#: The ``--help`` epilog.
EXIT_CODES = (
    f"exit codes: {EXIT_IN_PLACE} the new index is in place; {EXIT_NOT_REPLACED} nothing was replaced "
    "(the old index is kept as it was: a gap in the CommitLog, a bad store, an error while building); "
    f"2 usage error; {EXIT_IN_PLACE_UNFINISHED} the new index is in place, but the checkpoint could not "
    "be updated or the replaced index could not be removed (the message says which, and where it is)"
)


def report_after_swap(command: str, target: Path, problems: list[str]) -> int:
    """After a successful swap: ``EXIT_IN_PLACE``, or print what is unfinished and return 3."""
    if not problems:
        return EXIT_IN_PLACE
    for problem in problems:
        print(f"{command}: {problem}", file=sys.stderr)
    print(
        f"{command}: the new index is in place in {target}; only the step(s) above are unfinished",
        file=sys.stderr,
    )
    return EXIT_IN_PLACE_UNFINISHED
