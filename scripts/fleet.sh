#!/usr/bin/env bash
# A fleet of `codemode serve --http` nodes behind HAProxy or nginx on one machine, for trying it by hand
# (docs/scale.md), and the renderer of the shipped balancer configurations for any set of nodes.
#
#   scripts/fleet.sh start [--nodes N] [--balancer haproxy|nginx] [--port PORT] [--dir DIR]
#       starts N nodes (node-1..node-N on 127.0.0.1:PORT+1..PORT+N, each with its own state directory,
#       all sharing DIR/skills) and the balancer on 127.0.0.1:PORT; returns once all answer.
#   scripts/fleet.sh stop [--dir DIR]
#       drains and stops the nodes (SIGTERM) and stops the balancer.
#   scripts/fleet.sh render haproxy|nginx [--listen ADDR:PORT] ID=ADDR:PORT...
#       prints deploy/haproxy/codemode.cfg or deploy/nginx/codemode.conf for these nodes.
#   scripts/fleet.sh balancer haproxy|nginx --dir DIR [--listen ADDR:PORT] ID=ADDR:PORT...
#       renders the configuration into DIR and runs the balancer in the foreground.
#
# Defaults: 3 nodes, haproxy, port 8765, DIR $TMPDIR/codemode-fleet-<uid>. The nodes run `codemode` from
# PATH, else this checkout's ./codemode ($CODEMODE_BIN overrides); they inherit the environment
# (CODEMODE_RUNTIME, CODEMODE_HTTP_TOKEN, ...). Logs are in DIR/*.log.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

die() { echo "fleet.sh: $*" >&2; exit 2; }
node_id_pattern='^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'
address_pattern='^[][A-Za-z0-9.:_-]+:[0-9]+$'

# render KIND LISTEN ID=ADDR...: the shipped file with its node blocks written for these nodes. Each block
# (between "# --- nodes" and "# --- end of nodes ---") is its first line repeated per node, with the
# example node's id (node-1) and address (10.0.0.11:8765) replaced.
render() {
  local kind="$1" listen="$2"; shift 2
  local file ids=() addrs=()
  case "$kind" in
    haproxy) file="$repo/deploy/haproxy/codemode.cfg" ;;
    nginx) file="$repo/deploy/nginx/codemode.conf" ;;
    *) die "unknown balancer \"$kind\": use haproxy or nginx" ;;
  esac
  [ $# -gt 0 ] || die "give the nodes as ID=ADDR:PORT, e.g. node-1=10.0.0.11:8765"
  for pair in "$@"; do
    local id="${pair%%=*}" addr="${pair#*=}"
    [[ "$id" =~ $node_id_pattern ]] || die "\"$id\" is not a node id (a DNS label such as node-1)"
    [[ "$pair" == *=* && "$addr" =~ $address_pattern ]] || die "\"$pair\" is not ID=ADDR:PORT"
    ids+=("$id") addrs+=("$addr")
  done
  awk -v ids="${ids[*]}" -v addrs="${addrs[*]}" -v listen="$listen" '
    BEGIN { n = split(ids, id, " "); split(addrs, addr, " ") }
    /# --- end of nodes ---/ { block = 0; print; next }
    block == 1 {
      for (i = 1; i <= n; i++) {
        line = $0; gsub(/node-1/, id[i], line); gsub(/10\.0\.0\.11:8765/, addr[i], line); print line
      }
      block = 2; next
    }
    block == 2 { next }
    /# --- nodes/ { block = 1; print; next }
    listen != "" && /^    bind :8765$/ { print "    bind " listen; next }
    listen != "" && /^    listen 8765;$/ { print "    listen " listen ";"; next }
    { print }
  ' "$file"
}

# balancer KIND DIR LISTEN ID=ADDR...: renders into DIR and runs HAProxy or nginx in the foreground.
balancer() {
  local kind="$1" dir="$2" listen="$3"; shift 3
  mkdir -p "$dir"
  case "$kind" in
    haproxy)
      command -v haproxy >/dev/null || die "haproxy is not installed (Debian: apt-get install haproxy)"
      render haproxy "$listen" "$@" >"$dir/haproxy.cfg"
      exec haproxy -db -f "$dir/haproxy.cfg"
      ;;
    nginx)
      command -v nginx >/dev/null || die "nginx is not installed (Debian: apt-get install nginx)"
      render nginx "$listen" "$@" >"$dir/codemode.conf"
      mkdir -p "$dir/nginx-temp"
      # A main configuration of its own: no system paths, no daemon, this user's temp directories.
      cat >"$dir/nginx.conf" <<EOF
