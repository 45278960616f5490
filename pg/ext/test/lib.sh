# Helpers the test scripts of this directory share (sourced).

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pick_ports N: the first of N consecutive free ports.
pick_ports() {
  local p i ok
  for _ in $(seq 1 200); do
    # Below Linux's ephemeral range (32768+): an outgoing connection's local port
    # there is free to connect() but can make the node's bind fail.
    p=$(( 20000 + RANDOM % 12000 )); ok=1
    for (( i = 0; i < $1; i++ )); do port_free "$((p + i))" || ok=0; done
    if [[ $ok == 1 ]]; then echo "$p"; return; fi
  done
  echo "no free ports" >&2; exit 1
}

# The PostgreSQL superuser the node's cluster has (initdb names it after the user
# running it, postgres as root).
if [[ "$(id -u)" == 0 ]]; then superuser=postgres; else superuser="$(id -un)"; fi
