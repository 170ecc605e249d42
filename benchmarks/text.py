"""The ``text`` source at 10^6 lines: events/s of each built-in format beside ``ndjson`` and
``nginx``, measured in the same run (issue 24).

Once per run, ``--lines`` lines of each kind are written (seeded; ``--keep DIR`` keeps them
and a later run with the same ``--keep``, ``--lines`` and ``--seed`` reuses them):

- each text format (``oslo``, ``klog``, ``journald``, ``json``, ``syslog``, ``python``,
  ``logfmt``) from templates copied from the real lines in
  ``tests/correlator/sources/text/fixtures/`` (its README says where each came from), with
  their times (monotonic: 1-5 ms apart, so that a format's milliseconds never repeat), request
  ids, instance ids, hosts and process ids varied, so that no two records have the same
  content hash (a repeated line would be a duplicate, and cheaper); every record is checked
  unique as it is written. About 1 % of ``oslo`` and ``python`` records are tracebacks
  folded into their record (``oslo``'s repeating its ``logging_exception_prefix``);
- ``ndjson``: agent JSON lines of the benchmark fleet (``benchmarks.fleet``), its layer files
  one after the other in one file, cut at ``--lines``;
- ``nginx``: access lines in the ``combined`` form with ``$request_id`` and the timings
  appended, as the incident corpus's real nginx wrote them, and 1 % error lines naming their
  request (which the ingest links to their access lines once committed);
- ``nginx-access``: the same access lines without the error lines, as nginx writes its
  access log: the adapter reading and storing, without the linking.

Each kind is one file. Measured, ``--repeat`` rounds, the kinds interleaved in each round so
that the host's drift hits all alike:

- whole process (the default): ``python -m correlator --db FRESH ingest --source KIND
  [--format F --layer L] FILE --quiet``, each into a fresh DuckDB file, from start to exit
  (wall seconds; CPU seconds and peak RSS of the process and its parse workers). Every kind
  is parsed by the CLI's default parse workers (one per core) once its file reaches 64 MiB,
  in threads (the native mappings of ndjson, nginx and every text format); a smaller file
  is parsed in the ingesting process. The summary the CLI prints must say
  every record was accepted, none a duplicate and none rejected, else the run fails;
- ``--parse-only``: the source's parsing alone in this process, no store: the lines read with
  ``correlator.ingest.read_lines`` and parsed as the ingest's workers parse them, one batch of
  50,000 lines after the other (``_parse_workers.reading``: the native mappings, the
  parsers reading what they decline; each batch packed for the store, its raw texts
  compressed); the events must be every record.

events/s is the records accepted (events) over the median seconds; each kind's ratio to
``ndjson``, ``nginx`` and ``nginx-access`` is of those rates, from the same run (above 1:
faster).
``--profile`` prints each kind's cProfile top 15 (by own time) over its first
:data:`PROFILE_LINES` lines: of the parser alone with ``--parse-only``, else of the ingest in
this process (``ingest_lines``, no parse workers, into a fresh store: parsing and storing).

Run: ``python -m benchmarks.text [--lines 1e6] [--repeat 3] [--seed 1] [--kinds a,b]
[--parse-only] [--profile] [--keep DIR]``. At 10^6 lines the files take about 2.5 GB in
``$TMPDIR``.
"""

from __future__ import annotations

import argparse
import calendar
import cProfile
import hashlib
import io
import itertools
import os
import pstats
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from benchmarks._common import REPO_ROOT, machine_note

#: The first record's time: 2026-11-27T00:00:00Z, two days before the fixtures were written
#: (klog and RFC 3164 lines carry no year: they are read in the latest year that does not put
#: them more than a day after now).
BASE_US: Final = calendar.timegm((2026, 11, 27, 0, 0, 0)) * 1_000_000
#: Records are this many µs apart, at random: at least a millisecond, so that the times of a
#: format writing milliseconds never repeat.
STEP_US: Final = (1_000, 5_000)
#: ``--profile`` profiles this many lines of each kind (a rate does not depend on the size).
PROFILE_LINES: Final = 200_000
#: The ingest's batches, which ``--parse-only`` gives a columnar parser.
BATCH_LINES: Final = 50_000
_SUMMARY: Final = re.compile(r"accepted (\d+), duplicate (\d+), rejected (\d+) in")
_PLACEHOLDER: Final = re.compile(r"\$([a-z_0-9]+)")

# -- the values a template's placeholders take --------------------------------------------------


