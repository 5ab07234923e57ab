"""Progress bars for the slow cells: a widget in Jupyter, a text bar elsewhere (tqdm.auto).

    for k in bar(ks, "segment sizes"):          # a known number of steps
        ...
    with ticking("torchrun, 2 ranks"):          # a wait of unknown length: the seconds tick by
        proc.wait()

Bars are left on screen when done, so a finished cell shows what ran and how long it took.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from tqdm.auto import tqdm


def bar(iterable, desc: str, *, total: int | None = None, enabled: bool = True):
    """`iterable`, with a bar that advances once per item."""
    return tqdm(iterable, desc=desc, total=total, disable=not enabled)


@contextmanager
def ticking(desc: str, *, enabled: bool = True, every_s: float = 0.5, leave: bool = True):
    """A bar that shows the seconds elapsed while the block runs (for waits with no steps to count).
    `leave=False`: the bar is removed when the block ends (a check's verdict then stands alone)."""
    if not enabled:
        yield None
        return
    shown = tqdm(desc=desc, total=None, bar_format="{desc}: {elapsed}", leave=leave)
    done = threading.Event()

    def tick():
        while not done.wait(every_s):
            shown.refresh()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield shown
    finally:
        done.set()
        ticker.join()
        shown.close()
