"""A percent progress bar over named stages, for the command-line tools."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from tqdm import tqdm


@contextmanager
def stage_progress(tag: str) -> Iterator[Callable[[str, float], None]]:
    """Yields update(stage, fraction in [0, 1]). On a terminal it draws a bar named by the stage; elsewhere (a file,
    a pipe, CI) it prints one ``[tag] stage`` line on stderr each time the stage changes."""
    with tqdm(total=100, unit="%", desc=tag, disable=None) as bar:
        last = [""]

        def update(stage: str, fraction: float) -> None:
            if bar.disable and stage != last[0]:
                bar.write(f"[{tag}] {stage}", file=sys.stderr)
            last[0] = stage
            bar.set_description(stage)
            bar.update(int(100 * fraction) - bar.n)

        yield update
