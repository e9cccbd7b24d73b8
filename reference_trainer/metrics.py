"""Metrics to JSONL (one object per line), and to TensorBoard when it is installed and asked for."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable


def _clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become ``null``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsLogger:
    """Appends ``{"iteration": i, "phase": ..., "<group>/<name>": value, ...}`` lines to ``out/metrics.jsonl``.

    Args:
        out: Output directory (created).
        tensorboard: Also write scalars with ``torch.utils.tensorboard`` (needs ``tensorboard``;
            a clear error says how to install it).
        append: Keep an existing file (resuming) instead of starting a new one.
    """

    def __init__(self, out: str | Path, *, tensorboard: bool = False, append: bool = False):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.path = self.out / "metrics.jsonl"
        if not append and self.path.exists():
            self.path.unlink()
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as e:  # tensorboard is optional
                raise ImportError("--tensorboard needs the tensorboard package: pip install tensorboard") from e
            self._tb = SummaryWriter(str(self.out / "tensorboard"))

    def log(self, record: dict[str, Any]) -> None:
        record = {k: _clean(v) for k, v in record.items()}
        with self.path.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        if self._tb is not None:
            step = int(record.get("iteration", 0))
            for k, v in record.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "iteration":
                    self._tb.add_scalar(k, v, step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file, in order."""
    with Path(path).open() as f:
        return [json.loads(line) for line in f if line.strip()]


def progress_bar(it: Iterable[Any], desc: str, enabled: bool) -> Iterable[Any]:
    """``it`` behind a tqdm bar when ``enabled`` (the main rank of a run that asked for bars), else ``it`` itself."""
    if not enabled:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, desc=desc, dynamic_ncols=True, leave=False)
