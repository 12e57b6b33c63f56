"""The debounced persist loop: a background thread that persists the store's due shards."""

from __future__ import annotations

import threading
from collections.abc import Callable

from checkpoint_runtime.store.core import Store


class Debouncer:
    """A background thread calling `persist_due` while `leading()` holds (stop writing as
    soon as the lease cannot be renewed), and, on a tick with nothing due, preparing the new
    bases the next persists will need (`Store.prepare_compactions`). The first error goes to
    `on_error` and ends the loop: the runtime decides, and ends its lifecycle."""

    def __init__(
        self,
        store: Store,
        on_error: Callable[[BaseException], None],
        interval: float | None = None,
        leading: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store = store
        self.on_error = on_error
        self.leading = leading
        self.interval = interval if interval is not None else max(store.debounce_seconds / 4, 0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="checkpoint-debouncer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if not self.leading():
                return
            try:
                if not self.store.persist_due():
                    self.store.prepare_compactions()  # between persists: no persist waits
            except BaseException as error:  # handed to the runtime, which ends its lifecycle
                self.on_error(error)
                return
