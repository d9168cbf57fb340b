"""bpbc: exact Smith-Waterman read screening with Bitwise Parallel Bulk Computation.

``import bpbc`` is cheap: numba, dnaio and cupy load on first use.
"""

__version__ = "0.1.0"
__all__ = ["screen", "Screener", "ReadBatch", "Reads", "ScreenResult", "Alignment", "Scoring", "SequenceError",
           "InputError", "InternalError"]

_LAZY = {
    "screen": "bpbc.screening",
    "Screener": "bpbc.screener",
    "ReadBatch": "bpbc.screener",
    "Reads": "bpbc.reads",
    "ScreenResult": "bpbc.result",
    "Alignment": "bpbc.result",
    "Scoring": "bpbc.scoring",
    "SequenceError": "bpbc.alphabet",
    "InputError": "bpbc.errors",
    "InternalError": "bpbc.errors",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bpbc' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
