"""profile=ncu on the CPU: Nsight Compute's raw CSV read in bytes, the profiler run through a fake `ncu` on PATH,
the runner's hook, the one-launch entry's bracket, the validation one-liners, and the report's ±10% flag.

No GPU and no Nsight Compute here: the fake `ncu` is a shell script that prints a canned raw page (and records
the command it was given), so everything but the counters themselves is exercised.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import tests.toy_family as toy
from scenarios.matmul import Matmul
from suite.cli import precheck
from suite.core.errors import ConfigError
from suite.core.ledger import STORE_MODEL
from suite.core.row import Row, params_json
from suite.gpu import ncu
from suite.kit.tidy import tidy
from suite.report import measured
from suite.run import profile, profile_one, runner
from suite.run.config import TimingConfig
from suite.run.job import Job
from tests.conftest import make_config

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","lts__t_bytes.sum","dram__bytes_write.sum","dram__bytes_read.sum"')  # fmt: skip
"""The metrics deliberately in another order than they were asked for: columns are found by name."""
IDS = '"{id}","4242","python3","gpu-host","{name}","1","13","(256, 1, 1)","(4096, 1, 1)","0","9.0"'


def raw_page(launches: list[tuple[str, str, str, str]], units: tuple[str, str, str] = ("Mbyte", "Kbyte", "byte"),
             pid: str = "4242") -> str:  # fmt: skip
    """ncu's raw page with noise around it: (kernel name, lts, dram write, dram read) per launch."""
    lines = ["==PROF== Connected to process 4242 (/usr/bin/python3)", "the profiled program printed this",
             "==WARNING== Found outstanding GPU clock reset, trying to revert...", HEADER,
             '"","","","","","","","","","","",' + ",".join(f'"{u}"' for u in units)]  # fmt: skip
    for i, (name, lts, write, read) in enumerate(launches):
        ids = IDS.format(id=i, name=name).replace('"4242"', f'"{pid}"')
        lines.append(ids + f',"{lts}","{write}","{read}"')
    return "\n".join([*lines, "==PROF== Disconnected from process 4242", ""])


THREE = [
    ("void scale_kernel<float, 4>(float*, float const*, int)", "12.34", "4,096", "1,048,576"),
    ("gelu_kernel", "0.5", "2.5", "3,000,000"),
    ("triton_poi_fused_add_0", "1", "0", "12"),
]


# --- the parser -------------------------------------------------------------------------------------------------


def test_three_kernels_with_noise_units_and_thousands_separators_read_in_bytes() -> None:
    launches = ncu.parse(raw_page(THREE))
    assert [launch.kernel for launch in launches] == [name for name, *_ in THREE]  # the comma-laden name intact
    first = launches[0]
    assert (first.lts, first.dram_write, first.dram_read) == (12_340_000, 4_096_000, 1_048_576)
    assert (launches[1].lts, launches[1].dram_write, launches[1].dram_read) == (500_000, 2_500, 3_000_000)
    assert [launch.id for launch in launches] == ["0", "1", "2"] and {launch.process_id for launch in launches} == {
        "4242"
    }
    traffic = ncu.total(launches)
    assert (traffic.dram_read, traffic.dram_write) == (1_048_576 + 3_000_000 + 12, 4_096_000 + 2_500)
    assert traffic.dram == traffic.dram_read + traffic.dram_write and traffic.launches == 3
    assert traffic.lts == 12_340_000 + 500_000 + 1_000_000


@pytest.mark.parametrize(
    ("unit", "scale"),
    [("byte", 1), ("Kbyte", 10**3), ("Mbyte", 10**6), ("Gbyte", 10**9), ("KB", 10**3), ("MB", 10**6),
     ("GB", 10**9), ("KiB", 2**10), ("MiB", 2**20)],
)  # fmt: skip
def test_every_unit_spelling_scales_to_bytes(unit: str, scale: int) -> None:
    (launch,) = ncu.parse(raw_page([("k", "1.5", "2", "3.25")], units=(unit, unit, unit)))
    assert (launch.lts, launch.dram_write, launch.dram_read) == (round(1.5 * scale), 2 * scale, round(3.25 * scale))


