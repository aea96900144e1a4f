#!/usr/bin/env bash
# The README's config section stays true: its TOML example parses, resolves to what the
# demo's config resolves to (--print-config), and every key tessera-train --help lists is
# named in the README (as section.key, `key`, or a line of the example).
# Usage: readme_config.sh README DEMO_CONFIG WORKDIR BIN_DIR LAUNCH...
set -u
readme=$1 demo=$2 work=$3 bin=$4
shift 4
launch=("$@")
# shellcheck source=tests/apps/workdir.sh
source "$(dirname "$0")/workdir.sh"
enter_workdir "$work" "readme"
fail() { echo "readme_config: FAILED: $*"; exit 1; }
train() { timeout 120 "${launch[@]}" -np 1 "$bin/tessera-train" "$@"; }

# The example: the first ```toml block after the sentence that introduces it.
awk '/with the keys it leaves at their defaults/ { seen = 1 }
     seen && /^```toml/ { inside = 1; next }
     inside && /^```/ { exit }
     inside { print }' "$readme" >example.toml
[ -s example.toml ] || fail "no TOML example found in $readme"
train example.toml --print-config >example.resolved 2>example.err ||
  { cat example.err; fail "the README's example does not parse"; }
train "$demo" --print-config >demo.resolved 2>demo.err || { cat demo.err; fail "the demo config"; }
diff demo.resolved example.resolved || fail "the README's example resolves unlike $demo"
echo "ok: the README's example resolves as the demo's config"

train --help >help.txt 2>&1 || { cat help.txt; fail "--help"; }
keys=$(grep -oE '^  --[a-z_]+\.[a-z_0-9]+=' help.txt | sed 's/^  --//; s/=$//')
[ "$(echo "$keys" | wc -l)" -ge 40 ] || fail "--help lists too few keys: $keys"
missing=()
for k in $keys; do
  key=${k#*.}
  grep -qF -- "$k" "$readme" || grep -qE "^$key *=" example.toml ||
    grep -qF "\`$key\`" "$readme" || missing+=("$k")
done
[ ${#missing[@]} -eq 0 ] || fail "keys in --help the README never names: ${missing[*]}"
echo "ok: every one of $(echo "$keys" | wc -l) keys in --help is named in the README"
