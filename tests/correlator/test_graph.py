from __future__ import annotations

from collections import defaultdict

import pytest

from correlator.graph import Parent, cardinality, expand

# Evidence of a busy node: n-17 ran allocations a-1..a-30 over time; a-9 had two workflows
# and three requests; two inventory batch runs touched the same 40 nodes (m:n).
ROWS = [
    *[{"node_id": "n-17", "allocation_id": f"a-{i}"} for i in range(1, 31)],
    {"allocation_id": "a-9", "workflow_id": "wf-9p"},
    {"allocation_id": "a-9", "workflow_id": "wf-9r"},
    *[{"allocation_id": "a-9", "correlation_id": f"c-9{i}"} for i in range(3)],
    {"node_id": "n-17", "node_instance_id": "ni-3"},
    {"node_id": "n-17", "node_instance_id": "ni-4"},
    {"workflow_id": "wf-9p", "node_instance_id": "ni-4"},
    *[{"correlation_id": f"c-batch{b}", "node_id": f"n-{i}"} for i in range(40) for b in (1, 2)],
]
KEYS = ("node_id", "node_instance_id", "correlation_id", "allocation_id", "workflow_id")


def _link_counts(key: str, value: str) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for row in ROWS:
        if row.get(key) == value:
            for other, other_value in row.items():
                if other != key:
                    counts[other][other_value] = counts[other].get(other_value, 0) + 1
    return counts


def _cardinalities() -> dict[tuple[str, str], tuple[int, int]]:
    result = {}
    for a in KEYS:
        for b in KEYS:
            if a == b:
                continue
            per_a: dict[str, set[str]] = defaultdict(set)
            per_b: dict[str, set[str]] = defaultdict(set)
            for row in ROWS:
                if a in row and b in row:
                    per_a[row[a]].add(row[b])
                    per_b[row[b]].add(row[a])
            result[(a, b)] = (
                max(map(len, per_a.values()), default=0),
                max(map(len, per_b.values()), default=0),
            )
    return result


@pytest.mark.parametrize(
    ("near_far", "far_near", "expected"),
    [(1, 1, "1:1"), (5, 1, "1:n"), (1, 5, "n:1"), (3, 3, "m:n"), (0, 0, "1:1")],
)
def test_cardinality_classes(near_far: int, far_near: int, expected: str) -> None:
    assert cardinality(near_far, far_near) == expected


def test_a_busy_node_does_not_pull_in_unrelated_allocations() -> None:
    expansion = expand(
        "allocation_id", "a-9", link_counts=_link_counts, cardinalities=_cardinalities()
    )
    assert expansion.ids == {
        "allocation_id": ["a-9"],
        "correlation_id": ["c-90", "c-91", "c-92"],
        "workflow_id": ["wf-9p", "wf-9r"],
    }
    # The node is a windowed parent, never expanded: its 29 other allocations stay out. So is
    # the node instance, although wf-9p is the only work it ran in this evidence (1:1): a
    # place is where work runs, never a unit of work's own.
    assert [(p.key, p.value, p.child_key) for p in expansion.parents] == [
        ("node_id", "n-17", "allocation_id"),
        ("node_instance_id", "ni-4", "workflow_id"),
    ]
    followed = {
        (link.from_key, link.to_key, link.cardinality) for link in expansion.links if link.followed
    }
    assert ("allocation_id", "workflow_id", "1:n") in followed
    assert ("allocation_id", "node_id", "n:1") in followed


_MN = ("correlation_id", "m:n: shared both ways")


@pytest.mark.parametrize(
    ("seed", "max_fanout", "refused", "found"),
    [
        # a-9 reaches 2 workflows and 3 requests: a limit of 2 takes the one, not the other.
        (
            ("allocation_id", "a-9"),
            2,
            [("correlation_id", "fan-out: 3 correlation_id values (limit 2)")],
            {"allocation_id": 1, "workflow_id": 2},
        ),
        (
            ("allocation_id", "a-9"),
            3,
            [],
            {"allocation_id": 1, "correlation_id": 3, "workflow_id": 2},
        ),
        # n-17 ran 30 allocations: its children at a limit of 30, capped below it.
        (
            ("node_id", "n-17"),
            10,
            [_MN, ("allocation_id", "fan-out: 30 allocation_id values (limit 10)")],
            {"node_id": 1, "node_instance_id": 2, "workflow_id": 1},
        ),
        (
            ("node_id", "n-17"),
            29,
            [_MN, ("allocation_id", "fan-out: 30 allocation_id values (limit 29)")],
            {"node_id": 1, "node_instance_id": 2, "workflow_id": 1},
        ),
        (
            ("node_id", "n-17"),
            30,
            [_MN],
            {
                "node_id": 1,
                "node_instance_id": 2,
                "allocation_id": 30,
                "workflow_id": 2,
                "correlation_id": 3,
            },
        ),
    ],
)
def test_fan_out_up_to_the_limit_is_followed_and_beyond_it_refused(
    seed: tuple[str, str],
    max_fanout: int,
    refused: list[tuple[str, str]],
    found: dict[str, int],
) -> None:
    expansion = expand(
        *seed, link_counts=_link_counts, cardinalities=_cardinalities(), max_fanout=max_fanout
    )
    assert [(link.to_key, link.reason) for link in expansion.links if not link.followed] == refused
    assert {key: len(values) for key, values in expansion.ids.items()} == found


