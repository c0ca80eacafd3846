"""The agent as every entry point needs it: the turn engine with the extraction worker attached.

`hermes ask`, `hermes chat`, `hermes cron run` and the daemon all build their agent here, so a
fact said in any of them is learned the same way.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hermes.agent.turn import Agent
    from hermes.learn.worker import ExtractionWorker
    from hermes.runtime import Runtime

log = logging.getLogger(__name__)


def build_agent(rt: Runtime) -> tuple[Agent, ExtractionWorker | None]:
    """The agent, and the extraction worker attached to it when extraction is enabled."""
    from hermes.agent.turn import Agent
    from hermes.learn.worker import ExtractionWorker

    agent = Agent(rt)
    worker = ExtractionWorker(rt)
    if not worker.enabled:
        log.info("fact extraction is off (extraction.enabled, or no model configured)")
        return agent, None
    worker.attach(agent)
    return agent, worker
