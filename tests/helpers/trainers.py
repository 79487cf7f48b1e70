"""The trainers' own readers, for reading tokenmill's layouts back.

megatron-core, datatrove and ai2-olmo-core are installed without their
dependencies (Makefile, TRAINER_READERS): each declares torch, which their
reading code needs for little more than a base class. `stand_in_torch()`
puts a minimal `torch` module in sys.modules (only when torch is not
installed) so that their modules import; the reading code stays theirs.
"""

from __future__ import annotations

import importlib.util
import sys
import types


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
