#!/usr/bin/env bash
# The release as a stranger gets it: wheels and sdists of the three distributions, checked with
# twine, the wheels alone installed into a fresh virtual environment, and used from outside the
# checkout (import, `composo --version`, one evaluation against `composo serve`, the LangChain and
# LlamaIndex packages). Run with the development environment's python (build and twine).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
work=$(mktemp -d)
server=
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

for project in . integrations/langchain integrations/llamaindex; do
    "$python" -m build --outdir "$work/dist" "$project" > "$work/build.log" 2>&1 \
        || { cat "$work/build.log"; exit 1; }
done
ls "$work/dist"
"$python" -m twine check --strict "$work"/dist/*

# A fresh environment with the wheels alone: our three by path, their dependencies by name.
"$python" -m venv "$work/venv"
fresh="$work/venv/bin/python"
"$fresh" -m pip install --quiet --upgrade pip
"$fresh" -m pip install --quiet "$(echo "$work"/dist/composo-*.whl)[cli]" \
    "$work"/dist/langchain_composo-*.whl "$work"/dist/llama_index_evaluation_composo-*.whl

cd "$work"  # outside the checkout: nothing may come from it
env -u PYTHONPATH "$fresh" - <<'PY'
import importlib.metadata as md
import sys
from pathlib import Path

import composo
import composo.errors
import composo.types
import langchain_composo
import llama_index.evaluation.composo as li

venv = Path(sys.prefix)
for module in (composo, langchain_composo, li):
    assert venv in Path(module.__file__).parents, f"{module.__name__} from {module.__file__}"
for dist in ("composo", "langchain-composo", "llama-index-evaluation-composo"):
    assert md.version(dist) == composo.__version__, (dist, md.version(dist))
print("imports ok:", composo.__version__)
PY
version=$("$work/venv/bin/composo" --version)
echo "composo --version: $version"
port=$(env -u PYTHONPATH "$fresh" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
env -u PYTHONPATH "$work/venv/bin/composo" serve --port "$port" --no-access-log > "$work/serve.log" 2>&1 &
server=$!
env -u PYTHONPATH COMPOSO_BASE_URL="http://127.0.0.1:$port" COMPOSO_API_KEY=any-key "$fresh" - <<'PY'
import time

import httpx

from composo import Composo

base = __import__("os").environ["COMPOSO_BASE_URL"]
for _ in range(200):
    try:
        if httpx.get(base + "/api/healthcheck").status_code == 200:
            break
    except httpx.TransportError:
        time.sleep(0.1)
else:
    raise SystemExit("composo serve did not start")
with Composo() as client:
    result = client.evaluate(
        messages=[
            {"role": "user", "content": "What's the capital of France?"},
            {"role": "assistant", "content": "The capital of France is Paris."},
        ],
        criteria="Reward accurate answers",
    )
assert result.score is not None and 0 <= result.score <= 1, result
print("evaluation ok: score", result.score)
PY
echo "release smoke test passed"
