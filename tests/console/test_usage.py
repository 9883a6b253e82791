"""The console's usage page and exports, from known day rows (added by agents.usage's flush):
the charts and the table by agent show the last 30 days and nothing older, the limits in
effect with 0 as unlimited, the exports (CSV and JSON) the range asked for and a clear 400 for
a range they do not take; who may see what (members look, owners and operators export, another
tenant's people get 404)."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from agents import usage
from agents.models import Plan
from console import charts

pytestmark = pytest.mark.django_db


@pytest.fixture
def counted(world, make_agent):
    """Tenant A's usage: alpha today and five days ago, `quiet` never, alpha 40 days ago
    (outside the page's 30 days); B's beta today."""
    today = usage.today()
    a = world["a"]
    quiet = make_agent(a, "quiet")
    meter = usage.Meter(background=False)
    alpha = world["agent_a"]
    meter.count(
        a.pk,
        alpha.pk,
        {"requests": 7, "runs": 5, "run_seconds": 12.5, "tokens_in": 300, "tokens_out": 120},
        today,
    )
    meter.count(a.pk, alpha.pk, {"push_deliveries": 2, "refused_rate": 3}, today)
    meter.count(
        a.pk, alpha.pk, {"requests": 2, "runs": 1, "run_seconds": 0.5}, today - timedelta(5)
    )
    meter.count(a.pk, alpha.pk, {"requests": 1000, "runs": 900}, today - timedelta(40))
    beta = world["agent_b"]
    meter.count(world["b"].pk, beta.pk, {"requests": 55, "runs": 44}, today)
    assert meter.flush()
    return {**world, "quiet": quiet, "today": today}


def cell(body: str, agent: str, name: str) -> str:
    """The table's value (data-value) of `name` in the row of `agent` ("" for the totals)."""
    row = re.search(rf'<tr[^>]*data-agent="{agent}">(.*?)</tr>', body, re.S)
    assert row is not None, agent
    value = re.search(rf'data-stat="{name}" data-value="([^"]*)"', row.group(1))
    assert value is not None, name
    return value.group(1)


def limit(body: str, name: str, stat: str) -> str:
    row = re.search(rf'<tr data-limit="{name}">(.*?)</tr>', body, re.S)
    assert row is not None, name
    value = re.search(rf'data-stat="{stat}"[^>]*>(.*?)</td>', row.group(1), re.S)
    assert value is not None, stat
    return re.sub(r"<[^>]+>", "", value.group(1)).strip()


def page(client, url: str, **query: str) -> str:
    response = client.get(url, query)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# --- the page ------------------------------------------------------------------------------


def test_the_page_shows_the_last_30_days_by_day_and_by_agent(client, counted):
    client.force_login(counted["member_a"])  # members look
    body = page(client, reverse("console:usage", args=[counted["a"].slug]))
    assert cell(body, "alpha", "requests") == "9"
    assert cell(body, "alpha", "runs") == "6"
    assert cell(body, "alpha", "run_seconds") == "13.0"
    assert cell(body, "alpha", "tokens_in") == "300"
    assert cell(body, "alpha", "tokens_out") == "120"
    assert cell(body, "alpha", "push_deliveries") == "2"
    assert cell(body, "alpha", "refused_rate") == "3"
    assert cell(body, "quiet", "runs") == "0"  # every agent, used or not
    assert cell(body, "", "runs") == "6"  # all agents: the 900 runs of 40 days ago are not in
    # the charts: five, one per counter group, 30 daily buckets, today the last
    assert body.count("<svg") == 5
    bars = re.findall(
        r'<rect [^>]*data-series="runs" data-bucket="(\d+)" data-value="([^"]+)"', body
    )
    assert len(bars) == 30
    assert bars[29] == ("29", "5") and bars[24] == ("24", "1")
    assert sum(float(v) for _, v in bars) == 6
    tokens = re.findall(
        r'<circle [^>]*data-series="(in|out)" data-bucket="29" data-value="(\d+)"', body
    )
    assert sorted(tokens) == [("in", "300"), ("out", "120")]
    assert "<script" not in body.split("<main>")[1]  # server-drawn
    # B's numbers are not on A's page; members get no export links
    assert counted["b"].slug not in body and "beta" not in body
    assert "export-csv" not in body


def test_the_limits_in_effect_with_0_as_unlimited_and_the_quotas_used(client, counted):
    a = counted["a"]
    a.plan = Plan.objects.create(name="team", runs_per_day=100, request_burst=20, weight=3)
    a.limits = {"request_burst": 0, "runs_per_month": 2000}  # the tenant's own, over the plan's
    a.save()
    client.force_login(counted["owner_a"])
    body = page(client, reverse("console:usage", args=[a.slug]))
    assert re.search(r'id="plan">team<', body) and re.search(r'id="weight">3<', body)
    assert limit(body, "runs_per_day", "value") == "100 runs"
    assert limit(body, "runs_per_month", "value") == "2,000 runs"
    assert limit(body, "request_burst", "value") == "unlimited"
    assert limit(body, "running_runs", "value") == "unlimited"
    assert limit(body, "runs_per_day", "used") == "5"  # today's
    assert limit(body, "runs_per_month", "used") == str(5 + (1 if counted["today"].day > 5 else 0))
    assert limit(body, "running_runs", "used") == "–"


def test_without_a_plan_the_default_plan_is_named(client, counted, settings):
    settings.A2A_DEFAULT_PLAN = "starter"
    Plan.objects.create(name="starter", running_runs=4)
    client.force_login(counted["owner_a"])
    body = page(client, reverse("console:usage", args=[counted["a"].slug]))
    assert re.search(r'id="plan">starter \(the default plan\)<', body)
    assert limit(body, "running_runs", "value") == "4 runs"


def test_the_menus_page_shows_the_first_tenant_or_the_one_chosen(client, counted):
    url = reverse("console:usage-index")
    client.force_login(counted["owner_a"])
    body = page(client, url)
    assert f'<small class="mono">{counted["a"].slug}</small>' in body
    assert 'href="/console/usage/"' in body  # the menu links it
    client.force_login(counted["operator"])  # sees every tenant: chooses one
    body = page(client, url, tenant=counted["b"].slug)
    assert cell(body, "beta", "runs") == "44"
    assert f'<option value="{counted["a"].slug}"' in body
    client.force_login(counted["owner_b"])
    assert client.get(url, {"tenant": counted["a"].slug}).status_code == 404


def test_a_person_of_no_tenant_sees_a_page_saying_so(client, django_user_model):
    client.force_login(django_user_model.objects.create(username="nobody"))
    assert "no usage to show" in page(client, reverse("console:usage-index"))


# --- exports -------------------------------------------------------------------------------


def export(client, tenant: str, kind: str, **query: str):
    return client.get(reverse(f"console:usage-{kind}", args=[tenant]), query)


def test_the_csv_export_has_a_row_per_agent_and_day_in_the_range(client, counted):
    today, a = counted["today"], counted["a"].slug
    client.force_login(counted["owner_a"])
    body = page(client, reverse("console:usage", args=[a]))
    assert "export-csv" in body and "export-json" in body
    response = export(client, a, "csv", **{"from": str(today - timedelta(6)), "to": str(today)})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="usage-{a}-{today - timedelta(6)}-{today}.csv"'
    )
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["tenant"], r["day"], r["agent"]) for r in rows] == [
        (a, str(today - timedelta(5)), "alpha"),
        (a, str(today), "alpha"),
    ]
    assert rows[1]["requests"] == "7" and rows[1]["run_seconds"] == "12.5"
    assert rows[1]["tokens_in"] == "300" and rows[1]["refused_rate"] == "3"
    assert list(rows[0]) == ["tenant", "day", "agent", *usage.COUNTERS]


