#!/usr/bin/env bash
# The dependency ranges pyproject.toml declares, tested at both ends: a fresh environment with
# the core (and the local server the tests start) at the lowest versions the ranges allow
# (`uv pip install --resolution lowest-direct`), then one at the newest. In each: the public
# modules import with warnings as errors, one evaluation against `composo serve` runs with
# warnings as errors, and the core tests (client, validation, wire facts) pass.
# Run with the development environment's python (it has uv).
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
core_tests=(tests/test_client.py tests/test_validation.py tests/test_wire_facts.py)

for resolution in lowest-direct highest; do
    echo "== dependencies at $resolution"
    env="$work/$resolution"
    "$python" -m venv "$env"
    py="$env/bin/python"
    # The package alone first, so nothing else lifts a version its ranges allow.
    "$python" -m uv pip install --quiet --python "$py" --resolution "$resolution" ".[server]"
    "$py" -m pip list 2>/dev/null | grep -iE '^(httpx|httpcore|pydantic|tenacity|pluggy) '

    (cd "$work" && env -u PYTHONPATH "$py" -W error -c "import composo, composo.types, composo.errors")

    port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    (cd "$work" && exec env -u PYTHONPATH "$py" -m composo serve --port "$port" --no-access-log) \
        > "$work/serve.log" 2>&1 &
    server=$!
    (cd "$work" && env -u PYTHONPATH COMPOSO_BASE_URL="http://127.0.0.1:$port" \
        COMPOSO_API_KEY=any-key "$py" -W error -c '
import time
import httpx
from composo import Composo

for _ in range(300):
    try:
        if httpx.get("http://127.0.0.1:'"$port"'/api/healthcheck").status_code == 200:
            break
    except httpx.TransportError:
        time.sleep(0.1)
with Composo() as client:
    result = client.evaluate(
        messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
        criteria="Reward friendly greetings",
    )
assert result.score is None or 0 <= result.score <= 1, result
print("evaluation ok: score", result.score)
') || { cat "$work/serve.log"; exit 1; }
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=

    # Then the test tools, at their newest (pytest needs a newer pluggy than the core does).
    "$python" -m uv pip install --quiet --python "$py" pytest pytest-asyncio pytest-timeout \
        pytest-xdist
    "$py" -m pip list 2>/dev/null | grep -iE '^(httpx|httpcore|pydantic|tenacity|pluggy) ' \
        | tr -s ' ' | tr '\n' ';' | sed 's/^/core tests with: /;s/;$/\n/'
    env -u PYTHONPATH "$py" -m pytest "${core_tests[@]}" -q -n 2 -p no:randomly
done
