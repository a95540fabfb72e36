# Shared by scripts/*: where cached artefacts live (outside the clone) and how to get tox.
PROVISION_AGENT_CACHE=${PROVISION_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/provision-agent}
export PROVISION_AGENT_CACHE
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

ensure_tox() {
  local venv="$PROVISION_AGENT_CACHE/tox-venv"
  if [ ! -x "$venv/bin/tox" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q 'tox>=4'
  fi
  TOX="$venv/bin/tox"
}
