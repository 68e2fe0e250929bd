"""The progress bar of a multirun counts the whole sweep's cases and estimates the time left from its pace."""

from __future__ import annotations

from rich.progress import Task

from suite.run import progress


def test_a_job_of_a_planned_sweep_counts_every_job_s_cases():
    progress.plan_sweep([3, 2, 4])
    bar = progress.Bar(2, enabled=False, job=1)
    task = bar.progress.tasks[0]
    assert (task.total, task.completed, bar.prefix) == (9, 3, "job 2/3 ")


def test_a_run_that_is_not_the_planned_job_counts_its_own_cases():
    progress.plan_sweep([3, 2])
    for bar in (progress.Bar(5, enabled=False, job=1), progress.Bar(5, enabled=False)):  # resumed, or a plain run
        task = bar.progress.tasks[0]
        assert (task.total, task.completed, bar.prefix) == (5, 0, "")


def test_time_left_is_the_pace_so_far_times_the_cases_left(monkeypatch):
    sweep = progress.Sweep([4, 6], started=100.0)
    monkeypatch.setattr(progress.time, "monotonic", lambda: 160.0)
    column = progress.SweepTime(sweep)
    task = Task(0, "cases", total=10, completed=4, _get_time=lambda: 160.0)
    assert column.render(task).plain == "1:00 elapsed, about 1:30 left"
    task.completed = 0
    assert column.render(task).plain == "1:00 elapsed"
