"""The trainers' own readers, for reading tokenmill's layouts back.

megatron-core, datatrove and ai2-olmo-core are installed without their
dependencies (Makefile, TRAINER_READERS): each declares torch, which their
reading code needs for little more than a base class. `stand_in_torch()`
puts a minimal `torch` module in sys.modules (only when torch is not
installed) so that their modules import; the reading code stays theirs.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np


def stand_in_torch() -> None:
    """A `torch` module with what the readers' imports touch, unless torch is installed."""
    if "torch" in sys.modules or importlib.util.find_spec("torch") is not None:
        return
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch.utils")
    data = types.ModuleType("torch.utils.data")

    class Dataset:  # torch.utils.data.Dataset: a base class with no behaviour the readers use
        pass

    data.Dataset = Dataset
    utils.data = data
    torch.utils = utils
    sys.modules.update({"torch": torch, "torch.utils": utils, "torch.utils.data": data})
    # olmo_core.data.utils's imports (olmo_core.io, olmo_core.utils) name these in
    # annotations, base classes and a decorator; the numpy readers never call them.
    for name in ("Tensor", "dtype", "device"):
        setattr(torch, name, type(name, (), {}))
    torch.compiler = types.SimpleNamespace(disable=lambda fn: fn)
    torch.cuda = types.SimpleNamespace(Stream=type("Stream", (), {}))
    for name in (
        "torch.nn",
        "torch.nn.functional",
        "torch.distributed",
        "torch.utils.flop_counter",
    ):
        parent, _, leaf = name.rpartition(".")
        sys.modules[name] = types.ModuleType(name)
        setattr(sys.modules[parent], leaf, sys.modules[name])
    torch.nn.Module = type("Module", (), {})
    # megatron-core logs on one rank only, asking torch.distributed whether it runs distributed.
    torch.distributed.is_initialized = lambda: False
    utils.flop_counter.FlopCounterMode = type("FlopCounterMode", (), {})
    # datatrove defines its datasets only when find_spec("torch") finds torch (it raises
    # on a module without a spec); DatatroveFileDataset returns its windows through
    # torch.as_tensor(..., dtype=torch.long), here the numpy array itself.
    torch.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    torch.long = np.int64
    torch.as_tensor = lambda data, dtype=None: np.asarray(data, dtype)


@contextmanager
def torch_stand_in() -> Iterator[None]:
    """`stand_in_torch()` for the block only: the readers imported in it keep the
    stand-in, but after it sys.modules holds no `torch`, so that libraries imported
    later in the process (datasets, transformers) do not take it for torch."""
    before = set(sys.modules)
    stand_in_torch()
    try:
        yield
    finally:
        for name in set(sys.modules) - before:
            if name == "torch" or name.startswith("torch."):
                del sys.modules[name]


def olmo_core_data_utils() -> types.ModuleType:
    """OLMo-core's `olmo_core.data.utils`, whose numpy readers (`iter_document_indices`,
    `load_array_slice`) are how its datasets find documents in .npy token arrays.
    Imported without running `olmo_core/data/__init__.py`, which imports every dataset
    and data loader (torch throughout) only to re-export them."""
    with torch_stand_in():
        if "olmo_core.data" not in sys.modules:
            spec = importlib.util.find_spec("olmo_core")
            package = types.ModuleType("olmo_core.data")
            package.__path__ = [str(Path(spec.origin).parent / "data")]
            sys.modules["olmo_core.data"] = package
        return importlib.import_module("olmo_core.data.utils")


def megatron_indexed_dataset() -> types.ModuleType:
    """megatron-core's `megatron.core.datasets.indexed_dataset` (IndexedDataset,
    IndexedDatasetBuilder), imported without running `megatron/core/__init__.py`,
    which imports the whole training stack (torch throughout); and with
    `megatron.core.utils`, which imports that stack too, standing in as the one
    function the module takes from it: megatron-core's own `log_single_rank`."""
    with torch_stand_in():
        if "megatron.core" not in sys.modules:
            spec = importlib.util.find_spec("megatron")
            package = types.ModuleType("megatron.core")
            path = Path(next(iter(spec.submodule_search_locations))) / "core"
            package.__path__ = [str(path)]
            sys.modules["megatron.core"] = package
            from megatron.core._rank_utils import log_single_rank

            utils = types.ModuleType("megatron.core.utils")
            utils.log_single_rank = log_single_rank
            sys.modules["megatron.core.utils"] = utils
        return importlib.import_module("megatron.core.datasets.indexed_dataset")
