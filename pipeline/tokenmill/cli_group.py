"""The `tokenmill` command group: every failure is one line, a usage error
too, and an argument that is not UTF-8 is refused before any work, naming
the option or argument it is."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import click

# A bare command's help, which click 8.2 and later raise as a usage error
# (older ones print it and exit): shown as click shows it.
HELP_ERRORS = tuple(
    getattr(click.exceptions, name)
    for name in ("NoArgsIsHelpError",)
    if hasattr(click.exceptions, name)
)


def said(line: str, file=None) -> None:
    """An error's line on stderr. One that cannot be written (`2>/dev/full`)
    goes nowhere, as a status line does: the exit status still says what
    kind of error it was, which a failed write would turn into 1."""
    from tokenmill.errors import silence

    try:
        click.echo(line, err=True, file=file)
    except OSError:
        silence(2)


class UsageLine(click.UsageError):
    """A usage error on one line, naming where help is (click's own is three:
    the usage, the hint, then the error)."""

    def show(self, file=None) -> None:
        where = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        said(f"Error: {self.format_message()}{where}", file)


class Failure(click.ClickException):
    """An error of its own exit status, said on one line."""

    def show(self, file=None) -> None:
        said(f"Error: {self.format_message()}", file)


class BadEnvironment(Failure):
    """A variable of the environment refused: a value refused, as a bad
    option's is (README's exit status table), though no help names it."""

    exit_code = 2


@contextlib.contextmanager
def usage_on_one_line() -> Iterator[None]:
    try:
        yield
    except (UsageLine, *HELP_ERRORS):
        raise
    except click.UsageError as e:
        # click lists a missing option's choices a line each.
        message = " ".join(line.strip() for line in e.format_message().splitlines())
        raise UsageLine(message, e.ctx) from None


@contextlib.contextmanager
def quiet_on_a_closed_pipe() -> Iterator[None]:
    """Click's own output (help, --version) to a reader that closed the pipe
    ends as a command's does (`echo`), not in click's status 1."""
    try:
        yield
    except BrokenPipeError:
        from tokenmill.errors import exit_pipe_closed

        exit_pipe_closed()


NOT_UTF8 = "not UTF-8; names, options and patterns must be UTF-8"


def not_utf8(value: str, where: str | None = None) -> str:
    """The line saying `value` (of the argument or option `where`) is not
    UTF-8: its bytes as Python hands them over, lone surrogates, shown as
    \\xNN escapes."""
    from tokenmill.io.inputs import printable

    return f"{where + ' ' if where else ''}{printable(value)}: {NOT_UTF8}"


def is_utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_utf8(command: click.Command, ctx: click.Context, args: list[str]) -> None:
    """Python hands a non-UTF-8 argument over with its bytes as lone
    surrogates, which no file name, option or pattern tokenmill writes may
    hold: refused before any work as a usage error, naming the option or
    argument it is the value of (walked as click parses them: an option's
    value follows it or its =). The command's `as_given` arguments are its
    own to check (tokenize's TEXT)."""
    takes_value = {}
    for param in command.get_params(ctx):
        if isinstance(param, click.Option):
            for name in (*param.opts, *param.secondary_opts):
                takes_value[name] = not (param.is_flag or param.count)
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    position = 0
    options_end = False
    values = iter(args)
    for arg in values:
        where: str | None = None
        value = arg
        if not options_end and arg == "--":
            options_end = True
            continue
        if not options_end and arg.startswith("-") and arg != "-":
            option, equals, given = arg.partition("=")
            if equals and takes_value.get(option):
                where, value = option, given
            elif takes_value.get(arg):
                where, value = arg, next(values, "")
        elif position < len(arguments):
            param = arguments[position]
            position += param.nargs != -1
            if param.name in getattr(command, "as_given", ()):
                continue
            where = param.human_readable_name
        if not is_utf8(value):
            raise click.UsageError(not_utf8(value, where), ctx)


class Command(click.Command):
    """A tokenmill command: an argument that is not UTF-8 is refused before
    click converts it (a path that is not there would be said so instead),
    and its usage errors name it: click's parser raises some (an option's
    missing value, a value given to a flag) without the command, which the
    line's pointer to its help needs."""

    # Arguments taken as given, which the command checks itself.
    as_given: tuple[str, ...] = ()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        check_utf8(self, ctx, args)
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            if e.ctx is None:
                e.ctx = ctx
            raise


class TextCommand(Command):
    """tokenize: its TEXT is encoded as given, and said not to be UTF-8 as
    text is (standard input's too), not as an option."""

    as_given = ("text",)


class Commands(click.Group):
    command_class = Command

    def invoke(self, ctx: click.Context):
        from tokenmill.environment import check_all
        from tokenmill.errors import TokenmillError
        from tokenmill.io.stores import for_the_command_line

        try:
            # Before any argument is read: a bad store timeout would be blamed
            # on the first URL, a bad mixture part size found only after encode.
            check_all()
        except TokenmillError as e:
            raise BadEnvironment(str(e)) from None
        for_the_command_line()
        with usage_on_one_line(), quiet_on_a_closed_pipe():
            return super().invoke(ctx)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Up to the command's name: what follows it is the command's to check.
        for arg in args:
            if arg in self.commands:
                break
            if not is_utf8(arg):
                raise UsageLine(not_utf8(arg), ctx)
        with usage_on_one_line(), quiet_on_a_closed_pipe():
            try:
                return super().parse_args(ctx, args)
            except click.UsageError as e:
                if e.ctx is None:  # as for a command's (Command)
                    e.ctx = ctx
                raise
