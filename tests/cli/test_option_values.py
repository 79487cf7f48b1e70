"""An option's value is refused alike by every command that takes it: in one
line, before any work, as a usage error (status 2, where help is) when the
value itself is wrong, whatever input it would have met."""

from __future__ import annotations

import pytest
from conftest import assert_usage_error, make_documents, write_shard


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A small run's output folder, for the commands that read one."""
    from runs import tokenmill

    root = tmp_path_factory.mktemp("made")
    write_shard(root / "data" / "a.jsonl", make_documents(40, seed=3))
    tokenmill("run", root / "data", root / "out", "--vocab-size", "300")
    return root


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-0.5", "1"])
@pytest.mark.parametrize("command", ["pack", "bin", "run"])
def test_a_val_fraction_out_of_range_nan_too_is_a_usage_error(cli, made, command, value):
    """pack failed with a traceback on nan, and bin split nothing and ended 0."""
    target = made / f"{command}-target"
    if command == "run":
        args = ["run", made / "data", target]
    else:
        args = [command, made / "out" / "tokens", target]
        args += ["--seq-len", "64"] if command == "pack" else []
    result = cli(*args, "--val-fraction", value, ok=False)
    assert_usage_error(result, "is out of range: 0 (no split) to below 1", command, target)
    assert "--val-fraction" in result.output and value in result.output
