"""Cron jobs: schedules, the store, and running each fire time at most once (controlled clock)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from hermes.assembly import cron_store
from hermes.clock import FakeClock, parse_ts, to_ts
from hermes.config import CronJobConfig, load_settings
from hermes.cron.runner import CronRunner, RunOutcome
from hermes.cron.schedule import ScheduleError, parse_schedule, plan_runs
from hermes.cron.store import CronJob
from hermes.errors import ConfigError, NotFound
from hermes.runtime import Runtime


def at(text: str) -> datetime:
    return parse_ts(text)


class ScriptedPrompt:
    """Stands in for the turn engine: records each job run and replies from a queue."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.calls: list[str] = []

    async def __call__(self, job: CronJob) -> RunOutcome:
        self.calls.append(job.name)
        text = self.replies.pop(0) if self.replies else f"digest for {job.user}"
        return RunOutcome(text=text, session_id=None)


@pytest.fixture
def store(rt):
    return cron_store(rt.memory)


def runner_for(rt, prompt, **kw) -> CronRunner:
    return CronRunner(cron_store(rt.memory), prompt,
                      grace=timedelta(minutes=rt.settings.cron.grace_minutes), **kw)


# --------------------------------------------------------------------------- schedules
def test_cron_expression_uses_crontab_weekdays_and_time_zone():
    trigger = parse_schedule("0 8 * * 0", "Europe/Berlin")       # crontab: Sunday
    fire = trigger.get_next_fire_time(None, at("2026-11-30T00:00:00Z"))   # a Monday
    assert fire.strftime("%a %H:%M") == "Sun 08:00"
    assert fire.astimezone(UTC).hour == 7                          # Berlin is UTC+1 in winter
    weekdays = parse_schedule("30 9 * * 1-5", "UTC")
    assert weekdays.get_next_fire_time(None, at("2026-11-28T12:00:00Z")).strftime("%a") == "Mon"


def test_day_of_month_and_weekday_both_set_fire_on_either_like_crontab():
    trigger = parse_schedule("0 9 1 * 1", "UTC")     # the 1st of each month, and every Monday
    fire, days = None, []
    now = at("2026-11-29T12:00:00Z")                  # a Sunday
    for _ in range(8):
        fire = trigger.get_next_fire_time(fire, fire or now)
        days.append(fire.strftime("%a %d %b %H:%M"))
    assert days == ["Mon 30 Nov 09:00", "Tue 01 Dec 09:00", "Mon 07 Dec 09:00",
                    "Mon 14 Dec 09:00", "Mon 21 Dec 09:00", "Mon 28 Dec 09:00",
                    "Fri 01 Jan 09:00", "Mon 04 Jan 09:00"]
    # Only one restricted: the other "*" does not widen it (crontab semantics too).
    assert parse_schedule("0 9 1 * *", "UTC").get_next_fire_time(None, now).day == 1


def test_interval_counts_from_the_anchor():
    anchor = at("2026-11-29T12:00:00Z")
    trigger = parse_schedule("every 30m", "UTC", anchor=anchor)
    assert trigger.get_next_fire_time(None, anchor) == anchor + timedelta(minutes=30)
    assert parse_schedule("every 6 hours", "UTC", anchor=anchor).get_next_fire_time(
        None, anchor) == anchor + timedelta(hours=6)


@pytest.mark.parametrize("bad", ["every", "every 0m", "every 5 fortnights", "0 8 * *",
                                 "61 * * * *", "tomorrow at 8", "every 367d",
                                 "every 1000000000d", "every 99999999999999999999h"])
def test_bad_schedules_say_what_to_write(bad):
    with pytest.raises(ScheduleError, match="cron expression|interval|positive"):
        parse_schedule(bad, "UTC")


def test_unknown_time_zone_is_a_config_error():
    with pytest.raises(ConfigError, match="cron.timezone"):
        parse_schedule("0 8 * * *", "Mars/Olympus")


