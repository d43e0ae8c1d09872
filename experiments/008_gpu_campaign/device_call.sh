#!/usr/bin/env bash
# One device call of the GPU campaign (README.md, "The device calls"): the wheels the GPU machine lacks are
# installed into SITE (/tmp/site) by the call that carries them (.whl/, the session's first call) and
# reused by the next calls on the warm machine, which carry no wheels (the tree and the wheels together
# must stay under the device's 64 MiB a call); then `campaign.sh session` within BUDGET_S seconds, into
# /tmp/camp (kept on the warm machine), its log and its files (one .tgz) into $OUT.
#
#   bash experiments/008_gpu_campaign/device_call.sh BUDGET_S
#
# Exit 2 (nothing run): no wheels installed here and none carried (a fresh machine: send the first
# call's command again, carrying .whl); else campaign.sh's own exit code (3: work left, call again).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUDGET="${1:-}"
[[ "$BUDGET" =~ ^[0-9]+$ ]] || { echo "device_call: give the call's budget in whole seconds, e.g. 540." >&2; exit 2; }
[[ -n "${OUT:-}" && -d "$OUT" ]] || { echo "device_call: \$OUT (the device's folder of files to bring back) is not set." >&2; exit 2; }
SITE="${CAMPAIGN_SITE:-/tmp/site}"
PY="${PYTHON:-python3}"

if [[ ! -f "$SITE/.perfmodel-wheels" ]]; then
  if ! compgen -G "$ROOT/.whl/*.whl" >/dev/null; then
    echo "device_call: no wheels installed in $SITE and none carried: a fresh machine; send the session's first call again (carry [\".whl\"])." >&2
    exit 2
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$ROOT"/.whl/*.whl \
    || { echo "device_call: the wheels did not install into $SITE (pip's message above)." >&2; exit 2; }
  touch "$SITE/.perfmodel-wheels"
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export CAMPAIGN_BUNDLE="$OUT/campaign.tgz" CAMPAIGN_BUDGET_S="$BUDGET"
bash "$HERE/campaign.sh" session /tmp/camp 2>&1 | tee "$OUT/session.log"
exit "${PIPESTATUS[0]}"
