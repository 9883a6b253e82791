"""The side-by-side benchmark (bench/compare.py), a small bounded part of it: both servers are
started as `make bench` starts them, on one throwaway PostgreSQL, and the same scenarios run
against each. Figures are not judged here (a shared machine is too noisy for that: `make
bench` records them); what is checked is that every run the benchmark counts really happened
on both systems, so a broken benchmark fails CI instead of printing nonsense."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.e2e


def test_the_benchmark_drives_both_servers_through_the_same_scenarios(tmp_path):
    command = [sys.executable, "bench/compare.py", "--quick", "--scenarios", "io,cancel,scale"]
    command += ["--io-counts", "20", "--cancel-samples", "2", "--scale-tasks", "1000"]
    command += ["--rounds", "2"]  # the I/O-bound cell twice, alternating; the others once
    command += ["--out", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]

    (report,) = tmp_path.glob("compare-*.json")
    results = json.loads(report.read_text())["results"]
    assert set(results) == {"sdk", "platform"}
    for system, figures in results.items():
        io = figures["io"]["20"]
        assert (io["send_errors"], io["not_terminal"]) == (0, 0), (system, io)
        assert io["states"] == {"TASK_STATE_COMPLETED": 20}, (system, io)
        assert len(io["rounds_wall_s"]) == 2 and None not in io["rounds_wall_s"], (system, io)
        cancel = figures["cancel"]
        assert cancel["cancel_answered"] == {"TASK_STATE_CANCELED": 2}, (system, cancel)
        assert cancel["to_canceled_ms"]["n"] == 2 and not cancel["problems"], (system, cancel)
        scale = figures["scale"]["1000"]  # `make bench` reads more sizes, each its own agent
        assert scale["total_size"] == 1000, (system, scale)
        reads = [scale[k] for k in ("get", "list_first", "list_state", "list_context")]
        assert all(r["n"] >= 3 and not r["problems"] for r in reads), (system, scale)
        deep = scale["list_deep"]
        assert deep["walk"]["n"] >= 1 and not deep["problems"], (system, deep)
    (table,) = tmp_path.glob("compare-*.md")
    assert "platform ÷ sdk" in table.read_text()


def test_the_noisy_neighbour_measures_one_tenant_while_another_bursts(tmp_path):
    """bench/noisy_neighbour.py, small: the quiet tenant's calls all complete in both phases,
    every one of the noisy tenant's sends is counted as accepted or refused (by a 429 and its
    reason, where the platform enforces the plan), every accepted run ends, and the `limits`
    variant puts the limited tenant on the plan given."""
    command = [sys.executable, "bench/noisy_neighbour.py", "--quick", "--rounds", "1"]
    command += ["--n-messages", "20", "--n-clients", "4", "--q-alone-seconds", "1"]
    command += ["--n-limits", "running_runs=5,requests_per_second=5,request_burst=10"]
    command += ["--out", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]

    (report,) = tmp_path.glob("noisy-*.json")
    data = json.loads(report.read_text())
    plan = data["meta"]["plan"]
    assert plan["supported"], plan
    assert (plan["plan"]["running_runs"], plan["plan"]["request_burst"]) == (5, 10), plan
    assert set(data["results"]) == {"none", "limits"}
    for variant, (figures,) in data["results"].items():
        alone, during = figures["alone"], figures["during"]
        for phase in (alone, during):
            assert phase["calls"] >= 1 and not phase["problems"], (variant, phase)
            assert phase["latency_ms"]["n"] == phase["calls"], (variant, phase)
        burst = during["burst"]
        assert burst["accepted"] + sum(burst["refused"].values()) == 20, (variant, burst)
        assert all(r.startswith("HTTP 429 ") for r in burst["refused"]), (variant, burst)
        assert burst["states"] == {"TASK_STATE_COMPLETED": burst["accepted"]}, (variant, burst)
        assert burst["left_in_flight"] == 0 and burst["drain_s"] is not None, (variant, burst)
        if variant == "none":  # no plan: nothing refused
            assert not burst["refused"], burst
    (table,) = tmp_path.glob("noisy-*.md")
    assert "Q during N's burst" in table.read_text()
