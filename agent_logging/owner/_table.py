"""The built-in owner table: what real software says when each layer fails.

One table, two uses: :func:`agent_logging.owner.classify` applies it to exception objects at log
time, :func:`agent_logging.owner.classify_evidence` to the text of evidence that nobody stamped
(a Go service's ``err.Error()``, a Java stack trace, curl's stderr, an Ansible task result).

Order matters: for one exception (or one written type and message) the first rule that matches
wins, so the more specific wording comes first. In particular the database rules come before
the auth and connection rules (libpq says "password authentication failed" and "Connection
refused" too, and the driver is the better evidence), and an ssh connection Ansible cannot make
is the node's before it is the network's.

Decisions a reader may question:

- HTTP 502 and 504 are the ingress reporting that its upstream failed or timed out:
  ``ingress``. 503 is left out: nginx returns it for rate limits and exhausted upstreams, and
  applications when overloaded or while a dependency is down. 500 is left out too (the peer
  could be our API or the provider). Status-only rules are *weak*: the correlator lets any
  rule about a failure's own text outrank them.
- A timeout alone (``TimeoutError``, ``httpx.ReadTimeout``, curl's 28, Go's "i/o timeout") is
  left out: it says a peer did not answer in time, not which layer was slow.
- A TLS error without certificate or alert wording (``WRONG_VERSION_NUMBER``: TLS spoken to
  a plaintext port) is left out: a misconfiguration on either side, not a certificate.
- A ``ConnectionRefusedError`` (with or without its errno) is ``ingress``: the request did not
  reach a listener. A database driver's own error type wins over it (``db-driver`` is
  earlier); a driver that raises socket errors unwrapped (asyncpg) cannot be told apart by
  type, so its callers set ``owner_layer``; in text, "connect: connection refused" to a
  database's well-known port (5432, 3306, 6432) is ``db``.
- An unreachable or refusing ssh (Ansible's ``UNREACHABLE!``) is ``node``: the host is down,
  reimaging or not yet provisioned, which is the node's state, not the network path's.
- Programming errors (``KeyError``, ``TypeError``, Go's ``panic: runtime error``, Java's
  ``NullPointerException``) logged by the API layer are ``api``; logged elsewhere they name
  no owner here and the correlator falls back to the layer that logged them.
"""

from __future__ import annotations

import errno
from typing import Final

from agent_logging.owner._rule import OwnerRule

__all__ = ["DEFAULT_RULES"]

_CERT_MESSAGES: Final = (
    # OpenSSL, as Python's ssl, curl, nginx and openssl s_client print it
    r"certificate[ _]verify[ _]failed",
    r"certificate has expired",
    r"certificate (?:is )?not yet valid",
    r"self[- ]signed certificate",
    r"unable to get (?:local )?issuer certificate",
    r"unable to verify the first certificate",
    r"certificate is not valid for",  # Python's hostname mismatch
    r"hostname mismatch",
    r"(?:tlsv1|sslv3|tlsv13) alert (?:certificate|bad certificate|unknown ca|handshake)",
    r"alert (?:certificate expired|bad certificate|unknown ca|certificate unknown)",
    r"handshake failure",
    r"unknown ca\b",
    r"bad certificate",
    r"verify error:num=\d+",  # openssl s_client
    r"SSL certificate problem",  # curl 60
    r"no alternative certificate subject name matches",  # curl 60
    r"SSL: no alternative certificate",
    # Go crypto/x509 and crypto/tls
    r"\bx509: ",
    r"tls: failed to verify certificate",
    r"remote error: tls: (?:bad certificate|unknown certificate|certificate|expired)",
    # Java (JSSE)
    r"PKIX path (?:building|validation) failed",
    r"unable to find valid certification path",
    r"No subject alternative (?:DNS )?names? match",
    r"NotAfter: ",
    # Kubernetes and others quoting the above
    r"certificate signed by unknown authority",
)

