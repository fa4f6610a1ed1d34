"""A local server that speaks the Composo evaluation API, for offline development, demos and CI
(``pip install 'composo[server]'``); FastAPI and uvicorn load only when a server starts."""

from composo._core.provenance import JUDGE_HEADER
from composo.server._config import DEFAULT_MAX_BODY_BYTES, ServerConfig
from composo.server._local import LocalServer
from composo.server._received import Received

__all__ = ["DEFAULT_MAX_BODY_BYTES", "JUDGE_HEADER", "LocalServer", "Received", "ServerConfig"]