daemon off;
user $(id -un) $(id -gn);
worker_processes 1;
pid $dir/nginx.pid;
error_log stderr notice;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/nginx-temp/body;
    proxy_temp_path $dir/nginx-temp/proxy;
    fastcgi_temp_path $dir/nginx-temp/fastcgi;
    uwsgi_temp_path $dir/nginx-temp/uwsgi;
    scgi_temp_path $dir/nginx-temp/scgi;
    include $dir/codemode.conf;
}
EOF
      exec nginx -e stderr -p "$dir" -c "$dir/nginx.conf"
      ;;
    *) die "unknown balancer \"$kind\": use haproxy or nginx" ;;
  esac
}

# Waits until "$1" (a file) contains "$2", or fails after "$3" seconds naming the log.
wait_for_line() {
  local file="$1" text="$2" seconds="$3"
  for _ in $(seq 1 $((seconds * 5))); do
    grep -q "$text" "$file" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "fleet.sh: no \"$text\" in $file after ${seconds}s:" >&2
  tail -20 "$file" >&2 || true
  return 1
}

start() {
  local nodes="$1" kind="$2" port="$3" dir="$4"
  [ ! -s "$dir/pids" ] || die "a fleet already runs from $dir: scripts/fleet.sh stop --dir $dir first"
  local bin="${CODEMODE_BIN:-}"
  [ -n "$bin" ] || bin="$(command -v codemode || echo "$repo/codemode")"
  mkdir -p "$dir/skills"
  : >"$dir/pids"
  local pairs=()
  for i in $(seq 1 "$nodes"); do
    local id="node-$i" node_port=$((port + i))
    mkdir -p "$dir/$id"
    CODEMODE_NODE_ID="$id" CODEMODE_STATE_DIR="$dir/$id/state" CODEMODE_SKILLS_DIR="$dir/skills" \
      CODEMODE_LOG_LEVEL="${CODEMODE_LOG_LEVEL:-info}" \
      nohup "$bin" serve --http --host 127.0.0.1 --port "$node_port" </dev/null >/dev/null 2>"$dir/$id.log" &
    echo "$! $id" >>"$dir/pids"
    pairs+=("$id=127.0.0.1:$node_port")
  done
  for i in $(seq 1 "$nodes"); do wait_for_line "$dir/node-$i.log" "serving MCP over HTTP" 120; done
  nohup "$0" balancer "$kind" --dir "$dir" --listen "127.0.0.1:$port" "${pairs[@]}" </dev/null \
    >"$dir/$kind.log" 2>&1 &
  echo "$! $kind" >>"$dir/pids"
  for _ in $(seq 1 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.2
  done
  echo "fleet: $nodes nodes behind $kind at http://127.0.0.1:$port/mcp (logs in $dir)"
  echo "fleet: each node's dashboard is at http://127.0.0.1:$((port + 1))/ ... :$((port + nodes))/"
  echo "fleet: stop with scripts/fleet.sh stop --dir $dir"
}

stop() {
  local dir="$1"
  [ -s "$dir/pids" ] || die "no fleet runs from $dir"
  local pids=()
  while read -r pid name; do
    kill -TERM "$pid" 2>/dev/null && echo "fleet: stopping $name (pid $pid)" || true
    pids+=("$pid")
  done <"$dir/pids"
  # Nodes drain first (runs in flight finish, CODEMODE_DRAIN_TIMEOUT at most), then remove their sandboxes.
  for _ in $(seq 1 300); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.2
  done
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null && { echo "fleet: pid $pid did not stop; killing it" >&2; kill -KILL "$pid" || true; }
  done
  rm -f "$dir/pids"
  echo "fleet: stopped"
}

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
command="${1:-}"
[ $# -gt 0 ] && shift
case "$command" in -h | --help | help) usage; exit 0 ;; esac
nodes=3 kind=haproxy port=8765 dir="${TMPDIR:-/tmp}/codemode-fleet-$(id -u)" listen="" rest=()
if [ "$command" = render ] || [ "$command" = balancer ]; then
  [ $# -gt 0 ] || die "$command needs haproxy or nginx"
  kind="$1"; shift
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes="$2"; shift ;;
    --balancer) kind="$2"; shift ;;
    --port) port="$2"; shift ;;
    --dir) dir="$2"; shift ;;
    --listen) listen="$2"; shift ;;
    -h | --help) usage; exit 0 ;;
    --*) die "unknown option \"$1\" (see --help)" ;;
    *) rest+=("$1") ;;
  esac
  shift
done
case "$command" in
  start)
    [[ "$nodes" =~ ^[1-9][0-9]*$ ]] || die "--nodes wants a number, not \"$nodes\""
    [[ "$port" =~ ^[0-9]+$ ]] || die "--port wants a number, not \"$port\""
    start "$nodes" "$kind" "$port" "$dir" ;;
  stop) stop "$dir" ;;
  render) render "$kind" "$listen" "${rest[@]}" ;;
  balancer) balancer "$kind" "$dir" "$listen" "${rest[@]}" ;;
  *) die "usage: fleet.sh start|stop|render|balancer ... (see --help)" ;;
esac
