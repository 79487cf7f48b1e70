"""--executor ray: the mixture's two passes (stages/shuffle.py) and the
shuffled packed rows (layouts/packed_shuffle.py) as Ray tasks write the bytes
threads write (a local Ray with 2 CPUs)."""

from __future__ import annotations

import pytest
from mixdata import parts, write_corpus, write_tokenizer
from runs import manifest, output_files, tokenmill

from tokenmill.stages.mix import BUCKET_ENV

pytest.importorskip("ray")


def test_ray_writes_the_mixture_threads_write(tmp_path):
    data, tok = write_corpus(tmp_path / "data"), write_tokenizer(tmp_path / "tok.json")
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('[mix]\nshort = 120\nlong = { epochs = 1.5 }\nbooks = "2K"\n')
    common = ("--tokenizer", tok, "--mix", recipe, "--shuffle", "7", "--workers", "2",
              "--pack", "64")  # fmt: skip
    env = {BUCKET_ENV: "2000"}  # several parts: several tasks of each pass
    tokenmill("run", data, tmp_path / "threads", *common, env=env)
    tokenmill("run", data, tmp_path / "ray", *common, "--executor", "ray", env=env)
    assert len(parts(tmp_path / "ray")) > 1
    assert output_files(tmp_path / "ray") == output_files(tmp_path / "threads")
    assert manifest(tmp_path / "ray")["mix"] == manifest(tmp_path / "threads")["mix"]
