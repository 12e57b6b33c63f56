"""The depths of the campaign's explorations (checkpoint_testenv.support.exploration): the seed
comes from the commit unless the environment names one, the full depth takes everything, and the
parts of a split search together make every run of the tree, each whole in exactly one part."""

from __future__ import annotations

import itertools
import subprocess
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from checkpoint_testenv.support import exploration
from checkpoint_testenv.support.exploration import Exploration, ExplorationConfigError, current

ROOT = Path(__file__).resolve().parents[2]


def head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_seed_is_the_commits_unless_the_environment_names_one() -> None:
    plain = current({}, ROOT)
    assert (plain.full, plain.seed) == (False, int(head()[:8], 16))
    assert plain.origin == f"commit {head()[:12]}"
    assert current({"CHECKPOINT_EXPLORE_SEED": "42"}, ROOT).seed == 42
    assert current({"CHECKPOINT_EXPLORE_SEED": "0x2a"}, ROOT).seed == 42
    assert current({"CHECKPOINT_EXPLORE": "full"}, ROOT).full


def test_outside_a_git_checkout_the_seed_is_a_fixed_one(tmp_path: Path) -> None:
    assert current({}, tmp_path).seed == 0


@pytest.mark.parametrize(
    "environ",
    [
        {"CHECKPOINT_EXPLORE": "deep"},
        {"CHECKPOINT_EXPLORE_SEED": "x"},
        {"CHECKPOINT_EXPLORE_SEED": "-1"},
    ],
)
def test_a_wrong_setting_is_refused_by_name(environ: dict[str, str]) -> None:
    with pytest.raises(ExplorationConfigError, match="CHECKPOINT_EXPLORE"):
        current(environ, ROOT)


def test_the_replay_command_names_the_seed_and_the_depth() -> None:
    sample = Exploration(False, 7, "test")
    assert sample.replay_command("tests/x.py::t[1]") == (
        "CHECKPOINT_EXPLORE_SEED=7 .venv/bin/pytest 'tests/x.py::t[1]'"
    )
    assert Exploration(True, 7, "test").replay_command().startswith("CHECKPOINT_EXPLORE=full ")
    assert sample.environment() == {"CHECKPOINT_EXPLORE": "sample", "CHECKPOINT_EXPLORE_SEED": "7"}


def test_sizes_and_samples_follow_the_depth() -> None:
    sample, full = Exploration(False, 7, "test"), Exploration(True, 7, "test")
    assert (sample.choose(3, 30), full.choose(3, 30)) == (3, 30)
    items = list(range(100))
    assert full.sample(items, 5, "a") == items
    drawn = sample.sample(items, 5, "a")
    assert len(drawn) == 5
    assert drawn == sorted(drawn)
    assert drawn == sample.sample(items, 5, "a")
    assert full.part(8, "a") is None


def test_every_part_comes_round_as_the_seed_changes() -> None:
    parts = Counter(Exploration(False, seed, "test").part(8, "scope") for seed in range(400))
    assert set(parts) == set(range(8))
    assert min(parts.values()) > 25  # roughly even
    assert Exploration(False, 5, "t").part(8, "one") != Exploration(False, 5, "t").part(8, "two")


def tree(path: Sequence[int]) -> int:
    """Options at a node of an uneven tree (0: a leaf; 77 leaves at depths 2 to 6, subtrees of
    1 to 15 leaves below depth 3): the branching depends on the path taken."""
    depth, total = len(path), sum(path)
    if depth >= 6 or (depth >= 2 and (total * 5 + depth) % 4 == 0):
        return 0
    return 2 + (total * 5 + depth) % 3


def runner(log: list[tuple[int, ...]]) -> Callable[[exploration.Chooser], tuple[int, ...]]:
    def run(choose: exploration.Chooser) -> tuple[int, ...]:
        path: list[int] = []
        while options := tree(path):
            choice = choose([f"option {i}" for i in range(options)])
            assert 0 <= choice < options
            path.append(choice)
        log.append(tuple(path))
        return tuple(path)

    return run


