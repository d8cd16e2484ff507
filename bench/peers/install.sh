#!/usr/bin/env bash
# Install each peer orchestrator into its own virtual environment, outside the repository.
#
#   bash bench/peers/install.sh            # all peers
#   bash bench/peers/install.sh luigi      # one peer
#
# PEERS_DIR (default /tmp/etl-peers) holds one venv per tool; a venv that
# already imports its tool is left alone, so a rerun is cheap. Each install's
# output goes to PEERS_DIR/<tool>/install.log and a failure is recorded in
# PEERS_DIR/<tool>/FAILED (the bench reads it and prints the error).
set -uo pipefail

PEERS_DIR="${PEERS_DIR:-/tmp/etl-peers}"
PYTHON="${PEER_PYTHON:-python3}"
# Only PyPI is reachable here, so Airflow's constraints file cannot be used:
# pin a release whose own upper bounds resolve on Python 3.11.
AIRFLOW_VERSION="${AIRFLOW_VERSION:-2.10.5}"

declare -A SPEC=(
  [luigi]="luigi==3.8.1"
  [dagster]="dagster==1.13.28"
  [prefect]="prefect==3.9.1"
  [airflow]="apache-airflow==${AIRFLOW_VERSION}"
)
declare -A MODULE=([luigi]=luigi [dagster]=dagster [prefect]=prefect [airflow]=airflow)

tools=("$@")
[ ${#tools[@]} -eq 0 ] && tools=(luigi dagster prefect airflow)
status=0
for tool in "${tools[@]}"; do
  if [ -z "${SPEC[$tool]:-}" ]; then
    echo "unknown peer: $tool (known: ${!SPEC[*]})" >&2
    exit 2
  fi
  dir="$PEERS_DIR/$tool"
  mkdir -p "$dir"
  if [ -x "$dir/venv/bin/python" ] && "$dir/venv/bin/python" -c "import ${MODULE[$tool]}" 2>/dev/null; then
    echo "$tool: already installed ($("$dir/venv/bin/python" -m pip show "${SPEC[$tool]%%==*}" 2>/dev/null | sed -n 's/^Version: //p'))"
    continue
  fi
  echo "$tool: installing ${SPEC[$tool]} into $dir/venv (log: $dir/install.log)"
  rm -f "$dir/FAILED"
  {
    "$PYTHON" -m venv "$dir/venv" &&
    "$dir/venv/bin/python" -m pip install --quiet --upgrade pip &&
    "$dir/venv/bin/python" -m pip install "${SPEC[$tool]}" &&
    "$dir/venv/bin/python" -c "import ${MODULE[$tool]}"
  } >"$dir/install.log" 2>&1
  if [ $? -ne 0 ]; then
    tail -n 25 "$dir/install.log" >"$dir/FAILED"
    echo "$tool: FAILED (see $dir/FAILED)" >&2
    status=1
    continue
  fi
  if [ "$tool" = airflow ]; then
    # dag.test() needs a metadata database; keep it in the scratch folder.
    if ! AIRFLOW_HOME="$dir/home" AIRFLOW__CORE__LOAD_EXAMPLES=False "$dir/venv/bin/airflow" db migrate >>"$dir/install.log" 2>&1; then
      tail -n 25 "$dir/install.log" >"$dir/FAILED"
      echo "$tool: 'airflow db migrate' FAILED (see $dir/FAILED)" >&2
      status=1
      continue
    fi
  fi
  echo "$tool: ok"
done
exit $status
