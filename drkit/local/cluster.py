"""Local KRaft clusters (dc1, dc2, ...) as background Java processes on loopback.

Layout under the state directory::

    local/<cluster>/cluster.json          cluster id, ports, node ids (the source of truth)
    local/<cluster>/broker-<id>/data      log.dirs
    local/<cluster>/broker-<id>/logs      server.log (log4j2), broker.out (JVM stdout/stderr)
    local/<cluster>/broker-<id>/server.properties

Invariants: a broker's ports never change once chosen (clients and the generated config keep
working across restarts); ``up`` is idempotent; nothing here deletes data unless ``purge`` is given.
Each node is a combined broker+controller with a static voter set, so a 3-node cluster keeps a
quorum with one node down.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from drkit.config.model import MAX_ALIAS_LENGTH, Role
from drkit.errors import ConfigError, DrkitError, KafkaError, LocalClusterError, Problem
from drkit.local import class_archive, netns, secure
from drkit.local import secure as secure_module  # where a parameter named secure hides it
from drkit.local.jars import KAFKA_VERSION, bundle_dir, java_executable, resolve_bundle
from drkit.local.netns import Namespace
from drkit.local.ports import free_port
from drkit.local.tls import SUPER_USER, LocalSecrets
from drkit.logs import log_tail
from drkit.private_files import write_private

if TYPE_CHECKING:
    from drkit.config.model import DrkitConfig
    from drkit.kafka import ClusterEndpoint
    from drkit.kafka.ports import AdminFactory

_LOG4J2 = """\
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.filePattern = ${sys:kafka.logs.dir}/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
"""


# ACLs on, open by default: the failover engine fences an old primary with DENY WRITE ACLs on
# its replicated topics; everything without ACLs stays allowed.  docker-compose.yml and the
# testcontainers brokers run the same (their tests check it).
OPEN_AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


def as_docker_env(settings: dict[str, str]) -> dict[str, str]:
    """Broker settings as the apache/kafka image takes them: ``KAFKA_`` + upper snake case."""
    return {"KAFKA_" + key.upper().replace(".", "_"): value for key, value in settings.items()}


@dataclass
class BrokerState:
    """What ``cluster.json`` remembers about one node."""

    node_id: int
    port: int
    controller_port: int
    pid: int | None = None


@dataclass
class LocalClusterState:
    name: str
    cluster_id: str
    brokers: list[BrokerState] = field(default_factory=list)
    kafka_version: str = KAFKA_VERSION
    netns: int | None = None  # index of its network namespace (drkit.local.netns), if any
    secure: bool = False  # SASL_SSL + mTLS controllers + deny-by-default (drkit.local.secure)
    # OAUTHBEARER beside SCRAM on the secured listener: tokens validated against this JWKS.
    oidc_jwks_url: str | None = None
    oidc_audience: str | None = None
    oidc_issuer: str | None = None
    # How clients of a secured cluster authenticate: secure.SCRAM or secure.MTLS.
    client_auth: str = secure_module.SCRAM

    @property
    def namespace(self) -> Namespace | None:
        return netns.Namespace(self.netns) if self.netns is not None else None

    @property
    def address(self) -> str:
        """Where clients reach the brokers: loopback, or the namespace's address."""
        return self.namespace.address if self.namespace is not None else "127.0.0.1"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.address}:{b.port}" for b in self.brokers)


@dataclass(frozen=True)
class BrokerStatus:
    id: int
    pid: int | None
    alive: bool
    port: int
    log_dir: str


@dataclass(frozen=True)
class ClusterStatus:
    name: str
    bootstrap_servers: str
    brokers: tuple[BrokerStatus, ...]
    secure: bool = False
    client_auth: str = secure_module.SCRAM  # of a secured cluster

    def to_json(self) -> dict[str, object]:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "secure": self.secure,
            **({"client_auth": self.client_auth} if self.secure else {}),
            "brokers": [asdict(b) for b in self.brokers],
        }


def cluster_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a local cluster (None when it can): the config's alias rule
    (drkit.config.model), since ``up`` writes a config naming it - and a directory, and a
    properties file a JVM reads."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        return f"cluster name {name!r} may hold only letters, digits, _ and -"
    if len(name) > MAX_ALIAS_LENGTH:
        return (
            f"cluster name {name[:20]!r}... is {len(name)} characters: at most "
            f"{MAX_ALIAS_LENGTH} characters"
        )
    return None


