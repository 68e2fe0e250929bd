"""Bad input fails before any work: exit status 2 and one line naming the problem and the valid choices."""

from __future__ import annotations

import subprocess
import sys

import pytest

from suite.cli import precheck
from suite.core.errors import ConfigError

BAD = [
    (["scenario=nope"], "elementwise_chain"),
    (["backends=[numba,cuda_magic]"], "unknown backend 'cuda_magic'; valid: cupy"),
    (["variants=[halfway]"], "valid: fused, unfused"),
    (["scenario.ops=[scale,cube]"], "valid: scale, shift, relu, square, tanh, sigmoid, silu, gelu"),
    (["scenario.n=0"], "must be an integer in 1"),
    (["scenario.n=-5"], "must be an integer in 1"),
    (["scenario.n=99999999999999"], "must be an integer in 1"),
    (["scenario.n=12.5"], "must be an integer"),
    (["dtype=float64"], "valid: float32, float16, bfloat16"),
    (["device=tpu"], "cpu"),
    (["preset=XXL"], "valid: S, M, L"),
    (["scenario.rows=10"], "valid: n, ops"),
    (["scenario=attention", "scenario.cols=5"], "unknown key scenario.cols for attention; valid: batch, heads"),
    (["timing.min_reps=0"], "min_reps"),
    (["timing.budget_s=fast"], "budget_s"),
    (["timing.ceiling=sometimes"], "timing.ceiling='sometimes' is not one of: interleaved, once"),
    (["scenario.ops=[" + ",".join(["scale"] * 17) + "]"], "1..16"),
    (["-m", "scenario.n=10,0"], "must be an integer in 1"),
    (["backend_options.cupy.block=100"], "backend_options.cupy.block=100 must be a multiple of 32 in 32..1024"),
    (["+backend_options.cupy.colour=3"], "unknown option backend_options.cupy.colour; valid: block, max_items"),
    (["+backend_options.triton.num_warps=3"], "must be a power of two in 1..32"),
    (["+backend_options.torch.block=3"], "unknown option backend_options.torch.block; valid: mode, dynamic"),
    (
        ["+backend_options.numpy.block=3"],
        "unknown option backend_options.numpy.block; valid: slowdown_pct, slowdown_variant",
    ),
    (
        ["backend_options.torch.mode=fast"],
        "backend_options.torch.mode=fast must be one of default, reduce-overhead, max-autotune, "
        "max-autotune-no-cudagraphs",
    ),
    (["backend_options.torch.dynamic=sometimes"], "backend_options.torch.dynamic=sometimes must be true or false"),
]


@pytest.mark.parametrize(("overrides", "expected"), BAD, ids=[" ".join(o) for o, _ in BAD])
def test_precheck_names_problem_and_choices(overrides, expected):
    with pytest.raises(ConfigError) as info:
        precheck(overrides)
    message = str(info.value)
    assert "\n" not in message
    assert expected in message


def test_every_family_node_is_a_structured_config_of_its_axes():
    """conf/scenario/<name>.yaml start from the family's dataclass: its fields are `name` and the axes."""
    from dataclasses import fields

    from suite.core.scenario import discover

    for name, scn in discover().items():
        if not type(scn).__module__.startswith("scenarios."):
            continue  # a test's family
        assert scn.config is not None, name
        assert [f.name for f in fields(scn.config)] == ["name", *scn.axes]
        assert scn.config().name == name


def test_good_overrides_pass_precheck():
    precheck(["scenario.n=1000000", "scenario.ops=[scale,gelu]", "dtype=float16", "backends=[numba]", "device=cpu"])
    precheck(["-m", "scenario.n=1000,2000", "dtype=float32,float16"])
    precheck(["experiment=spill", "+backend_options.triton.num_warps=8"])
    precheck(["backend_options.torch.mode=max-autotune", "backend_options.torch.dynamic=true"])


def test_command_line_exit_status_two_and_one_line():
    proc = subprocess.run([sys.executable, "-m", "suite", "backends=[nope]"], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown backend 'nope'" in lines[0] and "numba" in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