def test_plan_runs_latest_in_grace_once_and_records_older_as_missed():
    trigger = parse_schedule("0 * * * *", "UTC")                  # hourly
    plan = plan_runs(trigger, now=at("2026-11-29T09:10:00Z"), last_fire=at("2026-11-29T05:00:00Z"),
                     created_at=at("2026-11-01T00:00:00Z"), grace=timedelta(minutes=90))
    assert plan.missed == [at(f"2026-11-29T0{h}:00:00Z") for h in (6, 7)]
    assert plan.folded == [at("2026-11-29T08:00:00Z")]
    assert plan.due == at("2026-11-29T09:00:00Z")
    nothing = plan_runs(trigger, now=at("2026-11-29T09:59:00Z"),
                        last_fire=at("2026-11-29T09:00:00Z"),
                        created_at=at("2026-11-01T00:00:00Z"), grace=timedelta(minutes=90))
    assert nothing.due is None and nothing.missed == [] and nothing.folded == []


def test_plan_after_a_long_outage_caps_the_missed_records():
    trigger = parse_schedule("* * * * *", "UTC")
    plan = plan_runs(trigger, now=at("2026-11-30T00:00:30Z"), last_fire=at("2026-11-29T00:00:00Z"),
                     created_at=at("2026-11-01T00:00:00Z"), grace=timedelta(minutes=5))
    assert len(plan.missed) == 100 and plan.uncounted
    assert plan.due == at("2026-11-30T00:00:00Z")


def test_a_set_hour_runs_once_when_the_clocks_go_back_an_hourly_job_twice():
    # (Fire times in an ambiguous local hour never compare == across zones (PEP 495): compare
    # them in UTC.)
    def utc(fires):
        return [f.astimezone(UTC) for f in fires]

    created = at("2026-10-01T00:00:00Z")
    daily = parse_schedule("30 1 * * *", "America/New_York")
    first = plan_runs(daily, now=at("2026-11-01T05:30:10Z"), last_fire=None,
                      created_at=at("2026-10-31T12:00:00Z"), grace=timedelta(minutes=5))
    assert utc([first.due]) == [at("2026-11-01T05:30:00Z")]              # 01:30 EDT
    again = plan_runs(daily, now=at("2026-11-01T06:30:10Z"), last_fire=first.due,
                      created_at=created, grace=timedelta(minutes=5))
    assert again.due is None and again.missed == []                      # 01:30 EST: not twice
    after_outage = plan_runs(daily, now=at("2026-11-03T12:00:00Z"), last_fire=first.due,
                             created_at=created, grace=timedelta(minutes=5))
    assert utc(after_outage.missed) == [at("2026-11-02T06:30:00Z"), at("2026-11-03T06:30:00Z")]
    hourly = parse_schedule("30 * * * *", "America/New_York")
    second = plan_runs(hourly, now=at("2026-11-01T06:30:10Z"),
                       last_fire=at("2026-11-01T05:30:00Z"), created_at=created,
                       grace=timedelta(minutes=5))
    assert utc([second.due]) == [at("2026-11-01T06:30:00Z")]             # a real hour later


# --------------------------------------------------------------------------- the store
def test_add_list_pause_resume_remove(store):
    job = store.add("digest", "owner", "0 8 * * *", "Summarise yesterday", "file:digests/d.md")
    assert (job.name, job.enabled, job.origin) == ("digest", True, "cli")
    assert store.set_enabled("digest", False).enabled is False
    assert store.list_jobs(enabled_only=True) == []
    assert store.set_enabled("digest", True).enabled is True
    store.remove("digest")
    assert store.list_jobs() == []
    with pytest.raises(NotFound):
        store.remove("digest")


def test_add_refuses_bad_input_and_changes_nothing(store, rt):
    store.add("a", "owner", "every 1h", "ping")
    with pytest.raises(ScheduleError, match="owner already has a cron job named .a."):
        store.add("a", "owner", "every 2h", "pong")
    with pytest.raises(ScheduleError, match="'..' is not allowed"):
        store.add("b", "owner", "every 1h", "p", "file:../../etc/passwd")
    with pytest.raises(ScheduleError, match="discord:<channel id>"):
        store.add("c", "owner", "every 1h", "p", "discord:general")
    with pytest.raises(ScheduleError):
        store.add("d", "owner", "every other day", "p")
    assert [(j.name, j.schedule, j.prompt) for j in store.list_jobs()] == [
        ("a", "every 1h", "ping")]


