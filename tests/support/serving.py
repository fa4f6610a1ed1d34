"""A ``socketserver`` served from a daemon thread of the test process: the loopback stand-ins
(echo server, proxies, scripted upstreams) start and stop theirs through it."""

from __future__ import annotations

import socketserver
import threading

__all__ = ["InThread"]


class InThread:
    """Serves ``server`` once :meth:`start` is called; :meth:`stop` shuts and closes it."""

    def __init__(self, server: socketserver.BaseServer) -> None:
        self.server = server
        # polled every 20 ms: shutdown() returns that soon (the default is half a second)
        self._thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, join: float = 0.0) -> None:
        """Shut the server down and close its socket; wait up to ``join`` s for the thread."""
        self.server.shutdown()
        self.server.server_close()
        if join:
            self._thread.join(join)