class _Values:
    """The state of one file's generation: the clock, the pools of identifiers, the record
    being written; each placeholder of :data:`_VALUES` reads it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.us = BASE_US
        self.seq = 0
        self.node = 0
        self.request = ""
        self.hosts = [f"cp-r{i // 40:02d}-n{i % 40:02d}.dc1.internal" for i in range(400)]
        self.instances = [self.uuid() for _ in range(2_000)]
        self.projects = [self.hex(32) for _ in range(50)]
        self.machine_ids = [self.hex(32) for _ in self.hosts]
        self._second = -1
        self._stamps: dict[tuple[str, int], str] = {}

    def next_record(self) -> None:
        """Advance the clock and the record count; choose the record's node; keep the request
        id for about three records (a request writes a few lines)."""
        self.us += self.rng.randint(*STEP_US)
        self.seq += 1
        self.node = self.rng.randrange(len(self.hosts))
        if not self.request or self.rng.random() < 1 / 3:
            self.request = "req-" + self.uuid()

    def hex(self, digits: int) -> str:
        return f"{self.rng.getrandbits(digits * 4):0{digits}x}"

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"

    def clock(self, layout: str, offset_s: int = 0) -> str:
        """The record's time to the second, ``time.strftime``'s ``layout``, ``offset_s``
        east of UTC (kept while the second lasts: a second holds hundreds of records)."""
        second = self.us // 1_000_000
        if second != self._second:
            self._second = second
            self._stamps.clear()
        text = self._stamps.get((layout, offset_s))
        if text is None:
            text = time.strftime(layout, time.gmtime(second + offset_s))
            self._stamps[(layout, offset_s)] = text
        return text

    @property
    def micros(self) -> int:
        return self.us % 1_000_000


def _rfc3164(v: _Values) -> str:
    """``Jun  4 15:16:01``: the day padded with a space, as RFC 3164 writes it."""
    month_day = v.clock("%b %d")
    return f"{month_day[:4]}{int(month_day[4:]):>2} {v.clock('%H:%M:%S')}"


#: Placeholder -> its value for the record being written. Times first, then identifiers.
_VALUES: Final[dict[str, Callable[[_Values], str]]] = {
    # 2017-05-16 00:00:04.500 (oslo)
    "oslo_time": lambda v: f"{v.clock('%Y-%m-%d %H:%M:%S')}.{v.micros // 1000:03d}",
    # 1129 05:41:07.986784 (klog, after its level letter)
    "klog_time": lambda v: f"{v.clock('%m%d %H:%M:%S')}.{v.micros:06d}",
    # journald's microseconds, and its monotonic clock (since the host's boot)
    "realtime_us": lambda v: str(v.us),
    "realtime_hex": lambda v: f"{v.us:x}",
    "monotonic_us": lambda v: str(v.us - BASE_US + 14_789_979_684),
    "monotonic_hex": lambda v: f"{v.us - BASE_US + 14_789_979_684:x}",
    "seq_hex": lambda v: f"{v.seq + 0x12D:x}",
    # zap's epoch seconds, pino's epoch milliseconds
    "epoch_s": lambda v: f"{v.us // 1_000_000}.{v.micros:06d}",
    "epoch_ms": lambda v: str(v.us // 1000),
    # RFC 3339 in UTC: milliseconds (ECS, bunyan), microseconds (python-json-logger, rsyslog),
    # nanoseconds (go-logfmt, logrus)
    "utc_ms": lambda v: f"{v.clock('%Y-%m-%dT%H:%M:%S')}.{v.micros // 1000:03d}Z",
    "utc_us": lambda v: f"{v.clock('%Y-%m-%dT%H:%M:%S')}.{v.micros:06d}+00:00",
    "utc_ns": lambda v: f"{v.clock('%Y-%m-%dT%H:%M:%S')}.{v.micros:06d}000Z",
    # Europe/Berlin in winter, as the JSON fixtures were written: seconds (zerolog, logrus),
    # nanoseconds (zerolog's and logrus's fine forms), zap's ISO 8601 milliseconds
    "berlin_s": lambda v: f"{v.clock('%Y-%m-%dT%H:%M:%S', 3600)}+01:00",
    "berlin_ns": lambda v: f"{v.clock('%Y-%m-%dT%H:%M:%S', 3600)}.{v.micros:06d}000+01:00",
    "berlin_zap": lambda v: f"{v.clock('%Y-%m-%dT%H:%M:%S', 3600)}.{v.micros // 1000:03d}+0100",
    "berlin_asctime": lambda v: f"{v.clock('%Y-%m-%d %H:%M:%S', 3600)},{v.micros // 1000:03d}",
    # Python's asctime (UTC here)
    "asctime": lambda v: f"{v.clock('%Y-%m-%d %H:%M:%S')},{v.micros // 1000:03d}",
    # Jun 14 15:16:01 (RFC 3164), and ftpd's ctime in its message
    "rfc3164": _rfc3164,
    "ctime": lambda v: v.clock("%a %b %d %H:%M:%S %Y"),
    # nginx: access [29/Nov/2026:02:55:25 +0000], error 2026/11/29 02:54:44
    "nginx_time": lambda v: v.clock("%d/%b/%Y:%H:%M:%S +0000"),
    "nginx_error_time": lambda v: v.clock("%Y/%m/%d %H:%M:%S"),
    # identifiers: a request's (kept for ~3 records), fresh ones, the pools'
    "req": lambda v: v.request,
    "uuid": lambda v: v.uuid(),
    "hex32": lambda v: v.hex(32),
    "hex16": lambda v: v.hex(16),
    "sha1": lambda v: v.hex(40),
    "instance": lambda v: v.rng.choice(v.instances),
    "project": lambda v: v.rng.choice(v.projects),
    "user": lambda v: v.projects[v.node % len(v.projects)],
    "host": lambda v: v.hosts[v.node],
    "node": lambda v: v.hosts[v.node][3:10],  # r07-n12
    "machine_id": lambda v: v.machine_ids[v.node],
    "boot_id": lambda v: v.machine_ids[-1 - v.node],
    "ip": lambda v: f"10.{v.rng.randrange(256)}.{v.rng.randrange(256)}.{v.rng.randrange(1, 255)}",
    # process ids: drawn from a few (long-running services), or counting (each a new process:
    # unique within any second of lines whose times stop at the second)
    "pid": lambda v: str(2_900 + v.node % 40),
    "pid_seq": lambda v: str(300 + v.seq % 32_000),
    "seq": lambda v: str(v.seq),
    "task": lambda v: str(v.rng.randrange(1, 90_000)),
    "allocation": lambda v: f"ax-{v.rng.getrandbits(24):06x}",
    "pod": lambda v: v.hex(5),
    "attempt": lambda v: str(v.rng.randrange(1, 6)),
    "len": lambda v: str(v.rng.randrange(1_800, 2_000)),
    "duration": lambda v: f"0.{v.rng.randrange(1_000_000, 9_999_999)}",
    "rt": lambda v: f"0.{v.rng.randrange(1, 400):03d}",
    "seconds": lambda v: f"{v.rng.randrange(5, 40)}.{v.rng.randrange(100):02d}",
    "ram_mb": lambda v: f"{512 * v.rng.randrange(1, 100)}MB",
    "vm_event": lambda v: v.rng.choice(("Started", "Paused", "Resumed", "Stopped")),
    "user_name": lambda v: v.rng.choice(("cyrus", "news", "test", "guest", "root")),
}


@dataclass(frozen=True, slots=True)
class _Template:
    """A record with ``$name`` placeholders (:data:`_VALUES`); ``\\n`` separates its lines.

    Attributes:
        layout: the record as a ``str.format`` layout (``{name}`` for ``$name``).
        names: its placeholders.
    """

    layout: str
    names: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> _Template:
        names = tuple(dict.fromkeys(_PLACEHOLDER.findall(text)))
        unknown = [name for name in names if name not in _VALUES]
        if unknown:
            raise ValueError(f"unknown placeholders {unknown} in {text[:60]!r}")
        # As a str.format layout: braces doubled (JSON), $name as {name}.
        layout = _PLACEHOLDER.sub(r"{\1}", text.replace("{", "{{").replace("}", "}}"))
        return cls(layout, names)

    def record(self, values: _Values) -> str:
        return self.layout.format_map({name: _VALUES[name](values) for name in self.names})


@dataclass(frozen=True)
class Kind:
    """One kind of input measured: its source, the ingest's options, its record templates.

    Attributes:
        name: its row in the table (a text format's name, ``ndjson``, ``nginx``).
        source: ``--source``.
        flags: the ingest's options after ``--source``.
        options: the same, as the parser takes them.
        templates: ``(weight, template)`` of its records (none: ``ndjson``, from the fleet).
    """

    name: str
    source: str
    flags: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    templates: tuple[tuple[float, _Template], ...] = ()

    def records(self, rng: random.Random) -> Iterator[str]:
        """Its records, one after the other, without end."""
        values = _Values(rng)
        weights = list(itertools.accumulate(weight for weight, _ in self.templates))
        templates = [template for _, template in self.templates]
        choose = rng.choices
        while True:
            values.next_record()
            (template,) = choose(templates, cum_weights=weights)
            yield template.record(values)


def _text(name: str, layer: str | None, *templates: tuple[float, str]) -> Kind:
    flags = ("--format", name, *(("--layer", layer) if layer else ()))
    options = {"text_format": name, **({"layer": layer} if layer else {})}
    return Kind(
        name,
        "text",
        flags,
        options,
        tuple((weight, _Template.of(text)) for weight, text in templates),
    )


# -- the templates, each a line of a fixture with its values made placeholders ----------------

# openstack_2k_head.log (loghub): the file each line came from is its first word.
_API: Final = "nova-api.log.1.2017-05-16_13:53:08 $oslo_time"
_COMPUTE: Final = "nova-compute.log.1.2017-05-16_13:55:31 $oslo_time"
# The loghub sample holds no traceback: this one is written from oslo.log's
# logging_exception_prefix, as tests/correlator/sources/text/test_oslo.py's PREFIXED_TRACEBACK,
# with the frames of nova's "Virtual Interface creation failed".
_OSLO_TRACE_PREFIX: Final = f"\n{_COMPUTE} $pid ERROR nova.compute.manager [instance: $instance] "
_OSLO_TRACEBACK: Final = (
    f"{_COMPUTE} $pid ERROR nova.compute.manager [$req $user $project - - -] "
    "[instance: $instance] Instance failed to spawn"
    + _OSLO_TRACE_PREFIX.join(
        [
            "",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python2.7/dist-packages/nova/compute/manager.py", line 2078, '
            "in _build_resources",
            "    yield resources",
            '  File "/usr/lib/python2.7/dist-packages/nova/compute/manager.py", line 1920, '
            "in _build_and_run_instance",
            "    block_device_info=block_device_info)",
            '  File "/usr/lib/python2.7/dist-packages/nova/virt/libvirt/driver.py", line 2596, '
            "in spawn",
            "    post_xml_callback=gen_confdrive)",
            '  File "/usr/lib/python2.7/dist-packages/nova/virt/libvirt/driver.py", line 5013, '
            "in _create_domain_and_network",
            "    raise exception.VirtualInterfaceCreateException()",
            "VirtualInterfaceCreateException: Virtual Interface creation failed",
        ]
    )
)
OSLO: Final = _text(
    "oslo",
    None,  # the file word names the service: nova-api in api, nova-compute in node
    (40, f'{_API} 25746 INFO nova.osapi_compute.wsgi.server [$req $user $project - - -] 10.11.10.1 "GET /v2/$project/servers/detail HTTP/1.1" status: 200 len: $len time: $duration'),  # noqa: E501
    (12, f"{_COMPUTE} $pid INFO nova.compute.manager [$req - - - - -] [instance: $instance] VM $vm_event (Lifecycle Event)"),  # noqa: E501
    (5, f"{_COMPUTE} $pid INFO nova.compute.manager [$req - - - - -] [instance: $instance] During sync_power_state the instance has a pending task (spawning). Skip."),  # noqa: E501
    (12, f"{_COMPUTE} $pid INFO nova.virt.libvirt.imagecache [$req - - - - -] image $uuid at (/var/lib/nova/instances/_base/$sha1): checking"),  # noqa: E501
    (5, f"{_COMPUTE} $pid INFO nova.virt.libvirt.imagecache [$req - - - - -] Active base files: /var/lib/nova/instances/_base/$sha1"),  # noqa: E501
    (3, f"{_API} 25743 INFO nova.api.openstack.compute.server_external_events [$req $user $project - - -] Creating event network-vif-plugged:$uuid for instance $instance"),  # noqa: E501
    (3, f"{_COMPUTE} $pid INFO nova.virt.libvirt.driver [-] [instance: $instance] Instance spawned successfully."),  # noqa: E501
    (3, f"{_COMPUTE} $pid INFO nova.compute.manager [$req $user $project - - -] [instance: $instance] Took $seconds seconds to spawn the instance on the hypervisor."),  # noqa: E501
    (4, f"{_COMPUTE} $pid INFO nova.compute.resource_tracker [$req - - - - -] Auditing locally available compute resources for node $host"),  # noqa: E501
    (2, f"{_COMPUTE} $pid INFO nova.compute.resource_tracker [$req - - - - -] Final resource view: name=$host phys_ram=64172MB used_ram=$ram_mb phys_disk=15GB used_disk=20GB total_vcpus=16 used_vcpus=1 pci_stats=[]"),  # noqa: E501
    (6, f'{_API} 25784 INFO nova.metadata.wsgi.server [$req - - - - -] $ip,10.11.10.1 "GET /openstack/2013-10-17/meta_data.json HTTP/1.1" status: 200 len: 967 time: $duration'),  # noqa: E501
    (2, f'{_API} 25793 INFO nova.metadata.wsgi.server [-] $ip,10.11.10.1 "GET /openstack/2013-10-17 HTTP/1.1" status: 200 len: 157 time: $duration'),  # noqa: E501
    (1.5, f'{_API} 25746 INFO nova.osapi_compute.wsgi.server [$req $user $project - - -] 10.11.10.1 "DELETE /v2/$project/servers/$instance HTTP/1.1" status: 204 len: 203 time: $duration'),  # noqa: E501
    (1.5, f"{_COMPUTE} $pid INFO nova.compute.manager [$req $user $project - - -] [instance: $instance] Terminating instance"),  # noqa: E501
    (1, _OSLO_TRACEBACK),
)  # fmt: skip

# klog.log (tests/correlator/sources/text/programs/klog_lines.go, klog v2)
KLOG: Final = _text(
    "klog",
    "node",
    (10, "I$klog_time   14013 klog_lines.go:22] Starting kubelet"),
    (5, "I$klog_time   14013 klog_lines.go:23] Version: v1.29.0"),
    (30, 'I$klog_time   14013 klog_lines.go:24] "Pod status updated" pod="kube-system/coredns-5d78c9869d-$pod" status="Running" request_id="$req"'),  # noqa: E501
    (25, 'I$klog_time   14013 klog_lines.go:25] "Node ready" node="$host" allocation="$instance"'),
    (10, "W$klog_time   14013 klog_lines.go:26] Image garbage collection failed once"),
    (10, 'E$klog_time   14013 klog_lines.go:27] "Failed to contact API server" err="connection refused" host="$ip:6443" attempt=$attempt'),  # noqa: E501
    (10, r'I$klog_time   14013 klog_lines.go:29] "Message with \"quotes\" and spaces" key="value with spaces" empty=""'),  # noqa: E501
)  # fmt: skip

# journald.json (journalctl -o json of a journald fed by systemd-cat), keys in its order
_CURSOR: Final = (
    "s=d9f278d2269c4f5fb7823643602ca7fa;i=$seq_hex;b=$boot_id;m=$monotonic_hex;"
    "t=$realtime_hex;x=$hex16"
)
JOURNALD: Final = _text(
    "journald",
    "node",
    (45, '{"_RUNTIME_SCOPE":"system","_CAP_EFFECTIVE":"1fffeffffff","_TRANSPORT":"stdout","_STREAM_ID":"$hex32","_UID":"0","MESSAGE":"plain message from systemd-cat $req","_PID":"$pid_seq","_COMM":"cat","__CURSOR":"' + _CURSOR + '","__MONOTONIC_TIMESTAMP":"$monotonic_us","_HOSTNAME":"$host","_MACHINE_ID":"$machine_id","_BOOT_ID":"$boot_id","PRIORITY":"4","SYSLOG_IDENTIFIER":"provision","__REALTIME_TIMESTAMP":"$realtime_us","_GID":"0"}'),  # noqa: E501
    (35, '{"_TRANSPORT":"stdout","__MONOTONIC_TIMESTAMP":"$monotonic_us","_HOSTNAME":"$host","_CAP_EFFECTIVE":"1fffeffffff","_STREAM_ID":"$hex32","PRIORITY":"3","_RUNTIME_SCOPE":"system","_UID":"0","SYSLOG_IDENTIFIER":"agent","_PID":"$pid_seq","_GID":"0","_COMM":"cat","MESSAGE":"instance $instance: first line","__REALTIME_TIMESTAMP":"$realtime_us","__CURSOR":"' + _CURSOR + '","_MACHINE_ID":"$machine_id","_BOOT_ID":"$boot_id"}'),  # noqa: E501
    (20, '{"_SOURCE_MONOTONIC_TIMESTAMP":"474750","MESSAGE":"Key type fscrypt-provisioning registered","SYSLOG_IDENTIFIER":"kernel","_RUNTIME_SCOPE":"system","_HOSTNAME":"$host","__REALTIME_TIMESTAMP":"$realtime_us","__MONOTONIC_TIMESTAMP":"$monotonic_us","SYSLOG_FACILITY":"0","_BOOT_ID":"$boot_id","PRIORITY":"5","_TRANSPORT":"kernel","_MACHINE_ID":"$machine_id","__CURSOR":"' + _CURSOR + '"}'),  # noqa: E501
)  # fmt: skip

# json_zap.log, json_zerolog.log, json_logrus.log, json_ecs.log, json_pino.log,
# json_bunyan.log, json_python.log (programs/json_*_lines.*)
_STACK: Final = r"Error: boom: disk full\n    at lines (/srv/app/lines.js:19:23)\n    at Object.<anonymous> (/srv/app/lines.js:30:3)\n    at Module._compile (node:internal/modules/cjs/loader:1521:14)\n    at Module.load (node:internal/modules/cjs/loader:1266:32)"  # noqa: E501
JSON: Final = _text(
    "json",
    "api",
    (12, '{"level":"info","ts":$epoch_s,"caller":"programs/json_zap_lines.go:32","msg":"request handled","request_id":"$req","trace_id":"$hex32","status":200,"latency":0.001234,"cached":false,"tags":["a","b"]}'),  # noqa: E501
    (2, r'{"level":"error","ts":$epoch_s,"caller":"programs/json_zap_lines.go:38","msg":"upstream failed","error":"dial tcp $ip:443: i/o timeout","request_id":"$req","stacktrace":"main.main\n\t/srv/app/json_zap_lines.go:38\nruntime.main\n\t/usr/lib/go-1.19/src/runtime/proc.go:250"}'),  # noqa: E501
    (4, r'{"level":"warn","ts":$epoch_s,"logger":"http","caller":"programs/json_zap_lines.go:42","msg":"slow \"spawn\"","http":{"method":"POST","instance":"$instance"}}'),  # noqa: E501
    (6, '{"L":"DEBUG","T":"$berlin_zap","C":"programs/json_zap_lines.go:49","M":"handling request","request_id":"$req"}'),  # noqa: E501
    (10, '{"level":"debug","host":"$host","request_id":"$req","trace_id":"$hex32","time":"$berlin_s","message":"handling request"}'),  # noqa: E501
    (4, '{"level":"info","host":"$host","instance":"$instance","time":"$berlin_ns"}'),
    (8, '{"host":"$host","level":"debug","msg":"handling request","request_id":"$req","time":"$berlin_ns"}'),  # noqa: E501
    (3, '{"error":"boom: disk full","level":"error","msg":"write failed","time":"$berlin_s","trace.id":"$hex32"}'),  # noqa: E501
    (8, '{"@timestamp":"$utc_ms","log.level":"debug","message":"handling request","ecs.version":"1.6.0","host":"$host","log":{"logger":"app.module","origin":{"file":{"line":39,"name":"json_python_lines.py"},"function":"_lines"},"original":"handling request"},"process":{"name":"MainProcess","pid":$pid,"thread":{"id":140196348218240,"name":"MainThread"}},"request_id":"$req"}'),  # noqa: E501
    (8, '{"level":20,"time":$epoch_ms,"pid":$pid,"hostname":"$host","request_id":"$req","host":"worker-1","msg":"handling request"}'),  # noqa: E501
    (8, '{"name":"app","hostname":"$host","pid":$pid,"level":30,"msg":"service started","time":"$utc_ms","v":0}'),  # noqa: E501
    (1, '{"name":"app","hostname":"$host","pid":$pid,"level":50,"err":{"message":"boom: disk full","name":"Error","stack":"' + _STACK + '"},"attempt":3,"msg":"write failed","time":"$utc_ms","v":0}'),  # noqa: E501
    (8, '{"asctime": "$berlin_asctime", "levelname": "DEBUG", "name": "app.module", "message": "handling request", "request_id": "$req", "host": "$host"}'),  # noqa: E501
    (6, '{"severity": "INFO", "name": "app.module", "message": "service started", "timestamp": "$utc_us"}'),  # noqa: E501
)  # fmt: skip

# linux_2k_excerpt.log (loghub, RFC 3164 file form), syslog_local.log (rsyslog's
# RSYSLOG_FileFormat), syslog_logger_stderr.log (RFC 5424 and 3164 with PRI, from logger)
SYSLOG: Final = _text(
    "syslog",
    "node",
    (20, "$rfc3164 $host sshd(pam_unix)[$pid_seq]: authentication failure; logname= uid=0 euid=0 tty=NODEVssh ruser= rhost=$ip "),  # noqa: E501
    (5, "$rfc3164 $host sshd(pam_unix)[$pid_seq]: check pass; user unknown"),
    (8, "$rfc3164 $host su(pam_unix)[$pid_seq]: session opened for user $user_name by (uid=0)"),
    (8, "$rfc3164 $host su(pam_unix)[$pid_seq]: session closed for user $user_name"),
    (4, "$rfc3164 $host ftpd[$pid_seq]: connection from $ip (24-54-76-216.bflony.adelphia.net) at $ctime "),  # noqa: E501
    (15, "$utc_us $host provision: instance $instance spawned $req"),
    (8, "$utc_us $host agent[$pid]: error with trailing spaces  "),
    (5, "$utc_us $host kernel: [    0.474750] Key type fscrypt-provisioning registered"),
    (15, '<165>1 $utc_us $host provision 4242 ID47 [timeQuality tzKnown="1" isSynced="0"][exampleSDID@32473 iut="3" eventSource="Application"] instance $instance spawned'),  # noqa: E501
    (7, '<27>1 $utc_us $host agent 77 - [timeQuality tzKnown="1" isSynced="0"] no structured data here'),  # noqa: E501
    (5, "<12>$rfc3164 $host app[$pid_seq]: an rfc3164 line from logger"),
)  # fmt: skip

# python_asctime.log and python_dashes.log (programs/python_lines.py, CPython 3.11 logging)
_PY_TRACEBACK: Final = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/python_lines.py", line 33, in main\n'
    '    {}["missing"]\n'
    "    ~~^^^^^^^^^^^\n"
    "KeyError: 'missing'"
)
PYTHON: Final = _text(
    "python",
    "workflow",
    (12, "$asctime WARNING root disk almost full"),
    (27, "$asctime INFO app.module request handled request_id=$req"),
    (0.25, "$asctime DEBUG app.module a message\nthat spans two lines"),
    (8, "$asctime ERROR app.db query failed: timeout"),
    (0.5, f"$asctime ERROR app.module lookup failed\n{_PY_TRACEBACK}"),
    (2, "$asctime CRITICAL app.module giving up"),
    (12, "$asctime - root - WARNING - disk almost full"),
    (27, "$asctime - app.module - INFO - request handled request_id=$req"),
    (0.25, "$asctime - app.module - DEBUG - a message\nthat spans two lines"),
    (8, "$asctime - app.db - ERROR - query failed: timeout"),
    (0.5, f"$asctime - app.module - ERROR - lookup failed\n{_PY_TRACEBACK}"),
    (2, "$asctime - app.module - CRITICAL - giving up"),
)  # fmt: skip

# logfmt_gologfmt.log (programs/logfmt_lines.go), logfmt_logrus.log (programs/logrus_lines.go)
LOGFMT: Final = _text(
    "logfmt",
    "api",
    (5, "ts=$utc_ns level=info msg=listening addr=:8080"),
    (20, "ts=$utc_ns level=debug msg=\"request started\" request_id=$req method=GET"),
    (5, r'ts=$utc_ns level=error msg="upstream failed: \"timeout\"\nretrying" host=$host err="dial tcp $ip:443: i/o timeout"'),  # noqa: E501
    (3, 'ts=$utc_ns lvl=warn message="=equals and spaces=" empty='),
    (2, 't=$utc_ns level=info msg="unicode ✓ ünïcödé"'),
    (10, 'time="$utc_ns" level=info msg="service started"'),
    (35, 'time="$utc_ns" level=debug msg="handling request" host=$host request_id=$req'),
    (8, 'time="$utc_ns" level=error msg="write failed" error="boom: disk full"'),
    (12, r'time="$utc_ns" level=warning msg="slow \"spawn\"" instance=$instance'),
)  # fmt: skip

# The incident corpus's real nginx (tests/incidents*/*/nginx-access.log, nginx-error.log)
_AGENT: Final = '"bmagent/3.2.0 (linux; go1.19)"'
_NGINX_ACCESS: Final = tuple(
    (weight, _Template.of(text))
    for weight, text in (
        (50, f'127.0.0.1 - - [$nginx_time] "POST /v1/nodes/$node/tasks/claim HTTP/1.1" 200 85 "-" {_AGENT} "$hex32" rt=$rt uct="0.001" urt="$rt"'),  # noqa: E501
        (25, f'127.0.0.1 - - [$nginx_time] "POST /v1/tasks/$task/result HTTP/1.1" 200 18 "-" {_AGENT} $hex32'),  # noqa: E501
        (12, '127.0.0.1 - - [$nginx_time] "GET /v1/allocations/$allocation/console HTTP/1.1" 200 30 "-" "Mozilla/5.0 (X11; Linux x86_64) tenant-portal/5.2" "$hex32" rt=$rt uct="0.000" urt="$rt"'),  # noqa: E501
        (6, '127.0.0.1 - - [$nginx_time] "POST /v1/nodes/$node/registration HTTP/1.1" 201 19 "-" "ansible-httpget" "$hex32" 201 0.173 0.173 127.0.0.1:36731'),  # noqa: E501
        (6, f'127.0.0.1 - - [$nginx_time] "POST /v1/nodes/$node/tasks/claim HTTP/1.1" 404 28 "-" {_AGENT} "$hex32" rt=$rt uct="0.000" urt="$rt"'),  # noqa: E501
    )
)  # fmt: skip
_NGINX_ERRORS: Final = tuple(
    (weight, _Template.of(text))
    for weight, text in (
        (0.5, '$nginx_error_time [error] 26142#26142: *$seq upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1, server: prov-ingress.dc1.internal, request: "GET /v1/allocations/$allocation HTTP/1.1", upstream: "http://127.0.0.1:39825/v1/allocations/$allocation", host: "127.0.0.1:60053"'),  # noqa: E501
        (0.5, '$nginx_error_time [error] 10152#10152: *$seq connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: prov-ingress.dc1.internal, request: "POST /v1/nodes/$node/tasks/claim HTTP/1.1", upstream: "http://127.0.0.1:39825/v1/nodes/$node/tasks/claim", host: "127.0.0.1:60053"'),  # noqa: E501
    )
)  # fmt: skip
#: Access lines with 1 % error lines among them (issue 24's baseline): the ingest then links
#: each error line to its request's access line (``nginx.link_stored``, after the commit).
NGINX: Final = Kind("nginx", "nginx", templates=_NGINX_ACCESS + _NGINX_ERRORS)
#: Access lines only, as nginx writes its access log (errors go to their own file): the
#: adapter's reading and storing without the linking, a stricter bar for the text formats.
NGINX_ACCESS: Final = Kind("nginx-access", "nginx", templates=_NGINX_ACCESS)
NDJSON: Final = Kind("ndjson", "ndjson")

#: Every kind, in the table's order: the baselines first.
KINDS: Final = (NDJSON, NGINX, NGINX_ACCESS, OSLO, KLOG, JOURNALD, JSON, SYSLOG, PYTHON, LOGFMT)

# -- the files --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Written:
    """A kind's file: its lines and its records (one event each)."""

    path: Path
    lines: int
    events: int


def write_kind(kind: Kind, path: Path, lines: int, seed: int) -> Written:
    """Write ``lines`` lines of a text or nginx kind (the last record cut there if it is
    longer), every record checked unique.

    Raises:
        RuntimeError: a record repeats one before it (a template with too little varied).
    """
    records = kind.records(random.Random(f"{seed}:{kind.name}"))
    written = events = 0
    seen: set[int] = set()
    with path.open("w", encoding="utf-8", newline="\n") as out:
        while written < lines:
            record = next(records)
            if hash(record) in seen:
                raise RuntimeError(f"{kind.name}: record {events + 1} repeats: {record[:200]!r}")
            seen.add(hash(record))
            parts = record.split("\n")[: lines - written]
            out.write("\n".join(parts) + "\n")
            written += len(parts)
            events += 1
    return Written(path, written, events)


def write_ndjson(path: Path, lines: int, seed: int, scratch: Path) -> Written:
    """The benchmark fleet's agent JSON lines (``benchmarks.fleet``), its files one after the
    other, cut at ``lines``.

    Raises:
        RuntimeError: the fleet came out smaller than ``lines``.
    """
    from benchmarks.fleet import generate

    fleet_dir = scratch / "fleet"
    fleet_dir.mkdir(parents=True, exist_ok=True)
    fleet = generate(fleet_dir, int(lines * 1.06) + 1_000, seed)
    written = 0
    with path.open("wb") as out:
        for part in fleet.files:
            with part.open("rb") as handle:
                for line in itertools.islice(handle, lines - written):
                    out.write(line)
                    written += 1
    shutil.rmtree(fleet_dir)
    if written < lines:
        raise RuntimeError(f"the fleet holds {written:,} lines, fewer than {lines:,}")
    return Written(path, written, written)


def files_in(
    directory: Path, kinds: Sequence[Kind], lines: int, seed: int
) -> tuple[dict[str, Written], float]:
    """Each kind's file in ``directory``: those a previous run wrote for the same lines and
    seed (its ``files.json``), the others written now; and the seconds writing took (0.0:
    every file reused)."""
    manifest = directory / "files.json"
    known: dict[str, Any] = orjson.loads(manifest.read_bytes()) if manifest.exists() else {}
    if known.get("lines") != lines or known.get("seed") != seed:
        known = {"lines": lines, "seed": seed, "files": {}}
    writing_s = 0.0
    files: dict[str, Written] = {}
    for kind in kinds:
        entry = known["files"].get(kind.name)
        if entry is not None and Path(entry["path"]).exists():
            files[kind.name] = Written(Path(entry["path"]), entry["lines"], entry["events"])
            continue
        path = directory / f"{kind.name}.{'ndjson' if kind is NDJSON else 'log'}"
        started = time.perf_counter()
        files[kind.name] = (
            write_ndjson(path, lines, seed, directory)
            if kind is NDJSON
            else write_kind(kind, path, lines, seed)
        )
        writing_s += time.perf_counter() - started
        written = files[kind.name]
        known["files"][kind.name] = {
            "path": str(written.path),
            "lines": written.lines,
            "events": written.events,
        }
        manifest.write_bytes(orjson.dumps(known))
        _say(f"{kind.name}: wrote {written.lines:,} lines, {written.events:,} records")
    return files, writing_s


# -- measurement -----------------------------------------------------------------------------


def _environment() -> dict[str, str]:
    """This environment without the correlator's variables (a zone, a rules file, a database
    set in the shell must not change what is measured)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("CORRELATOR_")}


def ingest_process(kind: Kind, written: Written, db: Path) -> dict[str, float]:
    """``python -m correlator ingest`` of a kind's file into a fresh store, timed whole.

    Raises:
        SystemExit: the ingest failed, or did not accept every record (none duplicate, none
            rejected): the figure would not be of the work it names.
    """
    command = [
        sys.executable, "-m", "correlator", "--db", str(db), "ingest", "--source", kind.source,
        *kind.flags, str(written.path), "--quiet",
    ]  # fmt: skip
    started = time.perf_counter()
    child = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    said = child.stderr.read().decode("utf-8", "replace") if child.stderr else ""
    # Reaped here rather than by Popen.wait: os.wait4 gives the CPU time and peak RSS of the
    # child and of the parse workers it reaped.
    _, status, usage = os.wait4(child.pid, 0)
    wall_s = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    for path in (db, db.with_name(db.name + ".wal")):
        path.unlink(missing_ok=True)
    summary = _SUMMARY.search(said)
    counts = tuple(int(n) for n in summary.groups()) if summary else None
    if child.returncode != 0 or counts != (written.events, 0, 0):
        raise SystemExit(
            f"benchmarks.text: {kind.name}: expected {written.events:,} accepted, 0 duplicate, "
            f"0 rejected; exit {child.returncode}, the ingest said:\n{said[-4000:]}"
        )
    return {
        "seconds": wall_s,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mib": usage.ru_maxrss / 1024,
    }


def _lines(path: Path, limit: int | None = None) -> Iterator[bytes]:
    from correlator.ingest import read_lines

    with path.open("rb") as handle:
        yield from itertools.islice(read_lines(handle), limit)


def parse_only(kind: Kind, written: Written, limit: int | None = None) -> dict[str, float]:
    """The kind's parser alone over its file, as the ingest calls it, no store.

    Raises:
        SystemExit: it did not yield an event for every record (``limit`` not given).
    """
    from correlator.sources import source

    declared = source(kind.source)
    origin = str(written.path)
    events = rejects = 0
    started = time.perf_counter()
    if declared.batched:
        from correlator._parse_workers import chunks, reading

        read = reading(declared, dict(kind.options))
        for chunk, start_line in chunks(_lines(written.path, limit), BATCH_LINES, read.cut):
            packed, rejected = read.parse(chunk, origin, start_line)
            events += packed.table.num_rows
            rejects += len(rejected)
    elif declared.parse is not None:
        from correlator.model import Event

        for item in declared.parse(_lines(written.path, limit), origin, **kind.options):
            if isinstance(item, Event):
                events += 1
            else:
                rejects += 1
    seconds = time.perf_counter() - started
    if limit is None and (events, rejects) != (written.events, 0):
        raise SystemExit(
            f"benchmarks.text: {kind.name}: the parser yielded {events:,} events and "
            f"{rejects:,} rejects, not {written.events:,} events"
        )
    return {"seconds": seconds}


def _ingest_in_process(kind: Kind, written: Written, db: Path, limit: int) -> None:
    """What ``--profile`` profiles without ``--parse-only``: the ingest in this process (one
    process: no parse workers) of the file's first ``limit`` lines into a fresh store."""
    from correlator.ingest import ingest_lines
    from correlator.store import Store

    with Store(db) as store:
        ingest_lines(store, kind.source, _lines(written.path, limit), str(written.path),
                     options=kind.options)  # fmt: skip
    for path in (db, db.with_name(db.name + ".wal")):
        path.unlink(missing_ok=True)


def profile(kind: Kind, written: Written, *, parse: bool, scratch: Path) -> str:
    """The cProfile top 15 by own time of the kind's first :data:`PROFILE_LINES` lines."""
    profiler = cProfile.Profile()
    profiler.enable()
    if parse:
        parse_only(kind, written, PROFILE_LINES)
    else:
        _ingest_in_process(kind, written, scratch / f"profile-{kind.name}.duckdb", PROFILE_LINES)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
    return out.getvalue()


# -- the report ------------------------------------------------------------------------------


def table(
    kinds: Sequence[Kind], files: Mapping[str, Written], runs: Mapping[str, list[dict[str, float]]]
) -> str:
    """The Markdown table: each kind's figures and its ratios to the baselines."""
    rate = {
        name: files[name].events / statistics.median(run["seconds"] for run in runs[name])
        for name in runs
    }
    whole = "cpu_s" in next(iter(runs.values()))[0]
    bases = [kind.name for kind in (NDJSON, NGINX, NGINX_ACCESS) if kind.name in rate]
    head = "| kind | lines | events | best s | median s | events/s |"
    head += "".join(f" vs {base} |" for base in bases)
    rule = "|---|---:|---:|---:|---:|---:|" + "---:|" * len(bases)
    if whole:
        head += " CPU s | peak MiB |"
        rule += "---:|---:|"
    rows = [head, rule]
    for kind in kinds:
        seconds = [run["seconds"] for run in runs[kind.name]]
        label = kind.name if kind.source != "text" else f"text --format {kind.name}"
        row = (
            f"| {label} | {files[kind.name].lines:,} | {files[kind.name].events:,} | "
            f"{min(seconds):.1f} | {statistics.median(seconds):.1f} | {rate[kind.name]:,.0f} |"
        )
        row += "".join(f" {rate[kind.name] / rate[base]:.2f}x |" for base in bases)
        if whole:
            cpu = statistics.median(run["cpu_s"] for run in runs[kind.name])
            peak = max(run["peak_mib"] for run in runs[kind.name])
            row += f" {cpu:.1f} | {peak:,.0f} |"
        rows.append(row)
    return "\n".join(rows)


def code_state() -> str:
    """The commit and a digest of ``correlator/``'s Python sources as they are now: the code
    measured (others edit the same checkout: a digest that changes during a run means the
    run measured two versions)."""
    digest = hashlib.blake2b(digest_size=6)
    for path in sorted((REPO_ROOT / "correlator").rglob("*.py")):
        digest.update(path.read_bytes())
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
    ).stdout.strip()
    return f"commit {commit or '?'}, correlator/ sources {digest.hexdigest()}"


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--lines", default="1e6", help="lines of each kind (default 1e6)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--kinds",
        default=",".join(kind.name for kind in KINDS),
        help="the kinds to measure, comma-separated (default: all)",
    )
    parser.add_argument(
        "--parse-only", action="store_true", help="time the parsers alone, in this process"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help=f"cProfile top 15 of each kind ({PROFILE_LINES:,} lines)",
    )
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="write the files into DIR and reuse them there"
    )
    args = parser.parse_args(argv)
    lines = int(float(args.lines))
    by_name = {kind.name: kind for kind in KINDS}
    unknown = [name for name in args.kinds.split(",") if name not in by_name]
    if unknown:
        parser.error(f"unknown kinds {unknown}; use {', '.join(by_name)}")
    kinds = [by_name[name] for name in args.kinds.split(",")]
    shown = argv if argv is not None else sys.argv[1:]
    print(" ".join(["python -m benchmarks.text", *shown]))
    print(machine_note())
    code = code_state()
    print(f"code: {code}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="text-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        directory = args.keep or scratch
        directory.mkdir(parents=True, exist_ok=True)
        files, writing_s = files_in(directory, kinds, lines, args.seed)
        runs: dict[str, list[dict[str, float]]] = {kind.name: [] for kind in kinds}
        for round_no in range(1, args.repeat + 1):
            for kind in kinds:  # interleaved: the host's drift hits every kind alike
                if args.parse_only:
                    run = parse_only(kind, files[kind.name])
                else:
                    run = ingest_process(kind, files[kind.name], scratch / f"{kind.name}.duckdb")
                runs[kind.name].append(run)
                rate = files[kind.name].events / run["seconds"]
                _say(f"round {round_no}: {kind.name} {run['seconds']:.1f} s, {rate:,.0f} events/s")
        profiles = (
            {
                kind.name: profile(kind, files[kind.name], parse=args.parse_only, scratch=scratch)
                for kind in kinds
            }
            if args.profile
            else {}
        )
    what = "the parser alone, in-process" if args.parse_only else "whole process"
    print(
        f"\n{what}; {args.repeat} rounds, kinds interleaved; events/s and ratios of the "
        f"medians; {f'files written in {writing_s:.0f} s' if writing_s else 'files reused'}\n"
    )
    print(table(kinds, files, runs))
    print(f"\nload average at the end {_load()}; {time.perf_counter() - started:.0f} s in all")
    if code_state() != code:
        print(f"WARNING: correlator/ changed during the run (now {code_state()})")
    profiled = min(lines, PROFILE_LINES)
    for name, text in profiles.items():
        print(f"\n### {name}: cProfile, {profiled:,} lines, by own time\n\n```\n{text}```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
