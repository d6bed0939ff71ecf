# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the tests of the gateway's HTTP side (sourced after
# tests/integration/lib.sh): a gateway with --http on loopback, and a free
# port for the tools that cannot pick their own.

need curl curl

# start_http_gateway [ARGS...]: start_gateway with --http on 127.0.0.1, any
# free port; sets HTTP (HOST:PORT) and HTTP_URL.
start_http_gateway() {
    rm -f "$workdir/http.port"
    start_gateway --http 0 --set gateway_http_port_file="$workdir/http.port" "$@"
    wait_until 10 "the gateway wrote no HTTP port file" test -s "$workdir/http.port"
    HTTP=$(cat "$workdir/http.port")
    HTTP_URL="http://$HTTP"
}

# free_port: a TCP port free on 127.0.0.1 now (for a server that needs
# one named: Prometheus).
free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# stop_pid PID WHAT: SIGTERM, then wait (bounded); SIGKILL if it lingers.
stop_pid() {
    kill -TERM "$1" 2>/dev/null || return 0
    sp_ticks=0
    while kill -0 "$1" 2>/dev/null; do
        sp_ticks=$((sp_ticks + 1))
        if [ "$sp_ticks" -gt $((200 * mult)) ]; then
            kill -KILL "$1" 2>/dev/null || true
            fail "$2 ignored SIGTERM"
        fi
        sleep 0.1
    done
    wait "$1" 2>/dev/null || true
}

# browse OUT ARGS...: headless Chromium on the live page (its own profile
# in the test directory, stopped by timeout if it hangs); OUT gets stdout.
# --virtual-time-budget lets the page's script and its polls run before
# the DOM is dumped or the screenshot taken.  Needs start_http_gateway.
browse() {
    br_out=$1
    shift
    bounded 120 chromium --headless --no-sandbox --disable-gpu \
        --no-first-run --disable-extensions --disable-sync \
        --user-data-dir="$workdir/chromium" --virtual-time-budget=6000 \
        "$@" "$HTTP_URL/" > "$br_out" 2>> "$workdir/chromium.err" || {
        tail -n 20 "$workdir/chromium.err" >&2
        fail "chromium $*"
    }
}