def test_a_job_is_only_found_for_its_own_user(store):
    store.add("alice-digest", "alice", "every 1h", "p")
    assert store.get("alice-digest", user="alice").user == "alice"
    with pytest.raises(NotFound):
        store.get("alice-digest", user="bob")
    assert store.list_jobs(user="bob") == []


def test_config_jobs_are_synced_and_a_pause_survives(store):
    jobs = [CronJobConfig(name="digest", schedule="0 8 * * *", prompt="Summarise",
                          deliver="discord:123")]
    store.sync_config(jobs)
    store.set_enabled("digest", False)
    jobs[0].prompt = "Summarise yesterday"
    store.sync_config(jobs)
    job = store.get("digest")
    assert (job.origin, job.prompt, job.enabled) == ("config", "Summarise yesterday", False)
    with pytest.raises(ScheduleError, match="config.yaml"):
        store.remove("digest")
    store.sync_config([])
    assert store.list_jobs() == []


def test_config_jobs_follow_a_changed_enabled_and_default_to_the_default_user(rt):
    rt.settings.users.default = "alice"
    store = cron_store(rt.memory)
    jobs = [CronJobConfig(name="digest", schedule="0 8 * * *", prompt="Summarise",
                          enabled=False),
            CronJobConfig(name="bobs", user="bob", schedule="0 9 * * *", prompt="Hi")]
    store.sync_config(jobs)
    assert store.get("digest").user == "alice"                 # not the literal "owner"
    assert store.get("bobs").user == "bob"
    assert store.get("digest").enabled is False
    jobs[0].enabled = True                                     # turned back on in the config
    store.sync_config(jobs)
    assert store.get("digest").enabled is True
    store.set_enabled("digest", False)                         # a CLI pause still survives
    store.sync_config(jobs)
    assert store.get("digest").enabled is False


def test_config_job_clashing_with_a_cli_job_is_an_error(store):
    store.add("digest", "owner", "every 1h", "mine")
    with pytest.raises(ConfigError, match="rename"):
        store.sync_config([CronJobConfig(name="digest", schedule="every 2h", prompt="x")])
    assert store.get("digest").prompt == "mine"


# --------------------------------------------------------------------------- running
async def test_a_fire_time_runs_once_and_is_recorded(rt, clock, store, hermes_home):
    job = store.add("digest", "owner", "0 13 * * *", "Summarise", "file:out/digest.md")
    prompt = ScriptedPrompt("Yesterday: shipped the cron store.")
    runner = runner_for(rt, prompt)
    assert await runner.tick(job.id) is None                       # 12:00: nothing due yet
    clock.set("2026-11-29T13:00:02Z")
    run = await runner.tick(job.id)
    assert (run.status, run.output, run.scheduled_for) == (
        "ok", "Yesterday: shipped the cron store.", to_ts(at("2026-11-29T13:00:00Z")))
    assert await runner.tick(job.id) is None                       # same fire time: not again
    assert prompt.calls == ["digest"]
    written = (hermes_home / "outbox" / "out" / "digest.md").read_text()
    assert "## digest" in written and "shipped the cron store" in written


async def test_silent_reply_delivers_nothing(rt, clock, store, hermes_home):
    job = store.add("quiet", "owner", "every 30m", "Anything new?", "file:quiet.md")
    runner = runner_for(rt, ScriptedPrompt("[SILENT]"))
    clock.advance(minutes=30)
    run = await runner.tick(job.id)
    assert run.status == "silent"
    assert not (hermes_home / "outbox" / "quiet.md").exists()


async def test_missed_within_grace_runs_once_at_start_older_recorded_missed(rt, clock, store):
    store.add("hourly", "owner", "0 * * * *", "Check in")      # created 12:00
    prompt = ScriptedPrompt()
    # The daemon was down from 12:00 until 16:20; grace is 60 minutes (the default).
    clock.set("2026-11-29T16:20:00Z")
    done = await runner_for(rt, prompt).catch_up()
    assert [r.scheduled_for for r in done] == [to_ts(at("2026-11-29T16:00:00Z"))]
    history = {r.scheduled_for[11:16]: r.status for r in store.runs(name="hourly")}
    assert history == {"13:00": "missed", "14:00": "missed", "15:00": "missed", "16:00": "ok"}
    assert prompt.calls == ["hourly"]


