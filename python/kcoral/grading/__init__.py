"""`grade`: a candidate judged against a reference out of its reach, on inputs it never saw
(issue 42, docs/grading.md). `Client.grade` and `AsyncClient.grade` run it; this package builds
its programs and its verdict, with no I/O of its own."""

from kcoral.grading.code import Code
from kcoral.grading.flow import grade_steps
from kcoral.grading.plan import make_plan
from kcoral.steps import adrive, drive

__all__ = ["Code", "adrive", "drive", "grade_steps", "make_plan"]
