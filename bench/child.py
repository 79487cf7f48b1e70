"""Entry point of one contender's child process.

    python bench/child.py NAME PARAMS_JSON RESULT_PATH

Runs `contenders.CONTENDERS[NAME](params)` and writes its result as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from contenders import CONTENDERS


def main() -> None:
    name, params, result_path = sys.argv[1:]
    result = CONTENDERS[name](json.loads(params))
    Path(result_path).write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
