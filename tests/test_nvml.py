"""NVML provenance on a fake `pynvml`: the snapshot's fields, the throttle bits in words (idle is no throttling),
nothing at all without NVML, the rows timed on the GPU flagged, and the report's line about them."""

from __future__ import annotations

import sys
import types

import pandas as pd
import pytest

from suite.core.registry import KernelKey
from suite.core.row import Row
from suite.core.targets import EMULATED, NATIVE
from suite.gpu import nvml
from suite.report.throttle import flagged, over_the_run
from suite.run import execute, measure, provenance
from suite.run.stages import Availability, Check, Stages, Timed

IDLE, APP_CLOCKS, SW_POWER, HW_SLOW, SW_THERMAL, HW_THERMAL, BRAKE = 0x1, 0x2, 0x4, 0x8, 0x20, 0x40, 0x80


class NVMLError(Exception):
    """pynvml's error type, as the fake raises it."""


def fake_pynvml(masks=(0,), fail=(), old=False, temperatures=(61,)) -> types.ModuleType:
    """A stand-in for nvidia-ml-py: an H200 at 1980/2619 MHz of 1980/3201, 412.3 of 700 W, 61 °C; each throttle
    reading takes the next of `masks` and each temperature reading the next of `temperatures` (the last of each
    repeats); a call named in `fail` raises NVMLError; `old`: only the pre-12.535 throttle getter exists."""
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.calls = []
    readings = iter(masks)
    last = [masks[0]]
    heat = iter(temperatures)
    hot = [temperatures[0]]

    def next_temperature(handle, sensor):
        hot[0] = next(heat, hot[0])
        return hot[0] if sensor == 0 else -1

    def call(name, value):
        def fn(*args):
            m.calls.append((name, args))
            if name in fail:
                raise NVMLError(f"{name}: Not Supported")
            return value(*args) if callable(value) else value

        setattr(m, name, fn)

    def next_mask(handle):
        last[0] = next(readings, last[0])
        return last[0]

    call("nvmlInit", None)
    call("nvmlSystemGetDriverVersion", b"580.95.05")
    call("nvmlSystemGetCudaDriverVersion", 13000)
    call("nvmlDeviceGetHandleByPciBusId", lambda bus: ("handle", bus))
    call("nvmlDeviceGetHandleByUUID", lambda uuid: ("handle", uuid))
    call("nvmlDeviceGetHandleByIndex", lambda i: ("handle", i))
    call("nvmlDeviceGetName", "NVIDIA H200")
    call("nvmlDeviceGetUUID", "GPU-0c3a")
    call("nvmlDeviceGetClockInfo", lambda h, kind: {1: 1980, 2: 2619}[kind])
    call("nvmlDeviceGetMaxClockInfo", lambda h, kind: {1: 1980, 2: 3201}[kind])
    call("nvmlDeviceGetMemoryBusWidth", 6144)
    call("nvmlDeviceGetEnforcedPowerLimit", 700_000)
    call("nvmlDeviceGetPowerUsage", 412_345)
    call("nvmlDeviceGetTemperature", next_temperature)
    call("nvmlDeviceGetCurrentClocksThrottleReasons", next_mask)
    if not old:
        call("nvmlDeviceGetCurrentClocksEventReasons", next_mask)
    return m


@pytest.fixture
def install(monkeypatch):
    """Put a fake pynvml (or None: not installed) where `import pynvml` finds it; CUDA's device 0 at a PCI bus."""

    def put(module, bus="00000000:1B:00.0"):
        monkeypatch.setitem(sys.modules, "pynvml", module)
        monkeypatch.setattr(nvml, "cuda_pci_bus_id", lambda: bus)
        nvml._session.cache_clear()
        nvml._session_of.cache_clear()
        return module

    yield put
    nvml._session.cache_clear()
    nvml._session_of.cache_clear()


def test_snapshot_fields(install):
    fake = install(fake_pynvml(masks=(IDLE | SW_POWER,)))
    assert nvml.snapshot() == {
        "driver_version": "580.95.05", "cuda_version": "13.0", "name": "NVIDIA H200", "uuid": "GPU-0c3a",
        "sm_clock_mhz": 1980, "sm_clock_max_mhz": 1980, "mem_clock_mhz": 2619, "mem_clock_max_mhz": 3201,
        "memory_bus_bits": 6144, "power_limit_w": 700.0, "power_draw_w": 412.3, "temperature_c": 61,
        "throttle_reasons": ["sw_power_cap"], "throttle_mask": IDLE | SW_POWER,
    }  # fmt: skip
    assert ("nvmlDeviceGetHandleByPciBusId", (b"00000000:1B:00.0",)) in fake.calls  # CUDA's device, not NVML's 0


