"""Superword training against ordinary training at several worker counts:
bench/superwordrows.py's training child (count, merge and train as `tokenmill
run` does them), ordinary and superword in turn, ROUNDS times at each count
(the fastest of each counts), on a lent machine with many cores.

    python superword_train.py CORPUS OUT.json [WORKERS, e.g. 2,4,8,16] [ROUNDS]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from superwordrows import VOCAB, train_rounds  # noqa: E402


def main(corpus: Path, out: Path, workers: list[int], rounds: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="superword-train-"))
    ctx = argparse.Namespace(tmp=tmp, quiet_wait=0.0)
    rows = []
    for n in workers:
        runs = train_rounds(ctx, corpus, VOCAB, n, rounds)
        best = {kind: min(r, key=lambda x: x["seconds"]) for kind, r in runs.items()}
        rows.append(
            {
                "workers": n,
                "ordinary": [r["seconds"] for r in runs["ordinary"]],
                "superword": [r["seconds"] for r in runs["superword"]],
                "ratio": best["superword"]["seconds"] / best["ordinary"]["seconds"],
                "stages": {kind: r["stages"] for kind, r in best.items()},
                "peak_rss": {kind: r["peak_rss"] for kind, r in best.items()},
            }
        )
        print(f"workers {n}: ratio {rows[-1]['ratio']:.2f}", rows[-1]["stages"], flush=True)
    about = {"date": time.strftime("%Y-%m-%d"), "corpus": str(corpus), "vocab": VOCAB}
    out.write_text(json.dumps(about | {"rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    workers = [int(w) for w in (sys.argv[3] if len(sys.argv) > 3 else "2,4,8,16").split(",")]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    main(Path(sys.argv[1]), Path(sys.argv[2]), workers, rounds)
