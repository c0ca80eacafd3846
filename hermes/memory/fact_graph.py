"""The entity graph behind ``FactStore.reason``: two entities are neighbours when an active
fact links both. Used only when no fact links the asked-about entities directly."""

from __future__ import annotations

from collections.abc import Sequence

import sqlite_utils

MAX_DEPTH = 4
# Hubs (entities in thousands of facts) would make each hop expensive; the best-trusted links
# of each entity are enough to find a short chain.
NEIGHBOURS_PER_ENTITY = 200


def _neighbours(db: sqlite_utils.Database, user: str, entity_id: int) -> list[tuple[int, int]]:
    """(neighbour entity id, best fact id linking the two), best-trusted facts first."""
    rows = db.execute(
        """
        SELECT other.entity_id, f.id FROM fact_entities mine
          JOIN facts f ON f.id = mine.fact_id
          JOIN fact_entities other ON other.fact_id = f.id AND other.entity_id != mine.entity_id
        WHERE mine.entity_id = ? AND f.user = ? AND f.forgotten_at IS NULL
          AND f.superseded_by IS NULL
        ORDER BY f.trust DESC, f.updated_at DESC, f.id DESC LIMIT ?
        """,
        [entity_id, user, NEIGHBOURS_PER_ENTITY * 4],
    ).fetchall()
    best: dict[int, int] = {}
    for other, fact_id in rows:
        best.setdefault(int(other), int(fact_id))
    return list(best.items())[:NEIGHBOURS_PER_ENTITY]


def shortest_path(
    db: sqlite_utils.Database, user: str, source: int, target: int
) -> tuple[list[int], list[int]] | None:
    """Breadth-first search: (entity ids on the path, one fact id per hop), or None."""
    if source == target:
        return [source], []
    parents: dict[int, tuple[int, int]] = {}
    seen = {source}
    frontier = [source]
    for _ in range(MAX_DEPTH):
        next_frontier: list[int] = []
        for node in frontier:
            for other, fact_id in _neighbours(db, user, node):
                if other in seen:
                    continue
                seen.add(other)
                parents[other] = (node, fact_id)
                if other == target:
                    path, facts = [target], []
                    while path[-1] != source:
                        parent, via = parents[path[-1]]
                        facts.append(via)
                        path.append(parent)
                    return path[::-1], facts[::-1]
                next_frontier.append(other)
        frontier = next_frontier
        if not frontier:
            break
    return None


def connect_entities(
    db: sqlite_utils.Database, user: str, entity_ids: Sequence[int]
) -> tuple[list[int], list[int]]:
    """A chain through all the entities, in the order given: each consecutive pair joined by
    its shortest path. Empty when some pair is not connected within MAX_DEPTH hops."""
    path: list[int] = [entity_ids[0]]
    facts: list[int] = []
    for source, target in zip(entity_ids, entity_ids[1:], strict=False):
        found = shortest_path(db, user, source, target)
        if found is None:
            return [], []
        hop_path, hop_facts = found
        path.extend(hop_path[1:])
        facts.extend(f for f in hop_facts if f not in facts)
    return path, facts
