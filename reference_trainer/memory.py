"""How a training process asks the C allocator to keep the memory its tensors free.

glibc's ``malloc`` maps every block above 32 MB fresh from the kernel and unmaps it when freed, so a training
step that makes such tensors (the tiny model's pretraining: ``[16, L, 2048]`` float32 logits, their log-softmax
and gradients) has the kernel zero new pages for each of them at every step: 21 of the 73 seconds of the search
QA recipe's pretraining were that system time. :func:`keep_freed_memory` serves every block from the heap and
keeps freed memory for the next step instead (what PyTorch's CPU tuning guide gets from jemalloc or TCMalloc,
without a preloaded library). The process then holds its peak memory until it exits: for processes that train.
"""

from __future__ import annotations

import ctypes
import sys

#: ``mallopt`` parameters (``<malloc.h>``).
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
#: The largest trim threshold ``mallopt`` takes (an ``int``): freed memory stays unless the heap's top frees 2 GB.
_KEEP = 2**31 - 1

_applied = False


def keep_freed_memory() -> bool:
    """Make glibc's ``malloc`` serve large blocks from its heap and keep freed memory (process-wide, once); returns
    whether it applies (False off glibc, where the allocator is left as it is). Numbers are unchanged: only where
    memory comes from changes."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 (glibc only: musl has no such function)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _applied = mallopt(_M_MMAP_MAX, 0) == 1 and mallopt(_M_TRIM_THRESHOLD, _KEEP) == 1
    return _applied