async def test_outside_grace_nothing_runs_everything_recorded(rt, clock, store):
    job = store.add("daily", "owner", "0 13 * * *", "Digest")
    clock.set("2026-11-29T15:00:00Z")                               # 2 h late, grace 60 min
    prompt = ScriptedPrompt()
    assert await runner_for(rt, prompt).catch_up() == []
    (run,) = store.runs(name="daily")
    assert run.status == "missed" and "grace window" in run.output
    assert prompt.calls == [] and store.last_scheduled(job.id) == at("2026-11-29T13:00:00Z")


async def test_at_most_once_across_a_restart(settings, clock, tmp_path):
    first = Runtime(settings, clock=clock)
    job = cron_store(first.memory).add("digest", "owner", "0 13 * * *", "Digest")
    clock.set("2026-11-29T13:00:01Z")
    prompt = ScriptedPrompt()
    assert len(await runner_for(first, prompt).catch_up()) == 1
    first.close()

    clock.set("2026-11-29T13:20:00Z")                              # restarted inside the grace
    second = Runtime(load_settings(), clock=clock)
    assert await runner_for(second, prompt).catch_up() == []
    clock.set("2026-11-30T13:00:00Z")
    assert (await runner_for(second, prompt).tick(job.id)).status == "ok"
    assert prompt.calls == ["digest", "digest"]
    second.close()


async def test_two_processes_claiming_one_fire_time_run_it_once(settings, clock):
    # Two daemons (two connections) reach the same fire time: the run row is the claim, and the
    # one whose INSERT was ignored must not run the job (lastrowid alone would still be set).
    first, second = Runtime(settings, clock=clock), Runtime(load_settings(), clock=clock)
    job = cron_store(first.memory).add("digest", "owner", "0 13 * * *", "Digest")
    clock.set("2026-11-29T13:00:00Z")
    fire = at("2026-11-29T13:00:00Z")
    prompt = ScriptedPrompt()
    assert (await runner_for(first, prompt).execute(job, fire)).status == "ok"
    assert await runner_for(second, prompt).execute(job, fire) is None
    assert cron_store(second.memory).claim(job.id, fire) is None
    assert prompt.calls == ["digest"]
    assert [r.status for r in cron_store(second.memory).runs(name="digest")] == ["ok"]
    first.close()
    second.close()


async def test_a_run_interrupted_by_a_crash_is_failed_not_repeated(rt, clock, store):
    job = store.add("digest", "owner", "0 13 * * *", "Digest")
    clock.set("2026-11-29T13:00:00Z")
    assert store.claim(job.id, at("2026-11-29T13:00:00Z")) is not None   # then the process died
    prompt = ScriptedPrompt()
    assert await runner_for(rt, prompt).catch_up() == []
    (run,) = store.runs(name="digest")
    assert run.status == "failed" and "interrupted" in run.output
    assert prompt.calls == []


async def test_two_ticks_racing_for_one_fire_time_run_it_once(rt, clock, store):
    job = store.add("digest", "owner", "0 13 * * *", "Digest")
    clock.set("2026-11-29T13:00:00Z")
    gate = asyncio.Event()
    calls = []

    async def slow(job: CronJob) -> RunOutcome:
        calls.append(job.name)
        await gate.wait()
        return RunOutcome("done")

    runner = runner_for(rt, slow)
    first = asyncio.create_task(runner.tick(job.id))
    await asyncio.sleep(0)
    assert await runner.tick(job.id) is None
    gate.set()
    assert (await first).status == "ok" and calls == ["digest"]


async def test_failures_are_recorded_not_raised(rt, clock, store):
    job = store.add("broken", "owner", "every 30m", "x", "discord:42")

    async def boom(job: CronJob) -> RunOutcome:
        raise RuntimeError("model exploded")

    clock.advance(minutes=30)
    run = await runner_for(rt, boom).tick(job.id)
    assert run.status == "failed" and "model exploded" in run.output
    # Discord delivery without the bot: the reply is kept in the run, the failure says why.
    clock.advance(minutes=30)
    run = await runner_for(rt, ScriptedPrompt("the digest")).tick(job.id)
    assert run.status == "failed" and run.output.startswith("the digest")
    assert "Discord delivery needs `hermes run`" in run.output