_DB_MESSAGES: Final = (
    # PostgreSQL (server messages as libpq and every driver relay them)
    r"could not connect to server",
    r"connection to server (?:at|on) .{0,120}failed",
    r"password authentication failed for user",
    r"no pg_hba\.conf entry",
    r"the database system is (?:starting up|shutting down|in recovery mode|not accepting)",
    r"remaining connection slots are reserved",
    r"too many clients already",
    r"sorry, too many clients",
    r"server closed the connection unexpectedly",
    r"terminating connection due to administrator command",
    r"canceling statement due to (?:lock timeout|statement timeout|conflict with recovery)",
    r"lock timeout",
    r"deadlock detected",
    r"could not obtain lock",
    r"could not serialize access",
    r"duplicate key value violates unique constraint",
    r"violates (?:foreign key|not-null|check|unique|exclusion) constraint",
    r"relation \"[^\"]{1,128}\" does not exist",
    r"column \"[^\"]{1,128}\" (?:of relation \"[^\"]{1,128}\" )?does not exist",
    r"\bSQLSTATE\b",
    r"\bpq: ",  # Go's lib/pq prefixes every server error with it
    r"\bpgx?(?:pool)?: .{0,60}(?:failed to connect|connection)",
    # MySQL / MariaDB
    r"Can't connect to (?:local )?MySQL server",
    r"MySQL server has gone away",
    r"Lost connection to MySQL server",
    r"Lock wait timeout exceeded",
    r"Deadlock found when trying to get lock",
    r"Too many connections",
    r"Access denied for user '",
    # SQLite, oslo.db, SQLAlchemy in text
    r"database is locked",
    r"\bDB(?:Connection|Deadlock|Duplicate)Error\b",
    r"\(sqlalchemy\.exc\.|\(psycopg2?\.|\(pymysql\.err\.",
    # A connection refused at a database's well-known port (Go: "dial tcp HOST:5432: connect:")
    r"(?:dial tcp|connect to|connection to) \S{0,100}:(?:5432|3306|6432)\b"
    r".{0,40}(?:refused|timed? ?out|no route)",
)

_AUTH_MESSAGES: Final = (
    r"\b401\b.{0,40}\bunauthori[sz]ed\b",
    r"\bunauthori[sz]ed\b.{0,40}\b401\b",
    r"\b403\b.{0,40}\bforbidden\b",
    r"\bforbidden\b.{0,40}\b403\b",
    r"(?:HTTP|status|status code|returned error|response)[ :=]{1,3}40[13]\b",
    # Java's HttpURLConnection: "Server returned HTTP response code: 401 for URL: ..."
    r"HTTP response code: 40[13]\b",
    r"\bHTTP/[0-9.]{1,3} 40[13]\b",
    r"invalid (?:api |access |bearer |auth )?token",
    r"(?:access |bearer |auth |api )?token (?:is |has )?(?:expired|revoked|invalid)",
    r"expired (?:access |bearer |auth )?token",
    r"invalid (?:credentials|api key|client credentials)",
    r"\bjwt (?:expired|malformed)\b",
    r"signature has expired",
    r"\binvalid_(?:grant|client|token)\b",
    r"requires authentication",
    r"authentication (?:failed|required|credentials were not provided)",
    r"\bnot authori[sz]ed\b",
    r"\bunauthori[sz]ed\b",
    r"\baccess denied\b",
    r"\binsufficient_scope\b|\b(?:lacks|missing|insufficient) (?:the )?scopes?\b",  # OAuth 2.0
)