def test_a_page_without_units_row_is_in_plain_counts() -> None:
    text = "\n".join([HEADER, IDS.format(id=0, name="k") + ',"7","8","9"'])
    (launch,) = ncu.parse(text)
    assert (launch.lts, launch.dram_write, launch.dram_read) == (7, 8, 9)


def test_sums_per_process_and_over_the_run() -> None:
    text = raw_page(THREE[:2]) + raw_page(THREE[2:], pid="777").split("\n", 3)[3]  # a second table, its own header
    launches = ncu.parse(text)
    assert len(launches) == 3
    per = ncu.by_process(launches)
    assert list(per) == ["4242", "777"]
    assert per["4242"].dram_read == 4_048_576 and per["4242"].launches == 2
    assert per["777"].dram_read == 12 and per["777"].dram_write == 0
    assert ncu.total(launches).dram == sum(t.dram for t in per.values())


def test_a_missing_metric_column_is_named() -> None:
    text = raw_page(THREE).replace('"dram__bytes_write.sum"', '"dram__bytes_written.sum"')
    with pytest.raises(ncu.NcuParseError, match=r"lacks column\(s\) dram__bytes_write\.sum"):
        ncu.parse(text)


def test_no_table_says_so_and_quotes_ncus_error() -> None:
    text = "==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\nhello\n"
    with pytest.raises(ncu.NcuParseError, match=r"no ncu CSV table.*ERR_NVGPUCTRPERM"):
        ncu.parse(text)
    with pytest.raises(ncu.NcuParseError, match="no ncu CSV table"):
        ncu.parse("")


def test_bad_values_units_and_rows_are_errors_not_zeros() -> None:
    with pytest.raises(ncu.NcuParseError, match=re.escape("dram__bytes_read.sum of kernel k is 'lots'")):
        ncu.parse(raw_page([("k", "1", "2", "lots")]))
    with pytest.raises(ncu.NcuParseError, match="unknown unit 'furlong'"):
        ncu.parse(raw_page([("k", "1", "2", "3")], units=("byte", "byte", "furlong")))
    with pytest.raises(ncu.NcuParseError, match="line 6 has 13 fields, its header 14"):
        ncu.parse(raw_page([("k", "1", "2", "3")]).replace(',"2","3"', ',"2"'))
    (launch,) = ncu.parse(raw_page([("k", "1", "n/a", "3")]))
    assert launch.dram_write is None
    with pytest.raises(ncu.NcuParseError, match=re.escape("no value for dram__bytes_write.sum of launch 0 (k)")):
        ncu.total([launch])


# --- the residual and the profiler through a fake ncu -----------------------------------------------------------


def test_residual_is_measured_over_modeled_minus_one() -> None:
    assert profile.residual(1_100, 1_000) == pytest.approx(0.10)
    assert profile.residual(900, 1_000) == pytest.approx(-0.10)
    assert profile.residual(1_000, 1_000) == 0.0
    assert profile.residual(5, None) is None and profile.residual(5, 0) is None and profile.residual(None, 9) is None


CHAIN = {"n": 1 << 20, "ops": ["scale", "gelu"]}
MODELED = 2 * 4 * (1 << 20)
"""The fused chain in float32 reads x once and writes y once: 8 MiB under the CUDA store model."""
CANNED = raw_page([("triton_fused_chain", "9,000", "4,200", "4.194304")], units=("Kbyte", "Kbyte", "Mbyte"))
"""4,194,304 bytes read, 4,200,000 written: 8,394,304 measured."""


def _job(**kw: object) -> Job:
    return Job("elementwise_chain", CHAIN, "float32", ["triton"], ["cuda"], ["fused"], 0, TimingConfig(), True,
               4096, {"triton": {"num_warps": 4}}, cache_dir="/tmp/cache", **kw)  # fmt: skip


