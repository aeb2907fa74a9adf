#!/usr/bin/env bash
# ctest compose.docker_compose_config: `docker-compose config` (Debian's docker-compose; no
# daemon needed) accepts compose/docker-compose.yml, with and without the gpu profile; and every
# port Prometheus scrapes (compose/prometheus/prometheus.yml) is one a service listens on.
# Exit 77 (skipped) without docker-compose. Usage: compose_config_test.sh SOURCE_DIR
set -euo pipefail
compose_dir="$1/compose"
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
         trainer-gpu serve-gpu prometheus grafana; do
  if ! [[ " $services " == *" $s "* ]]; then echo "FAIL: no service $s"; exit 1; fi
done
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
