"""How deep an exploration goes: a seeded sample of its space in `just check`, or all of it.

An exploration is a test that walks a space too large to walk on every check: a schedule
explorer, a random campaign, a fuzzer. At the sample depth (the default) each takes a fixed part
of its space chosen by a seed; at the full depth (`CHECKPOINT_EXPLORE=full`, what `just soak`
runs) it takes everything. The seed comes from the commit under test (`git rev-parse HEAD`), so
the sample rotates from commit to commit and, over a few runs, covers the whole space;
`CHECKPOINT_EXPLORE_SEED` overrides it, which is how a failure replays (`replay_command`).

The guards themselves are not left to the sample: each keeps a deterministic test (a fixed
schedule, a fixed seed) that runs at every depth.
"""

from __future__ import annotations

import os
import random
import subprocess
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

EXPLORE_ENV = "CHECKPOINT_EXPLORE"
"""`sample` (the default) or `full`."""
SEED_ENV = "CHECKPOINT_EXPLORE_SEED"
"""An integer (decimal, or 0x... hexadecimal) that replaces the commit's seed."""
DEPTHS = ("sample", "full")
REPOSITORY = Path(__file__).resolve().parents[3]
PYTEST = ".venv/bin/pytest"

Item = TypeVar("Item")
Run = TypeVar("Run")
Chooser = Callable[[Sequence[object]], int]
"""Picks one of the options a run offers at a step (an index)."""


class ExplorationConfigError(ValueError):
    """$CHECKPOINT_EXPLORE or $CHECKPOINT_EXPLORE_SEED holds something else than it may."""


class TreeTooLarge(RuntimeError):
    """A search made more runs than its limit: its scope is not the small one it was meant to be."""


@dataclass(frozen=True)
class Exploration:
    """The depth and seed of this run's explorations."""

    full: bool
    seed: int
    origin: str
    """Where the seed came from: `commit <sha>`, `$CHECKPOINT_EXPLORE_SEED`, or why neither."""

    @property
    def depth(self) -> str:
        return "full" if self.full else "sample"

    def choose(self, sample: int, full: int) -> int:
        """A size (a count of trials, examples, seeds) for this depth."""
        return full if self.full else sample

    def salted(self, salt: str) -> int:
        """The seed of one exploration: this run's seed mixed with the exploration's name, so
        explorations sharing a run's seed still draw independently of each other."""
        return (self.seed ^ zlib.crc32(salt.encode())) & 0xFFFFFFFF

    def rng(self, salt: str) -> random.Random:
        return random.Random(self.salted(salt))

    def part(self, parts: int, salt: str) -> int | None:
        """Which of `parts` equal parts of a space this run explores (None at the full depth:
        all of them). Over commits every part comes round."""
        if parts < 1:
            raise ValueError(f"parts must be at least 1, not {parts}")
        return None if self.full else self.salted(salt) % parts

    def sample(self, items: Sequence[Item], count: int, salt: str) -> list[Item]:
        """`count` of `items` drawn by the seed, in their order (all of them at the full depth)."""
        if self.full or count >= len(items):
            return list(items)
        chosen = sorted(self.rng(salt).sample(range(len(items)), count))
        return [items[index] for index in chosen]

    def environment(self) -> dict[str, str]:
        """The variables that make another process explore exactly as this one."""
        return {EXPLORE_ENV: self.depth, SEED_ENV: str(self.seed)}

    def replay_command(self, nodeid: str = "") -> str:
        """The one command that reruns `nodeid` (or the whole run) with this depth and seed."""
        depth = f"{EXPLORE_ENV}=full " if self.full else ""
        target = f" '{nodeid}'" if nodeid else ""
        return f"{depth}{SEED_ENV}={self.seed} {PYTEST}{target}"

    def describe(self) -> str:
        return f"depth {self.depth}, seed {self.seed} ({self.origin})"


def current(environ: Mapping[str, str] | None = None, repository: Path = REPOSITORY) -> Exploration:
    """This run's exploration, from the environment and the commit of `repository`."""
    environ = os.environ if environ is None else environ
    depth = environ.get(EXPLORE_ENV, "").strip().lower() or "sample"
    if depth not in DEPTHS:
        raise ExplorationConfigError(f"${EXPLORE_ENV} is {depth!r}: one of {', '.join(DEPTHS)}")
    given = environ.get(SEED_ENV, "").strip()
    if given:
        try:
            seed = int(given, 0)
        except ValueError:
            raise ExplorationConfigError(f"${SEED_ENV} is {given!r}: not an integer") from None
        if seed < 0:
            raise ExplorationConfigError(f"${SEED_ENV} is {seed}: not at least 0")
        return Exploration(depth == "full", seed, f"${SEED_ENV}")
    seed, origin = commit_seed(repository)
    return Exploration(depth == "full", seed, origin)


