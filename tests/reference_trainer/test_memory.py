"""keep_freed_memory: a large tensor made and freed at every step stops touching fresh pages once the heap has grown."""

import json
import subprocess
import sys

import pytest

from support.paths import ROOT

_STEPS = """
import json, resource, sys
import torch
from reference_trainer.memory import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
faults = []
for _ in range(30):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    x = torch.ones(16, 512, 2048)  # 64 MB, over glibc's 32 MB mmap ceiling
    del x
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"applied": applied, "faults": sum(faults[-10:])}))  # the last 10 steps: the heap has grown
"""

_PAGES = 16 * 512 * 2048 * 4 // 4096  # one tensor's 4 KB pages


def _faults(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _STEPS, mode], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_tensor_made_at_every_step_stops_faulting_in_fresh_pages():
    plain, kept = _faults("plain"), _faults("keep")
    assert kept["applied"] is True
    assert plain["faults"] > 5 * _PAGES  # mapped fresh (and zeroed by the kernel) at each step
    assert kept["faults"] < _PAGES  # the heap keeps what was freed: earlier steps' pages serve the next ones
