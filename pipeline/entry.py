"""The `tokenmill` console script. It imports nothing heavy itself, so that
Ctrl-C while the CLI's modules load (a few hundred ms) still ends in one
line and exit status 130, never a traceback."""

from __future__ import annotations

import gc
import sys


def main() -> None:
    try:
        # As cli.start_up: the CLI's modules are made without the cyclic
        # collector walking them, then frozen.
        gc.disable()
        try:
            from pipeline.cli import main as cli
        finally:
            gc.freeze()
            gc.enable()
        cli()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)


if __name__ == "__main__":
    main()
