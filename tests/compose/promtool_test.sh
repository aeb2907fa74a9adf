#!/usr/bin/env bash
# ctest compose.promtool: `promtool check config` accepts compose/prometheus/prometheus.yml and
# `promtool check rules` its rules file. Exit 77 (skipped) without promtool (Debian's package
# prometheus; scripts/install-deps installs it). Usage: promtool_test.sh SOURCE_DIR
set -euo pipefail
dir="$1/compose/prometheus"
if ! command -v promtool >/dev/null 2>&1; then
  echo "SKIP: promtool is missing (scripts/install-deps installs Debian's prometheus)"
  exit 77
fi
cd "$dir"  # rule_files are relative to the configuration
promtool check config prometheus.yml
promtool check rules rules.yml
