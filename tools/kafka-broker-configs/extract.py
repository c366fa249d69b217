"""Extract every Kafka broker configuration from Apache Kafka's sources.

Reads a checkout's git objects (``git -C REPO show COMMIT:path``), never a
work tree, and writes ``kafkette/server/config/kafka_broker_configs.py``: one row per
broker property of Kafka's ``AbstractKafkaConfig.CONFIG_DEF`` (plus the
dynamic-only broker quota configs of ``QuotaConfig.brokerQuotaConfigs``) with
its type, default (as Kafka's ``ConfigDef.convertToString`` prints it), dynamic
update mode (``read-only``, ``per-broker``, ``cluster-wide``, from
``DynamicBrokerConfig``'s sets), whether it is internal, and the first sentence
of its documentation.

Usage: python tools/kafka-broker-configs/extract.py KAFKA_GIT_DIR [COMMIT]

It is a small evaluator of the Java constant expressions Kafka's config
classes use, not a Java parser: a default it cannot evaluate stops the run
naming the expression, so a new Kafka needs a look, not a silent guess.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterator

OUT = pathlib.Path(__file__).resolve().parents[2] / "kafkette/server/config/kafka_broker_configs.py"

# The config definitions merged into AbstractKafkaConfig.CONFIG_DEF, in its order
# (file, anchor of the ConfigDef expression). ZkConfigs is left out: Kafka 4.0
# removed ZooKeeper mode and its configs (KAFKA-18631, after this snapshot).
CONFIG_DEFS = [
    (
        "storage/src/main/java/org/apache/kafka/server/log/remote/storage/RemoteLogManagerConfig.java",
        "public static ConfigDef configDef()",
    ),
    ("server/src/main/java/org/apache/kafka/server/config/ServerConfigs.java", "CONFIG_DEF ="),
    ("server/src/main/java/org/apache/kafka/server/config/KRaftConfigs.java", "CONFIG_DEF ="),
    ("server/src/main/java/org/apache/kafka/network/SocketServerConfigs.java", "CONFIG_DEF ="),
    ("server/src/main/java/org/apache/kafka/server/config/ReplicationConfigs.java", "CONFIG_DEF ="),
    (
        "group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorConfig.java",
        "GROUP_COORDINATOR_CONFIG_DEF =",
    ),
    (
        "group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorConfig.java",
        "NEW_GROUP_CONFIG_DEF =",
    ),
    (
        "group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorConfig.java",
        "OFFSET_MANAGEMENT_CONFIG_DEF =",
    ),
    (
        "group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorConfig.java",
        "CONSUMER_GROUP_CONFIG_DEF =",
    ),
    (
        "group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorConfig.java",
        "SHARE_GROUP_CONFIG_DEF =",
    ),
    (
        "storage/src/main/java/org/apache/kafka/storage/internals/log/CleanerConfig.java",
        "CONFIG_DEF =",
    ),
    (
        "storage/src/main/java/org/apache/kafka/storage/internals/log/LogConfig.java",
        "SERVER_CONFIG_DEF =",
    ),
    (
        "group-coordinator/src/main/java/org/apache/kafka/coordinator/group/modern/share/ShareGroupConfig.java",
        "CONFIG_DEF =",
    ),
    (
        "server/src/main/java/org/apache/kafka/server/config/ShareCoordinatorConfig.java",
        "CONFIG_DEF =",
    ),
    (
        "transaction-coordinator/src/main/java/org/apache/kafka/coordinator/transaction/TransactionLogConfig.java",
        "CONFIG_DEF =",
    ),
    (
        "transaction-coordinator/src/main/java/org/apache/kafka/coordinator/transaction/TransactionStateManagerConfig.java",
        "CONFIG_DEF =",
    ),
    ("raft/src/main/java/org/apache/kafka/raft/QuorumConfig.java", "CONFIG_DEF ="),
    ("server/src/main/java/org/apache/kafka/server/metrics/MetricConfigs.java", "CONFIG_DEF ="),
    ("server-common/src/main/java/org/apache/kafka/server/config/QuotaConfig.java", "CONFIG_DEF ="),
    (
        "clients/src/main/java/org/apache/kafka/common/config/internals/BrokerSecurityConfigs.java",
        "CONFIG_DEF =",
    ),
    (
        "server/src/main/java/org/apache/kafka/server/config/DelegationTokenManagerConfigs.java",
        "CONFIG_DEF =",
    ),
    (
        "server-common/src/main/java/org/apache/kafka/security/PasswordEncoderConfigs.java",
        "CONFIG_DEF =",
    ),
]
# DynamicConfig.Broker adds these (dynamic only, not in KafkaConfig).
BROKER_QUOTAS = (
    "server-common/src/main/java/org/apache/kafka/server/config/QuotaConfig.java",
    "public static ConfigDef brokerQuotaConfigs()",
)

DYNAMIC = "core/src/main/scala/kafka/server/DynamicBrokerConfig.scala"
LOG_CLEANER = "core/src/main/scala/kafka/log/LogCleaner.scala"
SOCKET_SERVER = "core/src/main/scala/kafka/network/SocketServer.scala"
SSL_CONFIGS = "clients/src/main/java/org/apache/kafka/common/config/SslConfigs.java"
SYNONYMS = (
    "server-common/src/main/java/org/apache/kafka/server/config/ServerTopicConfigSynonyms.java"
)

# Kafka 4.0 removed these ZooKeeper-era broker configs after the snapshot this
# tool was first run on (KAFKA-18353, KAFKA-18360 "Remove zookeeper configurations").
REMOVED_IN_4_0 = {
    "control.plane.listener.name",
    "broker.id.generation.enable",
    "reserved.broker.max.id",
    "log.message.format.version",  # KIP-724: message formats v0 and v1 dropped in 4.0
}


class Source:
    """Java sources of one commit, with their constants."""

    def __init__(self, repo: str, commit: str) -> None:
        self.repo, self.commit = repo, commit
        self.files: dict[str, str] = {}
        self.constants: dict[str, str] = {}  # "Class.NAME" -> raw expression
        self.class_of: dict[str, str] = {}
        paths = subprocess.run(
            ["git", "-C", repo, "ls-tree", "-r", "--name-only", commit],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        self.by_class = {
            p.rsplit("/", 1)[1][:-5]: p
            for p in paths
            if p.endswith(".java") and "/src/main/java/" in p
        }

    def show(self, path: str) -> str:
        if path not in self.files:
            text = subprocess.run(
                ["git", "-C", self.repo, "show", f"{self.commit}:{path}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            self.files[path] = _strip_comments(text)
        return self.files[path]

    def constant(self, cls: str, name: str) -> str | None:
        key = f"{cls}.{name}"
        if key not in self.constants:
            path = self.by_class.get(cls)
            if path is None:
                return None
            text = self.show(path)
            if not re.search(r"\b" + re.escape(name) + r"\s*=", text):
                for owner in re.findall(
                    r"import static [\w.]*\.(\w+)\.(?:" + re.escape(name) + r"|\*);", text
                ):
                    found = self.constant(owner, name)
                    if found is not None:
                        self.constants[key] = f"{owner}.{name}"
                        return self.constants[key]
            match = re.search(
                r"\bstatic\s+final\s+[\w<>\[\], ?]+?\s+" + re.escape(name) + r"\s*=\s*", text
            )
            if match is None:  # an interface's constant: no modifiers
                match = re.search(
                    r"^\s*(?:public\s+)?(?:static\s+)?(?:final\s+)?[\w<>\[\]]+\s+"
                    + re.escape(name)
                    + r"\s*=\s*",
                    text,
                    re.M,
                )
            if match is None:
                return None
            self.constants[key] = _until(text, match.end(), ";")
        return self.constants[key]


def _strip_comments(text: str) -> str:
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
        elif text.startswith("/*", i):
            i = text.find("*/", i) + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _until(text: str, start: int, stop: str) -> str:
    """Text from start to the first ``stop`` at bracket depth 0 (outside strings)."""
    depth, i = 0, start
    while True:
        c = text[i]
        if c == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return text[start:i]
            depth -= 1
        elif c in stop and depth == 0:
            return text[start:i]
        i += 1


def _args(call: str) -> list[str]:
    """The top-level comma-separated arguments of ``(a, b(c, d), "e,f")``."""
    inner = call[call.index("(") + 1 :]
    result, depth, current, i = [], 0, [], 0
    while i < len(inner):
        c = inner[i]
        if c == '"':
            j = i + 1
            while inner[j] != '"':
                j += 2 if inner[j] == "\\" else 1
            current.append(inner[i : j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                result.append("".join(current).strip())
                return result
            depth -= 1
        if c == "," and depth == 0:
            result.append("".join(current).strip())
            current = []
        else:
            current.append(c)
        i += 1
    raise ValueError(call)


_REF = re.compile(
    r"\b([A-Z]\w*)\.([A-Z_][A-Z0-9_]*)\b(?!\s*\()|(?<![.\w\"])([A-Z_][A-Z0-9_]{2,})\b(?!\s*\()"
)

_SPECIAL = {
    "Integer.MAX_VALUE": str(2**31 - 1),
    "Long.MAX_VALUE": str(2**63 - 1),
    "Short.MAX_VALUE": "32767",
    "Double.MAX_VALUE": "1.7976931348623157E308",
    "Collections.emptyList()": "[]",
    "Collections.emptyMap()": "{}",
    "List.of()": "[]",
}
_TIME = {
    "MILLISECONDS": 1,
    "SECONDS": 1000,
    "MINUTES": 60_000,
    "HOURS": 3_600_000,
    "DAYS": 86_400_000,
}


class Evaluator:
    """Java constant expressions to Python values."""

    def __init__(self, source: Source) -> None:
        self.source = source

    def value(self, expr: str, cls: str, depth: int = 0) -> object:
        expr = " ".join(expr.split())
        if depth > 20:
            raise ValueError(expr)
        if expr in _SPECIAL:
            return ast.literal_eval(_SPECIAL[expr])
        if expr == "null" or expr == "ConfigDef.NO_DEFAULT_VALUE":
            return None if expr == "null" else NO_DEFAULT
        if expr in OVERRIDES:
            return OVERRIDES[expr]
        m = re.fullmatch(r"(?:\(\w+\)\s*)?([A-Z][A-Z0-9_]*)\.id", expr)
        if m:
            raw = self.source.constant(cls, m.group(1))
            enum = re.fullmatch(r"(\w+)\.([A-Z][A-Z0-9_]*)", " ".join((raw or "").split()))
            if enum is None:
                raise ValueError(expr)
            return self._enum(enum.group(1), enum.group(2), "id")
        m = re.fullmatch(r"Collections\.unmodifiable\w+\((.*)\)", expr)
        if m:
            return self.value(m.group(1), cls, depth + 1)
        m = re.fullmatch(r"ServerTopicConfigSynonyms\.serverSynonym\((.*)\)", expr)
        if m:
            topic = self.value(m.group(1), cls, depth + 1)
            return topic_synonym_primaries(self.source)[str(topic)]
        m = re.fullmatch(
            r"(?:[\w.]*\.)?(\w+)\.([A-Z][A-Z0-9_]*)\.(toString\(\)|name\(\)|name|id)", expr
        )
        if m and m.group(1) in self.source.by_class:
            return self._enum(m.group(1), m.group(2), m.group(3))
        for fn in (
            "Arrays.asList",
            "List.of",
            "Collections.singletonList",
            "Set.of",
            "Utils.mkSet",
        ):
            if expr.startswith(fn + "("):
                return [self.value(a, cls, depth + 1) for a in _args(expr) if a]
        if expr.startswith("String.join("):
            sep, *rest = _args(expr)
            items: list[str] = []
            for r in rest:
                v = self.value(r, cls, depth + 1)
                items.extend(v if isinstance(v, list) else [str(v)])
            return str(self.value(sep, cls, depth + 1)).join(items)
        m = re.fullmatch(r"(?:\(\w+\)\s*)?TimeUnit\.(\w+)\.to(\w+)\((.*)\)", expr, re.S)
        if m:
            number = self.value(m.group(3), cls, depth + 1)
            assert isinstance(number, int)
            unit = m.group(2).upper()
            unit = unit if unit.endswith("S") and unit != "MILLIS" else unit + "S"
            unit = "MILLISECONDS" if unit == "MILLISS" else unit
            return number * _TIME[m.group(1)] // _TIME[unit]
        m = re.fullmatch(r"CompressionType\.(\w+)\.defaultLevel\(\)", expr)
        if m:
            codec = {"GZIP": "GzipCompression", "LZ4": "Lz4Compression", "ZSTD": "ZstdCompression"}
            return self.value(
                self.source.constant(codec[m.group(1)], "DEFAULT_LEVEL") or "", cls, depth + 1
            )
        m = re.fullmatch(r"(\w+)\.(\w+)\.name\(\)(?:\.toLowerCase\(Locale\.ROOT\))?", expr)
        if m and m.group(1)[0].isupper():
            name = m.group(2)
            return name.lower() if "toLowerCase" in expr else name
        m = re.fullmatch(r"(\w+)\.(\w+)\.name", expr)
        if m and m.group(1) in ("BrokerCompressionType", "CompressionType", "SecurityProtocol"):
            return m.group(2).lower() if m.group(1) != "SecurityProtocol" else m.group(2)
        m = re.fullmatch(r"(\w+)\.class(?:\.getName\(\))?", expr)
        if m:
            path = self.source.by_class.get(m.group(1))
            if path is None:
                raise ValueError(expr)
            return ("class", path.split("/src/main/java/")[1][:-5].replace("/", "."))
        # references and arithmetic
        python = self._pythonise(expr, cls, depth)
        return eval(python, {"__builtins__": {}}, {})

    def _enum(self, cls: str, constant: str, accessor: str) -> object:
        """An enum constant's name, its first string argument (toString) or first number (id)."""
        text = self.source.show(self.source.by_class[cls])
        match = re.search(r"\b" + constant + r"\s*\(([^;{]*?)\)\s*[,;{]", text)
        args = _args("(" + match.group(1) + ")") if match else []
        if accessor == "id":
            return int(re.sub(r"\(\w+\)\s*", "", args[0]))
        strings = [a for a in args if a.startswith('"')]
        if accessor in ("toString()", "name") and strings:  # a toString() or a name field
            return ast.literal_eval(strings[0])
        return constant

    def _pythonise(self, expr: str, cls: str, depth: int) -> str:
        def ref(match: re.Match[str]) -> str:
            owner, name = (
                (match.group(1), match.group(2)) if match.group(1) else (cls, match.group(3))
            )
            raw = self.source.constant(owner, name)
            if raw is None:
                raise ValueError(f"{owner}.{name} in {expr}")
            return repr(self.value(raw, owner, depth + 1))

        pieces = re.split(r'("(?:[^"\\]|\\.)*")', expr)
        out = []
        for piece in pieces:
            if piece.startswith('"'):
                out.append(repr(ast.literal_eval(piece)))
                continue
            text = re.sub(r"\((int|long|short|double)\)", "", piece)
            text = re.sub(r"(\d)[LlDdFf]\b", r"\1", text)
            text = text.replace("true", "True").replace("false", "False")
            text = text.replace("/", "//")  # Java's integer division
            out.append(_REF.sub(ref, text))
        return "".join(out)


