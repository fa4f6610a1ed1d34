#!/usr/bin/env bash
# The release as a stranger gets it: wheels and sdists of the three distributions, checked with
# twine, the wheels alone installed into a fresh virtual environment, and used from outside the
# checkout (import, `composo --version`, one evaluation against `composo serve`, the LangChain and
# LlamaIndex packages). Run with the development environment's python (build and twine).
. "$(dirname "$0")/lib.sh"

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

(cd "$work" && env -u PYTHONPATH "$fresh" -c '
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
')
echo "composo --version: $(cd "$work" && env -u PYTHONPATH "$work/venv/bin/composo" --version)"
start_server "$fresh"
evaluate "$fresh"
echo "release smoke test passed"