_NODE_MESSAGES: Final = (
    # Ansible and ssh: the host itself is not there
    r"\bUNREACHABLE!",
    r"Failed to connect to the host via ssh",
    r"ssh: connect to host",
    r"Connection timed out during banner exchange",
    r"Permission denied \(publickey",
    r"Host key verification failed",
    # Disks, filesystems, memory
    r"No space left on device",
    r"Read-only file system",
    r"Input/output error",
    r"\bI/O error\b",
    r"Cannot allocate memory",
    r"\bout of memory\b",
    r"\bOOMKilled\b",
    r"\boom[-_ ]kill",
    r"Killed process \d",
    r"kernel panic",
    r"\bDiskPressure\b|\bMemoryPressure\b",
    # Baseboard management: IPMI and Redfish answered, or did not
    r"Unable to establish (?:IPMI|LAN|LANplus|RMCP\+?) ",
    r"Error: Unable to establish",
    # ipmitool's open interface on a host whose BMC device is absent (no BMC, or its
    # ipmi_si/ipmi_devintf driver is not loaded): "Could not open device at /dev/ipmi0 ..."
    r"Could not open device at /dev/ipmi",
    r"\bBMC\b.{0,40}(?:not responding|unreachable|unavailable|timed? ?out|error)",
    r"\bpower (?:on|off|cycle|reset|status) (?:failed|error)",
    r"\bchassis power .{0,40}(?:failed|error)",
    r"\bNodeNotReady\b|\bnode .{0,60} (?:is )?not ready\b",
    r"\bhardware error\b|\bmachine check\b",
    # The hypervisor on the node: libvirt and QEMU (OpenStack nova-compute relays both)
    r"\blibvirtError\b|\bConnection to libvirt lost\b",
    r"Failed to connect socket to '/var/run/libvirt",
    r"\bqemu-(?:kvm|system-\w{1,20}): ",
)

_INGRESS_MESSAGES: Final = (
    r"connection refused",
    r"connect: connection refused",
    r"Failed to connect to \S{1,200} port \d{1,5}",  # curl 7
    r"no route to host",
    r"network is unreachable",
    r"host is unreachable",
    r"no live upstreams",
    r"upstream connect error",  # Envoy
    r"no healthy upstream",  # Envoy
    r"upstream (?:timed out|prematurely closed)",
    # Name resolution
    r"Name or service not known",
    r"Temporary failure in name resolution",
    r"nodename nor servname provided",
    r"Could not resolve host",  # curl 6
    r"\bno such host\b",  # Go
    r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN)",
    r"could not be resolved \(\d{1,3}: ",  # nginx's resolver
    r"\bHost not found\b|\bNXDOMAIN\b|\bserver misbehaving\b",
)

_DEPLOY_MESSAGES: Final = (
    r"command not found",
    r"executable file not found in \$PATH",  # Go os/exec
    r"not found in \$PATH",
    r"No module named",
    r"no such file or directory",
    r"cannot open shared object file",
    r"exec format error",
    r"status=203/EXEC",  # systemd: the unit's executable could not be run
    r"Missing sudo password",  # Ansible become
    r"sudo: a (?:terminal|password) is required",
    r"\bErrImagePull\b|\bImagePullBackOff\b|\bErrImageNeverPull\b|\bInvalidImageName\b",
    r"Failed to pull image",
    r"manifest unknown",
    r"\bFailedMount\b|MountVolume\.SetUp failed",
    r"\bCreateContainerConfigError\b",
    r"(?:secret|configmap)s? \"[^\"]{1,253}\" not found",
    r"\b(?:package|module|binary|executable|program|prerequisite|dependency|tool) "
    r"[\w.\-'\"]{1,80} (?:is )?(?:not found|missing|not installed)",
    r"\bis not installed\b",
    r"\bImageNotFound\b|\bImage [\w.:/-]{1,200} could not be found\b",  # OpenStack, Ironic
    r"\bmissing (?:required )?(?:prerequisite|dependency|package|binary|executable)",
    # Ansible: a module of a collection that is not installed ("couldn't resolve
    # module/action 'community.general.ipmi_power'. This often indicates a misspelling, missing
    # collection, or incorrect module path."; ad hoc: "Cannot resolve 'X' to an action or
    # module"), a role that is not installed, a source file missing on the controller
    r"couldn't resolve module/action",
    r"Cannot resolve '[^']{1,200}' to an action or module",
    r"the role '[^']{1,200}' was not found",
    r"Could not find or access '",
)