NO_DEFAULT = object()

# Defaults Kafka computes with code this evaluator does not run, each with its
# source: checked by hand against the commit in README.md.
OVERRIDES: dict[str, object] = {
    # CompressionType.GZIP.DEFAULT_LEVEL = Deflater.DEFAULT_COMPRESSION (java.util.zip: -1)
    "CompressionType.GZIP.defaultLevel()": -1,
    "CompressionType.LZ4.defaultLevel()": 9,  # Lz4Compression: DEFAULT_LEVEL = 9
    "CompressionType.ZSTD.defaultLevel()": 3,  # ZstdCompression: DEFAULT_LEVEL = 3
    # SocketServerConfigs: every SecurityProtocol mapped to itself, as Kafka's docs print it
    (
        "Arrays.stream(SecurityProtocol.values())"
        " .collect(Collectors.toMap(ListenerName::forSecurityProtocol, sp -> sp))"
        " .entrySet() .stream()"
        ' .map(entry -> entry.getKey().value() + ":" + entry.getValue().name())'
        ' .collect(Collectors.joining(","))'
    ): "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
    # MetadataVersion.LATEST_PRODUCTION = IBP_4_0_IV0, whose version() is "4.0-IV0"
    "MetadataVersion.latestProduction().version()": "4.0-IV0",
    "Sensor.RecordingLevel.INFO.toString()": "INFO",
    # SslClientAuth.toString() is its lower-case name
    "SslClientAuth.NONE.toString()": "none",
    # JVM defaults (Key/TrustManagerFactory.getDefaultAlgorithm()), as Kafka's docs print them
    "KeyManagerFactory.getDefaultAlgorithm()": "SunX509",
    "TrustManagerFactory.getDefaultAlgorithm()": "PKIX",
}


