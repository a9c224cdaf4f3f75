"""``lancetnic-flow``: parse, run the command, turn failures into words.

A :class:`UserError` becomes one clear message and exit status 2; anything
else is a bug: exit 1, with the traceback under ``--debug``.
"""
from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import sys
import threading
from typing import Sequence

from ..errors import UserError
from ..options import said
from .commands import COMMANDS
from .parser import Refused, all_options, build_parser, given_dests, logs_to_stdout, with_negative_values


def known_failure(exc: Exception) -> tuple[str, str] | None:
    """Failures of the machinery around a run, said in words: (message, hint)."""
    name = type(exc).__name__
    if name == "KilledWorker":
        return (f"a Dask worker died repeatedly while running task {getattr(exc, 'task', '?')}",
                "most often it ran out of memory: use a smaller --blocksize, fewer --worker-threads, or a larger "
                "--memory-budget; the worker logs (or `dmesg` for the OOM killer) say more")
    if name == "RanksKeptFailing":
        return (str(exc), "most often a worker ran out of memory (its limit must hold the model, its optimiser "
                          "moments and a shuffle buffer; `dmesg` shows the OOM killer); fix that, then continue "
                          "with `lancetnic-flow train --resume RUN` from the last checkpoint")
    if name == "RankWorkersGone":
        # --resume keeps the run's --ddp (its checkpoint holds that many ranks): more workers, not fewer ranks.
        return (str(exc), "start workers again, as many as the run's --ddp ranks, then continue with "
                          "`lancetnic-flow train --resume RUN` from the last checkpoint")
    if name in ("CommClosedError", "StreamClosedError") or (isinstance(exc, OSError) and "scheduler" in str(exc)):
        return (f"lost the connection to the Dask cluster ({exc})",
                "check that the scheduler is still running and reachable, then rerun: cached shards are reused")
    return None


def in_flags(message: str) -> str:
    """A configuration error as the command line says it: ``max_features: …`` → ``--max-features: …``."""
    m = re.match(r"^(?:[a-z_]+\.)?([a-z_]+): ", message)
    if m:
        flag = "--" + m.group(1).replace("_", "-")
        if flag in all_options():
            return flag + message[m.end(1):]
    return message


def cli_words(exc: UserError, command: str | None = None) -> tuple[str, str | None]:
    """A UserError's message and hint as the command line says them: a field's
    error (options.bad) names its flags, or under ``run WORKFLOW`` the file's keys
    (where the values came from); any other, its leading field as a flag. An
    option named ``{section.field}`` is said in those words, however the error was made."""
    style = words_of(command)
    if style == "workflow" and exc.workflow is not None:
        return exc.said("workflow")
    if exc.cli is not None:
        return exc.said("cli")
    message, hint = exc.said(style)
    return in_flags(message), hint


def words_of(command: str | None) -> str:
    """How the command's user names options: a workflow file's keys under ``run``, else flags."""
    return "workflow" if command == "run" else "cli"


def shown(message: str, hint: str | None, command: str | None) -> tuple[str, str | None]:
    """Any error's message and hint with its ``{section.field}`` named as the command's user names options."""
    style = words_of(command)
    return said(message, style), (said(hint, style) if hint else hint)


def _log_would_empty_a_file(a, debug: bool) -> bool:
    """Whether ``--json-log FILE`` names a file that holds something else (said on stderr)."""
    if getattr(a, "json_log", None) in (None, "-"):
        return False
    from ..ui.jsonlog import check_log_file

    try:
        check_log_file(a.json_log, {"--output": getattr(a, "output", None), "--onnx": getattr(a, "onnx", None),
                                    # make-data's corpus, renamed over the log (--force), took every event
                                    "OUT": a.out if a.command == "make-data" else None})
    except UserError as exc:
        if debug:
            raise
        print(f"error: {exc.message}\n  hint: {exc.hint}", file=sys.stderr)
        return True
    return False