_WORKFLOW_MESSAGES: Final = (
    r"invalid (?:state )?transition",
    r"illegal (?:state )?transition",
    r"cannot transition",
    r"can't transition",
    r"unexpected state\b",
    r"unexpected status [a-z_]",  # a state's name, not an HTTP status ("unexpected status 502")
    r"invalid (?:state|status) .{0,40}(?:for|expected)",
    r"\bin (?:state|status) .{0,40}, expected\b",
    r"\bwrong state\b",
    r"\bstate conflict\b",
    r"while it is in (?:vm_state|task_state|power_state|provision_state)",  # OpenStack
    r"\bInstanceInvalidState\b|\bInvalidStateTransition\b|\bNodeLocked\b",
    r"is locked by host",  # Ironic
    r"\brelease_failed\b",
    r"stuck in (?:state|status)?",
    r"\bversion conflict\b|\boptimistic lock",
    r"(?:can't|cannot) trigger event \S{1,100} from state",  # Python transitions' MachineError
    # Optimistic concurrency: the record changed under the writer (a lost update refused)
    r"\bstale (?:\w{1,40} )?(?:version|revision|generation|state)\b",
    r"\bStaleDataError\b",  # SQLAlchemy's version counter
)

_PROVIDER_MESSAGES: Final = (
    r"\b(?:AWX|AAP|Tower|automation controller|EDA)\b.{0,80}\b(?:job|activation)\b"
    r".{0,80}\b(?:failed|error|canceled|cancelled)\b",
    r"\bjob template\b.{0,80}\b(?:failed|error)\b",
    r"\brulebook activation\b.{0,80}\b(?:failed|error)\b",
    r"Job terminated due to error",
    # AWX/AAP job_explanation and job results: the job itself was stopped or its project
    # sync failed ("Task was canceled due to receiving a shutdown signal.", "The running
    # ansible process received a shutdown signal.", "Previous Task Failed: {...}")
    r"canceled due to receiving a shutdown signal",
    r"ansible process received a shutdown signal",
    r"Previous Task Failed: ",
    r"\bprovider job\b.{0,80}\b(?:failed|error|canceled|cancelled)\b",
)