def test_m_to_n_links_are_refused_and_reported() -> None:
    expansion = expand(
        "correlation_id", "c-batch1", link_counts=_link_counts, cardinalities=_cardinalities()
    )
    assert expansion.ids == {"correlation_id": ["c-batch1"]}
    (refused,) = [link for link in expansion.links if not link.followed]
    assert (refused.to_key, refused.cardinality, len(refused.to_values)) == ("node_id", "m:n", 40)


def test_expansion_stops_at_max_ids() -> None:
    expansion = expand(
        "node_id",
        "n-17",
        link_counts=_link_counts,
        cardinalities=_cardinalities(),
        max_fanout=100,
        max_ids=5,
    )
    assert expansion.truncated is True
    assert expansion.size == 5


@pytest.mark.parametrize(
    ("seed", "max_ids"),
    [(("allocation_id", "a-9"), 500), (("node_id", "n-17"), 500), (("node_id", "n-17"), 5)],
)
def test_prefetch_batches_lookups_without_changing_the_answer(
    seed: tuple[str, str], max_ids: int
) -> None:
    batches: list[list[tuple[str, str]]] = []
    asked: list[tuple[str, str]] = []

    def counting(key: str, value: str) -> dict[str, dict[str, int]]:
        asked.append((key, value))
        return _link_counts(key, value)

    kwargs = {"cardinalities": _cardinalities(), "max_fanout": 100, "max_ids": max_ids}
    plain = expand(*seed, link_counts=_link_counts, **kwargs)  # type: ignore[arg-type]
    batched = expand(
        *seed,
        link_counts=counting,
        prefetch=lambda pairs: batches.append(list(pairs)),
        **kwargs,  # type: ignore[arg-type]
    )
    assert batched == plain
    handed = [pair for batch in batches for pair in batch]
    assert len(handed) == len(set(handed))  # each identifier handed over once
    assert set(asked) <= set(handed)  # and before it is looked up
    assert batches[0] == [seed]


def test_prefetch_hands_over_a_whole_level_at_once() -> None:
    batches: list[list[tuple[str, str]]] = []
    expand(
        "allocation_id",
        "a-9",
        link_counts=_link_counts,
        cardinalities=_cardinalities(),
        prefetch=lambda pairs: batches.append(list(pairs)),
    )
    assert batches[:2] == [
        [("allocation_id", "a-9")],
        [
            ("correlation_id", "c-90"),
            ("correlation_id", "c-91"),
            ("correlation_id", "c-92"),
            ("workflow_id", "wf-9p"),
            ("workflow_id", "wf-9r"),
        ],
    ]


@pytest.mark.parametrize(
    ("parent", "filters"),
    [
        (
            Parent("node_id", "n-1", "correlation_id", ("c-1",)),
            (("allocation_id", ("a-9", "a-parent")), ("workflow_id", ("w-1", "w-2"))),
        ),
        (
            Parent("node_id", "n-1", "allocation_id", ("a-9",)),
            (("correlation_id", ("c-1",)), ("workflow_id", ("w-1", "w-2"))),
        ),
        (
            Parent("node_instance_id", "ni-1", "node_id", ()),
            (
                ("correlation_id", ("c-1",)),
                ("allocation_id", ("a-9", "a-parent")),
                ("workflow_id", ("w-1", "w-2")),
            ),
        ),
        # A unit of work's own: an allocation reached from its request keeps its workflows.
        (Parent("allocation_id", "a-parent", "correlation_id", ("c-1",)), ()),
        (Parent("workflow_id", "w-1", "allocation_id", ("a-9",)), ()),
    ],
)
def test_a_place_keeps_out_every_other_unit_of_work(
    parent: Parent, filters: tuple[tuple[str, tuple[str, ...]], ...]
) -> None:
    ids = {"allocation_id": ["a-9"], "correlation_id": ["c-1"], "workflow_id": ["w-1", "w-2"]}
    parents = [parent, Parent("allocation_id", "a-parent", "correlation_id", ("c-1",))]
    assert parent.sibling_filters(ids, parents) == filters
