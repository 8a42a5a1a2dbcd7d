#!/bin/bash
# the every-node row, main (merged) vs 80ff7c8 in /work/wt-rspush, 5 rounds: the eighth session's script
ROUNDS=5 exec "$(dirname "$0")/../sim-speed-2026-12-05-s8/row-alternating.sh"
