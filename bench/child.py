"""Entry point of one contender's child process.

    python bench/child.py NAME PARAMS_JSON RESULT_PATH

Runs the contender NAME of `contenders`, `realvocab`, `cliruns` or `gigaruns` with PARAMS and writes
its result as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cliruns import CONTENDERS as CLI_CONTENDERS
from contenders import CONTENDERS
from gigaruns import CONTENDERS as GIGATOKEN_CONTENDERS
from realvocab import CONTENDERS as REAL_VOCAB_CONTENDERS


def main() -> None:
    name, params, result_path = sys.argv[1:]
    result = (CONTENDERS | REAL_VOCAB_CONTENDERS | CLI_CONTENDERS | GIGATOKEN_CONTENDERS)[name](
        json.loads(params)
    )
    Path(result_path).write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
