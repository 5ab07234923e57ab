"""Pictures of what a kernel touches: one small grid per program, a cell per element.

    with counters.record(trace=True) as rec:
        my_kernel_wrapper(x)                  # under the interpreter (no GPU, or GPUPRINCIPLES_FORCE_CPU=1)
    drawing.draw_kernel(rec, x, width=16)     # which elements of x each program loaded and stored

The data is the interpreter's record of every load and store (`counters.record(trace=True)`):
the byte address of each lane the mask left on. Masked-off lanes move no memory, so they are not
in the record and their cells stay empty; a lane that should have been masked and was not shows
up as a cell *outside* the tensor, drawn in red past its end.

The drawing itself is generic: `draw(touches, shape)` takes `{program: {"load": flat indices,
"store": flat indices}}` laid out on a `shape` grid, so lesson 08 can draw attention tiles
(which rows of Q, K and V each program reads) with the same function.
"""

from __future__ import annotations

import math

import numpy as np

# One colour per kind of cell (RGB in 0..1)
COLOURS = {
    "untouched": (0.86, 0.86, 0.86),
    "load": (0.25, 0.50, 0.85),
    "store": (0.95, 0.60, 0.15),
    "both": (0.55, 0.35, 0.70),
    "outside": (1.0, 1.0, 1.0),
    "outside touched": (0.85, 0.10, 0.10),
}
_CODES = {name: i for i, name in enumerate(COLOURS)}


def program_touches(rec, tensor, kernel: str | None = None) -> dict:
    """Per program, the flat element indices of `tensor` that a traced run loaded and stored.

    Unlike `counters.touched`, indices outside the tensor are kept (negative, or >= numel): a
    load or store that touches the tensor at all is attributed to it whole, so the lanes of
    that access which ran past its end are kept too. That is what shows a missing mask.
    Indices are in elements from the tensor's first element, in storage order.
    """
    size = tensor.element_size()
    start = tensor.untyped_storage().data_ptr() + tensor.storage_offset() * size
    span = _storage_span(tensor)
    end = start + span * size
    result: dict = {}
    for acc in rec.accesses:
        if kernel is not None and acc.kernel != kernel:
            continue
        a = acc.addresses
        if a.size == 0 or not bool(((a >= start) & (a < end)).any()):
            continue
        slot = result.setdefault(acc.program, {"load": [], "store": []})
        slot[acc.op].append(((a - start) // acc.itemsize).astype(np.int64))
    return {p: {op: np.unique(np.concatenate(v)) if v else np.zeros(0, np.int64) for op, v in d.items()}
            for p, d in sorted(result.items())}


def _storage_span(tensor) -> int:
    """Elements from the first to one past the last element (a strided view spans its gaps)."""
    if tensor.numel() == 0:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()))


def image(touch: dict, shape: tuple[int, int], inside: int | np.ndarray | None = None) -> np.ndarray:
    """An integer image (codes of `COLOURS`) of one program's touches on a `shape` grid.

    `touch` is {"load": indices, "store": indices} (flat, row-major on `shape`); `inside` says
    which cells belong to the tensor: a count (the first `inside` cells) or a boolean array of
    `shape`; the default is every cell. Indices beyond the grid are dropped.
    """
    rows, cols = shape
    total = rows * cols
    if inside is None:
        inside_mask = np.ones(total, bool)
    elif isinstance(inside, (int, np.integer)):
        inside_mask = np.arange(total) < inside
    else:
        inside_mask = np.asarray(inside, bool).reshape(-1)
    loaded = np.zeros(total, bool)
    stored = np.zeros(total, bool)
    for op, flags in (("load", loaded), ("store", stored)):
        idx = np.asarray(touch.get(op, ()), dtype=np.int64)
        idx = idx[(idx >= 0) & (idx < total)]
        flags[idx] = True
    codes = np.where(inside_mask, _CODES["untouched"], _CODES["outside"])
    codes = np.where(inside_mask & loaded, _CODES["load"], codes)
    codes = np.where(inside_mask & stored, _CODES["store"], codes)
    codes = np.where(inside_mask & loaded & stored, _CODES["both"], codes)
    codes = np.where(~inside_mask & (loaded | stored), _CODES["outside touched"], codes)
    return codes.reshape(rows, cols)