async def test_manual_run_does_not_shift_the_schedule(rt, clock, store):
    job = store.add("every6", "owner", "every 6h", "x")              # fires 18:00, 00:00, ...
    runner = runner_for(rt, ScriptedPrompt())
    clock.set("2026-11-29T13:30:00Z")
    manual = await runner.run_now("every6")
    assert manual.kind == "manual" and manual.status == "ok"
    assert store.last_scheduled(job.id) is None
    clock.set("2026-11-29T18:00:00Z")
    assert (await runner.tick(job.id)).scheduled_for == to_ts(at("2026-11-29T18:00:00Z"))


async def test_paused_jobs_do_not_run_not_even_after_resuming(rt, clock, store):
    job = store.add("p", "owner", "every 30m", "x")                 # fires 12:30, 13:00, ...
    store.set_enabled("p", False)
    clock.advance(minutes=70)                                       # 13:10
    prompt = ScriptedPrompt()
    runner = runner_for(rt, prompt)
    assert await runner.tick(job.id) is None and prompt.calls == []
    store.set_enabled("p", True)
    assert await runner.tick(job.id) is None and prompt.calls == []   # 12:30, 13:00 skipped
    assert {r.output for r in store.runs(name="p")} == {"skipped: the job was paused"}
    clock.advance(minutes=20)                                       # 13:30
    assert (await runner.tick(job.id)).status == "ok" and prompt.calls == ["p"]


async def test_scheduler_gets_one_trigger_per_enabled_job():
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    settings = load_settings()
    rt = Runtime(settings, clock=FakeClock())
    store = cron_store(rt.memory)
    store.add("a", "owner", "0 8 * * *", "x")
    store.add("b", "owner", "every 30m", "y")
    runner = runner_for(rt, ScriptedPrompt())
    scheduler = AsyncIOScheduler(timezone=UTC)
    scheduler.start(paused=True)
    try:
        runner.schedule_all(scheduler)
        assert sorted(j.name for j in scheduler.get_jobs()) == ["cron a", "cron b"]
        store.set_enabled("a", False)
        runner.schedule_all(scheduler)
        (left,) = scheduler.get_jobs()
        assert left.name == "cron b"
        expected = parse_ts(store.get("b").created_at) + timedelta(minutes=30)
        assert left.trigger.get_next_fire_time(None, expected - timedelta(seconds=1)) == expected
    finally:
        scheduler.shutdown(wait=False)
        rt.close()


# --------------------------------------------------------------------------- the command line
def test_cli_add_list_pause_resume_remove(cli):
    added = cli("cron", "add", "digest", "0 8 * * *", "Summarise yesterday", "--deliver",
                "file:digest.md", "--json")
    assert added.exit_code == 0 and added.json()["next_run"].endswith("T08:00:00.000000Z")
    listed = cli("cron", "list", "--json").json()
    assert [(j["name"], j["enabled"], j["deliver"]) for j in listed] == [
        ("digest", True, "file:digest.md")]
    assert cli("cron", "pause", "digest").stdout == "Paused cron job 'digest'.\n"
    assert cli("cron", "list", "--json").json()[0]["next_run"] is None
    assert cli("cron", "resume", "digest").stdout.endswith(" 08:00 UTC.\n")
    assert cli("cron", "list", "--user", "bob", "--json").json() == []
    assert cli("cron", "remove", "digest").exit_code == 0
    assert "No cron jobs" in cli("cron", "list").stdout
    cli("cron", "add", "ping", "every 30m", "ping", "--paused")
    assert cli("cron", "list").stdout.splitlines() == [
        "ping  (owner, paused, cli)  'every 30m' -> terminal", "    next: -   last: -"]


def test_cli_bad_input_is_one_line_and_nothing_changes(cli):
    bad = cli("cron", "add", "x", "every fortnight", "p")
    assert bad.exit_code == 1 and "every 30m" in bad.stderr and bad.stderr.count("\n") == 1
    assert cli("cron", "remove", "nope").exit_code == 1
    assert cli("cron", "list", "--json").json() == []