def leaves(path: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    options = tree(path)
    if not options:
        return [path]
    return [leaf for choice in range(options) for leaf in leaves((*path, choice))]


def test_the_search_makes_every_run_of_the_tree_once() -> None:
    log: list[tuple[int, ...]] = []
    assert len(leaves()) == 77
    assert list(exploration.explore_tree(runner(log))) == leaves()
    assert log == leaves()


@pytest.mark.parametrize(("parts", "split"), [(1, 3), (3, 1), (4, 2), (8, 3), (5, 9)])
def test_the_parts_together_make_every_run_each_whole_in_one_part(parts: int, split: int) -> None:
    everything = leaves()
    made = [list(exploration.explore_tree(runner([]), (i, parts), split)) for i in range(parts)]
    for runs in made:
        assert len(set(runs)) == len(runs)
        assert set(runs) <= set(everything)
    assert set(itertools.chain.from_iterable(made)) == set(everything)
    subtrees = {leaf[:split] for leaf in everything}
    for prefix in subtrees:  # whole in exactly one part, its first run in every part
        below = {leaf for leaf in everything if leaf[:split] == prefix}
        whole = [i for i, runs in enumerate(made) if below <= set(runs)]
        assert len(whole) == 1 or len(below) == 1
        assert all(set(runs) & below for runs in made)


def test_a_search_past_its_limit_stops_by_name() -> None:
    with pytest.raises(exploration.TreeTooLarge):
        list(exploration.explore_tree(runner([]), limit=3))


# -- sleep sets: two or three actors sharing objects -------------------------------------------

PROGRAMS = {
    "A": [("read", "x"), ("write", "y"), ("read", "z"), ("write", "x")],
    "B": [("write", "x"), ("read", "y"), ("read", "z")],
    "C": [("read", "z"), ("write", "z")],
}


def concurrent(
    actors: str, log: list[tuple[str, ...]]
) -> Callable[[exploration.Chooser], tuple[object, ...]]:
    """Actors run their programs in the order chosen; a write stores what its actor has read
    so far, so the order of dependent steps shows in the final state (the run's result)."""

    def run(choose: exploration.Chooser) -> tuple[object, ...]:
        store: dict[str, str] = {}
        seen: dict[str, list[str]] = {actor: [] for actor in actors}
        step = dict.fromkeys(actors, 0)
        schedule: list[str] = []
        while ready := [a for a in actors if step[a] < len(PROGRAMS[a])]:
            options = [f"{a}: {' '.join(PROGRAMS[a][step[a]])}" for a in ready]
            picked = options[choose(options)]
            actor = picked[0]
            verb, name = PROGRAMS[actor][step[actor]]
            if verb == "read":
                seen[actor].append(store.get(name, "-"))
            else:
                store[name] = f"{actor}{step[actor]}<{','.join(seen[actor])}>"
            step[actor] += 1
            schedule.append(picked)
        log.append(tuple(schedule))
        return (tuple(sorted(store.items())), tuple(tuple(seen[a]) for a in actors))

    return run


def independent(a: object, b: object) -> bool:
    actor_a, verb_a, name_a = str(a).replace(":", "").split()
    actor_b, verb_b, name_b = str(b).replace(":", "").split()
    return actor_a != actor_b and (name_a != name_b or verb_a == verb_b == "read")


def trace(schedule: tuple[str, ...]) -> tuple[str, ...]:
    """The lexicographic normal form of a schedule: its class up to swapping neighbours that
    are independent."""
    rest, form = list(schedule), []
    while rest:
        movable = [
            i for i, step in enumerate(rest) if all(independent(rest[j], step) for j in range(i))
        ]
        form.append(rest.pop(min(movable, key=lambda i: rest[i])))
    return tuple(form)


@pytest.mark.parametrize("actors", ["AB", "ABC"])
def test_sleep_sets_make_every_class_of_runs_once_and_every_outcome(actors: str) -> None:
    every: list[tuple[str, ...]] = []
    outcomes = set(exploration.explore_tree(concurrent(actors, every)))
    reduced: list[tuple[str, ...]] = []
    counts: dict[str, int] = {}
    kept = list(
        exploration.explore_tree(
            concurrent(actors, reduced), independent=independent, counts=counts
        )
    )
    assert set(kept) == outcomes  # every final state, though far fewer runs
    assert len(every) == {"AB": 35, "ABC": 1260}[actors]  # every interleaving
    classes = {trace(schedule) for schedule in every}
    made = [trace(schedule) for schedule in reduced]  # the runs that reached their end
    assert set(made) == classes  # every class made
    assert len(made) == len(classes) == len(kept)  # and each once
    assert counts["runs"] == len(reduced) + counts["pruned"] < len(every) // 2


def test_sleep_sets_split_into_parts_still_make_every_class() -> None:
    whole: list[tuple[str, ...]] = []
    reduced = set(exploration.explore_tree(concurrent("ABC", whole), independent=independent))
    union: set[tuple[object, ...]] = set()
    made: list[tuple[str, ...]] = []
    for index in range(3):
        union |= set(
            exploration.explore_tree(
                concurrent("ABC", made), (index, 3), split_depth=2, independent=independent
            )
        )
    assert union == reduced
    assert {trace(schedule) for schedule in made} == {trace(schedule) for schedule in whole}


def test_a_replay_that_offers_other_options_is_refused() -> None:
    flips = itertools.count()

    def run(choose: exploration.Chooser) -> int:
        first = choose(["a", "b"])
        second = choose(["c", "d"] if next(flips) % 2 == 0 else ["c", "e"])
        return first * 2 + second

    with pytest.raises(exploration.Nondeterministic):
        list(exploration.explore_tree(run))
