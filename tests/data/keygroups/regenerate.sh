#!/usr/bin/env bash
# Regenerates flink_key_groups.tsv from real Apache Flink.
#
# Usage: regenerate.sh [PATH/TO/flink-dist-X.Y.Z.jar]
#
# Without an argument, the flink-dist jar shipped by PyFlink is looked up in
# the virtualenv /tmp/flinkvenv (override with FLINK_VENV), e.g. one made by:
#   python3 -m venv /tmp/flinkvenv && /tmp/flinkvenv/bin/pip install apache-flink==2.3.0
# Needs a JDK (javac, java) on PATH. Compiles into a temporary directory; no
# .class files are left in the repository.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/flink_key_groups.tsv"

if [[ $# -ge 1 ]]; then
    jar="$1"
else
    venv="${FLINK_VENV:-/tmp/flinkvenv}"
    jar="$(find "$venv" -path '*/pyflink/lib/flink-dist-*.jar' 2>/dev/null | sort | head -n 1)"
    if [[ -z "$jar" ]]; then
        echo "error: no flink-dist jar found under $venv; pass its path as the first argument" >&2
        exit 1
    fi
fi
if [[ ! -f "$jar" ]]; then
    echo "error: not a file: $jar" >&2
    exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

javac -encoding UTF-8 -cp "$jar" -d "$tmp/classes" "$here/KeyGroupTable.java"
java -cp "$jar:$tmp/classes" KeyGroupTable > "$tmp/out.tsv"
mv "$tmp/out.tsv" "$out"
echo "wrote $out using $jar" >&2
