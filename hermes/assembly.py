"""The agent as every entry point needs it: the turn engine with the extraction worker attached,
and the cron store and runner of a home.

`hermes ask`, `hermes chat`, `hermes cron run` and the daemon all build their agent here, so a
fact said in any of them is learned the same way; the cron parts are built from the settings
here, so that hermes.cron knows nothing of the Runtime.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hermes.agent.turn import Agent
    from hermes.cron.runner import CronRunner, Deliverer, Placer
    from hermes.cron.store import CronStore
    from hermes.learn.worker import ExtractionWorker
    from hermes.memory import Memory
    from hermes.runtime import Runtime

log = logging.getLogger(__name__)


def build_agent(rt: Runtime, *, exits_after: bool = False
                ) -> tuple[Agent, ExtractionWorker | None]:
    """The agent, and the extraction worker attached to it when extraction is enabled.

    ``exits_after``: the process ends once the person is answered (`hermes ask`, `hermes chat`).
    Background work (extraction, summaries) then tries its model once, without backoff: a
    provider that is down costs one attempt, recorded for the daemon to retry, not seconds of
    retries before the process may exit. The reply itself keeps its retries."""
    from hermes.agent.llm import LLM
    from hermes.agent.turn import Agent
    from hermes.learn.worker import ExtractionWorker, extraction_model_name

    if exits_after:
        once = rt.settings.model.model_copy(update={"retries": 0})
        env_file = rt.settings.home_path / ".env"
        background = LLM(once, model_name=rt.settings.model.background or rt.settings.model.name,
                         env_file=env_file)
        agent = Agent(rt.memory, background_llm=background)
        worker = ExtractionWorker(rt.memory, llm=LLM(once, model_name=extraction_model_name(
            rt.settings), env_file=env_file) if rt.settings.extraction.model else None)
    else:
        agent = Agent(rt.memory)
        worker = ExtractionWorker(rt.memory)
    if not worker.enabled:
        log.info("fact extraction is off (extraction.enabled, or no model configured)")
        return agent, None
    worker.attach(agent)
    return agent, worker


def cron_store(memory: Memory) -> CronStore:
    """The home's cron jobs and runs, in its time zone, with its default user."""
    from hermes.cron.store import CronStore

    settings = memory.settings
    return CronStore(memory.db, timezone=settings.cron.timezone, home=settings.home_path,
                     clock=memory.clock, default_user=settings.users.default)


def cron_runner(memory: Memory, agent: Agent,
                deliverers: dict[str, Deliverer] | None = None,
                placers: dict[str, Placer] | None = None) -> CronRunner:
    """The cron runner of the home: each job's prompt through ``agent``, in a new ``cron``
    session of the job's user held where its reply will be read (``placers``: who reads a
    front-end's deliveries, shared and filled as front-ends start); replies go to
    ``deliverers`` (likewise) and the runner's own (file, terminal)."""
    from datetime import timedelta

    from hermes.cron.runner import CronRunner, agent_prompt_runner

    return CronRunner(cron_store(memory),
                      agent_prompt_runner(memory.sessions, agent,
                                          {} if placers is None else placers),
                      grace=timedelta(minutes=memory.settings.cron.grace_minutes),
                      deliverers=deliverers)
