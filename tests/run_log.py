"""What a GPU run keeps as it goes: a line at a time into $OUT (tools/gpu-check sets it; the device returns what
is written there). A run cut by its time limit still has every line written before the cut, where pytest prints
failures only at its end."""

import os
from pathlib import Path


def log(name: str, text: str, echo: bool = True) -> None:
    """Append `text` as a line of $OUT/`name` when $OUT is set; `echo` also prints it (pytest -s shows it)."""
    folder = os.environ.get("OUT")
    if folder:
        with open(Path(folder) / name, "a") as f:
            f.write(text + "\n")
    if echo:
        print(text)