def _cuda_row(**kw: object) -> Row:
    values = {"scenario": "elementwise_chain", "params": params_json(CHAIN), "dtype": "float32", "backend": "triton",
              "device": "cuda", "variant": "fused", "status": "ok", "mode": "native", "time_ms": 0.021,
              "time_q1_ms": 0.02, "time_q3_ms": 0.022, "reps": 50, "bytes_modeled": MODELED, "size": 1 << 20,
              "extra": {"launch": {"block": 1024}}, **kw}  # fmt: skip
    return Row(**values)


def fake_ncu(directory: Path, body: str) -> Path:
    """An executable `ncu` in `directory` that records its arguments and the spec it was handed, then runs `body`."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "ncu"
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > "{directory}/args.txt"\n'
        f'for a in "$@"; do case "$a" in *spec.json) cp "$a" "{directory}/spec_seen.json";; esac; done\n'
        f"{body}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def _printing(directory: Path, text: str, code: int = 0) -> Path:
    (directory / "page.txt").parent.mkdir(parents=True, exist_ok=True)
    (directory / "page.txt").write_text(text)
    return fake_ncu(directory, f'cat "{directory}/page.txt"\nexit {code}')


def test_a_measured_row_gets_bytes_residual_and_every_kernel(tmp_path: Path) -> None:
    script = _printing(tmp_path, CANNED)
    row = _cuda_row()
    (out,) = profile.measure_rows([row], _job(), profile.Profiler(str(script), ("tests.toy_family",), 60.0))
    assert out.bytes_measured == 4_194_304 + 4_200_000
    assert out.ledger_residual == pytest.approx((4_194_304 + 4_200_000) / MODELED - 1)
    found = out.extra["ncu"]
    assert (found["dram_read_bytes"], found["dram_write_bytes"], found["lts_bytes"]) == (4_194_304, 4_200_000, 9e6)
    assert found["launches"] == 1 and found["processes"] == 1 and found["kernels"][0]["kernel"] == "triton_fused_chain"
    assert out.extra["launch"] == {"block": 1024}  # what the row already said is kept
    assert (out.time_ms, out.reps, out.status) == (row.time_ms, row.reps, "ok")

    args = (tmp_path / "args.txt").read_text().splitlines()
    assert args[:15] == ["--profile-from-start", "off", "--target-processes", "application-only",
                         "--clock-control", "base", "--cache-control", "all", "--csv", "--page", "raw", "--metrics",
                         "dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum", sys.executable, "-m"]  # fmt: skip
    assert args[15] == "suite.run.profile_one" and args[16].endswith("spec.json") and args[17].endswith("out.json")
    assert "all" not in args[args.index("--target-processes") + 1]  # the compile workers are not profiled
    assert found["clock_control"] == "base"
    seen = json.loads((tmp_path / "spec_seen.json").read_text())
    assert (seen["scenario"], seen["params"], seen["backend"], seen["device"], seen["variant"]) == (
        "elementwise_chain", CHAIN, "triton", "cuda", "fused")  # fmt: skip
    assert seen["backend_options"] == {"triton": {"num_warps": 4}} and seen["plugins"] == ["tests.toy_family"]


@pytest.mark.parametrize("setting", ["none", "base"])
def test_the_clock_control_is_configurable_given_to_ncu_and_recorded(tmp_path: Path, monkeypatch, setting: str) -> None:
    """The profiled process writes its build time; the row keeps it beside the clock setting ncu was given."""
    (tmp_path / "page.txt").write_text(CANNED)
    script = fake_ncu(tmp_path, f'for a in "$@"; do out="$a"; done\necho \'{{"ok": true, "build_s": 0.25}}\' > "$out"\n'
                                f'cat "{tmp_path}/page.txt"')  # fmt: skip
    monkeypatch.setenv(profile.CLOCK_VARIABLE, setting)
    cfg = make_config("profile=none", "timing.case_timeout_s=30")
    profiler = profile.Profiler.of(cfg)
    assert profiler.clock_control == setting
    (out,) = profile.measure_rows([_cuda_row()], _job(), replace(profiler, ncu=str(script)))
    args = (tmp_path / "args.txt").read_text().splitlines()
    assert args[args.index("--clock-control") + 1] == setting
    assert out.extra["ncu"]["clock_control"] == setting and out.extra["ncu"]["build_s"] == 0.25


def test_an_unknown_clock_control_is_one_line_naming_the_choices(monkeypatch) -> None:
    monkeypatch.setenv(profile.CLOCK_VARIABLE, "turbo")
    with pytest.raises(ConfigError) as info:
        profile.Profiler.of(make_config("profile=none"))
    assert str(info.value) == "FUSEBENCH_NCU_CLOCK_CONTROL must be one of base, none (got 'turbo')"
    assert profile.clock_control({}) == "base"


def test_only_cuda_rows_timed_natively_and_ok_are_profiled(tmp_path: Path) -> None:
    script = _printing(tmp_path, CANNED)
    others = [_cuda_row(mode="emulated", time_ms=None), _cuda_row(status="mismatch"), _cuda_row(device="cpu"),
              _cuda_row(status="error", time_ms=None, mode="")]  # fmt: skip
    out = profile.measure_rows(others, _job(), profile.Profiler(str(script)))
    assert out == others and not (tmp_path / "args.txt").exists()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ('echo "==PROF== Connected"\necho "==ERROR== ERR_NVGPUCTRPERM - no permission to the counters"\nexit 1',
         "ncu exited with status 1: ==ERROR== ERR_NVGPUCTRPERM - no permission to the counters"),
        ('echo "some program output"\nexit 0', "no ncu CSV table in the output"),
        (f"echo '{HEADER}'\nexit 0", "ncu profiled no kernel launch between cuProfilerStart and cuProfilerStop"),
        ('for a in "$@"; do out="$a"; done\necho \'{"error": "RuntimeError: build and check: mismatch"}\' > "$out"'
         "\nexit 1", "the profiled launch failed: RuntimeError: build and check: mismatch"),
        ("sleep 30", "timeout: ncu ran past 0.5 s"),
    ],
    ids=["nonzero-exit", "no-table", "no-kernel", "child-failed", "timeout"],
)  # fmt: skip
def test_a_failing_profiler_keeps_the_row_and_says_why(tmp_path: Path, body: str, why: str) -> None:
    script = fake_ncu(tmp_path, body)
    row = _cuda_row()
    (out,) = profile.measure_rows([row], _job(), profile.Profiler(str(script), timeout_s=0.5))
    assert out.extra["ncu"].startswith(why), out.extra["ncu"]
    assert out.bytes_measured is None and out.ledger_residual is None
    assert replace(out, extra=row.extra) == row  # timing, status and everything else untouched


def test_without_ncu_the_row_says_so() -> None:
    (out,) = profile.measure_rows([_cuda_row()], _job(), profile.Profiler(None))
    assert out.extra["ncu"] == "ncu not found on PATH" and out.time_ms == 0.021


def test_the_runner_hook_measures_rows_before_they_are_written(tmp_path: Path, monkeypatch) -> None:
    """The run's own loop: a worker that returns a timed CUDA row (no GPU here to time one), ncu on PATH."""
    bin_dir = tmp_path / "bin"
    _printing(bin_dir, CANNED)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    class TimedOnCuda:
        info = {"ceilings": {}, "environment": {}}

        def __init__(self, settings: object) -> None:
            pass

        def run(self, job: Job, timeout: float) -> list[Row]:
            return [_cuda_row(params=params_json(job.params)), _cuda_row(device="cpu", backend="numba")]

        def close(self) -> None:
            pass

    monkeypatch.setattr(runner, "InProcess", TimedOnCuda)
    cfg = make_config("profile=ncu", "isolate=false", "scenario.n=1048576", "scenario.ops=[scale,gelu]",
                      "dtype=float32", "backends=[triton,numba]", "variants=[fused]")  # fmt: skip
    frame = runner.run(cfg, tmp_path / "run", show_progress=False).table
    cuda, cpu = frame[frame["device"] == "cuda"].iloc[0], frame[frame["device"] == "cpu"].iloc[0]
    assert float(cuda["bytes_measured"]) == 8_394_304
    assert float(cuda["ledger_residual"]) == pytest.approx(8_394_304 / MODELED - 1)
    assert json.loads(cuda["extra"])["ncu"]["dram_write_bytes"] == 4_200_000
    assert pd.isna(cpu["bytes_measured"]) and "ncu" not in json.loads(cpu["extra"])


