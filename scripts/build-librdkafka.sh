#!/usr/bin/env bash
# Build librdkafka with SASL/GSSAPI (Kerberos) and the confluent-kafka Python client against it,
# into the venv ($PY's). The PyPI wheel bundles a librdkafka built without GSSAPI ("Current build
# options: PLAIN SASL_SCRAM OAUTHBEARER") and Debian's librdkafka is too old for the client.
#
# Sources, from the package registries only:
#   - librdkafka: the copy npm's @confluentinc/kafka-javascript bundles (deps/librdkafka),
#   - confluent-kafka: its PyPI sdist, the release matching that librdkafka (its C source refuses
#     an older librdkafka: MIN_RD_KAFKA_VERSION).
# System libraries (scripts/setup-system.sh): libsasl2-dev + libsasl2-modules-gssapi-mit (Cyrus
# SASL and its GSSAPI plugin), libssl-dev, zlib1g-dev, libzstd-dev; lz4 and snappy are built in.
#
# Cached in ${DRT_CACHE_DIR:-~/.cache/dr-toolkit}/librdkafka/<librdkafka>-ck<client>/ (the
# installed library and the built wheel): a second run with the client already in the venv does
# nothing (one import); a fresh venv only reinstalls the cached wheel. The wheel's extension finds
# the library through its rpath (the cache): removing the cache makes the next run build again.
set -euo pipefail
PY=${PY:-.venv/bin/python}
NPM_PACKAGE=${DRT_LIBRDKAFKA_NPM:-@confluentinc/kafka-javascript@1.10.1}
LIBRDKAFKA_VERSION=2.15.1       # what NPM_PACKAGE bundles (checked against its rdkafka.h)
CK_VERSION=2.15.1               # confluent-kafka (PyPI) built against it: constraints.txt pins the same
CACHE=${DRT_CACHE_DIR:-$HOME/.cache/dr-toolkit}/librdkafka/${LIBRDKAFKA_VERSION}-ck${CK_VERSION}
PREFIX=$CACHE/prefix
say() { echo "build-librdkafka: $*" >&2; }

# The check: the venv's client is ours (its version, this librdkafka, GSSAPI accepted).
check() {
  "$PY" - "$CK_VERSION" "$LIBRDKAFKA_VERSION" <<'EOF' 2>/dev/null
import sys
import confluent_kafka as ck
want_ck, want_lib = sys.argv[1], sys.argv[2]
version = ck.version()
version = version[0] if isinstance(version, tuple) else version
assert version == want_ck and ck.libversion()[0] == want_lib, (version, ck.libversion())
ck.Producer({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI",
             "sasl.kerberos.min.time.before.relogin": 0, "log_level": 0})
EOF
}

if check; then
  exit 0
fi
[ -x "$PY" ] || { say "no venv python at $PY (run make venv first)"; exit 2; }

if [ ! -f "$PREFIX/lib/librdkafka.so.1" ]; then
  for need in npm gcc make pkg-config; do
    command -v "$need" >/dev/null 2>&1 || { say "$need is missing (scripts/setup-system.sh installs it)"; exit 2; }
  done
  [ -f /usr/include/sasl/sasl.h ] || { say "Cyrus SASL headers missing: apt-get install libsasl2-dev libsasl2-modules-gssapi-mit"; exit 2; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  say "building librdkafka $LIBRDKAFKA_VERSION with GSSAPI from $NPM_PACKAGE (takes about a minute)"
  (cd "$work" && npm pack --silent "$NPM_PACKAGE" >/dev/null)
  tar xzf "$work"/*.tgz -C "$work" package/deps/librdkafka
  src=$work/package/deps/librdkafka
  got=$(sed -n 's/^#define RD_KAFKA_VERSION *0x\([0-9a-f]*\).*/\1/p' "$src/src/rdkafka.h")
  want=$(printf '%02x%02x%02xff' ${LIBRDKAFKA_VERSION//./ })
  [ "$got" = "$want" ] || { say "$NPM_PACKAGE bundles librdkafka 0x$got, not $LIBRDKAFKA_VERSION (0x$want)"; exit 2; }
  # Only what the toolkit and its users' topics need: SASL (GSSAPI, SCRAM, PLAIN), TLS, every
  # compression codec (records are read, whatever their producer chose); no libcurl (OIDC), no
  # syslog, no debug symbols, no C++ library or examples (make -C src).
  (cd "$src" && ./configure --prefix="$PREFIX" --enable-gssapi --enable-ssl --enable-zlib --enable-zstd \
      --disable-lz4-ext --disable-curl --disable-syslog --disable-debug-symbols >"$work/configure.out" 2>&1) \
    || { tail -20 "$work/configure.out" >&2; say "librdkafka's configure failed"; exit 2; }
  grep -q '^WITH_SASL_CYRUS=[[:space:]]*y' "$src/Makefile.config" \
    || { say "librdkafka's configure found no Cyrus SASL (GSSAPI): apt-get install libsasl2-dev"; exit 2; }
  make -C "$src/src" -j"${DRT_BUILD_JOBS:-2}" >"$work/make.out" 2>&1 \
    || { tail -30 "$work/make.out" >&2; say "building librdkafka failed"; exit 2; }
  rm -rf "$PREFIX"
  make -C "$src/src" install >"$work/install.out" 2>&1 || { tail -20 "$work/install.out" >&2; exit 2; }
  rm -f "$PREFIX"/lib/*.a
fi

wheel=$(ls "$CACHE"/wheel/confluent_kafka-"$CK_VERSION"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  say "building confluent-kafka $CK_VERSION from its sdist against $PREFIX"
  rm -rf "$CACHE/wheel"
  # The sdist (pip download: uv has none), built in an isolated environment for $PY.
  dl=$(mktemp -d)
  if python3 -m pip --version >/dev/null 2>&1; then pipcmd=(python3 -m pip); else pipcmd=(uvx pip); fi
  "${pipcmd[@]}" download -q --no-binary :all: --no-deps "confluent-kafka==$CK_VERSION" -d "$dl"
  CFLAGS="-I$PREFIX/include" LDFLAGS="-L$PREFIX/lib -Wl,-rpath,$PREFIX/lib" \
    uv build -q --wheel -p "$PY" --out-dir "$CACHE/wheel" "$dl/confluent_kafka-$CK_VERSION.tar.gz"
  rm -rf "$dl"
  wheel=$(ls "$CACHE"/wheel/confluent_kafka-"$CK_VERSION"-*.whl | head -1)
fi
VIRTUAL_ENV=$(cd "$(dirname "$PY")/.." && pwd) uv pip install -q --reinstall --no-deps "$wheel"
check || { say "the rebuilt confluent-kafka does not load or has no GSSAPI ($wheel)"; exit 2; }
say "confluent-kafka $CK_VERSION on librdkafka $LIBRDKAFKA_VERSION with GSSAPI installed into $(dirname "$PY")/.."