def commit_seed(repository: Path) -> tuple[int, str]:
    """The first 32 bits of HEAD's hash, and where they came from; 0 outside a git checkout
    (an unpacked archive: nothing rotates there, the sample is still a fixed one)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=repository,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        seed = int(head[:8], 16)
    except (OSError, subprocess.SubprocessError, ValueError):
        return 0, "not a git checkout: seed 0"
    return seed, f"commit {head[:12]}"


class Pruned(Exception):
    """Raised by the chooser of `explore_tree` when every option of a step is asleep: every
    run on from here is equivalent to one the search makes elsewhere. The run stops (cleaning
    up what it started) and lets this through."""


class Nondeterministic(AssertionError):
    """A replayed run offered other options than the run it replays: the search is unsound."""


@dataclass(frozen=True)
class _Node:
    choice: int
    options: tuple[object, ...]
    asleep: frozenset[object]
    """Options not to start with here: an equivalent run starting with them is made elsewhere."""


def explore_tree(
    run: Callable[[Chooser], Run],
    part: tuple[int, int] | None = None,
    split_depth: int = 3,
    limit: int = 100_000,
    independent: Callable[[object, object], bool] | None = None,
    counts: dict[str, int] | None = None,
) -> Iterator[Run]:
    """The runs of a deterministic choice tree, depth first: `run(choose)` makes one run from
    the start, calling `choose(options)` at each step; each run replays a prefix of choices
    (stateless search: nothing is restored, everything is made again). Yields what every run
    that reached its end returned.

    Without `independent`, every run of the tree. With it (a symmetric relation on options:
    two steps of different actors that touch nothing in common, or only read it), runs that
    differ only in the order of independent steps are made once (sleep sets, Godefroid 1996):
    after the subtree of option `a` at a step, `a` sleeps in the subtrees of the later options
    that are independent of it, until a step that depends on it. Every equivalence class of
    runs is still made, so every state the tree can reach and every outcome is still seen. A
    run that meets a step whose options all sleep stops there (`Pruned`), yielding nothing.

    With `part` = (index, parts), one part of the tree: the runs are grouped by their first
    `split_depth` choices (a subtree each, numbered in the order the search meets them); the
    subtrees numbered index, index + parts, ... run whole, and of every other subtree only its
    first run (the search learns the choices on the way to the next subtree from it). The parts
    0..parts-1 together make every run of the tree; each run is whole in exactly one part.

    `counts`, if given, receives `runs` (every run started) and `pruned`."""
    if part is not None and not 0 <= part[0] < part[1]:
        raise ValueError(f"part {part[0]} of {part[1]}: not one of the parts")
    tally = counts if counts is not None else {}
    tally.setdefault("runs", 0)
    tally.setdefault("pruned", 0)
    stack: list[_Node] = []  # the current path: each step's choice, options and sleepers
    subtree = 0
    while True:
        replay = list(stack)
        taken: list[_Node] = []

        def choose(
            options: Sequence[object], replay: list[_Node] = replay, taken: list[_Node] = taken
        ) -> int:
            depth, offered = len(taken), tuple(options)
            if depth < len(replay):
                node = replay[depth]
                if node.options != offered:
                    raise Nondeterministic(
                        f"step {depth} offered {list(offered)} on replay, {list(node.options)} "
                        "before"
                    )
                taken.append(node)
                return node.choice
            asleep = _asleep_after(taken[-1], independent) if taken else frozenset()
            awake = [index for index, option in enumerate(offered) if option not in asleep]
            if not awake:
                raise Pruned(f"every option of step {depth} sleeps: {list(offered)}")
            taken.append(_Node(awake[0], offered, asleep))
            return awake[0]

        tally["runs"] += 1
        try:
            result = run(choose)
        except Pruned:
            tally["pruned"] += 1
        else:
            yield result
        if tally["runs"] >= limit:
            raise TreeTooLarge(f"more than {limit} runs: the tree is not small")
        stack = taken
        if part is not None and subtree % part[1] != part[0]:
            del stack[split_depth:]  # not this part's subtree: on to the next one
        while stack:
            node = stack.pop()
            later = [
                index
                for index in range(node.choice + 1, len(node.options))
                if node.options[index] not in node.asleep
            ]
            if later:
                subtree += len(stack) < split_depth  # a choice above the split: the next subtree
                stack.append(_Node(later[0], node.options, node.asleep))
                break
        if not stack:
            return


def _asleep_after(
    node: _Node, independent: Callable[[object, object], bool] | None
) -> frozenset[object]:
    """The options asleep after `node`'s choice: those asleep at `node`, and the options it
    tried before this choice, that are independent of the option chosen."""
    if independent is None:
        return frozenset()
    chosen = node.options[node.choice]
    candidates = set(node.asleep) | set(node.options[: node.choice])
    return frozenset(option for option in candidates if independent(option, chosen))