# --- the one-launch entry ---------------------------------------------------------------------------------------


def test_the_entry_brackets_exactly_one_launch_after_a_warm_up(tmp_path: Path, monkeypatch) -> None:
    """On the toy family's host kernel (the bracket is the only CUDA part): built and checked by the suite's own
    machinery from the spec alone, launched once outside the bracket, once inside."""
    events: list[str] = []
    real = profile_one.check.build_and_check

    def counting(*args: object, **kwargs: object) -> tuple:
        built, found = real(*args, **kwargs)
        assert built.status == "ok"
        inner = built.launcher

        def launcher() -> None:
            events.append("launch")
            inner()

        return replace(built, launcher=launcher), found

    class Bracket:
        def __enter__(self) -> None:
            events.append("start")

        def __exit__(self, *exc: object) -> None:
            events.append("stop")

    monkeypatch.setattr(profile_one.check, "build_and_check", counting)
    job = Job(toy.NAME, {"n": 4096}, "float32", ["toy"], ["cpu"], ["fused"], 3, TimingConfig(), False, 4096, {},
              cache_dir=str(tmp_path / "cache"))  # fmt: skip
    row = Row(scenario=toy.NAME, params=params_json({"n": 4096}), dtype="float32", backend="toy", device="cpu",
              variant="fused", status="ok")  # fmt: skip
    spec = json.loads(json.dumps(profile_one.spec(job, row, ["tests.toy_family"])))  # through JSON, as the child
    assert profile_one.job_of(spec).params == job.params and profile_one.job_of(spec).seed == 3
    timings: dict[str, float] = {}
    assert profile_one.launch_once(spec, Bracket, timings) == "toy/cpu/fused"
    assert events == ["launch", "start", "launch", "stop"]
    assert 0 <= timings["build_s"] < 60


