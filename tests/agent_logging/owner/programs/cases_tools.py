"""Captures from programs other than Python libraries: Go, Java, command-line tools, Ansible.

Each family builds or finds its program, runs every case against the environment of env.py,
and takes what the program prints:

- Go (client.go): ``err.Error()``, the one line it prints on stderr;
- Java (Client.java): the exception's class and message, and its printed stack trace;
- curl, openssl, psql, ssh, ipmitool, shells, coreutils, sudo: the error line(s) on stderr
  and the exit code;
- Ansible (ansible/failures.yml and ad-hoc commands): the task result as printed.

Tool locations come from the environment: ``GO`` (default ``go``), ``ANSIBLE_BIN`` (the
directory holding ``ansible`` and ``ansible-playbook``, default /tmp/ansvenv/bin), ``JAVAC``
and ``JAVA`` (default ``javac``/``java``).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from env import USER, free_port

HERE = Path(__file__).parent
REL = "tests/agent_logging/owner/programs"

# Go's resolver names the DNS server it asked ("lookup nosuch.invalid on 10.1.2.3:53"): the
# machine's resolver address is replaced with a documentation address (RFC 5737).
_RESOLVER = re.compile(r" on [0-9a-fA-F.:\[\]]{3,45}:53:")


def _run(
    command: list[str], *, timeout: float = 60, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )


def _entry(
    ident: str,
    owner: str | None,
    program: str,
    how: str,
    layer: str | None,
    *,
    type_: str | None = None,
    message: str | None = None,
    stack: str | None = None,
    status: int | None = None,
    exit_code: int | None = None,
) -> dict[str, Any]:
    return {
        "id": ident,
        "owner": owner,
        "program": program,
        "how": how,
        "type": type_,
        "message": message,
        "stack": stack,
        "status": status,
        "exit_code": exit_code,
        "layer": layer,
    }


def _urls(env: dict[str, Any]) -> dict[str, str]:
    p = env["ports"]
    urls = {
        name: f"https://127.0.0.1:{p[name]}/"
        for name in ("valid", "expired", "wronghost", "selfsigned", "mtls")
    }
    ingress = f"http://127.0.0.1:{p['ingress']}"
    urls |= {
        "closed": f"http://127.0.0.1:{p['closed']}/api/allocations",
        "401": f"{ingress}/api/v1/allocations",
        "403": f"{ingress}/api/v1/nodes",
        "502": f"{ingress}/down/",
        "504": f"{ingress}/slow/",
        "plaintext": f"https://127.0.0.1:{p['ingress']}/",
        "dns": "https://nosuch.invalid/",
    }
    return urls


_SERVED = {
    "expired": "`openssl s_server -www` serving the local CA's expired cert",
    "selfsigned": "`openssl s_server -www` serving a self-signed cert",
    "valid": "`openssl s_server -www` serving a cert from the local CA, which the client does not "
    "trust",
    "wronghost": "`openssl s_server -www` serving a cert for wrong.example only",
    "mtls": "`openssl s_server -Verify 1` (a client certificate required; the client has none)",
    "closed": "a port on 127.0.0.1 where nothing listens",
    "401": "nginx proxying to a stub API that answers 401",
    "403": "nginx proxying to a stub API that answers 403",
    "502": "nginx whose upstream port is closed (a real 502)",
    "504": "nginx with proxy_read_timeout 1s to a 3 s upstream (a real 504)",
    "plaintext": "https:// to nginx's plain-HTTP port",
    "dns": "https://nosuch.invalid/ (the reserved .invalid TLD never resolves)",
}


# -- Go -------------------------------------------------------------------------------------


def go_cases(env: dict[str, Any]) -> list[dict[str, Any]]:
    go = os.environ.get("GO", "go")
    binary = Path(env["root"]) / "bin" / "client"
    binary.parent.mkdir(exist_ok=True)
    build_env = os.environ | {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    built = _run(
        [go, "build", "-o", str(binary), str(HERE / "client.go")], env=build_env, timeout=600
    )
    if built.returncode != 0:
        raise RuntimeError(f"go build failed: {built.stderr}")
    version = _run([go, "version"]).stdout.split()[2].removeprefix("go")
    ca = env["ca"]
    u = _urls(env)
    p = env["ports"]
    mounts = env["mounts"]
    cases: list[tuple[str, str | None, str, list[str], int | None]] = [
        ("go-http-x509-expired", "cert", "expired", ["get", u["expired"], ca], None),
        ("go-http-x509-unknown-authority", "cert", "valid", ["get", u["valid"]], None),
        ("go-http-x509-hostname-ip", "cert", "wronghost", ["get", u["wronghost"], ca], None),
        ("go-http-client-cert-required", "cert", "mtls", ["get", u["mtls"], ca], None),
        ("go-http-refused", "ingress", "closed", ["get", u["closed"]], None),
        ("go-http-dns", "ingress", "dns", ["get", u["dns"]], None),
        ("go-http-401", "api_auth", "401", ["get", u["401"]], 401),
        ("go-http-502", "ingress", "502", ["get", u["502"]], 502),
        ("go-http-504", "ingress", "504", ["get", u["504"]], 504),
        ("go-http-plaintext", None, "plaintext", ["get", u["plaintext"], ca], None),
    ]
    how_extra = {
        "go-tls-x509-hostname-dns": "crypto/tls Dial to localhost, ServerName localhost, against "
        + _SERVED["wronghost"],
        "go-dial-refused": "net.Dial to a port on 127.0.0.1 where nothing listens",
        "go-exec-missing": 'os/exec Command("racadm", ...).Run() with racadm not installed',
        "go-exec-127": 'os/exec Command("sh", "-c", "missing-cmd --status").Run()',
        "go-read-missing-config": "os.ReadFile of a configuration file that was never installed",
        "go-write-enospc": "os.WriteFile of 64 KiB into a full 16 KiB tmpfs",
        "go-write-erofs": "os.WriteFile into a tmpfs mounted read-only",
        "go-dial-postgres-refused": "net.Dial to 127.0.0.1:5432 with no PostgreSQL listening there",
    }
    extra: list[tuple[str, str | None, list[str]]] = [
        (
            "go-tls-x509-hostname-dns",
            "cert",
            ["tls", f"localhost:{p['wronghost']}", "localhost", ca],
        ),
        ("go-dial-refused", "ingress", ["dial", f"127.0.0.1:{p['closed']}"]),
        ("go-exec-missing", "deploy", ["exec", "racadm", "serveraction", "powerstatus"]),
        ("go-exec-127", "deploy", ["exec", "sh", "-c", "missing-cmd --status"]),
        ("go-read-missing-config", "deploy", ["read", "/etc/node-agent/agent.yaml"]),
    ]
    if "full" in mounts:
        extra.append(("go-write-enospc", "node", ["write", f"{mounts['full']}/agent.spool"]))
    if "ro" in mounts:
        extra.append(("go-write-erofs", "node", ["write", f"{mounts['ro']}/agent.spool"]))
    if _port_free(5432):
        extra.append(("go-dial-postgres-refused", "db", ["dial", "127.0.0.1:5432"]))
    program = f"Go {version} standard library (net/http, crypto/tls, net, os/exec, os)"
    entries = []
    runs = [(i, o, f"{'net/http GET against ' + _SERVED[s]}", a, st) for i, o, s, a, st in cases]
    runs += [(i, o, how_extra[i], a, None) for i, o, a in extra]
    for ident, owner, how, args, status in runs:
        out = _run([str(binary), *args])
        message = _RESOLVER.sub(" on 192.0.2.53:53:", out.stderr.strip())
        if message != out.stderr.strip():
            how += " (the resolver's address replaced with 192.0.2.53)"
        entries.append(
            _entry(
                ident,
                owner,
                program,
                f"{REL}/client.go `client {args[0]}`: {how}",
                "node",
                message=message,
                status=status,
            )
        )
    return entries


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


# -- Java -----------------------------------------------------------------------------------


def java_cases(env: dict[str, Any]) -> list[dict[str, Any]]:
    javac = os.environ.get("JAVAC", "javac")
    java = os.environ.get("JAVA", "java")
    classes = Path(env["root"]) / "java"
    built = _run([javac, "-d", str(classes), str(HERE / "Client.java")], timeout=300)
    if built.returncode != 0:
        raise RuntimeError(f"javac failed: {built.stderr}")
    version = _run([java, "-version"]).stderr.splitlines()[0]
    program = f"Java ({version.strip()}) HttpURLConnection/JSSE, ProcessBuilder"
    ca = env["ca"]
    u = _urls(env)
    p = env["ports"]
    cases: list[tuple[str, str | None, str, list[str]]] = [
        ("java-pkix-expired", "cert", "expired", ["get", u["expired"], ca]),
        ("java-pkix-unknown-ca", "cert", "valid", ["get", u["valid"]]),
        ("java-hostname-ip", "cert", "wronghost", ["get", u["wronghost"], ca]),
        (
            "java-hostname-dns",
            "cert",
            "wronghost",
            ["get", f"https://localhost:{p['wronghost']}/", ca],
        ),
        ("java-client-cert-required", "cert", "mtls", ["get", u["mtls"], ca]),
        ("java-connect-refused", "ingress", "closed", ["get", u["closed"]]),
        ("java-unknown-host", "ingress", "dns", ["get", u["dns"]]),
        ("java-http-401", "api_auth", "401", ["get", u["401"]]),
        ("java-http-502", "ingress", "502", ["get", u["502"]]),
        ("java-plaintext", None, "plaintext", ["get", u["plaintext"], ca]),
    ]
    entries = []
    for ident, owner, served, args in [
        *cases,
        ("java-exec-missing", "deploy", "", ["exec", "racadm"]),
    ]:
        out = _run([java, "-cp", str(classes), "Client", *args])
        head, _, trace = out.stdout.partition("\n--\n")
        type_, _, message = head.partition("\n")
        how = (
            'ProcessBuilder("racadm").start() with racadm not installed'
            if args[0] == "exec"
            else f"HttpURLConnection GET against {_SERVED[served]}"
        )
        entries.append(
            _entry(
                ident,
                owner,
                program,
                f"{REL}/Client.java `java Client {args[0]}`: {how}",
                "api",
                type_=type_,
                message=None if message == "null" else message,
                stack=trace.rstrip("\n"),
            )
        )
    return entries


# -- command-line tools ----------------------------------------------------------------------


def _first_lines(text: str, count: int = 1) -> str:
    return "\n".join(text.strip().splitlines()[:count])


def cli_cases(env: dict[str, Any]) -> list[dict[str, Any]]:
    ca = env["ca"]
    u = _urls(env)
    p = env["ports"]
    root = Path(env["root"])
    mounts = env["mounts"]
    curl_version = _run(["curl", "--version"]).stdout.split()[1]
    openssl_version = _run(["openssl", "version"]).stdout.split()[1]
    entries: list[dict[str, Any]] = []

    def curl(
        ident: str, owner: str | None, served: str, args: list[str], layer: str = "node"
    ) -> None:
        out = _run(["curl", "-sS", "-o", "/dev/null", *args])
        entries.append(
            _entry(
                ident,
                owner,
                f"curl {curl_version}",
                f"`curl -sS -o /dev/null {' '.join(a if a != ca else 'ca.pem' for a in args)}` "
                "against "
                f"{_SERVED[served]}; message = curl's first stderr line",
                layer,
                message=_first_lines(out.stderr),
                exit_code=out.returncode,
            )
        )

    curl("curl-60-expired", "cert", "expired", ["--cacert", ca, u["expired"]])
    curl("curl-60-selfsigned", "cert", "selfsigned", ["--cacert", ca, u["selfsigned"]])
    curl("curl-60-unknown-ca", "cert", "valid", [u["valid"]])
    curl("curl-60-hostname", "cert", "wronghost", ["--cacert", ca, u["wronghost"]])
    curl(
        "curl-35-client-cert-tls12", "cert", "mtls", ["--tls-max", "1.2", "--cacert", ca, u["mtls"]]
    )
    curl("curl-56-client-cert-tls13", "cert", "mtls", ["--cacert", ca, u["mtls"]])
    curl("curl-7-refused", "ingress", "closed", [u["closed"]])
    curl("curl-6-dns", "ingress", "dns", [u["dns"]])
    curl("curl-22-401", "api_auth", "401", ["-f", u["401"]])
    curl("curl-22-502", "ingress", "502", ["-f", u["502"]])
    curl("curl-22-504", "ingress", "504", ["-f", u["504"]])
    curl("curl-35-wrong-version", None, "plaintext", ["--cacert", ca, u["plaintext"]])

    def s_client(ident: str, owner: str, served: str, port: int) -> None:
        out = _run(
            [
                "openssl",
                "s_client",
                "-connect",
                f"127.0.0.1:{port}",
                "-CAfile",
                ca,
                "-verify_return_error",
                "-verify_ip",
                "127.0.0.1",
            ],
            stdin=subprocess.DEVNULL,
        )
        # The lines that say what failed: "verify error:..." and OpenSSL's "...:error:..." lines
        # (the hex prefix is the thread id); connect's "connect:errno=N".
        lines = [
            line
            for line in out.stderr.splitlines()
            if line.startswith(("verify error:", "connect:")) or ":error:" in line
        ]
        entries.append(
            _entry(
                ident,
                owner,
                f"openssl {openssl_version} s_client",
                f"`openssl s_client -connect 127.0.0.1:PORT -CAfile ca.pem -verify_return_error "
                f"-verify_ip 127.0.0.1 </dev/null` against {_SERVED[served]}; message = its "
                "stderr lines naming the error",
                "node",
                message="\n".join(lines),
                exit_code=out.returncode,
            )
        )

    s_client("openssl-s-client-expired", "cert", "expired", p["expired"])
    s_client("openssl-s-client-ip-mismatch", "cert", "wronghost", p["wronghost"])
    s_client("openssl-s-client-refused", "ingress", "closed", p["closed"])

    def tool(
        ident: str,
        owner: str,
        program: str,
        command: list[str],
        how: str,
        layer: str,
        *,
        lines: int = 1,
        env_extra: dict[str, str] | None = None,
        user: str | None = None,
    ) -> None:
        prefix = ["runuser", "-u", user, "--"] if user else []
        out = _run([*prefix, *command], env=os.environ | (env_extra or {}), cwd="/tmp")
        entries.append(
            _entry(
                ident,
                owner,
                program,
                f"`{how}`",
                layer,
                message=_first_lines(out.stderr, lines),
                exit_code=out.returncode,
            )
        )

    psql = shutil.which("psql") or "/usr/lib/postgresql/15/bin/psql"
    pg_version = _run([psql, "--version"]).stdout.strip()
    tool(
        "psql-refused",
        "db",
        pg_version,
        [psql, f"host=127.0.0.1 port={p['closed']} user=app dbname=wording", "-c", "SELECT 1"],
        "psql 'host=127.0.0.1 port=CLOSED_PORT user=app dbname=wording' -c 'SELECT 1'",
        "workflow",
        lines=2,
    )
    if "pg" in p:
        tool(
            "psql-auth-failed",
            "db",
            pg_version,
            [psql, f"host=127.0.0.1 port={p['pg']} user=app dbname=wording", "-c", "SELECT 1"],
            "PGPASSWORD=wrong psql 'host=127.0.0.1 port=PORT user=app dbname=wording' -c 'SELECT "
            "1' "
            "(PostgreSQL 15, scram-sha-256 in pg_hba.conf)",
            "workflow",
            env_extra={"PGPASSWORD": "wrong"},
        )
        tool(
            "psql-undefined-table",
            "db",
            pg_version,
            [
                psql,
                f"host=127.0.0.1 port={p['pg']} user=app dbname=wording",
                "-c",
                "SELECT state FROM allocations WHERE id = 'a-7c21'",
            ],
            "psql ... -c \"SELECT state FROM allocations WHERE id = 'a-7c21'\" (no such table)",
            "workflow",
            lines=3,
            env_extra={"PGPASSWORD": "apppass"},
        )
    ssh_version = _run(["ssh", "-V"]).stderr.strip()
    quiet = [
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "ConnectTimeout=5",
    ]
    tool(
        "ssh-refused",
        "node",
        ssh_version,
        ["ssh", *quiet, "-p", str(p["closed"]), "root@127.0.0.1", "true"],
        "ssh -o BatchMode=yes -p CLOSED_PORT root@127.0.0.1 true",
        "provider",
    )
    if "ssh" in p:
        tool(
            "ssh-publickey-denied",
            "node",
            ssh_version,
            ["ssh", *quiet, "-p", str(p["ssh"]), "deploy@127.0.0.1", "true"],
            "ssh -o BatchMode=yes -p PORT deploy@127.0.0.1 true against sshd (public keys only) "
            "where deploy has no authorized key",
            "provider",
        )
    tool(
        "dash-127",
        "deploy",
        "dash 0.5.12 (/bin/sh)",
        ["sh", "-c", "missing-cmd --status"],
        "sh -c 'missing-cmd --status'",
        "node",
    )
    bash_version = _run(["bash", "--version"]).stdout.splitlines()[0]
    tool(
        "bash-127",
        "deploy",
        bash_version,
        ["bash", "-c", "missing-cmd --status"],
        "bash -c 'missing-cmd --status'",
        "node",
    )
    script = root / "bin" / "power-cycle.sh"
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/bin/sh\necho cycled\n")
    script.chmod(0o644)
    tool(
        "dash-126",
        "deploy",
        "dash 0.5.12 (/bin/sh)",
        ["sh", "-c", str(script)],
        "sh -c /tmp/wording/bin/power-cycle.sh (a script installed with mode 0644)",
        "node",
    )
    ipmitool_version = _run(["ipmitool", "-V"]).stdout.strip()
    tool(
        "ipmitool-no-device",
        "node",
        ipmitool_version,
        ["ipmitool", "power", "status"],
        "ipmitool power status (the open interface, on a host without an IPMI device)",
        "node",
    )
    tool(
        "ipmitool-lanplus-no-session",
        "node",
        ipmitool_version,
        [
            "ipmitool",
            "-I",
            "lanplus",
            "-H",
            "127.0.0.1",
            "-p",
            str(p["closed"]),
            "-U",
            "admin",
            "-P",
            "x",
            "-N",
            "1",
            "-R",
            "1",
            "power",
            "status",
        ],
        "ipmitool -I lanplus -H 127.0.0.1 -p CLOSED_PORT -U admin -P x -N 1 -R 1 power status "
        "(no BMC answers)",
        "node",
    )
    if "full" in mounts:
        tool(
            "dd-enospc",
            "node",
            "GNU coreutils dd 9.1",
            ["dd", "if=/dev/zero", f"of={mounts['full']}/agent.spool", "bs=4k", "count=4"],
            "dd if=/dev/zero of=FULL/agent.spool bs=4k count=4 (FULL: a full 16 KiB tmpfs)",
            "node",
        )
    if "ro" in mounts:
        tool(
            "touch-erofs",
            "node",
            "GNU coreutils touch 9.1",
            ["touch", f"{mounts['ro']}/agent.spool"],
            "touch RO/agent.spool (RO: a tmpfs mounted read-only)",
            "node",
        )
    if _user_exists():
        sudo_version = _run(["sudo", "-V"]).stdout.splitlines()[0]
        tool(
            "sudo-n-password-required",
            "deploy",
            sudo_version,
            ["sudo", "-n", "systemctl", "restart", "node-agent"],
            f"runuser -u {USER} -- sudo -n systemctl restart node-agent ({USER}: sudoers ALL, a "
            "password "
            "nobody gives; setup_user.sh)",
            "node",
            user=USER,
        )
    python = "/usr/bin/python3"
    py_version = _run([python, "--version"]).stdout.strip()
    for ident, owner, code, how in (
        ("python-traceback-module", "deploy", "import pyghmi", "import pyghmi (not installed)"),
        (
            "python-traceback-refused",
            "ingress",
            f"import socket; socket.create_connection(('127.0.0.1', {p['closed']}))",
            "socket.create_connection(('127.0.0.1', CLOSED_PORT))",
        ),
        (
            "python-traceback-cert-expired",
            "cert",
            f"import socket, ssl; c = ssl.create_default_context(cafile={ca!r}); "
            f"c.wrap_socket(socket.create_connection(('127.0.0.1', {p['expired']})), "
            "server_hostname='127.0.0.1')",
            "ssl wrap_socket(cafile=ca.pem) against " + _SERVED["expired"],
        ),
    ):
        out = _run([python, "-c", code])
        entries.append(
            _entry(
                ident,
                owner,
                f"{py_version} (Debian's /usr/bin/python3), uncaught exception",
                f'`/usr/bin/python3 -c "..."`: {how}; stack = the traceback it prints on stderr, '
                "nothing else given",
                "node",
                stack=out.stderr.rstrip("\n"),
            )
        )
    return entries


def _user_exists() -> bool:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return False
    return True


# -- Ansible -----------------------------------------------------------------------------------

_ANSIBLE_ENV = {
    "ANSIBLE_HOST_KEY_CHECKING": "False",
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_LOCALHOST_WARNING": "False",
    "ANSIBLE_DEPRECATION_WARNINGS": "False",
}

# Owner of each task of ansible/failures.yml, by task name.
_PLAYBOOK_TASKS: dict[str, tuple[str, str, str]] = {
    "power status with racadm": (
        "ansible-command-missing-executable",
        "deploy",
        "command: racadm ... (not installed)",
    ),
    "agent status with a missing command": (
        "ansible-shell-127",
        "deploy",
        "shell: missing-cmd --status",
    ),
    "power status over IPMI": (
        "ansible-ipmitool-lanplus",
        "node",
        "command: ipmitool -I lanplus ... (no BMC answers)",
    ),
    "register with the API (401)": (
        "ansible-uri-401",
        "api_auth",
        "uri: to nginx proxying to a stub API answering 401",
    ),
    "register through a dead upstream": (
        "ansible-uri-502",
        "ingress",
        "uri: to nginx whose upstream port is closed (real 502)",
    ),
    "fetch over TLS with an expired certificate": (
        "ansible-uri-cert-expired",
        "cert",
        "uri: ca_path=ca.pem against " + _SERVED["expired"],
    ),
    "fetch from a closed port": (
        "ansible-uri-refused",
        "ingress",
        "uri: to a port where nothing listens",
    ),
    "write onto a read-only filesystem": (
        "ansible-shell-erofs",
        "node",
        "shell: echo > RO/agent.conf (a tmpfs mounted read-only)",
    ),
    "copy onto a full filesystem": (
        "ansible-copy-enospc",
        "node",
        "copy: 20 kB into a full 16 KiB tmpfs",
    ),
    "copy a file that was never built": (
        "ansible-copy-missing-src",
        "deploy",
        "copy: src= a file missing on the controller",
    ),
}


def _ansible_blocks(stdout: str) -> dict[str, str]:
    """Task name -> its "[ERROR]: ..." line(s) and its "fatal: ..." line, as printed."""
    blocks: dict[str, str] = {}
    for chunk in stdout.split("\nTASK [")[1:]:
        name = chunk.split("]", 1)[0]
        lines = chunk.splitlines()
        error: list[str] = []
        fatal = ""
        taking = False
        for line in lines:
            if line.startswith("[ERROR]: "):
                taking = True
            elif line.startswith("Origin: "):
                taking = False
            if taking:
                error.append(line)
            if line.startswith("fatal: "):
                fatal = line
        if fatal:
            blocks[name] = "\n".join([*error, fatal])
    return blocks


def _adhoc_result(stdout: str) -> str:
    """An ad-hoc run's "[ERROR]: ..." line(s) (up to "Origin:") and its result block."""
    lines = stdout.strip().splitlines()
    error: list[str] = []
    for line in lines:
        if line.startswith("Origin: "):
            break
        error.append(line)
    start = next(i for i, line in enumerate(lines) if line.startswith("127.0.0.1 | "))
    return "\n".join([*error, *lines[start:]])


