# Shared by the .ci scripts (sourced): a scratch directory removed on exit, with the local server
# the script started, if any.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-python}
work=$(mktemp -d)
server=
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# start_server PYTHON: `composo serve` of that interpreter on a free loopback port, from outside
# the checkout; sets $server (its pid) and $base_url once it answers its healthcheck.
start_server() {
    local py=$1 port
    port=$(env -u PYTHONPATH "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    (cd "$work" && exec env -u PYTHONPATH "$py" -m composo serve --port "$port" --no-access-log) \
        > "$work/serve.log" 2>&1 &
    server=$!
    base_url="http://127.0.0.1:$port"
    for _ in $(seq 300); do
        if "$py" -c "import urllib.request as u; u.urlopen('$base_url/api/healthcheck', timeout=1)" \
            2> /dev/null; then
            return 0
        fi
        sleep 0.1
    done
    cat "$work/serve.log"
    return 1
}

stop_server() {
    kill "$server"
    wait "$server" 2> /dev/null || true
    server=
}

# evaluate PYTHON [python options]: one evaluation against $base_url, from outside the checkout.
evaluate() {
    local py=$1
    shift
    (cd "$work" && env -u PYTHONPATH COMPOSO_BASE_URL="$base_url" COMPOSO_API_KEY=any-key \
        "$py" "$@" -c '
from composo import Composo

with Composo() as client:
    result = client.evaluate(
        messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
        criteria="Reward friendly greetings",
    )
assert result.score is None or 0 <= result.score <= 1, result
print("evaluation ok: score", result.score)
') || { cat "$work/serve.log"; return 1; }
}
