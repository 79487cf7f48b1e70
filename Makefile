# Two commands set up and run everything on a fresh machine:
#   make tokenize   # whole pipeline on sample_data/ (DATA=dir OUT=dir to change)
#   make test       # the test suite
#   make job JOB=jobs/NAME.toml   # a run described by a job file (see jobs/); the
#                                 # default, jobs/sample.toml, writes out-sample-job/
# Both create .venv and build the Rust core (release) when missing or stale.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= sample_data
OUT ?= out
ARGS ?=
CORPUS ?= /tmp/corpus
# `make bench` builds $(CORPUS) first when it does not exist (bench/build_corpus.py);
# --install has apt-get add the Debian packages it reads if missing (root). CORPUS_BUILD= to skip.
CORPUS_BUILD ?= --install
# The large corpus of C for the memory and size rows: bench/build_linux.py streams Debian's
# linux-source tarball (~1.2 GB of text, 320 MB on disk; --install adds the package).
# BIG_CORPUS= leaves those rows out.
BIG_CORPUS ?= /tmp/corpus-linux
# The multilingual corpus of the encode rows: bench/build_multilingual.py reads ~113 MB of text in
# 28 languages from Debian packages it downloads (--install: apt-get download, ~70 MB).
MULTI_CORPUS ?= /tmp/corpus-multilingual
# Runs per contender (the fastest counts); the machine is shared and noisy.
REPEAT ?= 5
# More bench/run.py options, e.g. BENCH_ARGS="--skip size --skip scaling".
# The run writes its tables to bench/RESULTS.md and its summary rows into README.md.
BENCH_ARGS ?=
JOB ?= jobs/sample.toml
# More pytest options for `make test`, e.g. PYTEST_ARGS="-k s3 -n 0".
PYTEST_ARGS ?=
# One stamp per install, so that each target installs what it needs, once: tokenize and job
# the package alone (`pip install -e .`); test, lint, fmt and bench its dev extra too.
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed-dev
# The trainers' own readers, which the tests read every output layout back with. Installed
# without their dependencies: each declares torch (gigabytes, CUDA included), which the reading
# code needs for a base class only; tests/helpers/trainers.py stands in for that import. The
# rest is what OLMo-core's data utilities import at import time (cached-path its cloud clients).
TRAINER_READERS := megatron-core==0.16.1 datatrove==0.10.1 ai2-olmo-core==3.0.0 \
	cached-path==1.8.10 dataclass-extensions==0.5.0 google-cloud-storage==3.17.1 \
	google-cloud-core==2.8.0 google-api-core==2.44.0 googleapis-common-protos==1.76.0 \
	google-auth==2.63.0
SOURCES := pyproject.toml native/Cargo.toml native/Cargo.lock $(shell find native/src -name '*.rs')

.PHONY: install install-dev tokenize job test lint fmt bench clean

install: $(RUNTIME_STAMP)

install-dev: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(RUNTIME_STAMP): $(SOURCES) | $(BIN)/python
	@echo "Installing tokenmill into $(VENV), building its Rust core (about a minute the first time)"
	$(BIN)/python -m pip install -e .
	touch $@

$(STAMP): $(SOURCES) | $(BIN)/python
	@echo "Installing tokenmill and its dev extra (test and lint tools, every optional" \
		"dependency) into $(VENV), building its Rust core (about a minute the first time)"
	$(BIN)/python -m pip install -e '.[dev]'
	$(BIN)/python -m pip install -q --no-deps $(TRAINER_READERS)
	touch $@ $(RUNTIME_STAMP)

# DATA, OUT and JOB are each one argument, exactly as given, whatever they hold (a space, ",
# $, `): `$(value X)` keeps make from expanding a $ in it, and `q` single-quotes it for the
# shell, each ' as '\''. ARGS is options, split by the shell, before the `--` that keeps a
# name starting with - from being read as one.
q = '$(subst ','\'',$(1))'

tokenize: $(RUNTIME_STAMP)
	$(BIN)/tokenmill run $(if $(ARGS),$(ARGS) )-- $(call q,$(value DATA)) $(call q,$(value OUT))

job: $(RUNTIME_STAMP)
	$(BIN)/tokenmill run --job $(call q,$(value JOB)) $(ARGS)

test: $(STAMP)
	cd native && cargo test --lib --quiet
	$(BIN)/python -m pytest -q -n auto --maxprocesses 8 --dist loadgroup $(PYTEST_ARGS)

# mypy checks the package ([tool.mypy] in pyproject.toml); stubtest checks the
# native module's stub (_native.pyi) against the built module.
lint: $(STAMP)
	$(BIN)/ruff check pipeline tests bench
	$(BIN)/ruff format --check pipeline tests bench
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest tokenmill._native
	cd native && cargo fmt --check && cargo clippy --quiet --all-targets -- -D warnings

fmt: $(STAMP)
	$(BIN)/ruff check --fix pipeline tests bench
	$(BIN)/ruff format pipeline tests bench
	cd native && cargo fmt

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	test -e $(CORPUS) || $(BIN)/python bench/build_corpus.py $(CORPUS) $(CORPUS_BUILD)
	$(if $(BIG_CORPUS),test -e $(BIG_CORPUS) || $(BIN)/python bench/build_linux.py $(BIG_CORPUS) $(CORPUS_BUILD))
	test -e $(MULTI_CORPUS) || $(BIN)/python bench/build_multilingual.py $(MULTI_CORPUS) $(CORPUS_BUILD)
	$(BIN)/python bench/run.py $(CORPUS) --repeat $(REPEAT) \
		--markdown bench/RESULTS.md --summary README.md --multilingual $(MULTI_CORPUS) \
		$(if $(BIG_CORPUS),--big $(BIG_CORPUS),--skip memory --skip size --skip code) $(BENCH_ARGS)

clean:
	rm -rf -- $(VENV) native/target $(call q,$(value OUT))
