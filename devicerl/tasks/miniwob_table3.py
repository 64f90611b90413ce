"""The 104 MiniWoB++ tasks of Synapse's Table 3 (arXiv 2306.07863, App. A), and their split
into ``train`` and ``unseen`` tasks, written once.

The split (`stratified_split`, seed `SPLIT_SEED`) keeps every task a decision was ever made on
(the development suites ``miniwob-dev16``) in ``train``, and shuffles the other 88 within strata
of the action each needs most (`STRATA`, from `devicerl.tasks.miniwob_reach.NEEDS`: a task that
needs a drag and a tap is a drag task), taking `UNSEEN` of them for ``unseen`` in proportion to
each stratum's size (largest remainders). `TRAIN` and `UNSEEN_TASKS` are its output, committed as
literals so that no later change moves a task (a test checks that they are still what the
function gives). Named splits: ``miniwob-table3``, ``miniwob-train``, ``miniwob-unseen``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

#: Synapse's Table 3: the 104 tasks, in its order (Synapse's names).
TABLE3_TASKS: tuple[str, ...] = (
    "bisect-angle", "book-flight", "chase-circle", "choose-date", "choose-date-easy",
    "choose-date-medium", "choose-list", "circle-center", "click-button",
    "click-button-sequence", "click-checkboxes", "click-checkboxes-large",
    "click-checkboxes-soft", "click-checkboxes-transfer", "click-collapsible",
    "click-collapsible-2", "click-color", "click-dialog", "click-dialog-2", "click-link",
    "click-menu", "click-menu-2", "click-option", "click-pie", "click-scroll-list",
    "click-shades", "click-shape", "click-tab", "click-tab-2", "click-tab-2-easy",
    "click-tab-2-hard", "click-tab-2-medium", "click-test", "click-test-2",
    "click-test-transfer", "click-widget", "copy-paste", "copy-paste-2", "count-shape",
    "count-sides", "drag-box", "drag-cube", "drag-item", "drag-items", "drag-items-grid",
    "drag-shapes", "drag-sort-numbers", "email-inbox", "email-inbox-delete",
    "email-inbox-forward", "email-inbox-forward-nl", "email-inbox-forward-nl-turk",
    "email-inbox-important", "email-inbox-nl-turk", "email-inbox-noscroll",
    "email-inbox-reply", "email-inbox-star-reply", "enter-date", "enter-password",
    "enter-text", "enter-text-2", "enter-text-dynamic", "enter-time", "find-midpoint",
    "find-word", "focus-text", "focus-text-2", "grid-coordinate", "guess-number",
    "highlight-text", "highlight-text-2", "identify-shape", "login-user", "login-user-popup",
    "moving-items", "multi-layouts", "multi-orderings", "navigate-tree", "number-checkboxes",
    "read-table", "read-table-2", "resize-textarea", "right-angle", "scroll-text",
    "scroll-text-2", "search-engine", "simon-says", "simple-algebra", "simple-arithmetic",
    "social-media", "social-media-all", "social-media-some", "terminal", "text-editor",
    "text-transform", "tic-tac-toe", "unicode-test", "use-autocomplete", "use-colorwheel",
    "use-colorwheel-2", "use-slider", "use-slider-2", "use-spinner", "visual-addition",
)  # fmt: skip

#: Table 3 names that the ``miniwob`` package spells differently: the original MiniWoB's
#: ``drag-item`` ships in MiniWoB++ as ``drag-circle``.
PACKAGE_NAMES: dict[str, str] = {"drag-item": "drag-circle"}

#: Strata, most demanding action first: a task's stratum is the first kind it needs.
STRATA: tuple[str, ...] = (
    "enter", "select", "type-computed", "type-page", "drag", "point", "pixels", "scroll",
    "type-instr", "tap",
)  # fmt: skip
SPLIT_SEED = 56
UNSEEN = 34

#: `stratified_split`'s train tasks (committed: see the module doc).
TRAIN: tuple[str, ...] = (
    "bisect-angle", "chase-circle", "choose-date", "choose-list", "circle-center", "click-button",
    "click-button-sequence", "click-checkboxes", "click-checkboxes-large", "click-collapsible",
    "click-collapsible-2", "click-dialog", "click-dialog-2", "click-link", "click-menu",
    "click-option", "click-pie", "click-shades", "click-tab", "click-tab-2", "click-tab-2-easy",
    "click-tab-2-hard", "click-tab-2-medium", "click-test", "click-test-2", "click-widget",
    "copy-paste", "copy-paste-2", "count-shape", "count-sides", "drag-box", "drag-items",
    "drag-items-grid", "drag-shapes", "drag-sort-numbers", "email-inbox", "email-inbox-delete",
    "email-inbox-forward", "email-inbox-forward-nl-turk", "email-inbox-important",
    "email-inbox-noscroll", "email-inbox-star-reply", "enter-password", "enter-text",
    "enter-text-dynamic", "find-midpoint", "find-word", "focus-text", "focus-text-2",
    "grid-coordinate", "identify-shape", "login-user", "moving-items", "multi-layouts",
    "multi-orderings", "navigate-tree", "number-checkboxes", "resize-textarea", "scroll-text",
    "scroll-text-2", "search-engine", "simple-algebra", "simple-arithmetic", "social-media",
    "social-media-all", "terminal", "text-editor", "use-autocomplete", "use-slider",
    "visual-addition",
)  # fmt: skip

#: `stratified_split`'s unseen tasks (committed: see the module doc).
UNSEEN_TASKS: tuple[str, ...] = (
    "book-flight", "choose-date-easy", "choose-date-medium", "click-checkboxes-soft",
    "click-checkboxes-transfer", "click-color", "click-menu-2", "click-scroll-list", "click-shape",
    "click-test-transfer", "drag-cube", "drag-item", "email-inbox-forward-nl",
    "email-inbox-nl-turk", "email-inbox-reply", "enter-date", "enter-text-2", "enter-time",
    "guess-number", "highlight-text", "highlight-text-2", "login-user-popup", "read-table",
    "read-table-2", "right-angle", "simon-says", "social-media-some", "text-transform",
    "tic-tac-toe", "unicode-test", "use-colorwheel", "use-colorwheel-2", "use-slider-2",
    "use-spinner",
)  # fmt: skip


def package_name(task: str) -> str:
    """The ``miniwob/...`` task name of a Table 3 task."""
    return "miniwob/" + PACKAGE_NAMES.get(task, task)


def stratum(kinds: Sequence[str]) -> str:
    """The first of `STRATA` among ``kinds``."""
    return next(s for s in STRATA if s in kinds)


def stratified_split(
    needs: Mapping[str, Sequence[str]],
    keep: Sequence[str],
    seed: int = SPLIT_SEED,
    unseen: int = UNSEEN,
) -> tuple[list[str], list[str]]:
    """(train, unseen) of `TABLE3_TASKS` (see the module doc): ``needs`` maps a Table 3 task
    to the action kinds it needs, ``keep`` are the tasks that stay in train."""
    rng = random.Random(seed)
    free = [t for t in TABLE3_TASKS if t not in keep]
    by: dict[str, list[str]] = {s: [] for s in STRATA}
    for t in free:
        by[stratum(needs[t])].append(t)
    exact = {s: len(ts) * unseen / len(free) for s, ts in by.items()}
    quota = {s: int(q) for s, q in exact.items()}
    left = unseen - sum(quota.values())
    for s in sorted(STRATA, key=lambda s: (-(exact[s] - quota[s]), STRATA.index(s)))[:left]:
        quota[s] += 1
    chosen: set[str] = set()
    for s in STRATA:
        tasks = sorted(by[s])
        rng.shuffle(tasks)
        chosen.update(tasks[: quota[s]])
    return [t for t in TABLE3_TASKS if t not in chosen], [t for t in TABLE3_TASKS if t in chosen]