#: The built-in owner table, in priority order (for one exception, the first rule wins).
DEFAULT_RULES: Final[tuple[OwnerRule, ...]] = (
    OwnerRule(
        "cert",
        type_names=(
            "ssl.SSLCertVerificationError",
            "requests.exceptions.SSLError",
            "aiohttp.client_exceptions.ClientConnectorCertificateError",
            "javax.net.ssl.SSLHandshakeException",
            "javax.net.ssl.SSLPeerUnverifiedException",
            "java.security.cert.CertificateExpiredException",
            "java.security.cert.CertificateNotYetValidException",
            "java.security.cert.CertPathValidatorException",
            "sun.security.provider.certpath.SunCertPathBuilderException",
            "sun.security.validator.ValidatorException",
        ),
        name="tls-certificate-type",
        description="TLS certificate errors by type: Python ssl, requests, aiohttp, Java JSSE",
    ),
    OwnerRule(
        "cert",
        message_patterns=_CERT_MESSAGES,
        name="tls-certificate-message",
        description="certificate wording of OpenSSL, curl, Go crypto/x509 and tls, Java PKIX",
    ),
    # Database drivers before the auth and connection rules: their messages say "password
    # authentication failed" and "connection refused" too, and the driver is the better
    # evidence.
    OwnerRule(
        "db",
        module_prefixes=(
            "psycopg",
            "psycopg2",
            "psycopg_pool",
            "asyncpg",
            "sqlite3",
            "duckdb",
            "_duckdb",
            "pymysql",
            "MySQLdb",
            "oslo_db",
            "org.postgresql",
            "com.mysql",
            "java.sql",
        ),
        name="db-driver",
        description="exceptions of database drivers (Python, and Java's JDBC by package)",
    ),
    OwnerRule(
        "db",
        type_names=(
            "sqlalchemy.exc.DBAPIError",
            "sqlalchemy.exc.OperationalError",
            "sqlalchemy.exc.IntegrityError",
            "sqlalchemy.exc.TimeoutError",
        ),
        name="sqlalchemy",
        description="SQLAlchemy's errors wrapping a driver's",
    ),
    OwnerRule(
        "db",
        message_patterns=_DB_MESSAGES,
        name="db-message",
        description="PostgreSQL, MySQL, SQLite and oslo.db wording; refusals at a DB port",
    ),
    # The node before the network: Ansible's unreachable host says "Connection refused" too.
    OwnerRule(
        "node",
        errnos=frozenset({errno.ENOSPC, errno.EROFS, errno.EIO, errno.ENOMEM}),
        name="node-errno",
        description="disk full, read-only filesystem, I/O error, out of memory",
    ),
    OwnerRule(
        "node",
        message_patterns=_NODE_MESSAGES,
        name="node-message",
        description="unreachable hosts (Ansible, ssh), disks, memory, BMC/IPMI and power",
    ),
    OwnerRule(
        "api_auth",
        statuses=frozenset({401, 403}),
        name="http-401-403",
        description="an API answered 401 or 403",
    ),
    OwnerRule(
        "api_auth",
        message_patterns=_AUTH_MESSAGES,
        name="api-auth-message",
        description="401/403 in words, invalid or expired tokens and credentials",
    ),
    OwnerRule(
        "ingress",
        statuses=frozenset({502, 504}),
        name="http-502-504",
        description="the ingress answered that its upstream failed or timed out",
    ),
    OwnerRule(
        "ingress",
        message_patterns=(
            r"\bbad gateway\b",
            r"\bgateway time-?out\b",
            r"(?:HTTP|status|status code|returned error|response)[ :=]{1,3}50[24]\b",
            r"HTTP response code: 50[24]\b",  # Java's HttpURLConnection
        ),
        name="http-502-504-message",
        weak=True,
        description="a client relaying the ingress's 502 or 504 in words",
    ),
    OwnerRule(
        "ingress",
        type_names=(
            "ConnectionRefusedError",
            "java.net.ConnectException",
            "java.net.NoRouteToHostException",
            "java.net.UnknownHostException",
            "socket.gaierror",
        ),
        name="connect-type",
        description="a connection refused or an unresolvable or unroutable host, by type",
    ),
    OwnerRule(
        "ingress",
        errnos=frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH}),
        name="connect-errno",
        description="connection refused, host or network unreachable, by errno",
    ),
    OwnerRule(
        "ingress",
        message_patterns=_INGRESS_MESSAGES,
        name="connect-message",
        description="refused connections, 502/504, proxies' upstream errors, name resolution",
    ),
    # Missing executables and prerequisites: subprocess raises FileNotFoundError for a missing
    # program, PermissionError for one that is not executable; a shell exits 127 (not found)
    # and 126 (not executable), systemd reports 203/EXEC.
    OwnerRule(
        "deploy",
        type_names=("FileNotFoundError", "PermissionError", "ModuleNotFoundError"),
        name="missing-prerequisite-type",
        description="a missing program, module or file, by Python type",
    ),
    OwnerRule(
        "deploy",
        exit_codes=frozenset({126, 127}),
        name="missing-prerequisite-exit",
        description="a shell's 126 (not executable) and 127 (command not found)",
    ),
    OwnerRule(
        "deploy",
        message_patterns=_DEPLOY_MESSAGES,
        name="missing-prerequisite-message",
        description="missing executables, modules, files, images, mounts, sudo passwords",
    ),
    OwnerRule(
        "workflow_state",
        statuses=frozenset({409}),
        name="http-409",
        description="an API refused a change that conflicts with the resource's state",
    ),
    OwnerRule(
        "workflow_state",
        message_patterns=_WORKFLOW_MESSAGES,
        name="workflow-state-message",
        description="invalid transitions, unexpected states, locked or stuck resources",
    ),
    OwnerRule(
        "provider",
        message_patterns=_PROVIDER_MESSAGES,
        name="provider-job-message",
        description="an AAP/AWX/EDA job or activation that failed or was canceled",
    ),
    OwnerRule(
        "api",
        type_names=(
            "KeyError",
            "TypeError",
            "AttributeError",
            "IndexError",
            "NameError",
            "ZeroDivisionError",
            "UnboundLocalError",
            "java.lang.NullPointerException",
            "java.lang.IllegalStateException",
            "java.lang.ClassCastException",
        ),
        layers=("api",),
        name="api-programming-error",
        description="a programming error raised in an API service",
    ),
    OwnerRule(
        "api",
        message_patterns=(
            r"panic: runtime error",
            r"\bNullPointerException\b",
            r"Traceback \(most recent call last\)",
        ),
        layers=("api",),
        name="api-crash-message",
        description="an API service's crash: a Go panic, a Java NPE, a Python traceback",
    ),
)
