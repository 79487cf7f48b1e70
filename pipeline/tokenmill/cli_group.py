"""The `tokenmill` command group: every failure is one line, a usage error
too, and an argument that is not UTF-8 is refused before any work."""

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


class Command(click.Command):
    """A command whose usage errors name it: click's parser raises some
    (an option's missing value, a value given to a flag) without the
    command, which the line's pointer to its help needs."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            if e.ctx is None:
                e.ctx = ctx
            raise


@contextlib.contextmanager
def quiet_on_a_closed_pipe() -> Iterator[None]:
    """Click's own output (help, --version) to a reader that closed the pipe
    ends as a command's does (`echo`), not in click's status 1."""
    try:
        yield
    except BrokenPipeError:
        from tokenmill.errors import exit_pipe_closed

        exit_pipe_closed()


def check_utf8(args: list[str]) -> None:
    """Python hands a non-UTF-8 argument over with its bytes as lone
    surrogates, which no file name, option or pattern tokenmill writes may
    hold: refused before any work (`tokenize` says so of its TEXT itself)."""
    if args[:1] == ["tokenize"]:
        return
    for arg in args:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            from tokenmill.io.inputs import printable

            raise click.ClickException(
                f"{printable(arg)}: argument is not UTF-8; names, options and patterns "
                "must be UTF-8"
            ) from None


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
        check_utf8(args)
        with usage_on_one_line(), quiet_on_a_closed_pipe():
            try:
                return super().parse_args(ctx, args)
            except click.UsageError as e:
                if e.ctx is None:  # as for a command's (Command)
                    e.ctx = ctx
                raise
