"""One module per lesson, each exporting `EXERCISES` (course/catalog.py finds them). Modules whose
name starts with `_` hold data, not lessons."""
