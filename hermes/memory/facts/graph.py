"""The entity graph behind ``FactStore.reason``: two entities are neighbours when an active
fact links both. Used only when no fact links the asked-about entities directly.

The end with fewer links is expanded (one indexed query); the other end is asked only whether
one of those neighbours is its neighbour too, which finds a chain through one shared entity
without reading a hub's thousands of links; failing that, one more hop is taken. Reads are
capped so a call stays cheap at 100k facts.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlite_utils

from hermes.memory.facts.records import ACTIVE

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
        WHERE mine.entity_id IN ({marks}) AND f.user = ? AND {ACTIVE}
        ORDER BY f.trust DESC, f.updated_at DESC, f.id DESC LIMIT ?
        """,
        [*entity_ids, user, MAX_LINKS],
    ).fetchall()
    found: dict[int, tuple[int, int]] = {}
    for mine, other, fact_id in rows:
        found.setdefault(int(other), (int(mine), int(fact_id)))
    return found


def _link_count(db: sqlite_utils.Database, entity_id: int) -> int:
    return int(db.execute("SELECT count(*) FROM fact_entities WHERE entity_id = ?",
                          [entity_id]).fetchone()[0])


def _best_link_into(
    db: sqlite_utils.Database, user: str, entity_id: int, others: Sequence[int]
) -> tuple[int, int] | None:
    """(one of ``others``, best fact linking it to ``entity_id``), or None."""
    if not others:
        return None
    marks = ",".join("?" * len(others))
    row = db.execute(
        f"""
        SELECT other.entity_id, f.id FROM fact_entities mine
          CROSS JOIN facts f ON f.id = mine.fact_id
          JOIN fact_entities other ON other.fact_id = f.id
        WHERE mine.entity_id = ? AND other.entity_id IN ({marks}) AND f.user = ? AND {ACTIVE}
        ORDER BY f.trust DESC, f.updated_at DESC, f.id DESC LIMIT 1
        """,
        [entity_id, *others, user],
    ).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def shortest_path(
    db: sqlite_utils.Database, user: str, source: int, target: int
) -> tuple[list[int], list[int]] | None:
    """(entity ids on the path, one fact id per hop) for a chain of at most three hops.

    The end with fewer links is expanded; the other end is only asked whether one of those
    neighbours is also its neighbour, so a hub's links are never all read for one shared
    entity."""
    if source == target:
        return [source], []
    flip = _link_count(db, source) > _link_count(db, target)
    small, big = (target, source) if flip else (source, target)
    found = _path_from_small_side(db, user, small, big)
    if found is None:
        return None
    path, facts = found
    return (path[::-1], facts[::-1]) if flip else (path, facts)


def _path_from_small_side(
    db: sqlite_utils.Database, user: str, small: int, big: int
) -> tuple[list[int], list[int]] | None:
    left = _neighbours(db, user, [small])
    if big in left:
        return [small, big], [left[big][1]]
    middle = _best_link_into(db, user, big, [c for c in left if c != small])
    if middle is not None:
        shared, fact_from_big = middle
        return [small, shared, big], [left[shared][1], fact_from_big]
    # one more hop: small - a - b - big
    outer = _neighbours(db, user, [c for c in left if c != big])
    candidates = [b for b in outer if b not in (small, big)]
    last = _best_link_into(db, user, big, candidates)
    if last is None:
        return None
    b, fact_b_big = last
    a, fact_ab = outer[b]
    return [small, a, b, big], [left[a][1], fact_ab, fact_b_big]


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
