"""CLI commands answered by a running daemon: searches (it has the embedding model loaded), a
cron job's run now (it has the model layer loaded, and its own scheduler and delivery), a
backfill's dry run (priced with that model layer) and `memory show` (the command then needs
neither the settings' validation nor the store: its process stays small).

``call(socket, what, user, **args)`` in the CLI (through ``hermes.cli.ask_daemon``) sends one
request over the daemon's local socket (hermes/local_socket.py, op ``call``) and returns the
answer, or None when no daemon runs on the home (the command then does the work itself, as
before). The daemon runs the
function registered under ``name`` in :data:`CALLS` for that user, on its own memory, and sends
the records back whole (``dataclasses.asdict``); :func:`facts_from` and :func:`hits_from` make
them records again, so the command prints them exactly as it prints its own.

The same trust model as the socket's turns: the client is the OS user who owns the home, and
names the user it acts for, as ``--user`` does in-process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes.errors import HermesError

if TYPE_CHECKING:
    from hermes.agent.turn import Agent
    from hermes.cron.runner import CronRunner
    from hermes.memory import Memory
    from hermes.memory.audience import Policy
    from hermes.memory.facts.records import Fact
    from hermes.memory.sessions.records import SearchHit

# What a command waits for an answer; a cron run is a model call (and its delivery)
TIMEOUT_SECONDS = 600.0


class RemoteError(HermesError):
    """The daemon refused, or the work failed there: its one line and exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# --------------------------------------------------------------------------- the CLI's side
def call(path: Path, what: str, user: str, **args: Any) -> Any | None:
    """The answer of the daemon listening on the socket ``path`` (the home's, `socket_path`) to
    the call ``what`` for ``user``; None when no daemon runs there."""
    from hermes.local_socket import MAX_PATH_BYTES

    if len(os.fsencode(path)) > MAX_PATH_BYTES or not path.exists():
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(os.fspath(path))
        except OSError:
            return None                 # a socket left by a daemon that died
        sock.settimeout(TIMEOUT_SECONDS)
        sock.sendall(json.dumps({"op": "call", "user": user, "name": what,
                                 "args": args}).encode() + b"\n")
        with sock.makefile("rb") as answer:
            line = answer.readline()
    if not line:
        raise RemoteError("The Hermes daemon closed the connection before answering; run the "
                          "command again.")
    message = json.loads(line)
    if "error" in message:
        raise RemoteError(message["error"], int(message.get("exit_code") or 1))
    return message["result"]


def record_from(cls: type, data: dict[str, Any]) -> Any:
    """A record (a dataclass) again from its ``asdict``: the fields it has, nothing else."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def facts_from(rows: list[dict[str, Any]]) -> list[Fact]:
    from hermes.memory.facts.records import Fact

    return [record_from(Fact, row) for row in rows]


def plan_from(data: dict[str, Any]) -> Any:
    """A backfill plan (hermes.learn.backfill.Plan) again, with its sessions."""
    from hermes.learn.backfill import Plan
    from hermes.memory.sessions.records import Session

    plan = record_from(Plan, data)
    plan.sessions = [record_from(Session, s) for s in data["sessions"]]
    return plan


def hits_from(rows: list[dict[str, Any]]) -> list[SearchHit]:
    from hermes.memory.sessions.records import Message, SearchHit, Session

    hits = []
    for row in rows:
        hit = record_from(SearchHit, row)
        hit.session = record_from(Session, row["session"])
        hit.match = record_from(Message, row["match"]) if row.get("match") else None
        hit.context = [record_from(Message, m) for m in row["context"]]
        hit.learned = [(int(i), str(text)) for i, text in row["learned"]]
        hits.append(hit)
    return hits


# --------------------------------------------------------------------------- the daemon's side
class Services:
    """What the calls run on: the daemon's memory, and its agent and cron runner."""

    def __init__(self, memory: Memory, agent: Agent | None = None,
                 runner: CronRunner | None = None) -> None:
        self.memory = memory
        self.agent = agent
        self.runner = runner


Call = Callable[[Services, str, dict[str, Any]], Awaitable[Any]]


def _ops(services: Services) -> Any:
    from hermes.memory.operations import MemoryOperations

    return MemoryOperations(services.memory)


async def _facts_search(services: Services, user: str, args: dict[str, Any]) -> Any:
    from hermes.memory.place import Scope

    found = _ops(services).search(Scope(user), str(args["query"]), limit=int(args["limit"]),
                                  category=args.get("category"),
                                  min_trust=args.get("min_trust"), explain=True)
    return [dataclasses.asdict(f) for f in found]


async def _sessions_search(services: Services, user: str, args: dict[str, Any]) -> Any:
    from hermes.memory.place import Scope

    hits = _ops(services).sessions_search(Scope(user), str(args["query"]),
                                          limit=int(args["limit"]),
                                          context=int(args["context"]),
                                          source=args.get("source"))
    return [dataclasses.asdict(h) for h in hits]


def memory_shown(ops: Any, scope: Any, policy: Policy) -> dict[str, Any]:
    """What `hermes memory show` prints, in the daemon or in the command alone: the block as
    the model sees it, where each entry that is not simply private may be shown (under
    ``privacy.shared_places``: ``policy``), and for --json the entries and the usage."""
    from hermes.memory.audience import who_sees

    entries = ops.basic_entries(scope)
    return {"entries": [{"id": e.id, "text": e.text, "place": e.place, "shared": e.mark}
                        for e in entries],
            "chars": ops.basic_usage(scope), "limit": ops.basic_limit,
            "rendered": ops.basic_render(scope),
            "shown_in": [[e.id, who_sees(e.place, e.shared, policy)] for e in entries
                         if e.place != "private" or e.shared is not None
                         or policy == "everything"]}


async def _memory_show(services: Services, user: str, args: dict[str, Any]) -> Any:
    from hermes.memory.place import Scope

    return memory_shown(_ops(services), Scope(user),
                        services.memory.settings.privacy.shared_places)


async def _cron_run(services: Services, user: str, args: dict[str, Any]) -> Any:
    if services.runner is None:
        raise HermesError("The daemon has no cron runner.")
    run = await services.runner.run_now(str(args["name"]), user=user)
    return dataclasses.asdict(run)


async def _backfill_plan(services: Services, user: str, args: dict[str, Any]) -> Any:
    """`hermes learn backfill --dry-run`: what a backfill would take, priced with the model
    layer the daemon has loaded (the command alone imports it: ~9 s)."""
    from hermes.agent.llm import LLM
    from hermes.learn import backfill as bf
    from hermes.learn.worker import extraction_model_name

    settings = services.memory.settings
    llm = LLM(settings.model, model_name=extraction_model_name(settings),
              env_file=settings.home_path / ".env")
    plan = bf.plan(services.memory, user, llm if llm.configured else None, since=args.get("since"),
                   source=args.get("source"))
    return dataclasses.asdict(plan)


CALLS: dict[str, Call] = {
    "facts.search": _facts_search,
    "sessions.search": _sessions_search,
    "memory.show": _memory_show,
    "cron.run": _cron_run,
    "learn.backfill_plan": _backfill_plan,
}


async def answer(services: Services, user: str, name: str, args: dict[str, Any]) -> Any:
    """Run the call ``name`` for ``user``; an unknown name is refused."""
    found = CALLS.get(name)
    if found is None:
        raise HermesError(f"Refused: the daemon answers no call {name!r}.")
    return await found(services, user, args)
