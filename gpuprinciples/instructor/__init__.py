"""The instructor's and maintainer's tools: the gradebook and intake of learner notebooks, releasing
lessons, benchmarks, figures, recorded verdicts."""
