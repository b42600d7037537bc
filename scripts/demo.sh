#!/usr/bin/env bash
# `make demo`: the real benchmark, end to end, on the embedded local model. No API key, no network at run time.
#
# Starts `contextdelta local-model serve` on a free loopback port, waits for its `ready` line, runs
# `contextdelta run-benchmark` on the demo slice (four of the six strategies, both protection modes), verifies the run
# directory, prints the report, and stops the server on exit (also on error or Ctrl-C).
#
# The slice, model and limits are chosen to finish within 30 minutes on a 2-core CPU machine (README, "Demo"): a
# short-horizon slice of the generated horizon suite, the config-launch-freeze family (its right ending is to leave
# a key the listing shows frozen alone: nothing a small model has to write) at horizons 1 and 2, x 4 strategies x
# 2 modes x 1 repeat = 16 episodes, at most 8 steps (the reference's 6 or 7 calls and a final answer) and 96
# completion tokens per call, with the reduced strategies' windows shrunk (last_n 1; summary/digest once more than 1
# group, keep 1) so that at horizon 2 the listing that shows the freeze has left the window when the change is due.
# Override with environment variables:
#   DEMO_MODEL (0.5b)  DEMO_TASK_IDS  DEMO_STRATEGIES  DEMO_MODES  DEMO_REPEATS (1)  DEMO_MAX_STEPS (8)
#   DEMO_MAX_TOKENS (96)  DEMO_LAST_N (1)  DEMO_SUMMARY_TRIGGER (1)  DEMO_SUMMARY_KEEP (1)
#   DEMO_RESULTS_DIR (results)  DEMO_TASKS (tasks/horizon)  DEMO_SERVER_ARGS (extra `local-model serve` flags)
#   DEMO_READY_TIMEOUT_S (900: the first start assembles and hashes the model file)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-.venv/bin}
MODEL=${DEMO_MODEL:-0.5b}
TASKS=${DEMO_TASKS:-tasks/horizon}
TASK_IDS=${DEMO_TASK_IDS:-config-launch-freeze-h01-d1-release-freeze-early-s0,config-launch-freeze-h02-d1-release-freeze-early-s0}
STRATEGIES=${DEMO_STRATEGIES:-full_history,last_n,semantic_summary,typed_state_digest}
MODES=${DEMO_MODES:-unprotected,freshness_contract}
REPEATS=${DEMO_REPEATS:-1}
MAX_STEPS=${DEMO_MAX_STEPS:-8}
MAX_TOKENS=${DEMO_MAX_TOKENS:-96}
LAST_N=${DEMO_LAST_N:-1}
SUMMARY_TRIGGER=${DEMO_SUMMARY_TRIGGER:-1}
SUMMARY_KEEP=${DEMO_SUMMARY_KEEP:-1}
RESULTS_DIR=${DEMO_RESULTS_DIR:-results}
READY_TIMEOUT_S=${DEMO_READY_TIMEOUT_S:-900}

started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/contextdelta-demo.XXXXXX")
server_out="$work/server.stdout"
server_log="$work/server.log"
server_pid=""

stop_server() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    server_pid=""
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== starting the local model ($MODEL); server log: $server_log"
read -r -a server_args <<<"${DEMO_SERVER_ARGS:-}"
"$BIN/contextdelta" local-model serve --model "$MODEL" --port 0 ${server_args[@]+"${server_args[@]}"} \
    >"$server_out" 2>"$server_log" &
server_pid=$!

deadline=$((SECONDS + READY_TIMEOUT_S))
ready_line=""
while [[ -z "$ready_line" ]]; do
    ready_line=$(grep -m1 '^ready ' "$server_out" || true)
    [[ -n "$ready_line" ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "error: the local model server exited before it was ready; its log:" >&2
        tail -n 40 "$server_log" >&2
        exit 1
    fi
    if ((SECONDS >= deadline)); then
        echo "error: the local model server was not ready within ${READY_TIMEOUT_S}s; its log:" >&2
        tail -n 40 "$server_log" >&2
        exit 1
    fi
    sleep 1
done
base_url=$(sed -n 's/.* base_url=\([^ ]*\).*/\1/p' <<<"$ready_line")
served_model=$(sed -n 's/.* model=\([^ ]*\).*/\1/p' <<<"$ready_line")
echo "== $ready_line"

repeat_word=repeats
if [[ "$REPEATS" == 1 ]]; then repeat_word=repeat; fi
echo "== run-benchmark: tasks $TASK_IDS x strategies $STRATEGIES x modes $MODES x $REPEATS $repeat_word," \
    "at most $MAX_STEPS steps (progress below; one episode takes about a minute)"
"$BIN/contextdelta" run-benchmark \
    --tasks "$TASKS" \
    --task-ids "$TASK_IDS" \
    --strategies "$STRATEGIES" \
    --protection-modes "$MODES" \
    --repeats "$REPEATS" \
    --max-steps "$MAX_STEPS" \
    --max-tokens "$MAX_TOKENS" \
    --last-n "$LAST_N" \
    --summary-trigger "$SUMMARY_TRIGGER" \
    --summary-keep "$SUMMARY_KEEP" \
    --model "$served_model" \
    --base-url "$base_url" \
    --results-dir "$RESULTS_DIR" \
    --timeout-s 300 \
    --concurrency 1 | tee "$work/run.out"
run_dir=$(tail -n 1 "$work/run.out")
run_id=$(basename "$run_dir")
stop_server

echo "== verify $run_id"
"$BIN/contextdelta" verify "$run_id" --results-dir "$RESULTS_DIR"

echo "== report $run_id"
"$BIN/contextdelta" report "$run_id" --results-dir "$RESULTS_DIR"

elapsed=$(($(date +%s) - started))
printf '== demo finished in %dm%02ds; run directory: %s\n' $((elapsed / 60)) $((elapsed % 60)) "$run_dir"