def parsed(parser, args: list[str]):
    """``args`` parsed; a refused command line also said as an ``error`` event where the
    JSON log goes to stdout: the console view is off there, and its reader is told why it ended."""
    try:
        return parser.parse_args(with_negative_values(args))
    except Refused as no:
        if logs_to_stdout(args):
            from ..ui.jsonlog import JsonLog

            JsonLog(sys.stdout)("error", {"message": no.said, "hint": no.hint, "status": 2, "kind": "error"})
        raise


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
    a = parsed(parser, args)
    if not a.command:
        parser.print_help()
        return 2
    if a.command in ("train", "tune"):
        # What was typed, whatever its value: --init-from takes what is not given from the run, --resume
        # refuses what is given and differs, and a model refuses an option it cannot honour even typed at
        # its default (TrainConfig.given).
        a.given = given_dests(args, a.command)
    from ..ui.report import ConsoleReport

    debug = getattr(a, "debug", False)
    if _log_would_empty_a_file(a, debug):
        return 2
    try:
        report = ConsoleReport(quiet=getattr(a, "quiet", False), json_log=getattr(a, "json_log", None))
    except OSError as exc:
        # Opening the log is the check: an unwritable --json-log stops the command before any work.
        from ..storage import WRITE_PLACES, write_reason

        why = write_reason(exc)
        print(f"error: --json-log {a.json_log}: cannot write there ({why[0] if why else exc.strerror or exc})\n"
              f"  hint: {why[1].replace(WRITE_PLACES, '--json-log') if why else 'check the path'}",
              file=sys.stderr)
        return 2
    except UserError as exc:   # a named pipe no process reads (storage.open_special)
        print(f"error: --json-log {exc.message}\n  hint: {exc.hint}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[a.command](a, report)
    except UserError as exc:
        if debug:
            raise
        report.error(*cli_words(exc, a.command), 2)
        return 2
    except KeyboardInterrupt as exc:
        from ..dataflow.worker_setup import quiet_distributed_logs

        # Clients and clusters still closing (at exit too) would log their lost connections as errors.
        quiet_distributed_logs()
        report.close()
        # A TrainingInterrupted says where the checkpoint is and how to resume.
        said = str(exc) or (f"after the run was saved whole in {report.saved_run}" if report.saved_run else
                            "before training began, so there is nothing to resume: run the same command again "
                            "(what was already fitted or featurised is cached)" if a.command in ("train", "run") else "")
        report.console.print(f"interrupted: {said}" if said else "interrupted", highlight=False, soft_wrap=True,
                             markup=False)
        return 130
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and stdout_reader_gone():
            # `predict --text … | head -1`: the reader of the output stopped, as it may; the
            # command stops too, quietly and with the status of a tool SIGPIPE ended
            return STDOUT_CLOSED
        if debug:
            raise
        known = known_failure(exc)
        if known:
            report.error(*shown(*known, a.command), 1)
            return 1
        report.error(*shown(f"{type(exc).__name__}: {exc}", "rerun with --debug for the traceback, and report it "
                            "if it looks like a bug", a.command), 1, label="internal error")
        return 1
    finally:
        report.finish()
        if argv is None:
            # The program ends here: every output is written and closed. Freezing
            # the heap spares the interpreter's last collection a walk over every
            # object torch, Dask and numba made (about a second measured, of a
            # 13 s run); objects still in reference cycles are simply not
            # finalised, which nothing written depends on.
            gc.freeze()
            # The command is over and has said how it ended: a Ctrl-C while the interpreter shuts
            # down (threads joined, objects freed) ends the process quietly, not in a traceback.
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, _exit_interrupted)


# 128 + SIGPIPE: what a shell reports for `yes | head -1`'s `yes`.
STDOUT_CLOSED = 141


def stdout_reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it; if so, it is pointed
    at /dev/null, so that what is still buffered or written later (the report's last
    words, the interpreter's last flush) goes nowhere instead of raising again."""
    import select

    try:
        fd = sys.stdout.fileno()
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        gone = any(event & select.POLLERR for _, event in poll.poll(0))
    except (OSError, ValueError, AttributeError):   # no real stdout (a notebook, a closed stream)
        return False
    if gone:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return gone


def _exit_interrupted(signum: int, frame: object) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(130)


if __name__ == "__main__":
    sys.exit(main())
