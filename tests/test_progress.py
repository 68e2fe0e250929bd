"""The progress bar of a multirun counts the whole sweep's cases and estimates the time left from its pace."""

from __future__ import annotations

from rich.progress import Task

from suite.run import progress


def test_a_job_of_a_planned_sweep_counts_every_job_s_cases(tmp_path):
    progress.Sweep([3, 2, 4], started=100.0).write(tmp_path)
    sweep = progress.Sweep.read(tmp_path)  # as a job in another process reads it
    assert sweep is not None and (sweep.cases, sweep.started) == ([3, 2, 4], 100.0)
    bar = progress.Bar(2, enabled=False, job=1, sweep=sweep)
    task = bar.progress.tasks[0]
    assert (task.total, task.completed, bar.prefix) == (9, 3, "job 2/3 ")
    assert progress.Sweep.read(tmp_path / "elsewhere") is None


def test_a_run_that_is_not_the_planned_job_counts_its_own_cases():
    sweep = progress.Sweep([3, 2])
    bars = (progress.Bar(5, enabled=False, job=1, sweep=sweep), progress.Bar(5, enabled=False, job=1))
    for bar in (*bars, progress.Bar(5, enabled=False)):  # resumed, no plan left, or a plain run
        task = bar.progress.tasks[0]
        assert (task.total, task.completed, bar.prefix) == (5, 0, "")


def test_time_left_is_the_pace_so_far_times_the_cases_left(monkeypatch):
    sweep = progress.Sweep([4, 6], started=100.0)
    monkeypatch.setattr(progress.time, "time", lambda: 160.0)
    column = progress.SweepTime(sweep)
    task = Task(0, "cases", total=10, completed=4, _get_time=lambda: 160.0)
    assert column.render(task).plain == "1:00 elapsed, about 1:30 left"
    task.completed = 0
    assert column.render(task).plain == "1:00 elapsed"
