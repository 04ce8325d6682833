#!/usr/bin/env bash
# Makes the pictures of docs/watching.md from a real run on this machine:
#   docs/images/tensorboard-loss.png  TensorBoard's scalars dashboard showing
#                                     the run's train/loss and val/loss;
#   docs/images/trace-steps.png       the run's --trace of its last two steps
#                                     in the Chrome trace viewer (catapult's,
#                                     the viewer behind chrome://tracing).
# A 4-layer GPT trains for 300 steps on the fortunes corpus as a 2-stage
# 1F1B pipeline with --tensorboard and --trace-steps 299:300; tensorboard
# serves the folder and headless Chromium photographs the pages, driven
# through its DevTools protocol (the trace viewer imports in the background,
# so the picture waits until it is done).
#
# What it needs is installed here if missing, for this script alone (not by
# the build, not by the tests): Debian's chromium, and a throwaway virtual
# environment BUILD/screenshot-python holding PyPI's tensorboard and
# websocket-client. Perfetto's UI is a web page that needs the internet; the
# Chrome trace viewer comes as two static files inside
# tensorboard-plugin-profile 2.8.0 from PyPI, taken out of its wheel and
# served from a local folder.
#
#   scripts/make-screenshots.sh [BUILD]   (default build/, with pipetrain built)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
pipetrain=$build/pipetrain
corpus=/usr/share/games/fortunes
images=$here/docs/images
[ -x "$pipetrain" ] || { echo "make-screenshots: build pipetrain first (make)" >&2; exit 1; }
[ -d "$corpus" ] || { echo "make-screenshots: $corpus is missing (scripts/install-deps.sh)" >&2; exit 1; }

if ! command -v chromium >/dev/null; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null
fi
venv=$build/screenshot-python
py=$venv/bin/python3
[ -x "$py" ] || python3 -m venv "$venv"
"$py" -c "import tensorboard, websocket" 2>/dev/null ||
    "$py" -m pip install -q --disable-pip-version-check tensorboard websocket-client

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# the trace viewer's two files
"$py" -m pip download -q --disable-pip-version-check --no-deps \
    "tensorboard-plugin-profile==2.8.0" -d "$work/wheel"
mkdir -p "$work/viewer"
"$py" - "$work/wheel"/*.whl "$work/viewer" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in ("trace_viewer_index.html", "trace_viewer_index.js"):
        with open(f"{dest}/{name}", "wb") as f:
            f.write(z.read(f"tensorboard_plugin_profile/static/{name}"))
PY

echo "== training (the run the pictures show)"
"$pipetrain" train --layers 4 --heads 4 --embd 96 --seq 64 --batch 16 --microbatches 4 \
    --stages 2 --schedule 1f1b --steps 300 --lr 1e-3 --warmup 20 --seed 1 --eval-every 25 \
    --data "$corpus" --tensorboard "$work/tb/gpt" --metrics "$work/metrics.jsonl" \
    --trace "$work/viewer/trace.json" --trace-steps 299:300 | tail -n 12

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
board_port=$(free_port)
(cd "$work" && exec "$venv/bin/tensorboard" --logdir tb --host 127.0.0.1 --port "$board_port") \
    >"$work/tensorboard.log" 2>&1 &
pids+=($!)
viewer_port=$(free_port)
(cd "$work/viewer" && exec "$py" -m http.server "$viewer_port" --bind 127.0.0.1) \
    >"$work/viewer.log" 2>&1 &
pids+=($!)

# shoot URL OUT WIDTH HEIGHT READY PREPARE: opens URL in headless Chromium,
# waits until the JavaScript READY is true (60 s at most), runs PREPARE,
# and writes the page as a PNG
shoot() {
    "$py" - "$@" <<'PY'
import base64, json, subprocess, sys, time, urllib.request
import websocket
url, out, width, height, ready, prepare = sys.argv[1:7]
width, height = int(width), int(height)
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
browser = subprocess.Popen(["chromium", "--headless", "--no-sandbox", "--hide-scrollbars",
                            f"--remote-debugging-port={port}", f"--window-size={width},{height}",
                            "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(150):
        try:
            pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json"))
            page = [p for p in pages if p["type"] == "page"][0]
            break
        except (OSError, IndexError, ValueError):
            time.sleep(0.2)
    ws = websocket.create_connection(page["webSocketDebuggerUrl"])
    calls = 0
    def call(method, **params):
        global calls
        calls += 1
        ws.send(json.dumps({"id": calls, "method": method, "params": params}))
        while True:
            reply = json.loads(ws.recv())
            if reply.get("id") == calls:
                return reply.get("result", {})
    call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
         mobile=False)
    call("Page.navigate", url=url)
    deadline = time.time() + 60
    while not call("Runtime.evaluate", expression=ready, returnByValue=True).get(
            "result", {}).get("value"):
        if time.time() > deadline:
            sys.exit(f"make-screenshots: {url} was not ready within 60 s")
        time.sleep(0.5)
    time.sleep(2)
    if prepare:
        call("Runtime.evaluate", expression=prepare)
        time.sleep(1)
    png = base64.b64decode(call("Page.captureScreenshot", format="png")["data"])
    open(out, "wb").write(png)
    print(f"{out}: {len(png)} bytes")
finally:
    browser.terminate()
PY
}

mkdir -p "$images"
# TensorBoard: the scalars dashboard filtered to the loss curves (its charts
# are SVG; the time series dashboard draws with WebGL)
shoot "http://127.0.0.1:$board_port/#scalars&tagFilter=loss" "$images/tensorboard-loss.png" \
    1200 470 "document.readyState == 'complete' && document.title.includes('TensorBoard')" ""

# the trace: imported, the analysis panel and the mouse-mode buttons hidden
ready="(() => { const v = document.querySelector('tf-trace-viewer');
    return !!(v && v._traceViewer && v._traceViewer.model) &&
        !document.body.innerText.includes('Importing'); })()"
prepare="(() => { const tv = document.querySelector('tf-trace-viewer')._traceViewer;
    tv.\$.analysis.style.display = 'none'; tv.\$.drag_handle.style.display = 'none';
    const hide = (root) => { const all = root.querySelectorAll('*');
        for (let i = 0; i < all.length; i++) {
            if (all[i].tagName == 'TR-UI-B-MOUSE-MODE-SELECTOR') all[i].style.display = 'none';
            if (all[i].shadowRoot) hide(all[i].shadowRoot); } };
    hide(document); })()"
shoot "http://127.0.0.1:$viewer_port/trace_viewer_index.html?trace_data_url=/trace.json" \
    "$images/trace-steps.png" 1200 300 "$ready" "$prepare"

echo "== made on: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
