"""Hand grading on the LegalBench paper's two criteria (correctness, analysis).

Why a package of its own: the paper grades explanations (rule-application tasks, rule_qa) by
hand, blind to the prompt that produced them. Here a *sheet* mixes the answers of several
trials of one task in a seeded random order with opaque item ids (`sheets`); its key (which
item is which trial's row) stays in ``grades/sheets/`` beside ``runs/``, never in the sheet.
Filled sheets come back checked and are appended to ``grades/grades.jsonl`` with the
grader's name (`store`); re-grades are kept, and `store.current_grades` says which counts.
`agreement` gives Cohen's kappa between graders who overlap.

Modules: `criteria` (the two criteria and the grading guide's wording), `store` (the grade
file and sheet keys: reading, appending, current grades, random-prefix check), `sheets`
(making a sheet from trials), `add` (reading a filled sheet into the store), `agreement`.

The older single-grade rule_qa export/import is `experiments.trials.grading` (unchanged).
"""
