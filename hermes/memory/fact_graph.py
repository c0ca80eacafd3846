"""The entity graph behind ``FactStore.reason``: two entities are neighbours when an active
fact links both. Used only when no fact links the asked-about entities directly.

The search meets in the middle: the neighbours of both ends are fetched (one indexed query
each) and intersected, which finds every chain through one shared entity; failing that, one more
hop is taken from the smaller side. Hubs (entities in thousands of facts) are capped so a call
stays cheap at 100k facts.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlite_utils

# At most this many links are read per side and hop; the best-trusted come first.
MAX_LINKS = 2000


def _neighbours(
    db: sqlite_utils.Database, user: str, entity_ids: Sequence[int]
) -> dict[int, tuple[int, int]]:
    """neighbour id -> (entity it neighbours, best fact linking the two), best trust first."""
    if not entity_ids:
        return {}
    marks = ",".join("?" * len(entity_ids))
    rows = db.execute(
        f"""
        SELECT mine.entity_id, other.entity_id, f.id FROM fact_entities mine
          CROSS JOIN facts f ON f.id = mine.fact_id
          JOIN fact_entities other ON other.fact_id = f.id AND other.entity_id != mine.entity_id
        WHERE mine.entity_id IN ({marks}) AND f.user = ? AND f.forgotten_at IS NULL
          AND f.superseded_by IS NULL
        ORDER BY f.trust DESC, f.updated_at DESC, f.id DESC LIMIT ?
        """,
        [*entity_ids, user, MAX_LINKS],
    ).fetchall()
    found: dict[int, tuple[int, int]] = {}
    for mine, other, fact_id in rows:
        found.setdefault(int(other), (int(mine), int(fact_id)))
    return found


def shortest_path(
    db: sqlite_utils.Database, user: str, source: int, target: int
) -> tuple[list[int], list[int]] | None:
    """(entity ids on the path, one fact id per hop) for a chain of at most three hops."""
    if source == target:
        return [source], []
    left = _neighbours(db, user, [source])
    if target in left:
        return [source, target], [left[target][1]]
    right = _neighbours(db, user, [target])
    shared = [c for c in left if c in right]  # left is ordered by trust: best chain first
    if shared:
        middle = shared[0]
        return [source, middle, target], [left[middle][1], right[middle][1]]
    # one more hop from the smaller side: source - a - b - target
    if len(left) <= len(right):
        outer = _neighbours(db, user, [c for c in left if c != target])
        for b, (a, fact_ab) in outer.items():
            if b in right and b != source:
                return [source, a, b, target], [left[a][1], fact_ab, right[b][1]]
    else:
        outer = _neighbours(db, user, [c for c in right if c != source])
        for a, (b, fact_ab) in outer.items():
            if a in left and a != target:
                return [source, a, b, target], [left[a][1], fact_ab, right[b][1]]
    return None


def connect_entities(
    db: sqlite_utils.Database, user: str, entity_ids: Sequence[int]
) -> tuple[list[int], list[int]]:
    """A chain through all the entities, in the order given: each consecutive pair joined by
    its shortest path. Empty when some pair is not connected within three hops."""
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