def test_a_reading_the_gpu_does_not_support_is_none_and_the_rest_stays(install):
    install(fake_pynvml(fail={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetCurrentClocksEventReasons"}))
    snap = nvml.snapshot()
    assert snap["power_draw_w"] is None and snap["throttle_mask"] is None and snap["throttle_reasons"] == []
    assert snap["name"] == "NVIDIA H200" and snap["power_limit_w"] == 700.0


def test_the_device_is_found_without_a_bus_id(install, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    fake = install(fake_pynvml(), bus=None)
    nvml.snapshot()
    assert ("nvmlDeviceGetHandleByIndex", (3,)) in fake.calls
    fake = install(fake_pynvml(fail={"nvmlDeviceGetHandleByPciBusId"}))  # an unknown bus id: the next way
    assert nvml.snapshot()["uuid"] == "GPU-0c3a"
    assert [c for c in fake.calls if c[0] == "nvmlDeviceGetHandleByIndex"] == [("nvmlDeviceGetHandleByIndex", (3,))]


@pytest.mark.parametrize(
    ("mask", "words"),
    [
        (0, ()),
        (IDLE, ()),  # nothing running: no throttling
        (APP_CLOCKS | IDLE, ()),  # clocks where the user set them: no throttling
        (SW_POWER, ("sw_power_cap",)),
        (IDLE | HW_SLOW | HW_THERMAL, ("hw_slowdown", "hw_thermal_slowdown")),
        (SW_THERMAL | BRAKE, ("sw_thermal_slowdown", "hw_power_brake")),
        (0x800 | SW_POWER, ("sw_power_cap", "0x800")),  # a bit newer than this table keeps its value
    ],
)
def test_throttle_bits_in_words(mask, words):
    assert nvml.decode(mask) == words


def test_the_union_keeps_each_reason_once_in_bit_order():
    assert nvml.union(("hw_power_brake",), ("sw_power_cap", "hw_power_brake"), ()) == ("sw_power_cap", "hw_power_brake")


def test_throttle_reasons_now_and_with_an_older_pynvml(install):
    install(fake_pynvml(masks=(IDLE, HW_THERMAL)))
    assert nvml.throttle_reasons() == ()
    assert nvml.throttle_reasons() == ("hw_thermal_slowdown",)
    install(fake_pynvml(masks=(SW_POWER,), old=True))
    assert nvml.throttle_reasons() == ("sw_power_cap",)


@pytest.mark.parametrize(
    "module",
    [
        None,
        fake_pynvml(fail={"nvmlInit"}),
        fake_pynvml(fail={"nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByIndex"}),
    ],
    ids=["not installed", "no driver", "no such device"],
)
def test_without_nvml_nothing_is_recorded_and_nothing_raises(install, module):
    install(module)
    assert nvml.snapshot() == {} and nvml.throttle_reasons() == ()


def test_the_run_environment_holds_the_start_snapshot(install, monkeypatch):
    install(fake_pynvml(masks=(HW_SLOW,)))
    monkeypatch.setattr(provenance, "gpu", lambda: {"name": "NVIDIA H200"})
    env = provenance.environment(True)
    assert env["nvml"]["start"]["uuid"] == "GPU-0c3a" and env["nvml"]["start"]["throttle_reasons"] == ["hw_slowdown"]
    assert "nvml" not in provenance.environment(False)  # no GPU: NVML is not asked
    install(None)
    assert "nvml" not in provenance.environment(True)


def test_a_gpu_named_by_its_uuid_is_read_without_cuda(install, monkeypatch):
    """The run's end is read in the worker's parent, which must not open a CUDA context to find the GPU."""
    fake = install(fake_pynvml())
    monkeypatch.setattr(nvml, "cuda_pci_bus_id", lambda: pytest.fail("CUDA asked for the bus id"))
    assert nvml.snapshot(uuid="GPU-0c3a")["name"] == "NVIDIA H200"
    assert ("nvmlDeviceGetHandleByUUID", (b"GPU-0c3a",)) in fake.calls
    install(fake_pynvml(fail={"nvmlDeviceGetHandleByUUID"}))  # a GPU NVML no longer knows: nothing, no raise
    assert nvml.snapshot(uuid="GPU-0c3a") == {}


def test_the_end_reading_is_added_beside_the_start(install, monkeypatch):
    install(fake_pynvml(temperatures=(44, 71)))
    monkeypatch.setattr(provenance, "gpu", lambda: {"name": "NVIDIA H200"})
    env = provenance.environment(True)
    ended = provenance.ended(env)
    assert ended["nvml"]["start"]["temperature_c"] == 44 and ended["nvml"]["end"]["temperature_c"] == 71
    assert ended["nvml"]["end"]["uuid"] == env["nvml"]["start"]["uuid"] and "end" not in env["nvml"]
    assert provenance.ended(provenance.environment(False)) == provenance.environment(False)  # no GPU: no-op
    install(None)  # NVML gone by the end: the start reading stands alone
    assert provenance.ended(env) is env


def test_a_run_records_nvml_at_its_start_and_after_its_cases(install, monkeypatch, tmp_path):
    """The fake GPU warms by a degree each reading; a case logs itself among NVML's calls: the start reading
    precedes every case, the end reading follows the last, and environment.json holds both."""
    import json

    from suite.report.report import write_report
    from suite.run import worker
    from suite.run.runner import run
    from tests.conftest import make_config

    fake = install(fake_pynvml(temperatures=tuple(range(40, 100))))
    monkeypatch.setattr(provenance, "gpu", lambda: {"name": "NVIDIA H200"})
    environment = provenance.environment
    monkeypatch.setattr(provenance, "environment", lambda has_gpu: environment(True))
    case = worker.Session.run

    def logged(self, job, notify=None):
        fake.calls.append(("case", ()))
        return case(self, job, notify)

    monkeypatch.setattr(worker.Session, "run", logged)
    cfg = make_config("plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]",
                      "variants=[good]", "device=cpu", "dtype=float32", "timing=quick", "isolate=false")  # fmt: skip
    frame = run(cfg, tmp_path, show_progress=False).table
    env = json.loads((tmp_path / "environment.json").read_text())
    start, end = env["nvml"]["start"], env["nvml"]["end"]
    assert end["uuid"] == start["uuid"] == "GPU-0c3a" and (start["temperature_c"], end["temperature_c"]) == (40, 41)
    order = [name for name, _ in fake.calls if name in ("case", "nvmlDeviceGetTemperature")]
    assert order[0] == order[-1] == "nvmlDeviceGetTemperature" and order.count("case") >= 1
    assert order.count("nvmlDeviceGetTemperature") == 2
    text = write_report(frame, [], tmp_path).read_text(encoding="utf-8")
    assert "- GPU at the run's start → end (NVML, environment.json): NVIDIA H200 `GPU-0c3a`" in text
    assert "temperature 40 → 41 °C" in text


def test_a_run_without_nvml_writes_no_reading(install, tmp_path):
    import json

    from suite.run.runner import run
    from tests.conftest import make_config

    install(None)
    cfg = make_config("plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]",
                      "variants=[good]", "device=cpu", "dtype=float32", "timing=quick", "isolate=false")  # fmt: skip
    run(cfg, tmp_path, show_progress=False)
    assert "nvml" not in json.loads((tmp_path / "environment.json").read_text())


def _stages(device_mode: str, timed: bool) -> Stages:
    timing = Timed(1.0, 1.0, 1.0, 1.0, 5, True, (1.0,) * 5) if timed else None
    return Stages(Availability(device_mode), check=Check("ok", launcher=lambda: None), timing=timing)


def _row(key: KernelKey) -> Row:
    return Row(key.scenario, "{}", "float32", key.backend, key.device, key.variant, "ok")


FOUND = {
    KernelKey("s", "cupy", "fused", "cuda"): _stages(NATIVE, timed=True),
    KernelKey("s", "cupy", "unfused", "cuda"): _stages(NATIVE, timed=True),
    KernelKey("s", "triton", "fused", "cuda"): _stages(EMULATED, timed=False),
    KernelKey("s", "numba", "fused", "cpu"): _stages(NATIVE, timed=True),
}


def test_rows_timed_on_the_gpu_are_flagged_with_the_union_of_before_and_after(install, monkeypatch):
    install(fake_pynvml(masks=(SW_POWER | IDLE, HW_THERMAL)))
    monkeypatch.setattr(measure, "timed", lambda found, job, clock, copies=None: (found, {}))
    found, reasons, _ = execute.timed_watching_clocks(FOUND, job=None, cuda_clock=None)
    assert reasons == ("sw_power_cap", "hw_thermal_slowdown")
    rows = execute.flag_throttled([_row(k) for k in found], found, reasons)
    assert [r.throttled for r in rows] == ["sw_power_cap,hw_thermal_slowdown"] * 2 + ["", ""]


def test_nvml_is_not_asked_where_nothing_runs_on_a_gpu(install, monkeypatch):
    fake = install(fake_pynvml(masks=(SW_POWER,)))
    monkeypatch.setattr(measure, "timed", lambda found, job, clock, copies=None: (found, {}))
    cpu_only = {k: s for k, s in FOUND.items() if k.device == "cpu" or s.mode == EMULATED}
    assert execute.timed_watching_clocks(cpu_only, job=None, cuda_clock=None)[1] == ()
    assert fake.calls == []


def test_without_nvml_no_row_is_flagged(install, monkeypatch):
    install(None)
    monkeypatch.setattr(measure, "timed", lambda found, job, clock, copies=None: (found, {}))
    found, reasons, _ = execute.timed_watching_clocks(FOUND, job=None, cuda_clock=None)
    assert reasons == () and {
        r.throttled for r in execute.flag_throttled([_row(k) for k in found], found, reasons)
    } == {""}


def test_the_report_says_how_many_rows_were_throttled_and_why():
    data = pd.DataFrame({"throttled": ["sw_power_cap", "sw_power_cap,hw_slowdown", "", ""],
                         "time_ms": [1.0, 2.0, 3.0, None]})  # fmt: skip
    (line,) = flagged(data)
    assert "2 of 3 timed rows" in line and "sw_power_cap (2), hw_slowdown (1)" in line
    assert flagged(data.assign(throttled="")) == [] and flagged(data.drop(columns="throttled")) == []


def test_the_gpu_over_the_run_in_words():
    start = {"name": "NVIDIA H200", "uuid": "GPU-0c3a", "driver_version": "580.95.05", "cuda_version": "13.0",
             "sm_clock_mhz": 1980, "sm_clock_max_mhz": 1980, "mem_clock_mhz": 2619, "mem_clock_max_mhz": 3201,
             "power_limit_w": 700.0, "power_draw_w": 80.5, "temperature_c": 38, "throttle_reasons": [],
             "throttle_mask": 0}  # fmt: skip
    end = {**start, "sm_clock_mhz": 1755, "power_draw_w": 690.2, "temperature_c": 83,
           "throttle_reasons": ["sw_power_cap", "sw_thermal_slowdown"], "throttle_mask": SW_POWER | SW_THERMAL}  # fmt: skip
    assert over_the_run({"nvml": {"start": start, "end": end}}) == (
        "NVIDIA H200 `GPU-0c3a`, driver 580.95.05, CUDA 13.0: SM clock 1980 → 1755 MHz (max 1980 MHz), "
        "memory clock 2619 → 2619 MHz (max 3201 MHz), temperature 38 → 83 °C, power draw 80.5 → 690.2 W "
        "(limit 700 W), throttling at the start: none, at the end: sw_power_cap, sw_thermal_slowdown"
    )
    unsupported = {**end, "power_draw_w": None, "throttle_mask": None, "throttle_reasons": []}
    said = over_the_run({"nvml": {"start": {**start, "power_draw_w": None}, "end": unsupported}})
    assert "power draw" not in said and said.endswith("at the end: unknown")
    assert over_the_run({"nvml": {"start": start}}) is None and over_the_run({}) is None
    assert over_the_run({"runs": {"a": {"nvml": {"start": start, "end": end}}}}) is None  # a merged report's


def test_the_report_line_is_in_the_report(tmp_path):
    from suite.report.report import sections
    from suite.run.runner import run
    from tests.conftest import make_config

    cfg = make_config("plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]",
                      "variants=[good]", "device=cpu", "dtype=float32", "timing=quick", "isolate=false")  # fmt: skip
    frame = run(cfg, tmp_path, show_progress=False).table
    assert not any("Clock throttling" in part for part in sections(frame, [], tmp_path))
    frame["throttled"] = ["hw_power_brake"] + [""] * (len(frame) - 1)
    text = "\n\n".join(sections(frame, [], tmp_path))
    assert "**Clock throttling:** 1 of" in text and "hw_power_brake (1)" in text
