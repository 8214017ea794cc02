"""A judge model grading open-ended answers on the paper's criteria (issue 33, point 3).

Modules: `rubrics` (one YAML per task, shipped in `rubrics/`, replaceable with `--rubric`),
`prompt` (the judge prompt, blind to the variant, and the reply's grade), `store` (the judge
scores of a trial, `runs/<trial id>/judge/<judge id>.jsonl` + `.json`), `run` (`judge_trial`:
every row through the same model gateway, response cache, retries and cost as trials) and
`tracking` (the judge scores on the trial's MLflow run).

Judge scores are not correctness: only hand grades calibrate them (`experiments.calibrated`).
"""
