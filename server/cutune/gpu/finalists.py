"""Last checks on the configurations that could win, through any backend: fresh inputs, then the sanitizer.

During the search every configuration is checked on one set of inputs (the worker's seed). Before a
finalist may win it is re-checked on inputs from several new seeds against fresh references (input
luck, races that show only sometimes), and before a winner is reported it runs under compute-sanitizer.
A finalist that fails either is dropped, and its Check says why.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence

from cutune.gpu.backend import Backend, Check
from cutune.gpu.sanitize import sanitizer_path
from cutune.template.model import Config

log = logging.getLogger(__name__)
_SEED_STRIDE = 7919  # verify seeds stay clear of the seeds replaced workers take (job seed + restarts)


def verify_seeds(base_seed: int, count: int) -> tuple[int, ...]:
    """The fresh-input seeds of the re-checks."""
    return tuple(base_seed + _SEED_STRIDE * (i + 1) for i in range(count))


def recheck(
    backend: Backend,
    configs: Sequence[Config],
    seeds: int,
    base_seed: int,
    *,
    cancel: threading.Event | None = None,
) -> tuple[tuple[Config, ...], tuple[Check, ...]]:
    """Re-check `configs` on `seeds` fresh input sets (seed by seed, so each set is built once).

    Returns the configurations that passed every re-check and the failed checks of the others.
    """
    alive = list(configs)
    rejected: list[Check] = []
    for seed in verify_seeds(base_seed, seeds):
        for config in list(alive):
            if cancel is not None and cancel.is_set():
                return tuple(alive), tuple(rejected)
            check = backend.verify(config, seed)
            if check is None:  # the backend runs no kernels (replay): nothing new to learn
                return tuple(alive), tuple(rejected)
            if not check.ok:
                log.warning(
                    "finalist %s rejected: %s: %s", config, check.failure.value if check.failure else "", check.detail
                )
                alive.remove(config)
                rejected.append(check)
    return tuple(alive), tuple(rejected)


def sanitizer_enabled(option: bool | None) -> bool:
    """`--sanitize`/`--no-sanitize`, or by default: whether compute-sanitizer is on PATH."""
    return option if option is not None else sanitizer_path() is not None


def first_finding(backend: Backend, configs: Iterable[Config]) -> Check | None:
    """Run the configurations under compute-sanitizer; the first failed check, or None if all are clean."""
    unique = tuple(dict.fromkeys(configs))
    checks = backend.sanitize(unique) if unique else None
    for check in checks or ():  # None: no tool, or a backend that runs no kernels
        if not check.ok:
            log.warning("winner %s rejected: %s", check.config, check.detail)
            return check
        log.info("%s: %s", check.config, check.detail)
    return None
