"""Your own labelled data as a task (``workbench task new``): read, checked, written.

- `read`: a CSV, JSONL or Parquet file (or a Hugging Face dataset) read through `datasets`,
  every value a string;
- `infer`: the task type and label set the answers show;
- `build`: the checks (each refusal names the file, the column and what to do) and the
  files of the task folder, in LegalBench's layout plus `task.json`;
- `write`: the folder written atomically (never half-written, never overwritten unasked);
- `source`: the catalog's view of the user task folder, beside LegalBench's tasks.

Kept light: importing the package imports none of them (`promptlib.data` is below `source`).
"""