def test_the_entry_reports_a_failure_as_json(tmp_path: Path) -> None:
    spec = {"scenario": toy.NAME, "params": {"n": 64}, "dtype": "float32", "backend": "toy", "device": "cuda",
            "variant": "fused", "seed": 0, "emulate_max_elements": 4096, "backend_options": {}, "cache_dir": None,
            "plugins": ["tests.toy_family"]}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    assert profile_one.main([str(tmp_path / "spec.json"), str(tmp_path / "out.json")]) == 1
    said = json.loads((tmp_path / "out.json").read_text())
    assert "does not run natively here" in said["error"]


# --- validation before any work ---------------------------------------------------------------------------------


def test_command_line_refuses_an_unknown_profile_with_exit_status_two() -> None:
    proc = subprocess.run([sys.executable, "-m", "suite", "profile=bogus"], capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0] == "fusebench: error: profile must be one of none, ncu (got 'bogus')"


def test_profile_ncu_needs_ncu_on_path(tmp_path: Path, monkeypatch) -> None:
    without = [d for d in os.environ["PATH"].split(os.pathsep) if d and not (Path(d) / "ncu").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(without))
    with pytest.raises(ConfigError) as info:
        precheck(["profile=ncu"])
    assert str(info.value) == "profile=ncu needs Nsight Compute's ncu on PATH"
    precheck(["profile=none"])
    fake_ncu(tmp_path, "exit 0")
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path), *without]))
    precheck(["profile=ncu"])


# --- the report -------------------------------------------------------------------------------------------------

MM = Matmul()


