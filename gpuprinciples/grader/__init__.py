"""One answer against one exercise: orchestration (grading), the compile pass, the pure verdicts
(judge, honesty), the child's side (worker), the report and its display."""