def test_the_json_export_has_the_rows_and_their_totals(client, counted):
    today, a = counted["today"], counted["a"].slug
    client.force_login(counted["operator"])  # any tenant
    since = today - timedelta(40)
    answer = export(client, a, "json", **{"from": str(since)}).json()  # `to`: today
    assert (answer["tenant"], answer["from"], answer["to"]) == (a, str(since), str(today))
    assert [(r["day"], r["agent"], r["runs"]) for r in answer["rows"]] == [
        (str(since), "alpha", 900),
        (str(today - timedelta(5)), "alpha", 1),
        (str(today), "alpha", 5),
    ]
    assert answer["totals"]["requests"] == 1009 and answer["totals"]["run_seconds"] == 13.0
    default = export(client, a, "json").json()  # the last 30 days
    assert default["from"] == str(today - timedelta(29)) and len(default["rows"]) == 2


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"from": "2026-02-01", "to": "2026-01-01"}, "'from' (2026-02-01) is after 'to'"),
        ({"from": "2025-01-01", "to": "2026-01-02"}, "is 367 days; an export covers at most 366"),
        ({"from": "2026-1-1"}, "'from' must be a date as YYYY-MM-DD"),
        ({"to": "20260101"}, "'to' must be a date as YYYY-MM-DD"),
        ({"to": "2026-02-30"}, "'to' '2026-02-30' is not a day of the calendar"),
    ],
)
def test_a_range_the_export_does_not_take_is_a_clear_400(client, counted, query, says):
    client.force_login(counted["owner_a"])
    a = counted["a"].slug
    as_csv = export(client, a, "csv", **query)
    assert as_csv.status_code == 400 and says in as_csv.content.decode()
    as_json = export(client, a, "json", **query)
    assert as_json.status_code == 400 and says in as_json.json()["error"]


def test_a_year_leap_day_included_is_taken(client, counted):
    client.force_login(counted["owner_a"])
    response = export(
        client, counted["a"].slug, "json", **{"from": "2024-01-01", "to": "2024-12-31"}
    )
    assert response.status_code == 200


def test_exports_are_for_owners_and_operators_of_the_tenant(client, counted):
    a = counted["a"].slug
    client.force_login(counted["member_a"])
    assert export(client, a, "csv").status_code == 403
    assert export(client, a, "json").status_code == 403
    client.force_login(counted["owner_b"])
    for kind in ("csv", "json"):
        assert export(client, a, kind).status_code == 404
        # 404 before the range is looked at: a bad range tells nothing either
        assert export(client, a, kind, **{"from": "x"}).status_code == 404
    assert client.get(reverse("console:usage", args=[a])).status_code == 404
    client.logout()
    assert export(client, a, "csv").status_code == 302  # to the login page


def test_a_line_chart_of_counts_has_whole_ticks():
    """One call in 30 days: the axis reads 0 and 1, not 0, 0, 0, 1, 1 (quarters rounded)."""
    svg = charts.line_chart(
        title="A2A calls per day",
        x_labels=["a", "b"],
        series=[charts.Series("requests", [0, 1])],
        y_label="calls",
    )
    ticks = re.findall(r'<text class="tick" x="\d+" y="[\d.]+" text-anchor="end">([^<]*)<', svg)
    assert ticks == ["0", "1"]