def test_cli_lists_config_jobs(cli, config_file):
    config_file.write_text(
        "cron:\n  timezone: Europe/Berlin\n  jobs:\n"
        "    - name: daily-digest\n      schedule: '0 8 * * *'\n"
        "      prompt: Summarise yesterday\n      deliver: 'discord:123456789012345678'\n")
    (job,) = cli("cron", "list", "--json").json()
    assert (job["name"], job["origin"]) == ("daily-digest", "config")
    assert job["next_run"][10:] in {"T07:00:00.000000Z", "T06:00:00.000000Z"}   # Berlin, DST
    assert "config.yaml" in cli("cron", "remove", "daily-digest").stderr


def test_cli_run_goes_through_the_turn_engine_as_a_cron_session(cli, fake_model, hermes_home,
                                                                clock):
    cli("cron", "add", "digest", "0 8 * * *", "Summarise yesterday", "-d", "file:d.md")
    fake_model.reply("Yesterday you planned the move.").reply("[SILENT]")
    ran = cli("cron", "run", "digest", "--json")
    assert ran.exit_code == 0, ran.stderr
    run = ran.json()
    assert (run["status"], run["kind"], run["output"]) == (
        "ok", "manual", "Yesterday you planned the move.")
    assert "Summarise yesterday" in fake_model.requests[0].messages[-1]["content"]
    assert "planned the move" in (hermes_home / "outbox" / "d.md").read_text()
    sessions = cli("sessions", "list", "--json").json()
    assert [s["source"] for s in sessions] == ["cron"]
    clock.advance(minutes=1)     # a manual run's fire time is "now": two in one instant are one
    silent = cli("cron", "run", "digest", "--json").json()
    assert silent["status"] == "silent"
    assert (hermes_home / "outbox" / "d.md").read_text().count("##") == 1      # nothing delivered
    assert [r["status"] for r in cli("cron", "runs", "digest", "--json").json()] == [
        "silent", "ok"]


def test_cli_run_without_a_model_fails_and_records_it(cli):
    cli("cron", "add", "digest", "every 1h", "Summarise", "-d", "file:d.md")
    ran = cli("cron", "run", "digest")
    assert ran.exit_code == 1
    (run,) = cli("cron", "runs", "--json").json()
    assert run["status"] == "failed" and "HERMES_MODEL__NAME" in run["output"]


@pytest.mark.parametrize("target,why", [
    ("file:context/bob.md", None),          # lands in outbox/context/bob.md, not bob's context
    ("file:.env", None),                    # outbox/.env, not the .env loaded at start
    ("file:../.env", "'..' is not allowed"),
    ("file:digests/../../context/bob.md", "'..' is not allowed"),
    ("file:/etc/cron.d/evil", "must be under the outbox"),
    ("file:link/escape.md", "must be under the outbox"),
])
def test_file_deliveries_stay_in_the_outbox(store, rt, hermes_home, tmp_path, target, why):
    outside = tmp_path / "outside"
    outside.mkdir()
    (hermes_home / "outbox").mkdir(parents=True, exist_ok=True)
    (hermes_home / "outbox" / "link").symlink_to(outside)
    if why is not None:
        with pytest.raises(ScheduleError, match=why):
            store.add("j", "alice", "every 1h", "p", target)
        return
    store.add("j", "alice", "every 1h", "p", target)
    from hermes.cron.schedule import file_target

    written = file_target(hermes_home, target.removeprefix("file:"))
    assert written.is_relative_to((hermes_home / "outbox").resolve())


async def test_a_symlink_made_after_the_job_was_added_is_refused_at_delivery(
        rt, store, hermes_home, tmp_path):
    runner = runner_for(rt, lambda *args, **kwargs: None)
    job = store.add("digest", "owner", "every 1h", "Summarise", "file:d/digest.md")
    outside = tmp_path / "outside"
    outside.mkdir()
    (hermes_home / "outbox").mkdir(parents=True, exist_ok=True)
    (hermes_home / "outbox" / "d").symlink_to(outside)
    with pytest.raises(ScheduleError, match="must be under the outbox"):
        await runner.deliver(job, "hello")
    assert list(outside.iterdir()) == []