def _java_properties_text(value: str) -> str:
    """``value`` as a .properties file read as ISO-8859-1 (as Kafka reads it) gives it back:
    characters beyond ASCII as \\uXXXX escapes (UTF-16 units), backslashes doubled."""
    out = []
    for char in value.replace("\\", "\\\\"):
        if ord(char) < 128:
            out.append(char)
            continue
        units = char.encode("utf-16-be")
        out.extend(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
    return "".join(out)


def _port_in_use(address: str, port: int) -> bool:
    """Whether another process listens on ``address:port`` (a port in TIME_WAIT is not in
    use: the JVM binds with SO_REUSEADDR, and so does this check)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as err:
            return err.errno == errno.EADDRINUSE
    return False


_BIND_FAILURE = re.compile(r"Address already in use|BindException|failed to bind", re.I)
_ADDRESS = re.compile(r"(\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:]+\]|localhost):(\d{1,5})")
_ERROR_LINE = re.compile(r"^\[[^\]]*\] (ERROR|FATAL) ")
_EXCEPTION_LINE = re.compile(r"^(Caused by: )?[\w.$]+(Exception|Error): \S")


def start_up_failure(text: str, ports: Iterable[int] = ()) -> str | None:
    """Why a broker exited during start-up, from what it logged during it: the address a
    bind failed on, else the first ERROR/FATAL line (with the exception line after it), else
    None.  One line."""
    lines = text.splitlines()
    if any(_BIND_FAILURE.search(line) for line in lines):
        for line in lines:
            found = _ADDRESS.search(line) if _BIND_FAILURE.search(line) else None
            if found:
                return f"Address already in use: {found.group(0)} ({line.strip()[:300]})"
        known = ", ".join(f"127.0.0.1:{port}" for port in ports)
        return f"Address already in use (its ports: {known})"
    for index, line in enumerate(lines):
        if _ERROR_LINE.match(line):
            said = line.strip()
            following = lines[index + 1].strip() if index + 1 < len(lines) else ""
            if _EXCEPTION_LINE.match(following):
                said = f"{said} - {following}"
            return said[:500]
    return None


def _new_cluster_id() -> str:
    """22-char base64url id, as ``kafka-storage random-uuid`` prints.  Like Kafka's own
    generator, never one starting with "-" (command-line parsers take it for an option)."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


def _pid_is_broker(pid: int | None, properties: Path) -> bool:
    """True when ``pid`` is alive and is the JVM of the broker started with ``properties``.

    Checking the command line (not only the pid) guards against pid reuse after a reboot.  The
    JVM itself, not a launcher that will exec it (``ip netns exec``): the launcher's command
    line names the broker too, and while it execs the JVM the command line reads empty, which
    would look like a broker that died during start-up.
    """
    if pid is None:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    if b"kafka.Kafka" not in cmdline or str(properties).encode() not in cmdline:
        return False
    if not Path(cmdline.split(b"\0", 1)[0].decode(errors="replace")).name.startswith("java"):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


class LocalKafka:
    """Manage the local clusters recorded under ``state_dir / "local"``."""

    def __init__(self, state_dir: Path, heap: str = "512m", *, connect: AdminFactory) -> None:
        """``connect``: how it reaches its clusters' admin API (drkit.kafka.ports) - no
        default, every caller passes one."""
        self.connect = connect
        self.root = state_dir / "local"
        self.heap = os.environ.get("DRKIT_KAFKA_HEAP", heap)
        # Extra JVM flags for every broker and format run, e.g. "-XX:TieredStopAtLevel=1"
        # (the test suite's: brokers that start and idle on less CPU, at some peak speed).
        self.jvm_options = shlex.split(os.environ.get("DRKIT_KAFKA_JVM_OPTIONS", ""))
        self.secrets = LocalSecrets(self.root)
        # Where each broker's logs stood when this process last started it: a start-up death
        # is named from what came after (the logs keep every earlier run's lines).
        self._log_marks: dict[tuple[str, int], dict[str, int]] = {}

    # -- paths and state ------------------------------------------------------------------

    def _cluster_dir(self, name: str) -> Path:
        return self.root / name

    def _broker_dir(self, name: str, node_id: int) -> Path:
        return self._cluster_dir(name) / f"broker-{node_id}"

    def _properties(self, name: str, node_id: int) -> Path:
        return self._broker_dir(name, node_id) / "server.properties"

    def _load(self, name: str) -> LocalClusterState | None:
        path = self._cluster_dir(name) / "cluster.json"
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        brokers = [BrokerState(**b) for b in raw.pop("brokers")]
        return LocalClusterState(brokers=brokers, **raw)

    def _save(self, state: LocalClusterState) -> None:
        path = self._cluster_dir(state.name) / "cluster.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2))
        tmp.replace(path)

    def cluster_names(self) -> list[str]:
        if not self.root.exists():
            return []
        return sorted(p.parent.name for p in self.root.glob("*/cluster.json"))

    # -- lifecycle ------------------------------------------------------------------------

    def up(
        self,
        names: Iterable[str],
        brokers: int = 1,
        timeout_s: float = 120.0,
        namespaced: bool = False,
        secure: bool = False,
        oidc: secure.OidcValidation | None = None,
        client_auth: str = secure_module.SCRAM,
    ) -> list[ClusterStatus]:
        """Start (creating and formatting when new) each named cluster; wait until ready.

        ``namespaced`` puts a new cluster in its own network namespace (a data center whose
        link can be cut; needs root, see drkit.local.netns).  ``secure`` makes a new cluster
        a secured one (drkit.local.secure); ``oidc`` (secured only) lets its clients also
        authenticate with OAUTHBEARER tokens of that issuer; ``client_auth`` (secured only) is
        how its clients authenticate (SCRAM, or TLS certificates).  An existing cluster keeps
        what it was created as.  Running brokers are left alone, so ``up`` on running clusters is a
        no-op.
        """
        if oidc is not None and not secure:
            raise LocalClusterError("OAUTHBEARER needs a secured cluster: add --secure")
        if client_auth not in secure_module.CLIENT_AUTH:
            raise LocalClusterError(f"unknown client authentication {client_auth!r}")
        if client_auth != secure_module.SCRAM and not secure:
            raise LocalClusterError("TLS client certificates need a secured cluster: add --secure")
        if client_auth == secure_module.MTLS and oidc is not None:
            raise LocalClusterError("OAUTHBEARER needs SASL: leave out --mtls")
        names = list(names)
        problems = [Problem("--clusters", why) for n in names if (why := cluster_name_problem(n))]
        if problems:
            raise ConfigError(problems)
        jars = resolve_bundle("kafka")
        states = [
            self._ensure_created(name, brokers, jars, namespaced, secure, oidc, client_auth)
            for name in names
        ]
        self._require_ports_free(
            [(state, b) for state in states for b in state.brokers if not self._alive(state, b)]
        )
        started: list[tuple[LocalClusterState, BrokerState]] = []
        try:
            for state in states:
                if state.namespace is not None:
                    netns.ensure(state.namespace)
                for broker in state.brokers:
                    if not self._alive(state, broker):
                        broker.pid = self._start(state, broker, jars)
                        started.append((state, broker))
                self._save(state)
            for state in states:
                self._wait_ready(state, timeout_s)
                if state.secure:
                    self._bootstrap_acls(state)
        except BaseException as err:
            said = self._undo_start(states, started)
            if not isinstance(err, DrkitError):
                raise
            failed = LocalClusterError(f"{err}; {said}" if said else str(err))
            failed.exit_code = err.exit_code
            raise failed from err
        return [self.cluster_status(state.name) for state in states]

    def _alive(self, state: LocalClusterState, broker: BrokerState) -> bool:
        return _pid_is_broker(broker.pid, self._properties(state.name, broker.node_id))

    def _undo_start(
        self,
        states: list[LocalClusterState],
        started: list[tuple[LocalClusterState, BrokerState]],
    ) -> str:
        """Stop the brokers a failed ``up`` started; what it stopped and what is left running
        (brokers that ran before it), and how to stop those."""
        for state, broker in started:
            self._signal(state, broker, signal.SIGTERM, wait_s=10.0)
        for state in states:
            self._save(state)
        stopped = list(dict.fromkeys(state.name for state, _ in started))
        left = [s.name for s in states if any(self._alive(s, b) for b in s.brokers)]
        said = []
        if stopped:
            said.append(f"stopped what this run started: {', '.join(stopped)}")
        if left:
            them = "them" if len(left) > 1 else "it"
            said.append(
                f"left running: {', '.join(left)} (running before); 'drkit local down' stops {them}"
            )
        return "; ".join(said)

    def _require_ports_free(self, brokers: list[tuple[LocalClusterState, BrokerState]]) -> None:
        """Refuse, before any of them starts, brokers whose port another process holds (the
        broker would bind, fail and exit seconds later)."""
        taken = [
            f"{state.name} broker {broker.node_id}'s {what} port 127.0.0.1:{port}"
            for state, broker in brokers
            if state.namespace is None
            for what, port in (("client", broker.port), ("controller", broker.controller_port))
            if _port_in_use("127.0.0.1", port)
        ]
        if taken:
            raise LocalClusterError(
                f"{'; '.join(taken)} is in use by another process: stop it (`ss -ltnp` names "
                "it) - a broker keeps its ports for good; nothing was started"
            )

    def _bootstrap_acls(self, state: LocalClusterState) -> None:
        """As the super user, give drkit's principal what it needs (idempotent)."""
        from drkit.kafka import ClusterEndpoint

        config = secure.client_config(
            self.secrets, state.bootstrap_servers, SUPER_USER, state.client_auth
        )
        self.connect(ClusterEndpoint(state.name, config)).allow_everything("User:drkit")

    def grant_roles(self, name: str, config: DrkitConfig) -> int:
        """As the super user, give each role principal ``config`` names for the secured cluster
        ``name`` exactly what its role needs (drkit.access.roles; idempotent).  Returns how
        many ACLs that is; 0 for a PLAINTEXT cluster."""
        from drkit.access.roles import role_needs

        if not self._require(name).secure:
            return 0
        cluster = config.clusters[name]
        entries = {
            need.entry(principal)
            for role in Role
            if (principal := cluster.principal(role)) is not None and principal != "User:drkit"
            for need in role_needs(role, name, config).needs
        }
        self.connect(self.endpoint_as(name, SUPER_USER)).create_entries(entries)
        return len(entries)

    def endpoint_as(self, name: str, user: str) -> ClusterEndpoint:
        """How ``user`` reaches the local cluster ``name`` (PLAINTEXT when not secured)."""
        from drkit.kafka import ClusterEndpoint

        state = self._require(name)
        if not state.secure:
            return ClusterEndpoint.plain(name, state.bootstrap_servers)
        return ClusterEndpoint(
            name,
            secure.client_config(self.secrets, state.bootstrap_servers, user, state.client_auth),
        )

    def _ensure_created(
        self,
        name: str,
        brokers: int,
        jars: Path,
        namespaced: bool = False,
        secure: bool = False,
        oidc: secure.OidcValidation | None = None,
        client_auth: str = secure_module.SCRAM,
    ) -> LocalClusterState:
        existing = self._load(name)
        if existing is not None:
            if existing.secure != secure:
                was = "secured" if existing.secure else "PLAINTEXT"
                raise LocalClusterError(
                    f"{name} was created {was}: `drkit local down --purge` first to recreate "
                    f"it {'secured' if secure else 'PLAINTEXT'}"
                )
            if secure and existing.client_auth != client_auth:
                raise LocalClusterError(
                    f"{name} was created for {existing.client_auth} clients: `drkit local down "
                    f"--purge` first to recreate it for {client_auth}"
                )
            wanted = (oidc.jwks_url, oidc.audience, oidc.issuer) if oidc is not None else None
            held = (existing.oidc_jwks_url, existing.oidc_audience, existing.oidc_issuer)
            if wanted is not None and held != wanted:
                raise LocalClusterError(
                    f"{name} was created to accept other tokens: `drkit local down --purge` "
                    "first to recreate it with these OAUTHBEARER settings"
                )
            return existing
        if brokers < 1:
            raise LocalClusterError("--brokers must be at least 1")
        state = LocalClusterState(
            name=name, cluster_id=_new_cluster_id(), secure=secure, client_auth=client_auth
        )
        if oidc is not None:
            state.oidc_jwks_url, state.oidc_audience = oidc.jwks_url, oidc.audience
            state.oidc_issuer = oidc.issuer
        if namespaced:
            if not netns.available():
                raise LocalClusterError(
                    "network namespaces need root and iproute2 (ip netns): run without "
                    "--netns, or as root"
                )
            state.netns = netns.create().index
        for node_id in range(1, brokers + 1):
            state.brokers.append(BrokerState(node_id, free_port(), free_port()))
        for broker in state.brokers:
            self._write_properties(state, broker)
            self._format(state, broker, jars)
        self._save(state)
        return state

    def _write_properties(self, state: LocalClusterState, broker: BrokerState) -> None:
        directory = self._broker_dir(state.name, broker.node_id)
        (directory / "data").mkdir(parents=True, exist_ok=True)
        (directory / "logs").mkdir(parents=True, exist_ok=True)
        voters = ",".join(f"{b.node_id}@127.0.0.1:{b.controller_port}" for b in state.brokers)
        size = len(state.brokers)
        internal_rf = min(3, size)
        min_isr = 2 if size >= 3 else 1
        # Clients use the cluster's address; the controllers talk over (the namespace's)
        # loopback, so a cut link never splits a cluster from itself.
        listeners = (
            f"PLAINTEXT://{state.address}:{broker.port},"
            f"CONTROLLER://127.0.0.1:{broker.controller_port}"
        )
        settings = {
            "process.roles": "broker,controller",
            "node.id": broker.node_id,
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": listeners,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": directory / "data",
            "num.partitions": 1,
            "default.replication.factor": internal_rf,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": internal_rf,
            # 50 offsets partitions (the default) make the first group join slow on a laptop.
            "offsets.topic.num.partitions": 8,
            "transaction.state.log.replication.factor": internal_rf,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": 8,
            "share.coordinator.state.topic.replication.factor": internal_rf,
            "share.coordinator.state.topic.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": 0,
            # drkit creates every topic it writes; auto-creation would hide mistakes.
            "auto.create.topics.enable": "false",
            "log.segment.bytes": 64 * 1024 * 1024,
            "log.retention.check.interval.ms": 30000,
            # A broker killed -9 and started again is refused (DUPLICATE_BROKER_REGISTRATION)
            # until its old incarnation's session times out: 9 s by default, 4 s here, so a
            # drill's "restore the killed cluster" and a test's restart wait less.
            "broker.session.timeout.ms": 4000,
            "broker.heartbeat.interval.ms": 1000,
            # The active controller appends a no-op record to the metadata log when nothing
            # else was written for this long (KIP-835; 500 ms by default), and every node
            # fetches and applies it: an idle single-node cluster spent ~1.6% of a core so,
            # ~1.0% at 5 s (2026-12-06; the test suite keeps 4-6 brokers up for half an hour).
            "metadata.max.idle.interval.ms": 5000,
            **OPEN_AUTHORIZER,
        }
        if state.secure:  # SASL_SSL clients, mTLS controllers, deny by default
            node = self.secrets.node(state.name, ["127.0.0.1", state.address])
            settings.update(
                secure.broker_settings(
                    state.address,
                    broker.port,
                    broker.controller_port,
                    node,
                    self.secrets,
                    state.client_auth,
                )
            )
            if state.oidc_jwks_url is not None:
                validation = secure.OidcValidation(
                    state.oidc_jwks_url, state.oidc_audience, state.oidc_issuer
                )
                settings.update(secure.oauthbearer_settings(validation))
        text = "".join(
            f"{key}={_java_properties_text(str(value))}\n" for key, value in settings.items()
        )
        properties = self._properties(state.name, broker.node_id)
        write_private(properties, text)  # a secured node's file holds the super user's password
        (directory / "log4j2.properties").write_text(_LOG4J2)

    def _format(self, state: LocalClusterState, broker: BrokerState, jars: Path) -> None:
        java = java_executable()
        command = [
            java,
            "-Xmx256m",
            *class_archive.GC_FLAGS,
            *class_archive.tool_flags(jars, java),
            *self.jvm_options,
            "-cp",
            f"{jars}/*",
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={state.cluster_id}",
            "--config",
            str(self._properties(state.name, broker.node_id)),
            "--ignore-formatted",
        ]
        scram = state.secure and state.client_auth == secure.SCRAM
        credentials = secure.scram_format_arguments(self.secrets) if scram else []
        argfile = self._broker_dir(state.name, broker.node_id) / "format.args"
        with secure.argument_file(argfile, credentials) as words:
            done = subprocess.run(command + words, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            said = secure.redact_scram((done.stderr or done.stdout).strip(), self.secrets)[-500:]
            raise LocalClusterError(
                f"formatting {state.name} broker {broker.node_id} failed: {said}"
            )

    def _start(self, state: LocalClusterState, broker: BrokerState, jars: Path) -> int:
        """Spawn the broker, remembering where its logs stood (``_check_processes``)."""
        logs = self._broker_dir(state.name, broker.node_id) / "logs"
        marks = {}
        for log in ("server.log", "broker.out"):
            with contextlib.suppress(OSError):
                marks[log] = (logs / log).stat().st_size
        self._log_marks[(state.name, broker.node_id)] = marks
        return self._spawn(state, broker, jars)

    def _spawn(self, state: LocalClusterState, broker: BrokerState, jars: Path) -> int:
        # Settings follow drkit's version; ports, ids and data never change.
        self._write_properties(state, broker)
        directory = self._broker_dir(state.name, broker.node_id)
        logs = directory / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        inside = state.namespace.exec_prefix() if state.namespace is not None else []
        java = java_executable()
        command = [
            *inside,
            java,
            f"-Xms{self.heap}"
            if self.heap.endswith("m") and int(self.heap[:-1]) <= 256
            else "-Xms256m",
            f"-Xmx{self.heap}",
            *class_archive.GC_FLAGS,
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            *class_archive.broker_flags(jars, java, directory),
            *self.jvm_options,
            f"-Dkafka.logs.dir={logs}",
            f"-Dlog4j2.configurationFile={directory / 'log4j2.properties'}",
            # Kafka 4 fetches only the OAuth URLs a JVM property allows (none by default).
            *(
                [f"-D{secure.ALLOWED_URLS_PROPERTY}={state.oidc_jwks_url}"]
                if state.oidc_jwks_url
                else []
            ),
            "-cp",
            f"{jars}/*",
            "kafka.Kafka",
            str(self._properties(state.name, broker.node_id)),
        ]
        with (logs / "broker.out").open("ab") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=directory,
            )
        # Between fork and exec /proc/<pid>/cmdline still shows Python; wait for the JVM so that
        # liveness checks (which match the command line) do not mistake it for a dead broker.
        properties = self._properties(state.name, broker.node_id)
        deadline = time.monotonic() + 10.0
        while not _pid_is_broker(process.pid, properties):
            if process.poll() is not None or time.monotonic() > deadline:
                cause = self._start_up_cause(state, broker)
                raise LocalClusterError(
                    f"{state.name} broker {broker.node_id} did not start (exit code "
                    f"{process.returncode}){': ' + cause if cause else ''}; see "
                    f"{logs / 'broker.out'}"
                )
            time.sleep(0.01)
        return process.pid

    def _wait_ready(self, state: LocalClusterState, timeout_s: float) -> None:
        admin = self.connect(self.endpoint_as(state.name, SUPER_USER))
        deadline = time.monotonic() + timeout_s
        expected = sum(
            1
            for b in state.brokers
            if _pid_is_broker(b.pid, self._properties(state.name, b.node_id))
        )
        last = "no answer"
        while time.monotonic() < deadline:
            self._check_processes(state)
            try:
                seen = admin.wait_ready(timeout_s=5.0)
            except KafkaError as err:
                last = str(err)
                time.sleep(0.2)  # refused at once while the broker starts: ask again shortly
                continue
            if seen >= expected:
                return
            last = f"{seen} of {expected} brokers registered"
            time.sleep(0.5)
        raise LocalClusterError(
            f"cluster {state.name} did not become ready within {timeout_s:.0f}s ({last}); "
            f"see {self._broker_dir(state.name, state.brokers[0].node_id) / 'logs'}"
        )

    def _check_processes(self, state: LocalClusterState) -> None:
        for broker in state.brokers:
            props = self._properties(state.name, broker.node_id)
            if broker.pid is not None and not _pid_is_broker(broker.pid, props):
                log = self._broker_dir(state.name, broker.node_id) / "logs"
                cause = self._start_up_cause(state, broker)
                if cause is None:
                    tail = log_tail(log / "server.log", 5) or log_tail(log / "broker.out", 5)
                    raise LocalClusterError(
                        f"{state.name} broker {broker.node_id} exited during start-up; "
                        f"last log lines:\n{tail}"
                    )
                raise LocalClusterError(
                    f"{state.name} broker {broker.node_id} exited during start-up: {cause} "
                    f"(see {log / 'server.log'})"
                )

    def _start_up_cause(self, state: LocalClusterState, broker: BrokerState) -> str | None:
        """The cause :func:`start_up_failure` finds in what the broker logged since this
        process started it (its whole logs when it did not)."""
        logs = self._broker_dir(state.name, broker.node_id) / "logs"
        marks = self._log_marks.get((state.name, broker.node_id), {})
        for log in ("server.log", "broker.out"):
            try:
                with (logs / log).open("rb") as text:
                    size = text.seek(0, os.SEEK_END)
                    mark = marks.get(log, 0)
                    text.seek(mark if mark <= size else 0)  # smaller: the log rolled over
                    written = text.read(4 * 1024 * 1024).decode(errors="replace")
            except OSError:
                continue
            cause = start_up_failure(written, (broker.port, broker.controller_port))
            if cause is not None:
                return cause
        return None

    def stop_clusters(self, names: Iterable[str] | None = None) -> dict[str, int]:
        """Stop every broker of the named clusters (all when None): how many brokers of each
        were running (and are stopped now)."""
        stopped: dict[str, int] = {}
        for name in list(names) if names is not None else self.cluster_names():
            state = self._load(name)
            if state is None:
                continue
            stopped[name] = sum(
                self._signal(state, broker, signal.SIGTERM, wait_s=30.0) for broker in state.brokers
            )
            self._save(state)
        return stopped

    def down(self, names: Iterable[str] | None = None, purge: bool = False) -> None:
        """Stop every broker of the named clusters (all when None); ``purge`` removes their
        directories (:meth:`purge` removes every cluster directory)."""
        names = list(names) if names is not None else self.cluster_names()
        self.stop_clusters(names)
        if not purge:
            return
        for name in names:
            state = self._load(name)
            if state is None:
                continue
            if state.namespace is not None:
                netns.remove(state.namespace)
            shutil.rmtree(self._cluster_dir(name), ignore_errors=True)

    def purge(self) -> tuple[list[Path], list[Path]]:
        """Stop every cluster, then remove every cluster directory under the local root - a
        recorded cluster's, and any other holding a broker's or a registry's files (a cluster
        whose creation failed half way).  (removed, left): what it removed, and what it left
        there (the secrets directory, anything not a cluster's, what could not be removed)."""
        self.stop_clusters()
        for name in self.cluster_names():
            state = self._load(name)
            if state is not None and state.namespace is not None:
                netns.remove(state.namespace)
        removed: list[Path] = []
        left: list[Path] = []
        if not self.root.exists():
            return removed, left
        for path in sorted(self.root.iterdir()):
            if path == self.secrets.directory:
                left.append(path)
                continue
            if not (path.is_dir() and not path.is_symlink() and self._is_cluster_dir(path)):
                left.append(path)
                continue
            shutil.rmtree(path, ignore_errors=True)
            (left if path.exists() else removed).append(path)
        return removed, left

    @staticmethod
    def _is_cluster_dir(path: Path) -> bool:
        return any((path / marker).exists() for marker in ("cluster.json", "registry.json")) or (
            any(p.is_dir() for p in path.glob("broker-*"))
        )

    def _require(self, name: str) -> LocalClusterState:
        state = self._load(name)
        if state is None:
            known = ", ".join(self.cluster_names()) or "none"
            raise ConfigError([Problem("CLUSTER", f"no local cluster {name!r} (known: {known})")])
        return state

    def _brokers(self, state: LocalClusterState, node_id: int | None) -> list[BrokerState]:
        if node_id is None:
            return state.brokers
        chosen = [b for b in state.brokers if b.node_id == node_id]
        if not chosen:
            ids = ", ".join(str(b.node_id) for b in state.brokers)
            raise ConfigError(
                [Problem("--broker", f"{state.name} has no broker {node_id} (brokers: {ids})")]
            )
        return chosen

    def stop_broker(self, name: str, node_id: int | None = None) -> tuple[list[int], list[int]]:
        """Graceful stop (SIGTERM, controlled shutdown) of one broker or all of a cluster.
        (stopped, idle): the ids it stopped, and those that were not running."""
        return self._signal_brokers(name, node_id, signal.SIGTERM, 30.0)

    def kill_broker(self, name: str, node_id: int | None = None) -> tuple[list[int], list[int]]:
        """Hard kill (SIGKILL) of one broker or all of a cluster: a simulated crash.
        (killed, idle): the ids it killed, and those that were not running."""
        return self._signal_brokers(name, node_id, signal.SIGKILL, 10.0)

    def _signal_brokers(
        self, name: str, node_id: int | None, sig: int, wait_s: float
    ) -> tuple[list[int], list[int]]:
        state = self._require(name)
        done: list[int] = []
        idle: list[int] = []
        for broker in self._brokers(state, node_id):
            ran = self._signal(state, broker, sig, wait_s=wait_s)
            (done if ran else idle).append(broker.node_id)
        self._save(state)
        return done, idle

    def freeze_broker(self, name: str) -> None:
        """SIGSTOP every broker of a cluster: alive, silent (connections hang)."""
        state = self._require(name)
        for broker in self._brokers(state, None):
            if _pid_is_broker(broker.pid, self._properties(name, broker.node_id)):
                assert broker.pid is not None
                os.kill(broker.pid, signal.SIGSTOP)

    def thaw_broker(self, name: str) -> None:
        """SIGCONT every broker of a cluster (undoes freeze_broker)."""
        state = self._require(name)
        for broker in self._brokers(state, None):
            if _pid_is_broker(broker.pid, self._properties(name, broker.node_id)):
                assert broker.pid is not None
                os.kill(broker.pid, signal.SIGCONT)

    def namespace(self, name: str) -> Namespace | None:
        """The cluster's network namespace, when it was created in one."""
        return self._require(name).namespace

    def cut_link(self, name: str) -> None:
        """Cut the namespaced cluster's link to the host: brokers run, nobody reaches them."""
        namespace = self._require(name).namespace
        if namespace is None:
            raise LocalClusterError(
                f"{name} is not in a network namespace (drkit local up --netns)"
            )
        netns.cut(namespace)

    def mend_link(self, name: str) -> None:
        namespace = self._require(name).namespace
        if namespace is not None:
            netns.mend(namespace)

    def client_ports(self, name: str) -> list[int]:
        """The ports clients connect to (one per broker)."""
        return [b.port for b in self._require(name).brokers]

    def start_broker(
        self, name: str, node_id: int | None = None, timeout_s: float = 120.0
    ) -> tuple[list[int], list[int]]:
        """Start stopped brokers of a cluster again (same ports, same data); waits for ready.
        (started, running): the ids it started, and those already running."""
        state = self._require(name)
        chosen = self._brokers(state, node_id)
        stopped = [broker for broker in chosen if not self._alive(state, broker)]
        self._require_ports_free([(state, broker) for broker in stopped])
        jars = resolve_bundle("kafka") if stopped else None
        started: list[BrokerState] = []
        try:
            for broker in stopped:
                assert jars is not None
                broker.pid = self._start(state, broker, jars)
                started.append(broker)
            self._save(state)
            self._wait_ready(state, timeout_s)
        except BaseException as err:  # not ready, Ctrl-C: what this start began is stopped
            said = self._undo_start_broker(state, started)
            if not isinstance(err, DrkitError):
                raise
            failed = LocalClusterError(f"{err}; {said}" if said else str(err))
            failed.exit_code = err.exit_code
            raise failed from err
        running = [broker.node_id for broker in chosen if broker not in stopped]
        return [broker.node_id for broker in stopped], running

    def _undo_start_broker(self, state: LocalClusterState, started: list[BrokerState]) -> str:
        """Stop the brokers a failed ``start`` started (as ``up`` does, :meth:`_undo_start`):
        which it stopped, and which are left running (they ran before) and how to stop them."""
        for broker in started:
            self._signal(state, broker, signal.SIGTERM, wait_s=10.0)
        self._save(state)
        left = [b.node_id for b in state.brokers if self._alive(state, b)]
        said = []
        if started:
            ids = ", ".join(str(b.node_id) for b in started)
            said.append(f"stopped what this start started: {state.name} broker(s) {ids}")
        if left:
            ids = ", ".join(str(i) for i in left)
            said.append(
                f"left running: {state.name} broker(s) {ids} (running before); "
                f"'drkit local stop {state.name}' stops them"
            )
        return "; ".join(said)

    def _signal(
        self, state: LocalClusterState, broker: BrokerState, sig: int, wait_s: float
    ) -> bool:
        """Send ``sig`` to the broker and wait for it to exit; whether it was running."""
        props = self._properties(state.name, broker.node_id)
        if not _pid_is_broker(broker.pid, props):
            broker.pid = None
            return False
        assert broker.pid is not None
        os.kill(broker.pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _pid_is_broker(broker.pid, props):
            time.sleep(0.1)
        if _pid_is_broker(broker.pid, props):
            os.kill(broker.pid, signal.SIGKILL)
            while _pid_is_broker(broker.pid, props):
                time.sleep(0.05)
        _reap(broker.pid)
        broker.pid = None
        directory = self._broker_dir(state.name, broker.node_id)
        if sig == signal.SIGTERM and class_archive.recording_of(directory).exists():
            # A graceful exit dumped the class archive the broker recorded (a killed one
            # leaves none, or a torn file the check refuses).
            class_archive.keep_recording(bundle_dir("kafka"), java_executable(), directory)
        if state.namespace is None:
            _wait_ports_released(broker, deadline=time.monotonic() + wait_s)
        return True

    # -- status ---------------------------------------------------------------------------

    def cluster_status(self, name: str) -> ClusterStatus:
        state = self._require(name)
        brokers = tuple(
            BrokerStatus(
                id=b.node_id,
                pid=b.pid,
                alive=_pid_is_broker(b.pid, self._properties(name, b.node_id)),
                port=b.port,
                log_dir=str(self._broker_dir(name, b.node_id) / "logs"),
            )
            for b in state.brokers
        )
        return ClusterStatus(
            name, state.bootstrap_servers, brokers, state.secure, state.client_auth
        )

    def status(self) -> list[ClusterStatus]:
        return [self.cluster_status(name) for name in self.cluster_names()]

    def log_files(self, name: str) -> list[Path]:
        state = self._require(name)
        return [self._broker_dir(name, b.node_id) / "logs" / "server.log" for b in state.brokers]


def _wait_ports_released(broker: BrokerState, deadline: float) -> None:
    """Wait (until ``deadline``) for the kernel to release a dead broker's listening ports.

    The JVM's command line reads empty as soon as its memory is gone, but its sockets close a
    moment later (the kernel frees memory before files): a ``start`` right after a kill found
    the ports still held and refused (CI, 2026-12-05)."""
    ports = (broker.port, broker.controller_port)
    while time.monotonic() < deadline and any(_port_in_use("127.0.0.1", p) for p in ports):
        time.sleep(0.05)


def _reap(pid: int) -> None:
    """Collect the exit status if the broker is our child (avoids zombies in long test runs)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
