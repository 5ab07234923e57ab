"""The course: the words an exercise is declared in (kit/), the registry (catalog), hints, reference
kernels (kernels/), the helpers lessons use (lab/), one exercise file per lesson (exercises/)."""