# --------------------------------------------------------------------------- names per user
def test_cron_job_names_are_per_user(cli):
    assert cli("cron", "add", "digest", "every 1d", "Summarise", "--user", "bob").exit_code == 0
    added = cli("cron", "add", "digest", "every 2d", "Sum up", "--user", "alice")
    assert added.exit_code == 0, added.stderr
    again = cli("cron", "add", "digest", "every 3d", "x", "--user", "alice")
    assert again.exit_code == 1 and "alice already has a cron job named 'digest'" in again.stderr
    ambiguous = cli("cron", "pause", "digest")
    assert ambiguous.exit_code == 1
    assert "several users have a cron job named 'digest' (alice, bob)" in ambiguous.stderr
    assert cli("cron", "pause", "digest", "--user", "alice").exit_code == 0
    jobs = {(j["user"], j["name"]): j for j in cli("cron", "list", "--json").json()}
    assert jobs[("alice", "digest")]["enabled"] is False
    assert jobs[("bob", "digest")]["enabled"] is True
    assert cli("cron", "remove", "digest", "--user", "bob").exit_code == 0
    # One left: the name alone finds it again.
    assert cli("cron", "resume", "digest").exit_code == 0
    assert [(j["user"], j["enabled"]) for j in cli("cron", "list", "--json").json()] == [
        ("alice", True)]


def test_config_jobs_of_two_users_may_share_a_name(cli, config_file):
    config_file.write_text(
        "cron:\n  jobs:\n"
        "    - {name: digest, user: alice, schedule: every 1d, prompt: a}\n"
        "    - {name: digest, user: bob, schedule: every 2d, prompt: b}\n")
    listed = cli("cron", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    assert sorted((j["user"], j["schedule"]) for j in listed.json()) == [
        ("alice", "every 1d"), ("bob", "every 2d")]


def test_the_migration_keeps_every_job_and_run(tmp_path):
    """m015 rebuilds cron_jobs and cron_runs: rows, ids and the cascade survive it."""
    import sqlite_utils
    from sqlite_utils.migrations import Migrations

    from hermes.store.db import migrate
    from hermes.store.migrations import migrations

    db = sqlite_utils.Database(tmp_path / "old.db")
    db.execute("PRAGMA foreign_keys=ON")
    before = Migrations("hermes")
    names = [m.name for m in migrations._migrations]
    before._migrations = migrations._migrations[:names.index("m015_cron_job_names_per_user")]
    before.apply(db)
    db.execute("INSERT INTO cron_jobs (id, name, user, schedule, prompt, deliver, created_at) "
               "VALUES (7, 'digest', 'bob', 'every 1d', 'p', 'terminal', '2026-11-01')")
    db.execute("INSERT INTO cron_runs (id, job_id, scheduled_for, status, kind) VALUES "
               "(3, 7, '2026-11-02', 'ok', 'manual')")
    db.conn.commit()
    migrate(db)
    assert db.execute("SELECT id, name, user FROM cron_jobs").fetchall() == [(7, "digest", "bob")]
    assert db.execute("SELECT id, job_id, status, kind FROM cron_runs").fetchall() == [
        (3, 7, "ok", "manual")]
    assert db.execute("PRAGMA foreign_key_list(cron_runs)").fetchall()[-1][2] == "cron_jobs"
    db.execute("INSERT INTO cron_jobs (name, user, schedule, prompt, deliver, created_at) "
               "VALUES ('digest', 'alice', 'every 1d', 'p', 'terminal', '2026-11-01')")
    db.execute("DELETE FROM cron_jobs WHERE id = 7")
    assert db.execute("SELECT count(*) FROM cron_runs").fetchone()[0] == 0


async def test_a_job_changed_by_hand_into_a_bad_schedule_waits_alone(rt, caplog):
    """schedule_all (every minute) meets a stored schedule it cannot use: that job is not
    scheduled and says so in one line; the others are (review rev4: one bad row turned cron off)."""
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    store = cron_store(rt.memory)
    store.add("a", "owner", "0 8 * * *", "x")
    store.add("b", "owner", "every 30m", "y")
    rt.db.execute("UPDATE cron_jobs SET schedule = 'every fortnight' WHERE name = 'a'")
    rt.db.conn.commit()
    runner = runner_for(rt, ScriptedPrompt())
    scheduler = AsyncIOScheduler(timezone=UTC)
    scheduler.start(paused=True)
    try:
        runner.schedule_all(scheduler)
        assert [j.name for j in scheduler.get_jobs()] == ["cron b"]
        assert "cron job 'a' of owner: schedule 'every fortnight'" in caplog.text
    finally:
        scheduler.shutdown(wait=False)
