"""The run's plan of cores (bpbc.resources): where the cores come from and each stage's share."""

import json
import os

import pytest

from bpbc import resources
from bpbc.resources import available_cores, cgroup_cpu_quota, plan_run


def test_cgroup_v2_quota(tmp_path):
    limited = tmp_path / "cpu.max"
    limited.write_text("250000 100000\n")
    assert cgroup_cpu_quota(v2=str(limited)) == 2.5
    unlimited = tmp_path / "unlimited"
    unlimited.write_text("max 100000\n")
    assert cgroup_cpu_quota(v2=str(unlimited)) is None


def test_cgroup_v1_quota_where_there_is_no_v2(tmp_path):
    quota, period = tmp_path / "quota", tmp_path / "period"
    quota.write_text("300000\n")
    period.write_text("100000\n")
    missing = str(tmp_path / "no-such-file")
    assert cgroup_cpu_quota(v2=missing, v1_quota=str(quota), v1_period=str(period)) == 3.0
    quota.write_text("-1\n")  # v1's 'no quota'
    assert cgroup_cpu_quota(v2=missing, v1_quota=str(quota), v1_period=str(period)) is None
    assert cgroup_cpu_quota(v2=missing, v1_quota=missing, v1_period=missing) is None


def test_a_quota_below_the_affinity_limits_the_cores(monkeypatch):
    monkeypatch.setattr(resources, "_affinity", lambda: 64)
    monkeypatch.setattr(resources, "cgroup_cpu_quota", lambda: 3.5)
    assert available_cores() == (4, "cgroup CPU quota")
    monkeypatch.setattr(resources, "cgroup_cpu_quota", lambda: 100.0)
    assert available_cores() == (64, "CPU affinity")
    monkeypatch.setattr(resources, "cgroup_cpu_quota", lambda: None)
    assert available_cores() == (64, "CPU affinity")


@pytest.mark.parametrize("cores, compress, tracebacks", [(1, 0, 1), (2, 1, 1), (7, 3, 1), (8, 4, 2), (16, 8, 2),
                                                       (64, 8, 2)])
def test_plan_shares_the_cores_out(monkeypatch, cores, compress, tracebacks):
    monkeypatch.setattr(resources, "available_cores", lambda: (cores, "CPU affinity"))
    plan = plan_run()
    assert (plan.cores, plan.source, plan.read, plan.kernel, plan.traceback) == (cores, "CPU affinity", cores, cores, cores)
    assert plan.encode == max(1, cores // 4)
    assert plan.compress == compress
    assert plan.tracebacks == tracebacks
    assert plan.threaded == (cores > 1)


def test_threads_given_override_the_machine(monkeypatch):
    monkeypatch.setattr(resources, "available_cores", lambda: (64, "CPU affinity"))
    plan = plan_run(3)
    assert (plan.cores, plan.source, plan.encode, plan.compress) == (3, "--threads", 3, 1)
    share = plan_run(8, source="Dask worker's share")
    assert (share.source, share.cores, share.encode) == ("Dask worker's share", 8, 2)  # a share is not a count given
    assert not plan_run(1).threaded
    with pytest.raises(ValueError, match="at least 1"):
        plan_run(0)


def test_the_json_summary_reports_the_plan(tmp_path):
    from bpbc.pipeline import ScreenSettings, screen_files

    data = os.path.join(os.path.dirname(__file__), "..", "data")
    summary_path = tmp_path / "summary.json"
    screen_files(os.path.join(data, "reads.fq"), os.path.join(data, "patterns.fa"),
                 ScreenSettings(threshold=30, device="cpu", threads=2), output=tmp_path / "hits.paf",
                 json_path=summary_path)
    plan = json.loads(summary_path.read_text())["plan"]
    assert plan == plan_run(2).as_dict()
    assert plan["cores"] == 2 and plan["source"] == "--threads"
