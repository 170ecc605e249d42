"""Run the ``w-*`` incidents' HTTP traffic through a real nginx in front of ``w_api_app``.

For each case: start the API (uvicorn, the case's state, flavor catalog and log style), send
the case's requests through nginx (curl for the portal, httpx for the workflow worker and the
lease cron), and keep what the programs wrote: nginx's access line of each request (JSON
``log_format`` as devstack/ingress.py writes it, or ``combined`` followed by
``"$request_id" $upstream_status $request_time``), the API's JSON lines, and per request its
label and ``$request_id`` (nginx returns it as ``X-Request-ID``). The w_build step moves these
lines to the incident's date.

The API runs as it would be deployed: ``w_api_app.py`` copied to
``OUT/root/opt/provisioning-api/lib/python3.11/site-packages/provisioning_api/app.py``, in a
venv made there from Debian's python3 (``pip install fastapi uvicorn httpx``); ``OUT/root`` is
removed from the paths its tracebacks print, so they read ``/opt/provisioning-api/...``::

    /usr/bin/python3 -m venv /tmp/w_capture/root/opt/provisioning-api
    /tmp/w_capture/root/opt/provisioning-api/bin/pip install fastapi uvicorn httpx
    /tmp/w_capture/root/opt/provisioning-api/bin/python tests/incidents/_make/w_ingress_run.py \
        /tmp/w_capture

Outputs: ``OUT/http/<case>/access.log``, ``api.ndjson``, ``requests.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
NGINX = "/usr/sbin/nginx"

JSON_FORMAT = (
    '{"time_iso8601":"$time_iso8601","msec":"$msec","request_id":"$request_id",'
    '"http_x_correlation_id":"$http_x_correlation_id","remote_addr":"$remote_addr",'
    '"request_method":"$request_method","request_uri":"$request_uri","status":"$status",'
    '"request_time":"$request_time","upstream_status":"$upstream_status",'
    '"upstream_addr":"$upstream_addr","upstream_response_time":"$upstream_response_time",'
    '"body_bytes_sent":"$body_bytes_sent","server_name":"$server_name",'
    '"http_user_agent":"$http_user_agent"}'
)
COMBINED_FORMAT = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$request_id" $upstream_status $request_time'
)

# Requests: (label, client, method, path, json body or None).
P, W, C = "portal", "worker", "cron"
CASES: dict[str, dict[str, Any]] = {
    "w-deploy-ipmitool-missing": {
        "log": "json",
        "state": {
            "alloc-5d1e07": {"node_id": "n-r12-07", "workflow_id": "wf-5d1e07-p1"},
            "alloc-a0913f": {"node_id": "n-r12-09", "workflow_id": "wf-a0913f-p1"},
        },
        "requests": [
            (
                "provision",
                P,
                "POST",
                "/v1/allocations/alloc-5d1e07/provision",
                {"flavor": "bm.std.2x"},
            ),
            (
                "noise_provision",
                P,
                "POST",
                "/v1/allocations/alloc-a0913f/provision",
                {"flavor": "bm.std.4x"},
            ),
            ("poll1", P, "GET", "/v1/allocations/alloc-5d1e07", None),
            ("noise_poll", P, "GET", "/v1/allocations/alloc-a0913f", None),
            ("poll2", P, "GET", "/v1/allocations/alloc-5d1e07", None),
            ("poll3", P, "GET", "/v1/allocations/alloc-5d1e07", None),
        ],
    },
    "w-deploy-api-config-missing": {
        "log": "json",
        "flavors": None,  # the deployment shipped without /etc/provisioning-api/flavors.conf
        "state": {
            "alloc-61c9d4": {"state": "requested", "workflow_id": "wf-61c9d4-p1"},
            "alloc-0e5a2f": {
                "state": "active",
                "node_id": "n-b03-14",
                "release_workflow_id": "wf-0e5a2f-r1",
            },
        },
        "requests": [
            ("healthz", "lb", "GET", "/healthz", None),
            ("get", P, "GET", "/v1/allocations/alloc-61c9d4", None),
            (
                "provision1",
                P,
                "POST",
                "/v1/allocations/alloc-61c9d4/provision",
                {"flavor": "bm.std.2x"},
            ),
            ("noise_get", P, "GET", "/v1/allocations/alloc-0e5a2f", None),
            (
                "provision2",
                P,
                "POST",
                "/v1/allocations/alloc-61c9d4/provision",
                {"flavor": "bm.std.2x"},
            ),
            ("noise_release", P, "DELETE", "/v1/allocations/alloc-0e5a2f", None),
            (
                "provision3",
                P,
                "POST",
                "/v1/allocations/alloc-61c9d4/provision",
                {"flavor": "bm.std.2x"},
            ),
        ],
    },
    "w-api-keyerror": {
        "log": "json",
        "state": {
            "alloc-c81f2a": {"state": "requested", "workflow_id": "wf-c81f2a-p1"},
            "alloc-3e7b90": {"state": "requested", "workflow_id": "wf-3e7b90-p1"},
        },
        "requests": [
            (
                "provision1",
                P,
                "POST",
                "/v1/allocations/alloc-c81f2a/provision",
                {"flavor": "bm.gpu.h100"},
            ),
            (
                "noise_provision",
                P,
                "POST",
                "/v1/allocations/alloc-3e7b90/provision",
                {"flavor": "bm.std.2x"},
            ),
            (
                "provision2",
                P,
                "POST",
                "/v1/allocations/alloc-c81f2a/provision",
                {"flavor": "bm.gpu.h100"},
            ),
            ("get", P, "GET", "/v1/allocations/alloc-c81f2a", None),
        ],
    },
    "w-api-typeerror": {
        "log": "combined",
        "style": "flask",
        "state": {
            # Imported from the old inventory: no lease_end (the bug's trigger).
            "alloc-9a04e6": {"state": "active", "node_id": "n-e02-08", "lease_end": None},
            "alloc-52d7c1": {
                "state": "active",
                "node_id": "n-e02-09",
                "lease_end": "2026-12-31T00:00:00+00:00",
            },
        },
        "requests": [
            ("noise_lease", C, "GET", "/v1/allocations/alloc-52d7c1/lease", None),
            ("lease1", C, "GET", "/v1/allocations/alloc-9a04e6/lease", None),
            ("get", P, "GET", "/v1/allocations/alloc-9a04e6", None),
            ("lease2", P, "GET", "/v1/allocations/alloc-9a04e6/lease", None),
            ("lease3", P, "GET", "/v1/allocations/alloc-9a04e6/lease", None),
        ],
    },
    "w-none-benign-404": {
        "log": "combined",
        "state": {"alloc-e3b512": {"state": "requested", "workflow_id": "wf-e3b512-p1"}},
        "requests": [
            (
                "provision",
                P,
                "POST",
                "/v1/allocations/alloc-e3b512/provision",
                {"flavor": "bm.std.2x"},
            ),
            ("poll1", P, "GET", "/v1/allocations/alloc-e3b512", None),
            ("console", P, "GET", "/v1/allocations/alloc-e3b512/console", None),
            ("poll2", P, "GET", "/v1/allocations/alloc-e3b512", None),
            ("typo", P, "GET", "/v1/allocations/alloc-e3b5l2", None),
            ("poll3", P, "GET", "/v1/allocations/alloc-e3b512", None),
        ],
    },
    "w-wfstate-invalid-transition": {
        "log": "json",
        "state": {
            "alloc-2b77e0": {
                "state": "provisioning",
                "node_id": "n-f01-02",
                "release_workflow_id": "wf-2b77e0-r1",
            }
        },
        "requests": [
            ("release", P, "DELETE", "/v1/allocations/alloc-2b77e0", None),
            ("poll1", P, "GET", "/v1/allocations/alloc-2b77e0", None),
            ("poll2", P, "GET", "/v1/allocations/alloc-2b77e0", None),
            ("poll3", P, "GET", "/v1/allocations/alloc-2b77e0", None),
        ],
    },
    "w-wfstate-release-failed": {
        "log": "json",
        "state": {
            "alloc-7f3c18": {
                "state": "active",
                "node_id": "n-g05-21",
                "release_workflow_id": "wf-7f3c18-r1",
            }
        },
        "requests": [
            ("release", P, "DELETE", "/v1/allocations/alloc-7f3c18", None),
            ("poll1", P, "GET", "/v1/allocations/alloc-7f3c18", None),
            ("poll2", P, "GET", "/v1/allocations/alloc-7f3c18", None),
        ],
    },
    "w-node-disk-full": {
        "log": "combined",
        "state": {
            "alloc-d4e881": {
                "state": "requested",
                "node_id": "n-h03-06",
                "workflow_id": "wf-d4e881-p1",
            }
        },
        "requests": [
            (
                "provision",
                P,
                "POST",
                "/v1/allocations/alloc-d4e881/provision",
                {"flavor": "bm.std.4x"},
            ),
            ("poll1", P, "GET", "/v1/allocations/alloc-d4e881", None),
            ("poll2", P, "GET", "/v1/allocations/alloc-d4e881", None),
        ],
    },
    "w-provider-aap-restart": {
        "log": "json",
        "state": {"alloc-44e0b9": {"state": "requested", "workflow_id": "wf-44e0b9-p1"}},
        "requests": [
            (
                "provision",
                P,
                "POST",
                "/v1/allocations/alloc-44e0b9/provision",
                {"flavor": "bm.gpu.a100"},
            ),
            ("poll1", P, "GET", "/v1/allocations/alloc-44e0b9", None),
        ],
    },
    "w-none-retry-succeeds": {
        "log": "json",
        "state": {
            "alloc-1c6d3a": {
                "state": "requested",
                "node_id": "n-k02-04",
                "workflow_id": "wf-1c6d3a-p1",
            }
        },
        "requests": [
            (
                "provision",
                P,
                "POST",
                "/v1/allocations/alloc-1c6d3a/provision",
                {"flavor": "bm.std.2x"},
            ),
            ("poll1", P, "GET", "/v1/allocations/alloc-1c6d3a", None),
            ("poll2", P, "GET", "/v1/allocations/alloc-1c6d3a", None),
        ],
    },
    "w-none-canceled-resubmitted": {
        "log": "combined",
        "state": {"alloc-8d2f60": {"state": "requested", "workflow_id": "wf-8d2f60-p1"}},
        "requests": [
            (
                "provision",
                P,
                "POST",
                "/v1/allocations/alloc-8d2f60/provision",
                {"flavor": "bm.std.2x"},
            ),
            ("poll1", P, "GET", "/v1/allocations/alloc-8d2f60", None),
            ("poll2", P, "GET", "/v1/allocations/alloc-8d2f60", None),
        ],
    },
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def _nginx_conf(prefix: Path, json_port: int, combined_port: int, api_port: int) -> str:
    user = "user nobody nogroup;\n" if os.geteuid() == 0 else ""
    return f"""{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log info;
events {{ worker_connections 64; }}
http {{
    map $http_x_correlation_id $w_correlation_id {{
        "" $request_id;
        default $http_x_correlation_id;
    }}
    log_format w_json escape=json '{JSON_FORMAT}';
    log_format w_combined '{COMBINED_FORMAT}';
    client_body_temp_path {prefix}/temp/client_body;
    proxy_temp_path {prefix}/temp/proxy;
    fastcgi_temp_path {prefix}/temp/fastcgi;
    uwsgi_temp_path {prefix}/temp/uwsgi;
    scgi_temp_path {prefix}/temp/scgi;
    upstream provisioning_api {{ server 127.0.0.1:{api_port}; }}
    server {{
        listen 127.0.0.1:{json_port};
        server_name provisioning.dc1.example.net;
        access_log {prefix}/logs/access-json.log w_json;
        location / {{
            proxy_pass http://provisioning_api;
            proxy_set_header X-Correlation-ID $w_correlation_id;
            add_header X-Request-ID $request_id always;
        }}
    }}
    server {{
        listen 127.0.0.1:{combined_port};
        server_name provisioning.dc2.example.net;
        access_log {prefix}/logs/access-combined.log w_combined;
        location / {{
            proxy_pass http://provisioning_api;
            proxy_set_header X-Correlation-ID $w_correlation_id;
            add_header X-Request-ID $request_id always;
        }}
    }}
}}
"""


def _send(client: str, method: str, url: str, body: Any) -> tuple[int, str]:
    if client in ("portal", "lb"):
        argv = ["curl", "-s", "-o", "/dev/null", "-D", "-", "-X", method, url]
        if client == "lb":
            argv += ["-A", "kube-probe/1.29"]
        if body is not None:
            argv += ["-H", "Content-Type: application/json", "--data", json.dumps(body)]
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        status = int(out.split()[1])
        rid = next(
            line.split(":", 1)[1].strip()
            for line in out.splitlines()
            if line.lower().startswith("x-request-id:")
        )
        return status, rid
    agent = {"worker": "workflow-worker/2.14.1", "cron": "lease-renewer/0.9.0"}[client]
    headers = {"User-Agent": f"{agent} python-httpx/{httpx.__version__}"}
    response = httpx.request(method, url, json=body, headers=headers, timeout=10)
    return response.status_code, response.headers["x-request-id"]


def run_case(name: str, case: dict[str, Any], out: Path, ports: dict[str, int], logs: Path) -> None:
    case_dir = out / "http" / name
    case_dir.mkdir(parents=True, exist_ok=True)
    api_log = case_dir / "api.ndjson"
    api_log.unlink(missing_ok=True)
    flavors = out / "flavors.conf"
    flavors.write_text("bm.std.2x\nbm.std.4x\nbm.gpu.a100\nbm.gpu.h100\n", "utf-8")
    env = os.environ | {
        "W_API_LOG": str(api_log),
        "W_API_STATE": json.dumps(case["state"]),
        "W_LOG_STYLE": case.get("style", "error"),
        "W_FLAVORS": str(flavors)
        if case.get("flavors", True)
        else "/etc/provisioning-api/flavors.conf",
    }
    root = out / "root"
    venv = root / "opt" / "provisioning-api"
    package = venv / "lib" / "python3.11" / "site-packages" / "provisioning_api"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").touch()
    shutil.copyfile(HERE / "w_api_app.py", package / "app.py")
    argv = [
        str(venv / "bin" / "python"),
        "-m",
        "uvicorn",
        "provisioning_api.app:app",
        "--port",
        str(ports["api"]),
        "--no-access-log",
    ]
    with (case_dir / "uvicorn.log").open("wb") as uvicorn_out:
        api = subprocess.Popen(argv, cwd="/", env=env, stdout=uvicorn_out, stderr=uvicorn_out)
    try:
        _wait_port(ports["api"])
        access = logs / f"access-{case['log']}.log"
        offset = access.stat().st_size if access.exists() else 0
        port = ports[case["log"]]
        sent = []
        for label, client, method, path, body in case["requests"]:
            started_ns = time.time_ns()
            status, rid = _send(client, method, f"http://127.0.0.1:{port}{path}", body)
            sent.append(
                {"label": label, "request_id": rid, "status": status, "started_ns": started_ns}
            )
            time.sleep(0.3)
        time.sleep(0.5)  # nginx writes the access line once the response is sent
        with access.open("rb") as lines:
            lines.seek(offset)
            (case_dir / "access.log").write_bytes(lines.read())
        (case_dir / "requests.json").write_text(json.dumps(sent, indent=1), "utf-8")
    finally:
        api.send_signal(signal.SIGTERM)
        api.wait(timeout=10)
    text = api_log.read_text("utf-8") if api_log.exists() else ""
    api_log.write_text(text.replace(str(root.resolve()), ""), "utf-8")


def main() -> None:
    out = Path(sys.argv[1])
    only = sys.argv[2:]
    prefix = out / "nginx"
    shutil.rmtree(prefix, ignore_errors=True)
    for sub in ("logs", "temp"):
        (prefix / sub).mkdir(parents=True)
    ports = {"api": _free_port(), "json": _free_port(), "combined": _free_port()}
    conf = prefix / "nginx.conf"
    conf.write_text(_nginx_conf(prefix, ports["json"], ports["combined"], ports["api"]), "utf-8")
    base = [NGINX, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "logs" / "error.log")]
    subprocess.run([*base, "-t"], check=True)
    nginx = subprocess.Popen(base, start_new_session=True)
    try:
        _wait_port(ports["json"])
        for name, case in CASES.items():
            if not only or name in only:
                run_case(name, case, out, ports, prefix / "logs")
                print(name, "done")
    finally:
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait(timeout=10)


if __name__ == "__main__":
    main()
