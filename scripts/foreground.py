"""`make run`'s launcher: run.sh as a job of its own in the foreground of make's terminal, so
that a Ctrl-C typed there reaches run.sh alone (which stops everything and exits 0) and never
make. GNU make reports an interrupt it receives itself as a failure whatever its recipe did:
it waits for the recipe, then re-raises the signal on itself (status 130).

    python scripts/foreground.py COMMAND [ARG...]

Without a controlling terminal, or outside its foreground (started in the background, or by a
job that does not hold the terminal), COMMAND replaces this process: signals sent to make's
process group reach it as they would reach the recipe. Otherwise COMMAND runs in a process group
of its own that is given the terminal, whatever the standard streams are (a terminal, a file,
a pipe to `tee`); this process waits for it, passes on the SIGINT and SIGTERM it receives itself
(make passes SIGTERM on to its recipe), relays Ctrl-Z and the `fg` after it as a shell does
(after a `bg`, the job stays in the background), gives the terminal back, and exits as COMMAND
did. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import NoReturn

FORWARDED = (signal.SIGINT, signal.SIGTERM)


def foreground_of(tty: int) -> int:
    try:
        return os.tcgetpgrp(tty)
    except OSError:
        return -1


def give_terminal(tty: int, group: int) -> None:
    # From a process group that does not hold the terminal, taking it raises SIGTTOU unless
    # that is ignored, as job-control shells ignore it.
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(tty, group)
    finally:
        signal.signal(signal.SIGTTOU, previous)


def run(command: list[str]) -> NoReturn:
    """Replace this process with `command`, with the signal dispositions a shell would give it
    (Python ignores SIGPIPE, and an ignored signal stays ignored across exec)."""
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"make run: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        os._exit(127)


def main(command: list[str]) -> int:
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:  # no controlling terminal
        run(command)
    if foreground_of(tty) != os.getpgrp():
        os.close(tty)
        run(command)
    # Blocked until the handlers are in place: an interrupt meanwhile is not lost, nor a
    # KeyboardInterrupt.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        give_terminal(tty, os.getpgrp())
        os.close(tty)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        run(command)
    with contextlib.suppress(OSError):  # done by the child already (and it may have run)
        os.setpgid(child, child)

    def forward(received: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, received)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    while True:
        _, status = os.waitpid(child, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            break
        # Ctrl-Z stopped the job: stop make's too, as a shell would see it, and go on
        # when the shell continues it (in the foreground again, or in the background).
        give_terminal(tty, os.getpgrp())
        os.killpg(os.getpgrp(), signal.SIGTSTP)
        if foreground_of(tty) == os.getpgrp():
            give_terminal(tty, child)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child, signal.SIGCONT)
    if foreground_of(tty) == child:
        give_terminal(tty, os.getpgrp())
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} COMMAND [ARG...]")
    sys.exit(main(sys.argv[1:]))
