#!/usr/bin/env bash
# The dependency ranges pyproject.toml declares, tested at both ends: a fresh environment with
# the core (and the local server the tests start) at the lowest versions the ranges allow
# (`uv pip install --resolution lowest-direct`), then one at the newest. In each: the public
# modules import with warnings as errors, one evaluation against `composo serve` runs with
# warnings as errors, and the core tests (client, validation, wire facts) pass.
# Run with the development environment's python (it has uv).
. "$(dirname "$0")/lib.sh"
core_tests=(tests/test_client.py tests/test_validation.py tests/test_wire_facts.py tests/test_deadline.py
    tests/test_transport.py tests/test_proxy.py)
versions() {
    "$1" -m pip list 2> /dev/null | grep -iE '^(httpx|httpcore|pydantic|tenacity|pluggy) ' \
        | tr -s ' ' | paste -sd ';'
}

for resolution in lowest-direct highest; do
    env="$work/$resolution"
    "$python" -m venv "$env"
    py="$env/bin/python"
    # The package alone first, so nothing else lifts a version its ranges allow.
    "$python" -m uv pip install --quiet --python "$py" --resolution "$resolution" ".[server]"
    echo "== $resolution: $(versions "$py")"
    (cd "$work" && env -u PYTHONPATH "$py" -W error -c "import composo, composo.types, composo.errors")
    start_server "$py"
    evaluate "$py" -W error
    stop_server

    # Then the test tools, at their newest (pytest needs a newer pluggy than the core does).
    "$python" -m uv pip install --quiet --python "$py" pytest pytest-asyncio pytest-timeout \
        pytest-xdist trustme socksio
    echo "core tests with: $(versions "$py")"
    env -u PYTHONPATH "$py" -m pytest "${core_tests[@]}" -q -n 2 -p no:randomly
done