def draw(touches: dict, shape: tuple[int, int], *, inside=None, title: str | None = None,
         max_programs: int = 12, columns: int = 4, cell: float = 0.18, programs=None):
    """One panel per program: its grid of cells coloured by what it did. Returns the Figure.

    `touches`: {program: {"load": flat indices, "store": flat indices}} on the row-major `shape`
    grid; `inside` as in `image`. Shows the first `max_programs` programs (or those listed in
    `programs`) and says how many were left out.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    chosen = list(programs) if programs is not None else list(touches)[:max_programs]
    n = max(len(chosen), 1)
    columns = min(columns, n)
    rows_of_panels = math.ceil(n / columns)
    rows, cols = shape
    width = max(2.2, cols * cell)
    height = max(0.8, rows * cell)
    fig, axes = plt.subplots(rows_of_panels, columns, figsize=(columns * width + 0.4, rows_of_panels * (height + 0.6)
                                                                + 0.9), squeeze=False)
    cmap = ListedColormap(list(COLOURS.values()))
    for ax in axes.flat:
        ax.axis("off")
    # programs are (x, y, z) grid indices; show only the grid's dimensions: 3, or (1, 2)
    dims = max([1] + [max((i + 1 for i, v in enumerate(p) if v), default=1) for p in touches
                      if isinstance(p, tuple)])
    for ax, program in zip(axes.flat, chosen):
        touch = touches.get(program, {})
        ax.imshow(image(touch, shape, inside), cmap=cmap, vmin=0, vmax=len(COLOURS) - 1, interpolation="nearest")
        ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
        ax.grid(which="minor", color="0.7", linewidth=0.5)
        ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
        ax.axis("on")
        for spine in ax.spines.values():
            spine.set_visible(False)
        loads, stores = len(touch.get("load", ())), len(touch.get("store", ()))
        label = program if not isinstance(program, tuple) else (program[0] if dims == 1 else program[:dims])
        ax.set_title(f"program {label}: {loads} loaded, {stores} stored", fontsize=8)
    left_out = len(touches) - len(chosen)
    handles = [Patch(color=c, label=name) for name, c in COLOURS.items() if name != "outside"]
    handles.append(Patch(facecolor="white", edgecolor="0.6", label="outside the tensor"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    suptitle = title or "what each program touched"
    if left_out > 0:
        suptitle += f" (first {len(chosen)} of {len(touches)} programs)"
    fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    return fig


def draw_kernel(rec, tensor, *, width: int | None = None, kernel: str | None = None, title: str | None = None,
                **options):
    """Draw what each program of a traced run did to `tensor`.

    A 1-D (or flattened) tensor is laid out in rows of `width` cells (default: up to 32); a 2-D
    tensor on its own rows and columns of storage (row stride wide). Cells past the end are
    added, up to the furthest one any program touched, so reads and writes past the end show.
    """
    touches = program_touches(rec, tensor, kernel)
    span = _storage_span(tensor)
    inside: int | np.ndarray
    if tensor.ndim == 2 and width is None:
        width = tensor.stride(0) if tensor.stride(1) == 1 else tensor.shape[1]
        inside_cols = np.arange(width) < tensor.shape[1]
    else:
        width = width or min(32, max(span, 1))
        inside_cols = None
    furthest = max([span] + [int(v.max()) + 1 for d in touches.values() for v in d.values() if v.size])
    rows = math.ceil(furthest / width)
    if inside_cols is not None:  # a strided 2-D view: the gap at the end of each row is not the tensor's
        inside = (np.arange(rows)[:, None] < tensor.shape[0]) & inside_cols[None, :]
    else:
        inside = span
    if title is None:
        name = kernel or (rec.kernel_names[0] if rec.kernel_names else "kernel")
        title = f"{name}: what each program touched of a tensor of {tensor.numel()} elements"
    return draw(touches, (rows, width), inside=inside, title=title, **options)
