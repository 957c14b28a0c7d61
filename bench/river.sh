#!/usr/bin/env bash
# River beside SciMesh on one throwaway PostgreSQL cluster, in the same
# rounds: River's harness (bench/river: River in-process, 2,000 workers,
# TASKS no-op jobs) and SciMesh's serve driven from a process of its own
# (64 workers: REST single, REST batch 50, gRPC Poll/Done). It is
# bench/load.sh on PostgreSQL with River added; see docs/PERFORMANCE.md.
# Usage: bench/river.sh [ROUNDS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
STORES=postgres FORMS=${FORMS:-river single batch50 grpc} exec bench/load.sh "${1:-3}"
