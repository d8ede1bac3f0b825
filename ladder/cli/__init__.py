"""The `ladder` command line. Thin: parse, call one library function, render with rich or print JSON.

One module per command group (``ladder.cli.plan``, ``ladder.cli.training``, ...); this one builds the Typer
app from them, in the order ``ladder --help`` lists them. A user error prints one line and exits 2: a
``LadderError`` (a bad file, field or state) and a bad command line alike (an unknown option, a value of the
wrong type, a missing argument: click's usage errors, which would otherwise print a boxed panel). Any other
exception is a bug in ladder and exits 1 with its traceback, but an ``OSError`` (a place that cannot be read or
written: one line naming it, exit 2) and Ctrl-C (one line, exit 130: the same command continues).
"""

from __future__ import annotations

import atexit
import errno
import functools
import inspect
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
import typer.main
from rich.markup import escape

from ladder import __version__
from ladder.cli import (
    data,
    evaluate,
    fit_report,
    forecast,
    hero,
    model_info,
    plan,
    run,
    status,
    studies,
    training,
)
from ladder.console import command_running, err, out
from ladder.errors import LadderError, shell_word
from ladder.layout import broken_link

app = typer.Typer(
    name="ladder",
    help="Rehearse a big pretraining run on a scaling ladder of small Llama runs: "
    "plan -> submit -> status -> collect -> fit -> report. `ladder run` does it all; then "
    "forecast freeze -> hero -> submit -> forecast score checks the forecast against the hero.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
app.add_typer(studies.app, name="studies")
app.add_typer(model_info.app, name="model")
app.add_typer(data.app, name="data")
app.add_typer(forecast.app, name="forecast")
app.command()(plan.plan)
app.command()(training.sanity)
app.command()(training.train)
app.command()(training.submit)
app.command()(status.status)
app.command()(status.collect)
app.command()(training.cancel)
app.command()(fit_report.fit)
app.command()(fit_report.report)
app.command()(hero.hero)
app.command("eval")(evaluate.eval_cmd)
app.command("run")(run.run_cmd)


def _version(value: bool) -> None:
    if value:
        out.print(f"ladder {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Rehearse a big pretraining run on a scaling ladder of small Llama runs."""


def reflow(text: str | None) -> str | None:
    """A docstring as help text: the lines of each paragraph joined, so that the terminal wraps whole sentences
    (typer's rich mode keeps a docstring's line breaks, and then wraps each line again). A paragraph with an
    indented line (an example, a list) keeps its lines."""
    if not text:
        return text
    out = []
    for para in inspect.cleandoc(text).split("\n\n"):
        lines = para.splitlines()
        keep = any(line.startswith((" ", "-")) for line in lines[1:])
        out.append(para if keep else " ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def _polish(command: Any) -> None:
    """Help that reads well: paragraphs reflowed, and no ``<bool>`` type column beside the flags (a flag takes
    no value: ``--dry-run/--no-dry-run`` says it all), the help option's included."""
    command.help = reflow(command.help)
    options = [*command.params, command.get_help_option(typer.Context(command))]
    for param in options:
        if param is not None and getattr(param, "is_flag", False):
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _polish(sub)


def _usage_errors() -> tuple[type[BaseException], ...]:
    try:  # typer >= 0.17 vendors click
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover - older typer on plain click
        from click.exceptions import ClickException
    return (ClickException,)


def _usage_error() -> type[Exception]:
    try:  # as in _usage_errors
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover - older typer on plain click
        from click.exceptions import UsageError
    return UsageError


def usage_line(exc: Any) -> str:
    """A click usage error in one line: what is wrong (it names the option or argument and the value) and
    where the help is."""
    text = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    return f"{text}; see `{ctx.command_path} --help`" if ctx is not None else text


@functools.cache
def _command() -> Any:
    """The click command tree, built once per process (typer takes ~60 ms to build it: a process that calls
    :func:`main` many times, as the tests do, pays that once)."""
    command = typer.main.get_command(app)
    _polish(command)
    _catch_ctrl_c(command)
    _refuse_empty_directories(command)
    _name_the_command(command)
    return command


def _name_the_command(command: Any) -> None:
    """A usage error raised without its command ("Option '--loss' requires an argument", from click's parser)
    gets the command, so that its line ends with where the help is, as every other usage error's does."""
    for sub in getattr(command, "commands", {}).values():
        _name_the_command(sub)
    parse = command.parse_args

    def parse_args(ctx: Any, args: list[str]) -> list[str]:
        try:
            return parse(ctx, args)
        except _usage_error() as exc:
            if exc.ctx is None:
                exc.ctx = ctx
            raise

    command.parse_args = parse_args


DIRECTORY_ARGUMENTS = ("study_dir", "run_dir")  # typed as paths: click reads "" as the current directory


def _refuse_empty_directories(command: Any) -> None:
    """An empty STUDY_DIR or RUN_DIR argument (``ladder status ""``, a shell variable that was not set) is
    refused as such: click turns it into ".", and the command then spoke of the current directory ("no study at
    ."), which the user never named. An empty value of an option (``--out ""``) is the option's to judge."""
    for sub in getattr(command, "commands", {}).values():
        _refuse_empty_directories(sub)
    argument = next(
        (
            p
            for p in getattr(command, "params", [])
            if p.param_type_name == "argument" and p.name in DIRECTORY_ARGUMENTS
        ),
        None,
    )
    if argument is None:
        return
    valued = {
        opt
        for p in command.params
        if p.param_type_name == "option" and not getattr(p, "is_flag", False) and not getattr(p, "count", False)
        for opt in (*p.opts, *p.secondary_opts)
    }
    parse = command.parse_args

    def checked(ctx: Any, args: list[str]) -> list[str]:
        previous, positional = None, False
        for arg in args:
            if arg == "" and (positional or previous not in valued):
                what = argument.name.upper()
                raise _usage_error()(f"an empty {what}: give a {what.lower().replace('_dir', ' directory')}", ctx=ctx)
            positional = positional or (arg == "--" and previous not in valued)
            previous = arg
        return parse(ctx, args)

    command.parse_args = checked


def main() -> None:
    """The command line, called from other code (the tests call it in-process): SIGINT is left as it is."""
    _main()


def entry() -> None:
    """The console script (the `ladder` script, ``python -m ladder``): the command line as a process's entry
    point. A Ctrl-C that lands once the command has returned (on the way out: atexit, the interpreter's teardown)
    no longer turns a finished command into a silent exit 130: the work is done and reported, so the process ends
    with the command's own code."""
    _trap_stop_signals()
    try:
        _main()
    except _TornExit as exc:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(_exit_code(exc.code))
    except SystemExit as exc:
        _finished(exc.code)
        raise
    _finished(0)


STOP_SIGNALS = ("SIGTERM", "SIGHUP")  # `kill PID`, a closed terminal: what a Ctrl-C gets, they get too


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP outside training, raised as a Ctrl-C is, so that every clean-up a Ctrl-C runs runs for
    it too (before, `kill` of a `ladder report` ended it at once, exit 143 with no word, an empty report/ left
    behind). Training stops at a step boundary on these signals by its own handler, and leaves this one alone."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_last_stop: list[int] = []  # the kill typer's exit 130 stands for, when one got past the guard around a command


def _stop_on(signum: int, frame: Any) -> None:
    _last_stop.append(signum)
    raise Stopped(signum)


_stop_on.raises_interrupt = True  # type: ignore[attr-defined]  # the trainer's SignalTrap.chain does not call it


def _trap_stop_signals() -> None:
    """Take SIGTERM and SIGHUP where they still have their default action (one ignored on purpose, as under
    nohup, stays ignored)."""
    for name in STOP_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _stop_on)


def _exit_code(code: object) -> int:
    """The status a ``SystemExit(code)`` gives the process."""
    return 0 if code is None else code if isinstance(code, int) else 1


def _finished(code: object) -> None:
    """Once the command has returned: a Ctrl-C ends the process at once with the command's code (stdout and
    stderr flushed), and from the exit handlers on it is ignored, so that it also holds in the interpreter's
    teardown (after which Python would otherwise die of SIGINT, exit 130, with no word). A SIGINT that is
    already ignored or taken by someone else (a background job, a caller's handler) is left as it is."""
    ours = [(signal.SIGINT, signal.default_int_handler)]
    ours += [(getattr(signal, n), _stop_on) for n in STOP_SIGNALS if hasattr(signal, n)]
    ours = [(signum, handler) for signum, handler in ours if signal.getsignal(signum) is handler]
    if not ours:
        return
    status = _exit_code(code)

    def late_ctrl_c(signum: int, frame: Any) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(status)

    for signum, _ in ours:
        signal.signal(signum, late_ctrl_c)
        atexit.register(signal.signal, signum, signal.SIG_IGN)  # registered last: runs first


def _main() -> None:
    _last_stop.clear()
    try:
        _refuse_undecodable_arguments()
        with command_running():
            code = _command().main(prog_name="ladder", standalone_mode=False)
    except _usage_errors() as exc:
        if not exc.format_message():  # a group called without a command: click printed its help
            ctx = getattr(exc, "ctx", None)
            path = ctx.command_path if ctx is not None else "ladder"
            err.print(
                f"[bold red]error:[/] `{escape(path)}` needs a command: one of those listed above", soft_wrap=True
            )
            sys.exit(2)
        err.print(f"[bold red]error:[/] {escape(usage_line(exc))}", soft_wrap=True)
        sys.exit(2)
    except typer.Abort as exc:
        behind = _interrupt_behind(exc)
        if behind is not None:  # typer aborts on an EOFError: one met while a kill stopped a worker pool
            _interrupted(getattr(behind, "signum", signal.SIGINT))
        sys.exit(1)
    except LadderError as exc:  # the message may hold brackets (a path, an extra): not rich markup
        _fail(str(exc))
    except (KeyboardInterrupt, _Interrupted) as exc:  # Ctrl-C (or a kill) outside training: a fit, a report
        _interrupted(getattr(exc, "signum", signal.SIGINT))
    except BrokenPipeError:  # `ladder ... | head`: the reader left; nothing to say, and nowhere to say it
        _quiet_stdout()
        sys.exit(1)
    except OSError as exc:  # a place that cannot be read or written (a read-only study, --out /proc/x)
        behind = _interrupt_behind(exc)
        if behind is not None:  # the clean-up after a kill failed (data prepare's pool: its semaphores gone)
            _interrupted(getattr(behind, "signum", signal.SIGINT))
        _fail(os_error_line(exc))
    except Exception as exc:
        from ladder.model.training.preemption import Preempted

        if isinstance(exc, Preempted):  # training stopped at a step boundary, its checkpoint written
            _interrupted(exc.signum, said=getattr(exc, "said", None))
        behind = _interrupt_behind(exc)
        if behind is not None:
            _interrupted(getattr(behind, "signum", signal.SIGINT), torn=True)
        raise
    if code == 130:  # typer's word for a Ctrl-C outside a command's own code (parsing its arguments): no word said
        _interrupted(_last_stop[-1] if _last_stop else signal.SIGINT)
    if isinstance(code, int) and code:
        sys.exit(code)


def _refuse_undecodable_arguments() -> None:
    """A name in another encoding than UTF-8 (a Latin-1 folder ``S\\xff``) reaches Python with its stray bytes as
    lone surrogates, which pyarrow, tokenizers and torch refuse to encode: `collect` died of a UnicodeEncodeError,
    and `fit` called the good results.parquet unreadable, sending the user to `collect`."""
    given = [("argument", a) for a in sys.argv[1:]] + [("LADDER_CACHE", os.environ.get("LADDER_CACHE", ""))]
    for what, text in given:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(text).decode("utf-8", "backslashreplace")
            raise LadderError(
                f"{what} '{shown}' is not valid UTF-8 (a name in another encoding?): ladder's tables, tokenizers "
                "and checkpoints take UTF-8 names only; rename it (convmv does) and run again"
            ) from None


INTERRUPTED = "run the same command to continue"


class _Interrupted(Exception):
    """Ctrl-C on its way out of a command: typer would turn a KeyboardInterrupt into a silent exit 130."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signum)
        self.signum = signum


def _catch_ctrl_c(command: Any) -> None:
    invoke = command.invoke

    def guarded(ctx: Any) -> Any:
        try:
            return invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Interrupted(getattr(exc, "signum", signal.SIGINT)) from None

    command.invoke = guarded


def _fail(message: str) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    sys.exit(2)


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (or kill) an exception stands for: a signal that lands while a C extension initializes
    (matplotlib's ft2font, imported by `fit`) comes out as "ImportError: initialization failed", raised from it."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


class _TornExit(SystemExit):
    """An exit after an extension module's initialization was cut short: the interpreter's teardown of that
    half-made module can die of a fatal error (exit -6 after the line was said), so the process ends at once."""


def _interrupted(signum: int, *, torn: bool = False, said: str | None = None) -> NoReturn:
    """One line and the shell's code for the signal (130 for Ctrl-C): what was done is kept (checkpoints, and
    files written whole or not at all), so the same command continues; ``said``: what stopped it and what to do
    instead (a `ladder cancel` from another terminal: the same command would undo it)."""
    try:
        name = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    except ValueError:
        name = f"stopped by signal {signum}"
    try:
        err.print(f"[yellow]{name}[/]: {escape(said) if said else INTERRUPTED}", soft_wrap=True)
    except (OSError, ValueError):  # SIGHUP: the terminal it would be said on may be gone
        pass
    raise (_TornExit if torn else SystemExit)(128 + int(signum))


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _cwd_exists() -> bool:
    try:
        os.getcwd()
    except OSError:
        return False
    return True


def _link_hint(path: str) -> str:
    """What a link that leads nowhere is (:func:`ladder.layout.broken_link`), and its repair: its target gone, or a
    loop (whose target exists as a link: "which does not exist" was wrong of it)."""
    said = broken_link(Path(path), named=False) or f"a link to {os.readlink(path)}, which does not exist"
    repair = "remove the link or mend it" if said.endswith("in a loop") else "remove the link or create its target"
    return f"{said}: {repair}"


def os_error_line(exc: OSError) -> str:
    """An OSError as the user's problem: the path it names and why it failed, in one line."""
    why = exc.strerror or str(exc) or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    if not paths:
        if isinstance(exc, FileNotFoundError) and not _cwd_exists():  # os.getcwd() names no path
            return "the current directory no longer exists (deleted or moved): cd to one that does, then run again"
        return f"{why} ({type(exc).__name__})"
    if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
        # a path that is not there could not be made: its folder is what to check ("cannot use
        # S/.fit.json.k2x9.tmp", a temporary file that never existed, sent the user to `ls` it)
        made = Path(paths[0])
        if not os.path.lexists(made) and os.path.isdir(made.parent):
            paths[0] = str(made.parent)
    hint = ""
    if isinstance(exc, PermissionError):
        hint = " (check its permissions, or give another place where the command takes --out)"
    elif isinstance(exc, NotADirectoryError):
        hint = " (a part of the path is a file, not a folder)"
    elif os.path.islink(paths[0]) and not os.path.exists(paths[0]):  # "File exists" said nothing of the link
        hint = f" ({_link_hint(paths[0])})"
    elif isinstance(exc, FileExistsError) and os.path.isfile(paths[0]):  # a folder was to be made there
        hint = f" (a file where a folder goes: remove it, `rm {shell_word(paths[0])}`, or move it aside)"
    elif exc.errno == errno.ELOOP:  # "Too many levels of symbolic links" of S/runs/<id>: the loop is S
        loop = next((p for p in Path(paths[0]).parents if os.path.islink(p) and not os.path.exists(p)), None)
        hint = f" ({loop}: {_link_hint(str(loop))})" if loop is not None else ""
    return f"cannot use {' -> '.join(paths)}: {why}{hint}"