def java_string(value: object, type_: str) -> str | None:
    """Kafka's ConfigDef.convertToString of a default."""
    if value is None or value is NO_DEFAULT:
        return None
    if isinstance(value, tuple) and value[0] == "class":
        return str(value[1])
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v[1]) if isinstance(v, tuple) else str(v) for v in value)
    if type_ == "DOUBLE":
        number = float(value)  # type: ignore[arg-type]
        return _java_double(number)
    if type_ == "LIST" and isinstance(value, str):
        return ",".join(p.strip() for p in value.split(",")) if value.strip() else ""
    return str(value)


def _java_double(number: float) -> str:
    if number == int(number) and abs(number) < 1e7:
        return f"{number:.1f}"
    if abs(number) >= 1e7:
        mantissa, exponent = f"{number:.16E}".split("E")
        mantissa = mantissa.rstrip("0").rstrip(".")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}E{int(exponent)}"
    return repr(number)


def first_sentence(text: str) -> str:
    text = re.sub(r"<[^>]+>", "", text)
    text = " ".join(text.split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return (match.group(1) if match else text)[:300]


def define_calls(block: str) -> Iterator[tuple[bool, str]]:
    for match in re.finditer(r"\.define(Internal)?\s*\(", block):
        call = block[match.start() + 1 :]
        yield (
            match.group(1) is not None,
            call[: call.index("(")] + "(" + _until(call, call.index("(") + 1, "") + ")",
        )


_TYPES = {"BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD"}


def parse_block(source: Source, ev: Evaluator, path: str, anchor: str) -> list[dict[str, object]]:
    text = source.show(path)
    cls = path.rsplit("/", 1)[1][:-5]
    start = text.index(anchor) + len(anchor)
    if anchor.endswith("()"):  # a method: its return expression
        start = text.index("return", start) + len("return")
    block = _until(text, start, ";")
    rows = []
    for internal, call in define_calls(block):
        args = _args(call)
        if len(args) < 4 or args[1].split(".")[-1] not in _TYPES:
            raise ValueError(f"unexpected define shape in {path}: {call[:200]}")
        name = ev.value(args[0], cls)
        type_ = args[1].split(".")[-1]
        if name in REMOVED_IN_4_0:
            continue
        default = java_string(ev.value(args[2], cls), type_)
        check = _check(ev, cls, args[3] if len(args) >= 6 else "")
        doc_expr = args[-1] if not args[-1].startswith("new ") else args[-2]
        try:
            doc = ev.value(doc_expr, cls)
        except (ValueError, SyntaxError, NameError, TypeError):
            doc = ""
        rows.append(
            {
                "name": name,
                "type": type_,
                "default": default,
                "internal": internal,
                "check": check,
                "doc": first_sentence(doc if isinstance(doc, str) else ""),
            }
        )
    return rows


def _check(ev: Evaluator, cls: str, validator: str) -> tuple[str, ...]:
    """Kafka's validators this table keeps: Range.atLeast, Range.between, ValidString.in
    of literal strings; () for none or another kind (see README)."""
    validator = " ".join(validator.split())
    match = re.fullmatch(r"(?:ConfigDef\.)?(?:Range\.)?(atLeast|between)\((.*)\)", validator)
    if match:
        bounds = [str(ev.value(a, cls)) for a in _args("(" + match.group(2) + ")")]
        return ("at_least" if match.group(1) == "atLeast" else "between", *bounds)
    match = re.fullmatch(r"ConfigDef\.ValidString\.in\((.*)\)", validator)
    if match:
        try:
            options = [ev.value(a, cls) for a in _args("(" + match.group(1) + ")")]
        except (ValueError, SyntaxError, NameError, TypeError, KeyError):
            return ()
        if all(isinstance(o, str) for o in options):
            return ("one_of", *(str(o) for o in options))
    return ()


def scala_set(source: Source, path: str, anchor: str) -> set[str]:
    """Names in a Scala ``val X = Set(A.B, ...)`` / Java ``Set.of(...)``."""
    text = _strip_comments(
        subprocess.run(
            ["git", "-C", source.repo, "show", f"{source.commit}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    start = text.index(anchor)
    open_paren = text.index("(", start)
    body = _until(text, open_paren + 1, "")
    names = set()
    for owner, name in re.findall(r"\b([A-Z]\w*)\.([A-Z_][A-Z0-9_]*)\b", body):
        raw = source.constant(owner, name)
        if raw is None:
            raise ValueError(f"{owner}.{name} in {path}")
        value = Evaluator(source).value(raw, owner)
        assert isinstance(value, str), (owner, name)
        names.add(value)
    return names


def topic_synonym_primaries(source: Source) -> dict[str, str]:
    """ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS: topic config -> first broker synonym."""
    text = source.show(SYNONYMS)
    ev = Evaluator(source)
    block = _until(text, text.index("ALL_TOPIC_CONFIG_SYNONYMS") + 30, ";")
    prefixes = {
        "sameName": "",
        "sameNameWithLogPrefix": "log.",
        "sameNameWithLogCleanerPrefix": "log.cleaner.",
        "single": "",
        "singleWithLogPrefix": "log.",
        "singleWithLogCleanerPrefix": "log.cleaner.",
        "listWithLogPrefix": "log.",
    }
    result = {}
    for match in re.finditer(r"\b(" + "|".join(prefixes) + r")\(", block):
        call = block[match.start() :]
        args = _args(call)
        topic = ev.value(args[0], "TopicConfig")
        assert isinstance(topic, str)
        if match.group(1).startswith("sameName"):
            broker = topic
        elif match.group(1).startswith("single"):
            broker = str(ev.value(args[1], "ServerTopicConfigSynonyms"))
        else:
            broker = str(ast.literal_eval(re.search(r'"[^"]*"', args[1]).group(0)))  # type: ignore[union-attr]
        result[topic] = prefixes[match.group(1)] + broker
    return result


def main() -> None:
    repo = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    commit = subprocess.run(
        ["git", "-C", repo, "rev-parse", commit], check=True, capture_output=True, text=True
    ).stdout.strip()
    source = Source(repo, commit)
    ev = Evaluator(source)
    rows: dict[str, dict[str, object]] = {}
    for path, anchor in CONFIG_DEFS:
        for row in parse_block(source, ev, path, anchor):
            rows.setdefault(str(row["name"]), row)  # mergeConfigs: first definition wins
    quota_rows = parse_block(source, ev, *BROKER_QUOTAS)
    for row in quota_rows:
        rows.setdefault(str(row["name"]), row)
    for name in REMOVED_IN_4_0:
        rows.pop(name, None)

    # DynamicBrokerConfig.AllDynamicConfigs and PerBrokerConfigs
    ssl = scala_set(source, SSL_CONFIGS, "RECONFIGURABLE_CONFIGS")
    cleaner = scala_set(source, LOG_CLEANER, "val ReconfigurableConfigs")
    synonyms = topic_synonym_primaries(source)
    log = {b for t, b in synonyms.items() if t != "message.format.version"}
    thread_pool, listener, remote = _dynamic_sets(source, source.show(DYNAMIC))
    socket = scala_set(source, SOCKET_SERVER, "val ReconfigurableConfigs")
    producer = scala_set(source, DYNAMIC, "DynamicProducerStateManagerConfig = Set")
    metric = {"metric.reporters"}
    all_dynamic = ssl | cleaner | log | thread_pool | metric | listener | socket | producer | remote
    all_dynamic |= {str(r["name"]) for r in quota_rows}
    cluster_level_listener = {
        "max.connections",
        "max.connection.creation.rate",
        "num.network.threads",
    }
    per_broker = (ssl | listener) - cluster_level_listener
    missing = all_dynamic - set(rows)
    assert not missing, f"dynamic names without a definition: {sorted(missing)}"

    lines = [
        "# ruff: noqa: E501",
        '"""Every Kafka 4 broker configuration (generated; do not edit).',
        "",
        "Generated by tools/kafka-broker-configs/extract.py from apache/kafka at",
        f"{commit} (see tools/kafka-broker-configs/README.md). Each row:",
        "(name, type, default or None, mode, internal, first sentence of Kafka's doc,",
        "check); mode is read-only, per-broker or cluster-wide (DynamicBrokerConfig);",
        "check is Kafka's validator when it is ('at_least', MIN), ('between', MIN, MAX)",
        "or ('one_of', *STRINGS), else ().",
        '"""',
        "",
        f'KAFKA_COMMIT = "{commit}"',
        "",
        "ROWS: tuple[tuple[str, str, str | None, str, bool, str, tuple[str, ...]], ...] = (",
    ]
    for name in sorted(rows):
        row = rows[name]
        mode = (
            "per-broker"
            if name in per_broker
            else "cluster-wide"
            if name in all_dynamic
            else "read-only"
        )
        lines.append(
            f"    ({name!r}, {row['type']!r}, {row['default']!r}, {mode!r}, "
            f"{row['internal']!r}, {row['doc']!r}, {row['check']!r}),"
        )
    lines.append(")")
    lines.append("")
    lines.append(f"SSL_RECONFIGURABLE: frozenset[str] = frozenset({sorted(ssl)!r})")
    lines.append('"""SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix."""')
    lines.append("")
    lines.append(f"LISTENER_MECHANISM_CONFIGS: tuple[str, ...] = {LISTENER_MECHANISM!r}")
    lines.append('"""Set per listener and SASL mechanism: listener.name.L.MECH.<name>."""')
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(rows)} configs ({sum(1 for n in rows if n in all_dynamic)} dynamic) -> {OUT}")


LISTENER_MECHANISM = (
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
)


def _dynamic_sets(source: Source, text: str) -> tuple[set[str], set[str], set[str]]:
    """ReconfigurableConfigs of DynamicThreadPool, DynamicListenerConfig, DynamicRemoteLogConfig."""
    found = []
    for owner in (
        "object DynamicThreadPool",
        "object DynamicListenerConfig",
        "object DynamicRemoteLogConfig",
    ):
        start = text.index(owner)
        open_paren = text.index("val ReconfigurableConfigs = Set(", start) + len(
            "val ReconfigurableConfigs = Set("
        )
        body = _until(text, open_paren, "")
        names = set()
        for cls, name in re.findall(r"\b([A-Z]\w*)\.([A-Z_][A-Z0-9_]*)\b", body):
            raw = source.constant(cls, name)
            if raw is None:
                raise ValueError(f"{cls}.{name}")
            names.add(str(Evaluator(source).value(raw, cls)))
        found.append(names)
    return found[0], found[1], found[2]


if __name__ == "__main__":
    main()