def _measured_row(variant: str, measured_bytes: int | None, epilogue: str = "none", dtype: str = "float32",
                  extra: dict | None = None, modeled: int | None = None) -> Row:  # fmt: skip
    params = {"m": 256, "n": 256, "k": 256, "epilogue": epilogue, "tile": [64, 64, 32]}
    modeled = modeled or MM.ledger(params, dtype)[variant].bytes_moved(STORE_MODEL["cuda"])
    return Row(scenario="matmul", params=params_json(params), dtype=dtype, backend="cupy", device="cuda",
               variant=variant, status="ok", mode="native", size=256, time_ms=0.1, bytes_modeled=modeled,
               bytes_measured=measured_bytes, ledger_residual=profile.residual(measured_bytes, modeled),
               extra=extra or {})  # fmt: skip


def _at(variant: str, ratio: float, **kw: object) -> Row:
    row = _measured_row(variant, 0, **kw)
    return _measured_row(variant, round(row.bytes_modeled * ratio), **kw)


def _frame(rows: list[Row]) -> pd.DataFrame:
    return tidy(pd.DataFrame([r.as_record() for r in rows]))


def test_the_flag_is_beyond_ten_percent_either_way(tmp_path: Path) -> None:
    """1,000 bytes modeled each: 1,100 and 900 measured are exactly 10% off (not flagged), 1,150 and 850 are."""
    rows = [_measured_row("unblocked", 1_100, modeled=1_000), _measured_row("tiled", 900, modeled=1_000),
            _measured_row("library", 1_150, modeled=1_000),
            _measured_row("unfused", 850, epilogue="bias_gelu", modeled=1_000),
            _measured_row("fused", 1_020, epilogue="bias_gelu", modeled=1_000),
            _measured_row("tiled", None, dtype="float16")]  # fmt: skip
    found = measured.measured(_frame(rows))
    assert len(found) == 5  # the row without bytes_measured is not a measured row
    assert dict(zip(found["variant"], found["flagged"], strict=True)) == {
        "unblocked": False, "tiled": False, "library": True, "unfused": True, "fused": False}  # fmt: skip
    text = measured.section(_frame(rows), [], tmp_path)
    lead, folded = text.split("<details>")
    assert lead.startswith("### Measured DRAM traffic (Nsight Compute)")
    assert "5 rows were rerun once under Nsight Compute" in lead and "More than 10% off the ledger: 2 of 5:" in lead
    flagged_lines = [line for line in lead.splitlines() if line.startswith("| epilogue=")]
    assert len(flagged_lines) == 2
    assert any("| library |" in line and "+15.0% (flagged)" in line for line in flagged_lines)
    assert any("| unfused |" in line and "-15.0% (flagged)" in line for line in flagged_lines)
    assert "| unblocked |" in folded and "+10.0% |" in folded and "-10.0% |" in folded


def test_the_chart_sets_measured_against_modeled_every_variant_included(tmp_path: Path) -> None:
    rows = [_at("unblocked", 3.0), _at("tiled", 1.01), _at("unfused", 0.7, epilogue="bias_gelu"),
            _at("fused", 1.0, epilogue="bias_gelu"), _at("tiled", 1.05, dtype="float16")]  # fmt: skip
    charts = [tmp_path / "charts" / "time_vs_size_matmul.png"]
    text = measured.section(_frame(rows), charts, tmp_path)
    chart = tmp_path / "charts" / "measured_bytes_matmul.png"
    assert chart.is_file() and chart.stat().st_size > 10_000
    assert f"]({chart.relative_to(tmp_path).as_posix()})" in text
    drawn = measured.measured(_frame(rows))
    assert {"unblocked", "tiled"} <= set(drawn["variant"]) and drawn["bytes_modeled"].gt(0).all()


def test_no_section_without_profile_and_failures_are_listed(tmp_path: Path) -> None:
    plain = _frame([_measured_row("tiled", None), _measured_row("unblocked", None)])
    assert measured.section(plain, [], tmp_path) == ""
    reason = "ncu exited with status 1: ==ERROR== ERR_NVGPUCTRPERM"
    rows = [_at("tiled", 1.0), _measured_row("unblocked", None, extra={"ncu": reason})]
    text = measured.section(_frame(rows), [], tmp_path)
    assert "Nsight Compute measured nothing for 1 rows (their timings stand)" in text
    assert f"| {reason} | 1 | cupy/cuda unblocked |" in text