def ansible_cases(env: dict[str, Any]) -> list[dict[str, Any]]:
    bin_dir = Path(os.environ.get("ANSIBLE_BIN", "/tmp/ansvenv/bin"))
    python = str(bin_dir / "python")
    version = _run([str(bin_dir / "ansible"), "--version"]).stdout.splitlines()[0]
    program = f"Ansible ({version.strip()})"
    p = env["ports"]
    u = _urls(env)
    mounts = env["mounts"]
    run_env = os.environ | _ANSIBLE_ENV | {"ANSIBLE_PYTHON_INTERPRETER": python}
    entries: list[dict[str, Any]] = []
    variables = [
        "-e",
        f"ca={env['ca']}",
        "-e",
        f"closed_port={p['closed']}",
        "-e",
        f"url_401={u['401']}",
        "-e",
        f"url_502={u['502']}",
        "-e",
        f"url_expired={u['expired']}",
        "-e",
        f"url_closed={u['closed']}",
        "-e",
        f"ro={mounts.get('ro', '/nonexistent-ro')}",
        "-e",
        f"full={mounts.get('full', '/nonexistent-full')}",
    ]
    # The playbooks run from a copy under the root: Ansible prints paths relative to them.
    books = Path(env["root"]) / "ansible"
    shutil.copytree(HERE / "ansible", books, dirs_exist_ok=True)
    playbook = books / "failures.yml"
    out = _run(
        [
            str(bin_dir / "ansible-playbook"),
            "-i",
            "127.0.0.1,",
            "-c",
            "local",
            str(playbook),
            *variables,
        ],
        env=run_env,
        cwd="/tmp",
        timeout=300,
    )
    blocks = _ansible_blocks(out.stdout)
    for name, (ident, owner, how) in _PLAYBOOK_TASKS.items():
        if name not in blocks:
            continue  # e.g. no tmpfs mounts here
        entries.append(
            _entry(
                ident,
                owner,
                program,
                f"{REL}/ansible/failures.yml task {name!r} (ansible-playbook -c local): {how}; "
                "message "
                "= the task's [ERROR] line(s) and its fatal: line",
                "provider",
                message=blocks[name],
            )
        )
    # One playbook per failure that stops the play before any task runs.
    missing = _run(
        [
            str(bin_dir / "ansible-playbook"),
            "-i",
            "127.0.0.1,",
            "-c",
            "local",
            str(books / "missing_collection.yml"),
        ],
        env=run_env,
        cwd="/tmp",
    )
    entries.append(
        _entry(
            "ansible-missing-collection",
            "deploy",
            program,
            f"{REL}/ansible/missing_collection.yml (a task of community.general, not installed); "
            "message = the [ERROR] line",
            "provider",
            message=next(
                line for line in missing.stderr.splitlines() if line.startswith("[ERROR]")
            ),
            exit_code=missing.returncode,
        )
    )
    module = _run(
        [
            str(bin_dir / "ansible"),
            "all",
            "-i",
            "127.0.0.1,",
            "-c",
            "local",
            "-m",
            "community.general.ipmi_power",
            "-a",
            "name=127.0.0.1 user=admin password=x state=on",
        ],
        env=run_env,
        cwd="/tmp",
    )
    entries.append(
        _entry(
            "ansible-adhoc-missing-collection",
            "deploy",
            program,
            "`ansible all -i 127.0.0.1, -c local -m community.general.ipmi_power -a ...` (the "
            "collection is not installed); message = the [ERROR] line(s) and the result block on "
            "stdout",
            "provider",
            message=_adhoc_result(module.stdout),
            exit_code=module.returncode,
        )
    )
    role = _run(
        [
            str(bin_dir / "ansible-playbook"),
            "-i",
            "127.0.0.1,",
            "-c",
            "local",
            str(books / "missing_role.yml"),
        ],
        env=run_env,
        cwd="/tmp",
    )
    entries.append(
        _entry(
            "ansible-missing-role",
            "deploy",
            program,
            f"{REL}/ansible/missing_role.yml (a role that is not installed); message = the "
            "[ERROR] line",
            "provider",
            message=next(line for line in role.stderr.splitlines() if line.startswith("[ERROR]")),
            exit_code=role.returncode,
        )
    )
    # Unreachable hosts, ad hoc and in a playbook.
    adhoc = _run(
        [
            str(bin_dir / "ansible"),
            "all",
            "-i",
            "127.0.0.1,",
            "-e",
            f"ansible_port={p['closed']}",
            "-m",
            "ping",
        ],
        env=run_env,
        cwd="/tmp",
    )
    entries.append(
        _entry(
            "ansible-adhoc-unreachable-refused",
            "node",
            program,
            "`ansible all -i 127.0.0.1, -e ansible_port=CLOSED_PORT -m ping` (ssh to a port where "
            "nothing "
            "listens); message = the [ERROR] line and the result block on stdout",
            "provider",
            message=_adhoc_result(adhoc.stdout),
            exit_code=adhoc.returncode,
        )
    )
    unreachable = _run(
        [
            str(bin_dir / "ansible-playbook"),
            "-i",
            "127.0.0.1,",
            "-e",
            f"ansible_port={p['closed']}",
            str(books / "ping.yml"),
        ],
        env=run_env,
        cwd="/tmp",
    )
    fatal = next(line for line in unreachable.stdout.splitlines() if line.startswith("fatal: "))
    entries.append(
        _entry(
            "ansible-playbook-unreachable-refused",
            "node",
            program,
            f"{REL}/ansible/ping.yml over ssh to a port where nothing listens; message = the "
            "fatal: line",
            "provider",
            message=fatal,
        )
    )
    if "ssh" in p:
        key = str(Path(env["root"]) / "ssh" / "id")
        denied = _run(
            [
                str(bin_dir / "ansible"),
                "all",
                "-i",
                "127.0.0.1,",
                "-e",
                f"ansible_port={p['ssh']}",
                "-u",
                "deploy",
                "--private-key",
                key,
                "-m",
                "ping",
            ],
            env=run_env,
            cwd="/tmp",
        )
        entries.append(
            _entry(
                "ansible-adhoc-unreachable-publickey",
                "node",
                program,
                "`ansible all -i 127.0.0.1, -e ansible_port=SSHD_PORT -u deploy --private-key KEY "
                "-m ping` "
                "against sshd (public keys only) where deploy has no authorized key; message = the "
                "[ERROR] line(s) and the result block on stdout",
                "provider",
                message=_adhoc_result(denied.stdout),
                exit_code=denied.returncode,
            )
        )
        if _user_exists():
            become = _run(
                [
                    str(bin_dir / "ansible"),
                    "all",
                    "-i",
                    "127.0.0.1,",
                    "-e",
                    f"ansible_port={p['ssh']}",
                    "-u",
                    USER,
                    "--private-key",
                    key,
                    "-b",
                    "-m",
                    "command",
                    "-a",
                    "systemctl restart node-agent",
                ],
                env=run_env,
                cwd="/tmp",
            )
            entries.append(
                _entry(
                    "ansible-become-missing-sudo-password",
                    "deploy",
                    program,
                    f"`ansible all -i 127.0.0.1, -e ansible_port=SSHD_PORT -u {USER} "
                    "--private-key KEY -b "
                    "-m command -a 'systemctl restart node-agent'` (sudo wants a password; none "
                    "given); "
                    "message = the [ERROR] line(s) and the result lines on stdout",
                    "provider",
                    message=_adhoc_result(become.stdout),
                    exit_code=become.returncode,
                )
            )
    if _user_exists():
        local = _run(
            [
                "runuser",
                "-u",
                USER,
                "--",
                "env",
                *[f"{k}={v}" for k, v in _ANSIBLE_ENV.items()],
                f"ANSIBLE_PYTHON_INTERPRETER={python}",
                str(bin_dir / "ansible"),
                "all",
                "-i",
                "127.0.0.1,",
                "-c",
                "local",
                "-b",
                "-m",
                "command",
                "-a",
                "systemctl restart node-agent",
            ],
            cwd="/tmp",
        )
        entries.append(
            _entry(
                "ansible-become-local-password-required",
                "deploy",
                program,
                f"`runuser -u {USER} -- ansible all -i 127.0.0.1, -c local -b -m command -a "
                "'systemctl "
                "restart node-agent'` (sudo wants a password; none given); message = the [ERROR] "
                "line(s) and the result lines on stdout",
                "provider",
                message=_adhoc_result(local.stdout),
                exit_code=local.returncode,
            )
        )
    return entries


__all__ = ["ansible_cases", "cli_cases", "free_port", "go_cases", "java_cases"]
