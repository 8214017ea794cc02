"""The sweep's HTML report: its data (`model`: `ReportDoc`, built from the trials by `build`,
with the prompts' word diffs from `diff`) and the one self-contained page it renders to."""

from experiments.reports.html.build import build_report, build_sweep_report
from experiments.reports.html.diff import prompt_diff
from experiments.reports.html.model import ROWS_CAP, ReportDoc

__all__ = ["ROWS_CAP", "ReportDoc", "build_report", "build_sweep_report", "prompt_diff"]
