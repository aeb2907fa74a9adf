#!/usr/bin/env bash
# ctest compose.docker_compose_config: `docker-compose config` (Debian's docker-compose; no
# daemon needed) accepts compose/docker-compose.yml, with and without the gpu profile; every
# flag a streamvec service passes is one its command's --help lists; and every port Prometheus
# scrapes (compose/prometheus/prometheus.yml) is one a service listens on.
# Exit 77 (skipped) without docker-compose. Usage: compose_config_test.sh SOURCE_DIR [STREAMVEC]
set -euo pipefail
compose_dir="$1/compose"
streamvec=${2:-}
if ! command -v docker-compose >/dev/null 2>&1; then
  echo "SKIP: docker-compose is missing (scripts/install-deps installs Debian's docker-compose)"
  exit 77
fi
file="$compose_dir/docker-compose.yml"
docker-compose -f "$file" config -q
docker-compose -f "$file" --profile gpu config -q
services=$(docker-compose -f "$file" --profile gpu config --services | sort | tr '\n' ' ')
echo "ok   docker-compose config: $services"
for s in kafka-1 kafka-2 kafka-3 kafka-init ingest crawl trainer param-node-0 param-node-1 serve \
         trainer-gpu serve-gpu proxy prometheus grafana; do
  if ! [[ " $services " == *" $s "* ]]; then echo "FAIL: no service $s"; exit 1; fi
done
# The streamvec services' flags, against the binary's --help (python3-yaml comes with
# docker-compose, which is written in Python).
if [ -n "$streamvec" ]; then
  docker-compose -f "$file" --profile gpu config | /usr/bin/python3 -c '
import subprocess, sys, yaml
binary, failed, checked = sys.argv[1], 0, 0
for name, svc in sorted(yaml.safe_load(sys.stdin)["services"].items()):
    if not str(svc.get("image", "")).startswith("streamvec"):
        continue
    command = svc["command"]
    usage = subprocess.run([binary, command[0], "--help"], capture_output=True, text=True).stdout
    for arg in command[1:]:
        if arg.startswith("--"):
            checked += 1
            if arg.split("=")[0] + " " not in usage:
                print(f"FAIL: {name}: streamvec {command[0]} has no flag {arg}")
                failed = 1
if not failed:
    print(f"ok   {checked} flags of the streamvec services are in their commands --help")
sys.exit(failed)' "$streamvec"
fi
# Scraped ports: "host:PORT" targets and dns_sd `port: PORT`, less Prometheus's own.
failed=0
for port in $(grep -oE '(:[0-9]+"|port: [0-9]+)' "$compose_dir/prometheus/prometheus.yml" \
                | grep -oE '[0-9]+' | sort -u); do
  [ "$port" = 9090 ] && continue
  if ! grep -qE "0\.0\.0\.0:$port\"" "$file"; then
    echo "FAIL: Prometheus scrapes port $port, which no service of $file listens on"
    failed=1
  fi
done
[ "$failed" -eq 0 ] && echo "ok   every scraped port is a service's --metrics or --http port"
exit "$failed"
